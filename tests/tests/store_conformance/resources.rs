//! Generic versioned resources (`ResourceStore`).

use super::*;

fn agent_update(workspace_id: &str, id: &str, expected_version: i64, body: serde_json::Value) -> ResourceUpdate {
    ResourceUpdate {
        workspace_id: workspace_id.to_owned(),
        kind: "agent".into(),
        id: id.to_owned(),
        expected_version,
        body,
        versioned: true,
    }
}

conformance!(resources_version_with_compare_and_swap, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let id = agentd_schema::ids::new_id("agent");
    let created = store
        .create_resource(NewResource {
            id: id.clone(),
            workspace_id: workspace.id.clone(),
            kind: "agent".into(),
            parent_id: None,
            body: json!({ "name": "a" }),
            versioned: true,
        })
        .await
        .unwrap();
    assert_eq!(created.version, 1);
    let updated = store.update_resource(agent_update(&workspace.id, &id, 1, json!({ "name": "b" }))).await.unwrap();
    assert_eq!(updated.version, 2);
    let stale = store.update_resource(agent_update(&workspace.id, &id, 1, json!({ "name": "c" }))).await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    let current = store.get_resource(&workspace.id, "agent", &id).await.unwrap().unwrap();
    assert_eq!(current.body, json!({ "name": "b" }), "a failed compare-and-swap changes nothing");
    assert_eq!(store.get_resource_version(&id, 1).await.unwrap(), Some(json!({ "name": "a" })));
    assert_eq!(store.get_resource_version(&id, 2).await.unwrap(), Some(json!({ "name": "b" })));
    // Another workspace cannot see it.
    let other = store.ensure_workspace("acme", "other").await.unwrap();
    assert!(store.get_resource(&other.id, "agent", &id).await.unwrap().is_none());
    let archived = store.archive_resource(&workspace.id, "agent", &id).await.unwrap();
    assert!(archived.archived_at_ms.is_some());
    let listed = store.list_resources(&workspace.id, "agent", &ListQuery { limit: 10, ..Default::default() }).await;
    assert!(listed.unwrap().is_empty(), "archived rows are hidden by default");
    let listed = store
        .list_resources(&workspace.id, "agent", &ListQuery { limit: 10, include_archived: true, ..Default::default() })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(store.delete_resource(&workspace.id, "agent", &id).await.unwrap());
    assert_eq!(store.get_resource_version(&id, 1).await.unwrap(), None, "snapshots go with the resource");
});

conformance!(resource_pages_move_both_ways, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let mut ids = Vec::new();
    for n in 0..5 {
        let id = format!("env_{n:02}");
        store
            .create_resource(NewResource {
                id: id.clone(),
                workspace_id: workspace.id.clone(),
                kind: "environment".into(),
                parent_id: None,
                body: json!({ "n": n }),
                versioned: false,
            })
            .await
            .unwrap();
        ids.push(id);
    }
    let page = |after: Option<&str>, before: Option<&str>, descending: bool| ListQuery {
        after_id: after.map(str::to_owned),
        before_id: before.map(str::to_owned),
        limit: 2,
        descending,
        ..Default::default()
    };
    let list = |q: ListQuery| {
        let store = store.clone();
        let workspace = workspace.id.clone();
        async move {
            store
                .list_resources(&workspace, "environment", &q)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(page(None, None, false)).await, ["env_00", "env_01"]);
    assert_eq!(list(page(Some("env_01"), None, false)).await, ["env_02", "env_03"]);
    assert_eq!(list(page(None, None, true)).await, ["env_04", "env_03"]);
    assert_eq!(list(page(Some("env_03"), None, true)).await, ["env_02", "env_01"]);
    assert_eq!(list(page(None, Some("env_02"), false)).await, ["env_00", "env_01"]);
});

conformance!(updating_a_missing_resource_is_not_found, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let missing = store.update_resource(agent_update(&workspace.id, "agent_missing", 1, json!({}))).await;
    assert!(matches!(missing, Err(StoreError::NotFound { .. })), "{missing:?}");
});

/// A new resource of `kind` with no parent, versioned if it is an agent.
fn top_level(workspace_id: &str, kind: &str, body: serde_json::Value) -> NewResource {
    NewResource {
        id: agentd_schema::ids::new_id(kind),
        workspace_id: workspace_id.to_owned(),
        kind: kind.into(),
        parent_id: None,
        body,
        versioned: kind == "agent",
    }
}

conformance!(resource_states_read_archive_and_disable_without_bodies, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let new = |kind: &str, body: serde_json::Value| top_level(&workspace.id, kind, body);
    let agent = store.create_resource(new("agent", json!({ "name": "a", "disabled_at": null }))).await.unwrap();
    let environment = store.create_resource(new("environment", json!({ "name": "e" }))).await.unwrap();
    let wanted = [("agent", agent.id.as_str()), ("environment", environment.id.as_str())];
    let mut states = store.resource_states(&workspace.id, &wanted).await.unwrap();
    states.sort_by(|a, b| a.kind.cmp(&b.kind));
    assert_eq!(states.len(), 2);
    assert!(states.iter().all(|s| s.archived_at_ms.is_none() && !s.disabled), "{states:?}");
    assert_eq!((states[0].kind.as_str(), states[0].id.as_str()), ("agent", agent.id.as_str()));

    // `disabled_at` set by an update is seen; so is an archive.
    let disabled = json!({ "name": "a", "disabled_at": "2026-11-25T00:00:00Z" });
    store.update_resource(agent_update(&workspace.id, &agent.id, 1, disabled)).await.unwrap();
    store.archive_resource(&workspace.id, "environment", &environment.id).await.unwrap();
    let states = store.resource_states(&workspace.id, &wanted).await.unwrap();
    let agent_state = states.iter().find(|s| s.kind == "agent").unwrap();
    assert!(agent_state.disabled && agent_state.archived_at_ms.is_none());
    assert!(states.iter().find(|s| s.kind == "environment").unwrap().archived_at_ms.is_some());
    // A resource created disabled is disabled too.
    let born = store.create_resource(new("agent", json!({ "disabled_at": "2026-11-25T00:00:00Z" }))).await.unwrap();
    let states = store.resource_states(&workspace.id, &[("agent", born.id.as_str())]).await.unwrap();
    assert!(states[0].disabled);

    // Only what exists in this workspace, under the kind asked for.
    let other = store.ensure_workspace("acme", "other").await.unwrap();
    assert!(store.resource_states(&other.id, &wanted).await.unwrap().is_empty());
    let crossed = [("environment", agent.id.as_str())];
    assert!(store.resource_states(&workspace.id, &crossed).await.unwrap().is_empty());
    assert!(store.resource_states(&workspace.id, &[]).await.unwrap().is_empty());
});

fn child(workspace_id: &str, parent: &str) -> NewResource {
    NewResource {
        id: agentd_schema::ids::new_id("tcrt"),
        workspace_id: workspace_id.to_owned(),
        kind: "tunnel_certificate".into(),
        parent_id: Some(parent.to_owned()),
        body: json!({}),
        versioned: false,
    }
}

conformance!(capped_children_stay_under_the_cap_even_when_racing, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let parent = agentd_schema::ids::new_id("tnl");
    let new_parent = NewResource {
        id: parent.clone(),
        workspace_id: workspace.id.clone(),
        kind: "tunnel".into(),
        parent_id: None,
        body: json!({}),
        versioned: false,
    };
    store.create_resource(new_parent).await.unwrap();
    let creators = (0..6).map(|_| {
        let (store, workspace, parent) = (store.clone(), workspace.id.clone(), parent.clone());
        async move { store.create_capped_child(child(&workspace, &parent), "tunnel", 2).await }
    });
    let results = futures::future::join_all(creators).await;
    let made: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(made.len(), 2, "{results:?}");
    assert!(results.iter().filter_map(|r| r.as_ref().err()).all(|e| matches!(e, StoreError::Conflict(_))));
    // An archived child frees its place; a missing or archived parent takes none.
    store.archive_resource(&workspace.id, "tunnel_certificate", &made[0].id).await.unwrap();
    store.create_capped_child(child(&workspace.id, &parent), "tunnel", 2).await.unwrap();
    let orphan = store.create_capped_child(child(&workspace.id, "tnl_missing"), "tunnel", 2).await;
    assert!(matches!(orphan, Err(StoreError::NotFound { .. })), "{orphan:?}");
    store.archive_resource(&workspace.id, "tunnel", &parent).await.unwrap();
    let archived = store.create_capped_child(child(&workspace.id, &parent), "tunnel", 5).await;
    assert!(matches!(archived, Err(StoreError::NotFound { .. })), "{archived:?}");
    let elsewhere = store.create_capped_child(child("ws_other", &parent), "tunnel", 5).await;
    assert!(matches!(elsewhere, Err(StoreError::NotFound { .. })), "another workspace's parent: {elsewhere:?}");
});

conformance!(a_session_for_turn_carries_its_agent_and_environment_state, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let new = |kind: &str, body: serde_json::Value| top_level(&workspace.id, kind, body);
    let agent = store.create_resource(new("agent", json!({ "name": "a" }))).await.unwrap();
    let environment = store.create_resource(new("environment", json!({ "name": "e" }))).await.unwrap();
    let session = |id: &str, agent_id: &str, environment_id: &str| NewSession {
        id: id.into(),
        workspace_id: workspace.id.clone(),
        status: "idle".into(),
        body: json!({ "environment_id": environment_id }),
        agent_id: Some(agent_id.into()),
        agent_version: Some(1),
    };
    let created = store.create_session(session("sesn_turn", &agent.id, &environment.id)).await.unwrap();
    let read = store.get_session_for_turn(&workspace.id, "sesn_turn").await.unwrap().unwrap();
    assert_eq!(read.session, store.get_session(&workspace.id, "sesn_turn").await.unwrap().unwrap());
    assert_eq!(read.session.id, created.id);
    let (agent_id, agent_state) = read.agent.clone().unwrap();
    assert_eq!(agent_id, agent.id);
    let agent_state = agent_state.unwrap();
    assert!(agent_state.kind == "agent" && !agent_state.disabled && agent_state.archived_at_ms.is_none());
    let (environment_id, environment_state) = read.environment.clone().unwrap();
    assert_eq!(
        (environment_id.as_str(), environment_state.unwrap().kind.as_str()),
        (environment.id.as_str(), "environment")
    );

    // Disabled, archived: seen as they are now.
    let disabled = json!({ "name": "a", "disabled_at": "2026-12-02T00:00:00Z" });
    store.update_resource(agent_update(&workspace.id, &agent.id, 1, disabled)).await.unwrap();
    store.archive_resource(&workspace.id, "environment", &environment.id).await.unwrap();
    let read = store.get_session_for_turn(&workspace.id, "sesn_turn").await.unwrap().unwrap();
    assert!(read.agent.unwrap().1.unwrap().disabled);
    assert!(read.environment.unwrap().1.unwrap().archived_at_ms.is_some());

    // Named but missing (or of another kind, or another workspace's): no state.
    let other = store.ensure_workspace("acme", "other").await.unwrap();
    let foreign = store.create_resource(top_level(&other.id, "agent", json!({ "name": "f" }))).await.unwrap();
    store.create_session(session("sesn_missing", &foreign.id, &agent.id)).await.unwrap();
    let read = store.get_session_for_turn(&workspace.id, "sesn_missing").await.unwrap().unwrap();
    assert_eq!(read.agent, Some((foreign.id.clone(), None)));
    assert_eq!(read.environment, Some((agent.id.clone(), None)));
    // Another workspace's session is not found.
    assert!(store.get_session_for_turn(&other.id, "sesn_turn").await.unwrap().is_none());
});
