//! Agent drafts and publications (`AgentDraftStore`): a draft is created at revision 1
//! and replaced whole with its revision bumped, read and listed within its workspace
//! only; a publication is written once per fingerprint and never changes.

use agentd_schema::AgentPublicationRow;
use agentd_schema::ids::new_id;

use super::*;

fn publication(workspace: &str, fingerprint: &str, agent: &str, version: i64, name: &str) -> AgentPublicationRow {
    AgentPublicationRow {
        workspace_id: workspace.to_owned(),
        fingerprint: fingerprint.to_owned(),
        agent_id: agent.to_owned(),
        agent_version: version,
        config: json!({ "name": name }),
        created_at_ms: 0,
    }
}

conformance!(a_draft_is_replaced_whole_and_seen_in_its_workspace_only, |store, clock| async move {
    let agent = new_id("agent");
    let first = store.put_agent_draft("ws_1", &agent, &json!({ "name": "a", "tools": [1, 2] })).await.unwrap();
    assert_eq!((first.revision, first.body.clone()), (1, json!({ "name": "a", "tools": [1, 2] })));
    assert_eq!(first.created_at_ms, clock.now_ms());
    assert_eq!(first.updated_at_ms, first.created_at_ms);
    clock.advance(5_000);
    let second = store.put_agent_draft("ws_1", &agent, &json!({ "model": "m" })).await.unwrap();
    assert_eq!((second.revision, second.body.clone()), (2, json!({ "model": "m" })), "replaced whole");
    assert_eq!(second.created_at_ms, first.created_at_ms, "created once");
    assert_eq!(second.updated_at_ms, first.created_at_ms + 5_000);
    assert_eq!(store.get_agent_draft("ws_1", &agent).await.unwrap(), Some(second.clone()));
    assert_eq!(store.get_agent_draft("ws_2", &agent).await.unwrap(), None, "another workspace's draft is missing");
    // Another workspace's draft of the same id is its own.
    let theirs = store.put_agent_draft("ws_2", &agent, &json!({ "name": "b" })).await.unwrap();
    assert_eq!(theirs.revision, 1);
    assert_eq!(store.get_agent_draft("ws_1", &agent).await.unwrap(), Some(second));

    assert!(!store.delete_agent_draft("ws_3", &agent).await.unwrap());
    assert!(store.delete_agent_draft("ws_1", &agent).await.unwrap());
    assert_eq!(store.get_agent_draft("ws_1", &agent).await.unwrap(), None);
    assert!(!store.delete_agent_draft("ws_1", &agent).await.unwrap());
    assert!(store.get_agent_draft("ws_2", &agent).await.unwrap().is_some(), "the other workspace's draft stays");
});

conformance!(drafts_list_newest_agent_first_in_pages, |store, _clock| async move {
    let agents: Vec<String> = (0..5).map(|_| new_id("agent")).collect();
    for agent in &agents {
        store.put_agent_draft("ws_1", agent, &json!({})).await.unwrap();
    }
    store.put_agent_draft("ws_2", &new_id("agent"), &json!({})).await.unwrap();
    let ids = |rows: Vec<agentd_schema::AgentDraftRow>| rows.into_iter().map(|r| r.agent_id).collect::<Vec<_>>();
    let newest_first: Vec<String> = agents.iter().rev().cloned().collect();
    assert_eq!(ids(store.list_agent_drafts("ws_1", None, 10).await.unwrap()), newest_first);
    let page = ids(store.list_agent_drafts("ws_1", None, 2).await.unwrap());
    assert_eq!(page, newest_first[..2]);
    let next = ids(store.list_agent_drafts("ws_1", Some(&page[1]), 2).await.unwrap());
    assert_eq!(next, newest_first[2..4]);
    let last = ids(store.list_agent_drafts("ws_1", Some(&next[1]), 2).await.unwrap());
    assert_eq!(last, newest_first[4..]);
    assert!(store.list_agent_drafts("ws_3", None, 10).await.unwrap().is_empty());
    // The first page has no cursor, not a sentinel: an id sorting after '~' (bytewise,
    // or anything under a non-C collation) is listed too.
    store.put_agent_draft("ws_4", "\u{e9}tude", &json!({})).await.unwrap();
    assert_eq!(ids(store.list_agent_drafts("ws_4", None, 10).await.unwrap()), ["\u{e9}tude"]);
});

conformance!(a_publication_is_written_once_per_fingerprint, |store, clock| async move {
    let agent = new_id("agent");
    let (first, created) = store.insert_agent_publication(publication("ws_1", "f1", &agent, 1, "a")).await.unwrap();
    assert!(created);
    assert_eq!(
        (first.agent_version, first.config.clone(), first.created_at_ms),
        (1, json!({"name": "a"}), clock.now_ms())
    );
    clock.advance(1_000);
    // The same fingerprint again: nothing written, the first returned unchanged.
    let (again, created) =
        store.insert_agent_publication(publication("ws_1", "f1", &agent, 7, "changed")).await.unwrap();
    assert!(!created);
    assert_eq!(again, first);
    assert_eq!(store.get_agent_publication("ws_1", "f1").await.unwrap(), Some(first.clone()));
    assert_eq!(store.get_agent_publication("ws_2", "f1").await.unwrap(), None, "another workspace's is missing");
    assert_eq!(store.get_agent_publication("ws_1", "f2").await.unwrap(), None);
    let (other, created) = store.insert_agent_publication(publication("ws_1", "f2", &agent, 2, "b")).await.unwrap();
    assert!(created && other.agent_version == 2);
});

conformance!(an_agent_id_has_one_owning_workspace, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let agent = new_id("agent");
    assert_eq!(store.agent_workspace(&agent).await.unwrap(), None);
    store
        .create_resource(NewResource {
            id: agent.clone(),
            workspace_id: workspace.id.clone(),
            kind: "agent".into(),
            parent_id: None,
            body: json!({ "name": "a" }),
            versioned: true,
        })
        .await
        .unwrap();
    assert_eq!(store.agent_workspace(&agent).await.unwrap(), Some(workspace.id.clone()));
    // Only agents: another kind's id is no agent's.
    let vault = new_id("vlt");
    store
        .create_resource(NewResource {
            id: vault.clone(),
            workspace_id: workspace.id,
            kind: "vault".into(),
            parent_id: None,
            body: json!({}),
            versioned: false,
        })
        .await
        .unwrap();
    assert_eq!(store.agent_workspace(&vault).await.unwrap(), None);
});
