//! Erasure (`ErasureStore`): one running job per profile, each session erased in one
//! transaction with its count, the memory it authored redacted.

use agentd_schema::ids::new_id;
use agentd_schema::store::{MemoryActor, MemoryContent, MemoryVersionQuery, MemoryWrite, NewMemory, NewMemoryStore};
use agentd_schema::{EventQuery, SessionErasure};

use super::*;

async fn subject_session(store: &dyn Store, workspace: &str, profile: &str) -> String {
    let id = new_id("sesn");
    store
        .create_session(NewSession {
            id: id.clone(),
            workspace_id: workspace.to_owned(),
            status: "idle".into(),
            body: json!({ "title": "t", "user_profile_id": profile }),
            agent_id: None,
            agent_version: None,
        })
        .await
        .unwrap();
    id
}

fn canary(text: &str) -> MemoryContent {
    use sha2::Digest;
    MemoryContent {
        text: text.to_owned(),
        sha256: hex::encode(sha2::Sha256::digest(text)),
        size_bytes: text.len() as i64,
    }
}

conformance!(an_erasure_removes_every_record_of_its_subjects_sessions_once, |store, _clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let profile = new_id("uprof");
    let erased = subject_session(store.as_ref(), &ws, &profile).await;
    let (_, bystander) = session(store.as_ref()).await;
    for session in [&erased, &bystander] {
        let submitted = submit(store.as_ref(), session, "CANARY").await;
        let held = claim(store.as_ref(), &submitted.run_id, "w").await;
        store.settle(&held, vec![agent_event(session, "CANARY reply")], Settlement::Awaiting).await.unwrap();
    }
    // Memory the session wrote (current content) and memory it changed after the API did.
    let memory_store = new_id("memstore");
    store
        .create_memory_store(NewMemoryStore {
            id: memory_store.clone(),
            workspace_id: ws.clone(),
            name: "m".into(),
            description: String::new(),
            metadata: json!({}),
        })
        .await
        .unwrap();
    let write = |path: &str, text: &str, actor: MemoryActor| NewMemory {
        workspace_id: ws.clone(),
        memory_store_id: memory_store.clone(),
        id: new_id("mem"),
        version_id: new_id("memver"),
        path: path.to_owned(),
        content: canary(text),
        actor,
    };
    let by_session = write("/CANARY.md", "CANARY note", MemoryActor::Session(erased.clone()));
    let by_api = write("/kept.md", "kept", MemoryActor::ApiKey("apikey_1".into()));
    assert!(matches!(store.create_memory(by_session.clone()).await.unwrap(), MemoryWrite::Written(_)));
    assert!(matches!(store.create_memory(by_api.clone()).await.unwrap(), MemoryWrite::Written(_)));

    let job = store.begin_erasure(&new_id("uperas"), &ws, &profile).await.unwrap();
    let again = store.begin_erasure(&new_id("uperas"), &ws, &profile).await.unwrap();
    assert_eq!(job.id, again.id, "one running erasure per profile");
    assert_eq!(store.subject_sessions(&ws, &profile, 10).await.unwrap(), vec![erased.clone()]);
    let removed = store.erase_session(&job.id, &ws, &erased, SessionErasure { removed_before: 2 }).await.unwrap();
    // 2 events, 1 run, 1 thread, the memory and its version, plus the 2 counted before, the session.
    assert!(removed >= 9, "removed {removed}");
    assert_eq!(store.erase_session(&job.id, &ws, &erased, SessionErasure::default()).await.unwrap(), 0);
    let done = store.complete_erasure(&job.id).await.unwrap();
    assert!(done.completed);
    assert_eq!(done.records_removed, removed, "each removal counted once");

    assert!(store.load_session(&erased).await.unwrap().is_none());
    assert!(store.subject_sessions(&ws, &profile, 10).await.unwrap().is_empty());
    let left = store.query_events(&bystander, &EventQuery { limit: 10, ..Default::default() }).await.unwrap();
    assert_eq!(left.len(), 2, "another subject's session is untouched");
    assert!(store.get_memory(&ws, &memory_store, &by_session.id, true).await.unwrap().is_none());
    assert!(store.get_memory(&ws, &memory_store, &by_api.id, true).await.unwrap().is_some());
    let versions = store
        .list_memory_versions(
            &ws,
            &memory_store,
            &MemoryVersionQuery { limit: 100, with_content: true, ..Default::default() },
        )
        .await
        .unwrap();
    assert_eq!(versions.len(), 3, "created, created, deleted by the erasure");
    for version in versions.iter().filter(|v| v.memory_id == by_session.id) {
        assert!(version.redacted_at_ms.is_some(), "{version:?}");
        assert!(!format!("{version:?}").contains("CANARY"), "{version:?}");
    }
    let memory_store_row = store.get_memory_store(&ws, &memory_store).await.unwrap().unwrap();
    assert_eq!(memory_store_row.memory_count, 1);

    // A new job finds nothing; zero is a valid count.
    let second = store.begin_erasure(&new_id("uperas"), &ws, &profile).await.unwrap();
    assert_ne!(second.id, job.id);
    assert_eq!(store.complete_erasure(&second.id).await.unwrap().records_removed, 0);
});

conformance!(a_stale_running_erasure_is_found_by_the_sweeper, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let job = store.begin_erasure(&new_id("uperas"), &ws, &new_id("uprof")).await.unwrap();
    let later = clock.now_ms() + 61_000;
    assert_eq!(
        store.stale_erasures(later, 10).await.unwrap().iter().map(|j| j.id.clone()).collect::<Vec<_>>(),
        std::slice::from_ref(&job.id)
    );
    assert!(store.stale_erasures(job.updated_at_ms, 10).await.unwrap().is_empty());
    store.complete_erasure(&job.id).await.unwrap();
    assert!(store.stale_erasures(later, 10).await.unwrap().is_empty());
});
