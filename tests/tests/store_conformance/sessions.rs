//! Sessions and their event history (`SessionStore`).

use super::*;

conformance!(concurrent_appends_get_gap_free_sequences, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let writers = (0..8).map(|n| {
        let store = store.clone();
        let session = session.clone();
        tokio::spawn(async move {
            store
                .append_events(&session, vec![event(&session, &format!("a{n}")), event(&session, &format!("b{n}"))])
                .await
        })
    });
    for writer in futures::future::join_all(writers).await {
        let stored = writer.unwrap().unwrap();
        assert_eq!(stored[1].seq, stored[0].seq + 1, "one batch is contiguous");
    }
    let events = store.list_events(&session, 0, 100).await.unwrap();
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=16).collect::<Vec<_>>());
    // A repeated event id is rejected and writes nothing of its batch.
    let duplicate = events[0].event_id.clone();
    let mut replay = event(&session, "again");
    replay.event_id = duplicate;
    let result = store.append_events(&session, vec![event(&session, "fresh"), replay]).await;
    assert!(matches!(result, Err(StoreError::Conflict(_))), "{result:?}");
    assert_eq!(store.list_events(&session, 0, 100).await.unwrap().len(), 16);
    assert_eq!(store.list_events(&session, 14, 100).await.unwrap().len(), 2);
});

conformance!(events_filter_by_type_time_thread_and_order, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    store
        .append_events(&session, vec![event(&session, "a"), status_event(&session, "session.status_idle")])
        .await
        .unwrap();
    clock.advance(1_000);
    let later = clock.now_ms();
    store
        .append_events(&session, vec![event(&session, "b"), status_event("sthr_child", "session.thread_status_idle")])
        .await
        .unwrap();
    let all = |q: agentd_schema::EventQuery| {
        let store = store.clone();
        let session = session.clone();
        async move { store.query_events(&session, &q).await.unwrap().into_iter().map(|e| e.seq).collect::<Vec<_>>() }
    };
    let base = agentd_schema::EventQuery { limit: 100, ..Default::default() };
    assert_eq!(all(base.clone()).await, [1, 2, 3, 4]);
    assert_eq!(all(agentd_schema::EventQuery { descending: true, ..base.clone() }).await, [4, 3, 2, 1]);
    assert_eq!(all(agentd_schema::EventQuery { types: vec!["user.message".into()], ..base.clone() }).await, [1, 3]);
    let since = agentd_schema::TimeBounds { gte: Some(later), ..Default::default() };
    assert_eq!(all(agentd_schema::EventQuery { processed: since, ..base.clone() }).await, [3, 4]);
    assert_eq!(all(agentd_schema::EventQuery { thread_id: Some(session.clone()), ..base.clone() }).await, [1, 2, 3]);
    assert_eq!(all(agentd_schema::EventQuery { after_seq: Some(2), limit: 1, ..base.clone() }).await, [3]);
    assert_eq!(all(agentd_schema::EventQuery { after_seq: Some(3), descending: true, ..base }).await, [2, 1]);
});

conformance!(sessions_list_filter_page_both_ways_and_delete, |store, clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let mut ids = Vec::new();
    for n in 0..4 {
        clock.advance(10);
        let id = format!("sesn_{n:02}");
        store
            .create_session(NewSession {
                id: id.clone(),
                workspace_id: workspace.id.clone(),
                status: if n % 2 == 0 { "idle".into() } else { "running".into() },
                body: json!({}),
                agent_id: Some(if n < 2 { "agent_a".into() } else { "agent_b".into() }),
                agent_version: Some(n),
            })
            .await
            .unwrap();
        ids.push(id);
    }
    let list = |q: agentd_schema::SessionQuery| {
        let store = store.clone();
        let ws = workspace.id.clone();
        async move { store.list_sessions(&ws, &q).await.unwrap().into_iter().map(|s| s.id).collect::<Vec<_>>() }
    };
    let base = agentd_schema::SessionQuery { limit: 10, descending: true, ..Default::default() };
    assert_eq!(list(base.clone()).await, ["sesn_03", "sesn_02", "sesn_01", "sesn_00"]);
    assert_eq!(
        list(agentd_schema::SessionQuery { statuses: vec!["idle".into()], ..base.clone() }).await,
        ["sesn_02", "sesn_00"]
    );
    assert_eq!(
        list(agentd_schema::SessionQuery { agent_id: Some("agent_a".into()), ..base.clone() }).await,
        ["sesn_01", "sesn_00"]
    );
    let page = agentd_schema::SessionQuery { limit: 2, ..base.clone() };
    assert_eq!(
        list(agentd_schema::SessionQuery { after_id: Some("sesn_02".into()), ..page.clone() }).await,
        ["sesn_01", "sesn_00"]
    );
    assert_eq!(
        list(agentd_schema::SessionQuery { before_id: Some("sesn_01".into()), ..page }).await,
        ["sesn_03", "sesn_02"]
    );
    store.archive_session(&workspace.id, "sesn_00").await.unwrap();
    assert_eq!(list(base.clone()).await.len(), 3, "archived sessions are hidden by default");
    store.append_events("sesn_01", vec![event("sesn_01", "x")]).await.unwrap();
    assert!(store.delete_session(&workspace.id, "sesn_01").await.unwrap());
    assert!(!store.delete_session(&workspace.id, "sesn_01").await.unwrap());
    assert!(store.list_events("sesn_01", 0, 10).await.unwrap().is_empty(), "events go with the session");
});

conformance!(sessions_share_one_agent_snapshot_per_agent_configuration, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let agent = json!({ "type": "agent", "id": "agent_a", "version": 3, "system": "x".repeat(10_000), "tools": [] });
    let create = |id: &'static str, body: serde_json::Value| {
        let store = store.clone();
        let workspace = workspace.id.clone();
        async move {
            store
                .create_session(NewSession {
                    id: id.into(),
                    workspace_id: workspace,
                    status: "idle".into(),
                    body,
                    agent_id: Some("agent_a".into()),
                    agent_version: Some(3),
                })
                .await
                .unwrap()
        }
    };
    let one = create("sesn_01", json!({ "title": "one", "agent": agent })).await;
    let two = create("sesn_02", json!({ "title": "two", "agent": agent })).await;
    assert_eq!(one.body["agent"], agent, "create answers with the agent");
    assert!(one.agent_snapshot_id.is_some());
    assert_eq!(one.agent_snapshot_id, two.agent_snapshot_id, "sessions of one agent version share a snapshot");
    let snapshot = one.agent_snapshot_id.clone().unwrap();
    assert_eq!(store.agent_snapshot(&snapshot).await.unwrap(), Some(agent.clone()));
    assert_eq!(store.agent_snapshot("asnap_missing").await.unwrap(), None);
    let read = store.get_session(&workspace.id, "sesn_01").await.unwrap().unwrap();
    assert_eq!((read.body["agent"].clone(), read.body["title"].clone()), (agent.clone(), json!("one")));
    assert_eq!(store.load_session("sesn_02").await.unwrap().unwrap().body["agent"], agent);
    // Lists leave the agent out; its snapshot id says which one it is.
    let listed = store
        .list_sessions(&workspace.id, &agentd_schema::SessionQuery { limit: 10, ..Default::default() })
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    for session in &listed {
        assert!(session.body.get("agent").is_none(), "{}", session.body);
        assert_eq!(session.agent_snapshot_id.as_deref(), Some(snapshot.as_str()));
    }
    // Changing one session's agent gives it its own snapshot; the other keeps the shared one.
    let mut changed = read.body.clone();
    changed["agent"]["tools"] = json!([{ "type": "custom", "name": "t" }]);
    let (updated, _) = store.update_session(&workspace.id, "sesn_01", changed.clone(), vec![]).await.unwrap();
    assert_eq!(updated.body, changed, "update answers with the new agent");
    assert_ne!(updated.agent_snapshot_id.as_deref(), Some(snapshot.as_str()));
    assert_eq!(store.get_session(&workspace.id, "sesn_01").await.unwrap().unwrap().body, changed);
    assert_eq!(store.get_session(&workspace.id, "sesn_02").await.unwrap().unwrap().body["agent"], agent);
    // A body written without an agent keeps the session's snapshot.
    let mut untouched = json!({ "title": "two, renamed" });
    let (kept, _) = store.update_session(&workspace.id, "sesn_02", untouched.clone(), vec![]).await.unwrap();
    untouched["agent"] = agent.clone();
    assert_eq!(kept.body, untouched);
    let replaced = store.replace_session_resources(ResourcesReplacement {
        workspace_id: workspace.id.clone(),
        session_id: "sesn_02".into(),
        expected_revision: None,
        body: kept.body.clone(),
        events: vec![],
    });
    assert_eq!(replaced.await.unwrap().unwrap().0.body["agent"], agent, "resource changes keep the agent");
    assert_eq!(store.archive_session(&workspace.id, "sesn_02").await.unwrap().body["agent"], agent);
    // A session without an agent has no snapshot.
    let bare = create("sesn_03", json!({ "title": "bare" })).await;
    assert_eq!((bare.agent_snapshot_id, bare.body), (None, json!({ "title": "bare" })));
});

conformance!(a_large_batch_is_appended_in_order, |store, _clock| async move {
    let (workspace, session) = session(store.as_ref()).await;
    store.append_events(&session, vec![event(&session, "first")]).await.unwrap();
    // More events than one statement takes: still one gap-free, ordered batch.
    let batch: Vec<NewEvent> = (0..2_500).map(|n| event(&session, &format!("m{n}"))).collect();
    let ids: Vec<String> = batch.iter().map(|e| e.event_id.clone()).collect();
    let stored = store.append_events(&session, batch).await.unwrap();
    assert_eq!(stored.iter().map(|e| e.seq).collect::<Vec<_>>(), (2..=2_501).collect::<Vec<_>>());
    let listed = store.list_events(&session, 1, 3_000).await.unwrap();
    assert_eq!(listed, stored, "what was returned is what was stored");
    assert_eq!(listed.iter().map(|e| e.event_id.clone()).collect::<Vec<_>>(), ids);
    assert_eq!(listed[2_499].body["content"][0]["text"], "m2499");
    let read = store.get_session(&workspace, &session).await.unwrap().unwrap();
    assert_eq!(read.next_seq, 2_502);
});

conformance!(resource_replacement_is_compare_and_swap_on_the_revision, |store, _clock| async move {
    let (workspace, session) = session(store.as_ref()).await;
    let revision = store.get_session(&workspace, &session).await.unwrap().unwrap().resources_revision;
    let change = |expected: Option<i64>, title: &str| ResourcesReplacement {
        workspace_id: workspace.clone(),
        session_id: session.clone(),
        expected_revision: expected,
        body: json!({ "title": title }),
        events: vec![status_event(&session, "session.updated")],
    };
    let (updated, events) = store.replace_session_resources(change(Some(revision), "a")).await.unwrap().unwrap();
    assert_eq!((updated.resources_revision, updated.body["title"].clone()), (revision + 1, json!("a")));
    assert_eq!(events.len(), 1);
    // A stale revision writes nothing, events included, and names the current one.
    let stale = store.replace_session_resources(change(Some(revision), "b")).await.unwrap();
    assert_eq!(stale.unwrap_err(), revision + 1);
    assert_eq!(store.list_events(&session, 0, 10).await.unwrap().len(), 1);
    let missing = ResourcesReplacement { session_id: "sesn_missing".into(), events: vec![], ..change(None, "c") };
    assert!(matches!(store.replace_session_resources(missing).await, Err(StoreError::NotFound { .. })));
});

conformance!(appends_keep_the_status_running_time_and_usage_projections, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let running = || agentd_schema::NewEvent::status_running(&session);
    let idle = || agentd_schema::NewEvent::status_idle(&session, agentd_schema::StopReason::EndTurn);
    let load = || async { store.load_session(&session).await.unwrap().unwrap() };

    store.append_events(&session, vec![event(&session, "hi"), running()]).await.unwrap();
    let now = load().await;
    assert_eq!((now.status.as_str(), now.active_ms, now.running_since_ms), ("running", 0, Some(clock.now_ms())));
    // Running again keeps the clock started the first time.
    clock.advance(400);
    store.append_events(&session, vec![running()]).await.unwrap();
    assert_eq!(load().await.running_since_ms, Some(clock.now_ms() - 400));
    clock.advance(600);
    store.append_events(&session, vec![idle()]).await.unwrap();
    let now = load().await;
    assert_eq!((now.status.as_str(), now.active_ms, now.running_since_ms), ("idle", 1_000, None));

    // The last status of an append wins; another thread's status is not the session's.
    store.append_events(&session, vec![running(), idle()]).await.unwrap();
    assert_eq!(load().await.status, "idle");
    let other_thread = agentd_schema::NewEvent::status_running("sthr_other");
    store.append_events(&session, vec![other_thread]).await.unwrap();
    let now = load().await;
    assert_eq!((now.status.as_str(), now.active_ms, now.running_since_ms), ("idle", 1_000, None));

    // Usage adds up over `span.model_request_end` events, and only those.
    let usage = agentd_schema::ModelUsage {
        input_tokens: 3,
        output_tokens: 5,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
    };
    let end = || agentd_schema::NewEvent::model_request_end(&session, "sevt_start", false, usage);
    store.append_events(&session, vec![end(), end()]).await.unwrap();
    store.append_events(&session, vec![event(&session, "more")]).await.unwrap();
    let now = load().await;
    assert_eq!(now.usage["input_tokens"], 6, "{}", now.usage);
    assert_eq!(now.usage["output_tokens"], 10, "{}", now.usage);
});

conformance!(sessions_list_by_the_memory_stores_among_their_resources, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let memory = |id: &str| json!({ "type": "memory_store", "memory_store_id": id, "access": "read_write" });
    let file = json!({ "type": "file", "id": "sres_1", "file_id": "file_1", "mount_path": "/mnt/x" });
    let create = |id: &'static str, resources: serde_json::Value| {
        let store = store.clone();
        let workspace = workspace.id.clone();
        async move {
            store
                .create_session(NewSession {
                    id: id.into(),
                    workspace_id: workspace,
                    status: "idle".into(),
                    body: json!({ "resources": resources }),
                    agent_id: None,
                    agent_version: None,
                })
                .await
                .unwrap()
        }
    };
    create("sesn_a", json!([memory("memstore_1"), file.clone(), memory("memstore_2")])).await;
    create("sesn_b", json!([memory("memstore_2")])).await;
    create("sesn_c", json!([file.clone()])).await;
    let with = |memory_store: &str| {
        let store = store.clone();
        let workspace = workspace.id.clone();
        let query = agentd_schema::SessionQuery {
            memory_store_id: Some(memory_store.to_owned()),
            limit: 10,
            ..Default::default()
        };
        async move { store.list_sessions(&workspace, &query).await.unwrap().into_iter().map(|s| s.id).collect::<Vec<_>>() }
    };
    assert_eq!(with("memstore_1").await, ["sesn_a"]);
    assert_eq!(with("memstore_2").await, ["sesn_a", "sesn_b"]);
    assert!(with("memstore_3").await.is_empty());
    // Another workspace's sessions never show, whatever their stores.
    let other = store.ensure_workspace("acme", "other").await.unwrap();
    let query =
        agentd_schema::SessionQuery { memory_store_id: Some("memstore_1".into()), limit: 10, ..Default::default() };
    assert!(store.list_sessions(&other.id, &query).await.unwrap().is_empty());

    // A replacement of the resources moves the index with them, in its transaction.
    let replace = |id: &str, resources: serde_json::Value, expected: Option<i64>| ResourcesReplacement {
        workspace_id: workspace.id.clone(),
        session_id: id.into(),
        expected_revision: expected,
        body: json!({ "resources": resources }),
        events: vec![],
    };
    store.replace_session_resources(replace("sesn_a", json!([memory("memstore_3")]), None)).await.unwrap().unwrap();
    store.replace_session_resources(replace("sesn_c", json!([memory("memstore_2")]), None)).await.unwrap().unwrap();
    assert!(with("memstore_1").await.is_empty(), "a store no longer among the resources");
    assert_eq!(with("memstore_2").await, ["sesn_b", "sesn_c"]);
    assert_eq!(with("memstore_3").await, ["sesn_a"]);
    // A refused replacement (stale revision) changes nothing.
    let stale = store.replace_session_resources(replace("sesn_b", json!([]), Some(0))).await.unwrap();
    assert!(stale.is_err());
    assert_eq!(with("memstore_2").await, ["sesn_b", "sesn_c"]);
    // The index goes with the session.
    assert!(store.delete_session(&workspace.id, "sesn_b").await.unwrap());
    assert_eq!(with("memstore_2").await, ["sesn_c"]);
});

conformance!(an_event_id_resolves_to_its_seq_within_its_session_only, |store, _clock| async move {
    let (_, first) = session(store.as_ref()).await;
    let (_, second) = session(store.as_ref()).await;
    let stored =
        store.append_events(&first, vec![event(&first, "a"), event(&first, "b"), event(&first, "c")]).await.unwrap();
    let middle = &stored[1];
    assert_eq!(store.event_seq(&first, &middle.event_id).await.unwrap(), Some(middle.seq));
    // Another session's event, or no event at all, is no resume point.
    assert_eq!(store.event_seq(&second, &middle.event_id).await.unwrap(), None);
    assert_eq!(store.event_seq(&first, "sevt_missing").await.unwrap(), None);
});
