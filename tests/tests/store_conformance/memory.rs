//! Memory stores, memories and memory versions (`AgentMemoryStore`).

use std::sync::Arc;

use agentd_schema::ids::new_id;
use agentd_schema::store::{
    MAX_MEMORIES_PER_STORE, MemoryActor, MemoryContent, MemoryDeletion, MemoryListItem, MemoryOperation, MemoryQuery,
    MemoryStoreQuery, MemoryStoreUpdate, MemoryUpdate, MemoryVersionQuery, MemoryWrite, NewMemory, NewMemoryStore,
};
use agentd_schema::{StoreError, TimeBounds};

use super::*;

fn content(text: &str) -> MemoryContent {
    use sha2::Digest;
    MemoryContent {
        text: text.to_owned(),
        sha256: hex::encode(sha2::Sha256::digest(text)),
        size_bytes: text.len() as i64,
    }
}

fn key() -> MemoryActor {
    MemoryActor::ApiKey("apikey_test".to_owned())
}

async fn new_store(store: &dyn Store, workspace: &str, name: &str) -> String {
    let id = new_id("memstore");
    let row = store
        .create_memory_store(NewMemoryStore {
            id: id.clone(),
            workspace_id: workspace.to_owned(),
            name: name.to_owned(),
            description: String::new(),
            metadata: json!({}),
        })
        .await
        .unwrap();
    assert_eq!((row.memory_count, row.archived_at_ms), (0, None));
    id
}

async fn create(store: &dyn Store, workspace: &str, memory_store: &str, path: &str, text: &str) -> MemoryWrite {
    store
        .create_memory(NewMemory {
            workspace_id: workspace.to_owned(),
            memory_store_id: memory_store.to_owned(),
            id: new_id("mem"),
            version_id: new_id("memver"),
            path: path.to_owned(),
            content: content(text),
            actor: key(),
        })
        .await
        .unwrap()
}

async fn created(store: &dyn Store, workspace: &str, memory_store: &str, path: &str, text: &str) -> String {
    match create(store, workspace, memory_store, path, text).await {
        MemoryWrite::Written(row) => row.id,
        other => panic!("creating {path}: {other:?}"),
    }
}

fn update(workspace: &str, memory_store: &str, memory: &str) -> MemoryUpdate {
    MemoryUpdate {
        workspace_id: workspace.to_owned(),
        memory_store_id: memory_store.to_owned(),
        memory_id: memory.to_owned(),
        version_id: new_id("memver"),
        path: None,
        content: None,
        expected_sha256: None,
        actor: MemoryActor::Session("sesn_writer".to_owned()),
    }
}

fn deletion(workspace: &str, memory_store: &str, memory: &str) -> MemoryDeletion {
    MemoryDeletion {
        workspace_id: workspace.to_owned(),
        memory_store_id: memory_store.to_owned(),
        memory_id: memory.to_owned(),
        version_id: new_id("memver"),
        expected_sha256: None,
        actor: key(),
    }
}

fn listing(prefix: Option<&str>, depth: u32, after: Option<&str>, limit: i64) -> MemoryQuery {
    MemoryQuery {
        path_prefix: prefix.map(str::to_owned),
        depth,
        after: after.map(str::to_owned),
        limit,
        with_content: false,
    }
}

fn paths(items: &[MemoryListItem]) -> Vec<&str> {
    items.iter().map(MemoryListItem::path).collect()
}

fn versions(limit: i64) -> MemoryVersionQuery {
    MemoryVersionQuery { limit, ..Default::default() }
}

conformance!(memory_stores_are_created_listed_updated_and_archived, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let other = store.ensure_workspace("acme", "other").await.unwrap().id;
    let first = new_store(store.as_ref(), &ws, "Notes").await;
    clock.advance(10);
    let second = new_store(store.as_ref(), &ws, "Prefs").await;
    let row = store.get_memory_store(&ws, &first).await.unwrap().unwrap();
    assert_eq!((row.name.as_str(), row.metadata.clone()), ("Notes", json!({})));
    assert!(store.get_memory_store(&other, &first).await.unwrap().is_none(), "another workspace sees nothing");

    let page = |before: Option<&str>, limit| MemoryStoreQuery {
        before_id: before.map(str::to_owned),
        limit,
        ..Default::default()
    };
    let listed: Vec<String> =
        store.list_memory_stores(&ws, &page(None, 10)).await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(listed, [second.clone(), first.clone()], "newest first");
    let next = store.list_memory_stores(&ws, &page(Some(&second), 10)).await.unwrap();
    assert_eq!(next.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), [first.as_str()]);
    let bounded = MemoryStoreQuery {
        created: TimeBounds { gte: Some(clock.now_ms()), ..Default::default() },
        limit: 10,
        ..Default::default()
    };
    assert_eq!(store.list_memory_stores(&ws, &bounded).await.unwrap().len(), 1);

    // Updates are compare-and-swap on the revision.
    clock.advance(5);
    let edit = |revision| MemoryStoreUpdate {
        expected_revision: revision,
        name: "Notes 2".into(),
        description: "what we learned".into(),
        metadata: json!({ "owner": "ada" }),
    };
    let updated = store.update_memory_store(&ws, &first, edit(row.revision)).await.unwrap().unwrap();
    assert_eq!((updated.name.as_str(), updated.description.as_str()), ("Notes 2", "what we learned"));
    assert_eq!(updated.metadata, json!({ "owner": "ada" }));
    assert_eq!((updated.revision, updated.updated_at_ms), (row.revision + 1, clock.now_ms()));
    let stale = store.update_memory_store(&ws, &first, edit(row.revision)).await.unwrap_err();
    assert!(matches!(stale, StoreError::Conflict(_)), "{stale:?}");
    assert!(store.update_memory_store(&other, &first, edit(updated.revision)).await.unwrap().is_none());

    // Archival is irreversible, idempotent and makes the store read-only.
    let archived = store.archive_memory_store(&ws, &first).await.unwrap().unwrap();
    let at = archived.archived_at_ms.unwrap();
    clock.advance(5);
    assert_eq!(store.archive_memory_store(&ws, &first).await.unwrap().unwrap().archived_at_ms, Some(at));
    let refused = store.update_memory_store(&ws, &first, edit(archived.revision)).await.unwrap_err();
    assert!(matches!(refused, StoreError::Conflict(_)), "{refused:?}");
    assert_eq!(create(store.as_ref(), &ws, &first, "/a.md", "x").await, MemoryWrite::StoreArchived);
    let live: Vec<String> =
        store.list_memory_stores(&ws, &page(None, 10)).await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(live, [second.as_str()], "archived stores are listed only on request");
    let all = MemoryStoreQuery { include_archived: true, limit: 10, ..Default::default() };
    assert_eq!(store.list_memory_stores(&ws, &all).await.unwrap().len(), 2);
    assert!(store.archive_memory_store(&ws, "memstore_missing").await.unwrap().is_none());
});

conformance!(a_memory_is_created_changed_renamed_and_deleted_with_a_version_each, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let memories = new_store(store.as_ref(), &ws, "notes").await;
    let MemoryWrite::Written(first) = create(store.as_ref(), &ws, &memories, "/notes/a.md", "hello").await else {
        panic!("create")
    };
    assert_eq!((first.path.as_str(), first.content.as_deref()), ("/notes/a.md", Some("hello")));
    assert_eq!((first.content_sha256.clone(), first.content_size_bytes), (content("hello").sha256, 5));
    assert_eq!(store.get_memory_store(&ws, &memories).await.unwrap().unwrap().memory_count, 1);
    let read = store.get_memory(&ws, &memories, &first.id, false).await.unwrap().unwrap();
    assert_eq!(read.content, None, "content only when asked for");
    assert_eq!(read.content_sha256, first.content_sha256);

    clock.advance(10);
    let changed = MemoryUpdate { content: Some(content("hello, world")), ..update(&ws, &memories, &first.id) };
    let MemoryWrite::Written(second) = store.update_memory(changed).await.unwrap() else { panic!("update") };
    assert_eq!((second.id.as_str(), second.content.as_deref()), (first.id.as_str(), Some("hello, world")));
    assert_eq!((second.created_at_ms, second.updated_at_ms), (first.created_at_ms, clock.now_ms()));
    assert_ne!(second.memory_version_id, first.memory_version_id);

    // A rename keeps the id and the content.
    let renamed = MemoryUpdate { path: Some("/archive/a.md".into()), ..update(&ws, &memories, &first.id) };
    let MemoryWrite::Written(third) = store.update_memory(renamed).await.unwrap() else { panic!("rename") };
    assert_eq!((third.id.as_str(), third.path.as_str()), (first.id.as_str(), "/archive/a.md"));
    assert_eq!(third.content.as_deref(), Some("hello, world"));

    // Writing what is already there records nothing.
    let same = MemoryUpdate { content: Some(content("hello, world")), ..update(&ws, &memories, &first.id) };
    let MemoryWrite::Written(unchanged) = store.update_memory(same).await.unwrap() else { panic!("no-op") };
    assert_eq!(unchanged.memory_version_id, third.memory_version_id);

    let MemoryWrite::Written(gone) = store.delete_memory(deletion(&ws, &memories, &first.id)).await.unwrap() else {
        panic!("delete")
    };
    assert_eq!(gone.path, "/archive/a.md");
    assert!(store.get_memory(&ws, &memories, &first.id, true).await.unwrap().is_none());
    assert_eq!(store.get_memory_store(&ws, &memories).await.unwrap().unwrap().memory_count, 0);
    assert_eq!(store.delete_memory(deletion(&ws, &memories, &first.id)).await.unwrap(), MemoryWrite::MemoryMissing);

    // Four versions, newest first, kept after the deletion.
    let history = MemoryVersionQuery { memory_id: Some(first.id.clone()), with_content: true, ..versions(10) };
    let history = store.list_memory_versions(&ws, &memories, &history).await.unwrap();
    let operations: Vec<MemoryOperation> = history.iter().map(|v| v.operation).collect();
    use MemoryOperation::*;
    assert_eq!(operations, [Deleted, Modified, Modified, Created]);
    assert_eq!(history[0].path.as_deref(), Some("/archive/a.md"));
    assert_eq!((history[0].content.clone(), history[0].content_sha256.clone()), (None, None));
    assert_eq!(history[1].content.as_deref(), Some("hello, world"));
    assert_eq!(history[1].created_by, MemoryActor::Session("sesn_writer".into()));
    assert_eq!(history[3].created_by, key());
    assert_eq!(history[3].id, first.memory_version_id);
    assert_eq!((history[3].content.as_deref(), history[3].content_size_bytes), (Some("hello"), Some(5)));
});

conformance!(refused_writes_change_nothing, |store, _clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let other = store.ensure_workspace("acme", "other").await.unwrap().id;
    let memories = new_store(store.as_ref(), &ws, "notes").await;
    let a = created(store.as_ref(), &ws, &memories, "/a.md", "one").await;
    let b = created(store.as_ref(), &ws, &memories, "/b.md", "two").await;

    assert_eq!(create(store.as_ref(), &ws, &memories, "/a.md", "again").await, MemoryWrite::PathTaken);
    assert_eq!(create(store.as_ref(), &other, &memories, "/c.md", "x").await, MemoryWrite::StoreMissing);
    let rename = MemoryUpdate { path: Some("/b.md".into()), ..update(&ws, &memories, &a) };
    assert_eq!(store.update_memory(rename).await.unwrap(), MemoryWrite::PathTaken);
    let stale = MemoryUpdate {
        content: Some(content("three")),
        expected_sha256: Some(content("not one").sha256),
        ..update(&ws, &memories, &a)
    };
    assert_eq!(
        store.update_memory(stale).await.unwrap(),
        MemoryWrite::PreconditionFailed { current_sha256: content("one").sha256 }
    );
    let stale_delete = MemoryDeletion { expected_sha256: Some(content("nope").sha256), ..deletion(&ws, &memories, &b) };
    assert!(matches!(store.delete_memory(stale_delete).await.unwrap(), MemoryWrite::PreconditionFailed { .. }));
    let elsewhere = update(&other, &memories, &a);
    assert_eq!(store.update_memory(elsewhere).await.unwrap(), MemoryWrite::StoreMissing);
    assert_eq!(store.update_memory(update(&ws, &memories, "mem_missing")).await.unwrap(), MemoryWrite::MemoryMissing);

    assert_eq!(store.get_memory(&ws, &memories, &a, true).await.unwrap().unwrap().content.as_deref(), Some("one"));
    assert_eq!(store.get_memory(&ws, &memories, &b, true).await.unwrap().unwrap().content.as_deref(), Some("two"));
    assert_eq!(store.list_memory_versions(&ws, &memories, &versions(10)).await.unwrap().len(), 2);
    assert_eq!(store.get_memory_store(&ws, &memories).await.unwrap().unwrap().memory_count, 2);

    // A matching precondition applies; an archived store still allows deletion.
    let fresh = MemoryUpdate {
        content: Some(content("three")),
        expected_sha256: Some(content("one").sha256),
        ..update(&ws, &memories, &a)
    };
    assert!(matches!(store.update_memory(fresh).await.unwrap(), MemoryWrite::Written(_)));
    store.archive_memory_store(&ws, &memories).await.unwrap();
    let archived = MemoryUpdate { content: Some(content("four")), ..update(&ws, &memories, &a) };
    assert_eq!(store.update_memory(archived).await.unwrap(), MemoryWrite::StoreArchived);
    let matching = MemoryDeletion { expected_sha256: Some(content("two").sha256), ..deletion(&ws, &memories, &b) };
    assert!(matches!(store.delete_memory(matching).await.unwrap(), MemoryWrite::Written(_)));
});

conformance!(racing_writers_with_one_precondition_have_one_winner, |store, _clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let memories = new_store(store.as_ref(), &ws, "notes").await;
    let id = created(store.as_ref(), &ws, &memories, "/counter", "0").await;
    let writers = (1..=8).map(|n| {
        let store = Arc::clone(&store);
        let change = MemoryUpdate {
            content: Some(content(&n.to_string())),
            expected_sha256: Some(content("0").sha256),
            ..update(&ws, &memories, &id)
        };
        tokio::spawn(async move { store.update_memory(change).await.unwrap() })
    });
    let outcomes = futures::future::join_all(writers).await;
    let winners: Vec<_> = outcomes
        .iter()
        .filter_map(|outcome| match outcome.as_ref().unwrap() {
            MemoryWrite::Written(row) => Some(row.content.clone().unwrap()),
            MemoryWrite::PreconditionFailed { .. } => None,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(winners.len(), 1, "exactly one racing writer wins: {outcomes:?}");
    let stored = store.get_memory(&ws, &memories, &id, true).await.unwrap().unwrap();
    assert_eq!(stored.content.as_deref(), Some(winners[0].as_str()), "the winner's content is what is stored");
    let modified = MemoryVersionQuery { operation: Some(MemoryOperation::Modified), ..versions(20) };
    assert_eq!(store.list_memory_versions(&ws, &memories, &modified).await.unwrap().len(), 1);

    // Unconditional racing writers each land, one after another, each with a version.
    let writers = (1..=6).map(|n| {
        let store = Arc::clone(&store);
        let change = MemoryUpdate { content: Some(content(&format!("free {n}"))), ..update(&ws, &memories, &id) };
        tokio::spawn(async move { store.update_memory(change).await.unwrap() })
    });
    for outcome in futures::future::join_all(writers).await {
        assert!(matches!(outcome.unwrap(), MemoryWrite::Written(_)));
    }
    assert_eq!(store.list_memory_versions(&ws, &memories, &modified).await.unwrap().len(), 7);
});

conformance!(a_store_holds_at_most_its_cap, |store, _clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let memories = new_store(store.as_ref(), &ws, "notes").await;
    let batches = (0..MAX_MEMORIES_PER_STORE).collect::<Vec<_>>();
    for batch in batches.chunks(200) {
        let writers = batch.iter().map(|n| {
            let (store, ws, memories) = (Arc::clone(&store), ws.clone(), memories.clone());
            let path = format!("/m/{n:04}.md");
            tokio::spawn(async move { created(store.as_ref(), &ws, &memories, &path, "x").await })
        });
        for writer in futures::future::join_all(writers).await {
            writer.unwrap();
        }
    }
    assert_eq!(create(store.as_ref(), &ws, &memories, "/one-too-many.md", "x").await, MemoryWrite::StoreFull);
    let row = store.get_memory_store(&ws, &memories).await.unwrap().unwrap();
    assert_eq!(row.memory_count, MAX_MEMORIES_PER_STORE, "the refused create left the count as it was");
    let all = store.list_memories(&ws, &memories, &listing(None, 0, None, 5_000)).await.unwrap();
    assert_eq!(all.len() as i64, MAX_MEMORIES_PER_STORE);
    // Deleting one makes room for one.
    let MemoryListItem::Memory(first) = &all[0] else { panic!("a memory") };
    store.delete_memory(deletion(&ws, &memories, &first.id)).await.unwrap();
    created(store.as_ref(), &ws, &memories, "/room.md", "x").await;
});

conformance!(listings_roll_deep_paths_into_prefixes_and_page_past_them, |store, _clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let memories = new_store(store.as_ref(), &ws, "notes").await;
    for path in ["/a.md", "/a/x.md", "/a/y/z.md", "/a0.md", "/b/c.md", "/b/d/e.md", "/ab.md", "/B.md"] {
        created(store.as_ref(), &ws, &memories, path, path).await;
    }
    let list = |query: MemoryQuery| {
        let store = Arc::clone(&store);
        let (ws, memories) = (ws.clone(), memories.clone());
        async move { store.list_memories(&ws, &memories, &query).await.unwrap() }
    };
    // Bytewise order: uppercase before lowercase, `.` before `/` before `0`.
    let everything = list(listing(None, 0, None, 100)).await;
    assert_eq!(
        paths(&everything),
        ["/B.md", "/a.md", "/a/x.md", "/a/y/z.md", "/a0.md", "/ab.md", "/b/c.md", "/b/d/e.md"]
    );
    let top = list(listing(None, 1, None, 100)).await;
    assert_eq!(paths(&top), ["/B.md", "/a.md", "/a/", "/a0.md", "/ab.md", "/b/"]);
    assert!(matches!(top[2], MemoryListItem::Prefix(_)));
    // Prefixes count toward the limit, and a page after a prefix skips what is under it.
    let first = list(listing(None, 1, None, 3)).await;
    assert_eq!(paths(&first), ["/B.md", "/a.md", "/a/"]);
    let second = list(listing(None, 1, Some("/a/"), 3)).await;
    assert_eq!(paths(&second), ["/a0.md", "/ab.md", "/b/"]);
    assert!(list(listing(None, 1, Some("/b/"), 3)).await.is_empty());
    // A whole-segment prefix, at depths 0, 1 and 2.
    assert_eq!(paths(&list(listing(Some("/a/"), 0, None, 100)).await), ["/a/x.md", "/a/y/z.md"]);
    assert_eq!(paths(&list(listing(Some("/a/"), 1, None, 100)).await), ["/a/x.md", "/a/y/"]);
    assert_eq!(paths(&list(listing(Some("/b/"), 2, None, 100)).await), ["/b/c.md", "/b/d/e.md"]);
    assert!(list(listing(Some("/c/"), 0, None, 100)).await.is_empty());
    // Pages of memories resume after the last path.
    let one = list(listing(None, 0, Some("/a/x.md"), 2)).await;
    assert_eq!(paths(&one), ["/a/y/z.md", "/a0.md"]);
    let with_content = MemoryQuery { with_content: true, ..listing(Some("/b/"), 0, None, 1) };
    let MemoryListItem::Memory(memory) = &list(with_content).await[0] else { panic!("a memory") };
    assert_eq!(memory.content.as_deref(), Some("/b/c.md"));
});

conformance!(versions_are_filtered_paged_and_redacted, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let memories = new_store(store.as_ref(), &ws, "notes").await;
    let a = created(store.as_ref(), &ws, &memories, "/a.md", "secret").await;
    clock.advance(100);
    let from_session = MemoryUpdate { content: Some(content("public")), ..update(&ws, &memories, &a) };
    store.update_memory(from_session).await.unwrap();
    clock.advance(100);
    let b = created(store.as_ref(), &ws, &memories, "/b.md", "b").await;

    let list = |query: MemoryVersionQuery| {
        let store = Arc::clone(&store);
        let (ws, memories) = (ws.clone(), memories.clone());
        async move { store.list_memory_versions(&ws, &memories, &query).await.unwrap() }
    };
    let all = list(versions(10)).await;
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].memory_id, b, "newest first");
    assert!(all.iter().all(|v| v.content.is_none()), "content only when asked for");
    let by_session = list(MemoryVersionQuery { session_id: Some("sesn_writer".into()), ..versions(10) }).await;
    assert_eq!(by_session.len(), 1);
    assert_eq!(by_session[0].operation, MemoryOperation::Modified);
    let by_key = list(MemoryVersionQuery { api_key_id: Some("apikey_test".into()), ..versions(10) }).await;
    assert_eq!(by_key.len(), 2);
    let created_only = list(MemoryVersionQuery { operation: Some(MemoryOperation::Created), ..versions(10) }).await;
    assert_eq!(created_only.len(), 2);
    let early = list(MemoryVersionQuery {
        created: TimeBounds { lte: Some(clock.now_ms() - 150), ..Default::default() },
        ..versions(10)
    })
    .await;
    assert_eq!(early.len(), 1);
    let page = list(MemoryVersionQuery { before_id: Some(all[0].id.clone()), ..versions(1) }).await;
    assert_eq!(page[0].id, all[1].id);

    let first = all[2].clone();
    assert_eq!(first.operation, MemoryOperation::Created);
    let redactor = MemoryActor::ApiKey("apikey_admin".into());
    let redacted = store.redact_memory_version(&ws, &memories, &first.id, redactor.clone()).await.unwrap().unwrap();
    assert_eq!((redacted.path, redacted.content), (None, None));
    assert_eq!((redacted.content_sha256, redacted.content_size_bytes), (None, None));
    assert_eq!(redacted.redacted_at_ms, Some(clock.now_ms()));
    assert_eq!((redacted.redacted_by.clone(), redacted.created_by.clone()), (Some(redactor), key()));
    clock.advance(10);
    let again = store.redact_memory_version(&ws, &memories, &first.id, key()).await.unwrap().unwrap();
    assert_eq!(again.redacted_at_ms, redacted.redacted_at_ms, "idempotent");
    assert!(store.redact_memory_version(&ws, &memories, "memver_missing", key()).await.unwrap().is_none());
    let stored = store.get_memory_version(&ws, &memories, &first.id, true).await.unwrap().unwrap();
    assert_eq!(stored.content, None, "redaction is for good");
    let current = store.get_memory_version(&ws, &memories, &all[1].id, true).await.unwrap().unwrap();
    assert_eq!(current.content.as_deref(), Some("public"));
});

conformance!(deleting_a_store_removes_its_memories_and_versions, |store, _clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let other = store.ensure_workspace("acme", "other").await.unwrap().id;
    let doomed = new_store(store.as_ref(), &ws, "doomed").await;
    let kept = new_store(store.as_ref(), &ws, "kept").await;
    let a = created(store.as_ref(), &ws, &doomed, "/a.md", "a").await;
    created(store.as_ref(), &ws, &kept, "/a.md", "a").await;
    assert!(!store.delete_memory_store(&other, &doomed).await.unwrap(), "not from another workspace");
    assert!(store.delete_memory_store(&ws, &doomed).await.unwrap());
    assert!(!store.delete_memory_store(&ws, &doomed).await.unwrap());
    assert!(store.get_memory_store(&ws, &doomed).await.unwrap().is_none());
    assert!(store.get_memory(&ws, &doomed, &a, false).await.unwrap().is_none());
    assert!(store.list_memory_versions(&ws, &doomed, &versions(10)).await.unwrap().is_empty());
    assert_eq!(store.list_memory_versions(&ws, &kept, &versions(10)).await.unwrap().len(), 1);
    assert_eq!(store.list_memories(&ws, &kept, &listing(None, 0, None, 10)).await.unwrap().len(), 1);
});
