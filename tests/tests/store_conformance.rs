//! The store seam's conformance suite, run against SQLite and PostgreSQL alike.
//! Each case gets a fresh database (a temp SQLite file or a new PostgreSQL database).

use agentd_schema::outbox::{RelayConfig, relay_once};
use agentd_schema::{
    Claim, ClaimOutcome, Clock, Heartbeat, IdempotencyBegin, KeyKind, ListQuery, NewEvent, NewResource, NewSession,
    Settlement, Store, StoreError, Submission, WorkSource,
};
use agentd_tests::store_conformance as conformance;
use serde_json::json;

const LEASE_MS: i64 = 30_000;

async fn session(store: &dyn Store) -> (String, String) {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let id = agentd_schema::ids::new_id("sesn");
    store
        .create_session(NewSession {
            id: id.clone(),
            workspace_id: workspace.id.clone(),
            status: "idle".into(),
            body: json!({ "title": "t" }),
            agent_id: None,
            agent_version: None,
        })
        .await
        .unwrap();
    (workspace.id, id)
}

fn event(thread: &str, text: &str) -> NewEvent {
    NewEvent {
        event_id: agentd_schema::ids::new_id("sevt"),
        thread_id: thread.to_owned(),
        kind: "user.message".into(),
        body: json!({ "type": "user.message", "content": [{ "type": "text", "text": text }] }),
    }
}

async fn submit(store: &dyn Store, session: &str, text: &str) -> agentd_schema::Submitted {
    store
        .submit(Submission {
            session_id: session.to_owned(),
            thread_id: session.to_owned(),
            events: vec![event(session, text)],
            max_attempts: 5,
            trace_context: vec![],
        })
        .await
        .unwrap()
}

async fn claim(store: &dyn Store, run: &str, owner: &str) -> Claim {
    match store.claim_run(run, owner, LEASE_MS).await.unwrap() {
        ClaimOutcome::Claimed(claim) => claim,
        other => panic!("expected a claim, got {other:?}"),
    }
}

conformance!(workspaces_are_idempotent, |store, _clock| async move {
    let a = store.ensure_workspace("acme", "default").await.unwrap();
    let b = store.ensure_workspace("acme", "default").await.unwrap();
    assert_eq!(a, b);
    let other = store.ensure_workspace("acme", "staging").await.unwrap();
    assert_ne!(a.id, other.id);
    assert_eq!(a.organization_id, other.organization_id);
    assert_eq!(store.find_workspace("staging").await.unwrap().unwrap().id, other.id);
    assert_eq!(store.find_workspace(&a.id).await.unwrap().unwrap(), a);
    assert!(store.find_workspace("nope").await.unwrap().is_none());
});

conformance!(api_keys_are_hashed_resolvable_and_revocable, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let secret = "sk-agentd-test-0123456789abcdef";
    let key = store.insert_api_key(&workspace.id, "ci", secret, &KeyKind::Api).await.unwrap();
    assert_eq!(key.hint, "cdef");
    // Storing the same secret again is idempotent.
    assert_eq!(store.insert_api_key(&workspace.id, "ci", secret, &KeyKind::Api).await.unwrap().id, key.id);
    // Environment and runner keys resolve with their kind.
    let env_key = "sk-agentd-env-test-0123456789";
    let environment = KeyKind::Environment("env_01".into());
    store.insert_api_key(&workspace.id, "env", env_key, &environment).await.unwrap();
    assert_eq!(store.resolve_api_key(env_key).await.unwrap().unwrap().kind, environment);
    store.insert_api_key(&workspace.id, "runner", "sk-agentd-runner-test-0123", &KeyKind::Runner).await.unwrap();
    assert_eq!(store.resolve_api_key("sk-agentd-runner-test-0123").await.unwrap().unwrap().kind, KeyKind::Runner);
    let scope = store.resolve_api_key(secret).await.unwrap().expect("key resolves");
    assert_eq!(scope.workspace_id, workspace.id);
    assert_eq!(scope.organization_id, workspace.organization_id);
    assert_eq!(scope.key_id, key.id);
    assert!(store.resolve_api_key("sk-agentd-wrong").await.unwrap().is_none());
    let listed = store.list_api_keys(Some(&workspace.id)).await.unwrap();
    assert_eq!(listed.len(), 3);
    assert!(store.revoke_api_key(&key.id).await.unwrap());
    assert!(!store.revoke_api_key(&key.id).await.unwrap(), "second revoke reports nothing to do");
    assert!(store.resolve_api_key(secret).await.unwrap().is_none(), "a revoked key resolves to nothing");
});

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
    let updated = store.update_resource(&workspace.id, "agent", &id, 1, json!({ "name": "b" }), true).await.unwrap();
    assert_eq!(updated.version, 2);
    let stale = store.update_resource(&workspace.id, "agent", &id, 1, json!({ "name": "c" }), true).await;
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

conformance!(submission_records_run_events_and_outbox_together, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let first = submit(store.as_ref(), &session, "hi").await;
    assert_eq!(first.generation, 1);
    assert!(!first.live);
    assert_eq!(first.events.len(), 1);
    assert_eq!(first.outbox.msg_id, format!("{}:1", first.run_id));
    let run = store.get_run(&first.run_id).await.unwrap().unwrap();
    assert_eq!(run.status, agentd_schema::RunStatus::Pending);
    // A second submission before any claim reuses the open run with a new generation.
    let second = submit(store.as_ref(), &session, "more").await;
    assert_eq!(second.run_id, first.run_id);
    assert_eq!(second.generation, 2);
    let due = store.outbox_due(clock.now_ms(), 10).await.unwrap();
    assert_eq!(
        due.iter().map(|m| m.msg_id.clone()).collect::<Vec<_>>(),
        [first.outbox.msg_id.clone(), second.outbox.msg_id.clone()]
    );
    let decoded = <agentd_proto::v1::RunSubmission as prost::Message>::decode(due[0].payload.as_slice()).unwrap();
    assert_eq!(decoded.run_id, first.run_id);
    assert_eq!(decoded.session_id, session);
    // The relay publishes what is old enough and removes it.
    let queue = agentd_proto::queue::memory::MemoryQueue::new(agentd_proto::QueueConfig::default());
    clock.advance(10_000);
    let relayed = relay_once(store.as_ref(), &queue, clock.as_ref(), &RelayConfig::default()).await.unwrap();
    assert_eq!(relayed, 2);
    assert!(store.outbox_due(clock.now_ms(), 10).await.unwrap().is_empty());
    let delivered = agentd_proto::Queue::fetch(&queue, 10, std::time::Duration::from_millis(100)).await.unwrap();
    assert_eq!(delivered.len(), 2);
});

conformance!(two_workers_racing_for_one_run_one_wins, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let racers = (0..8).map(|n| {
        let store = store.clone();
        let run = run.clone();
        tokio::spawn(async move { store.claim_run(&run, &format!("worker-{n}"), LEASE_MS).await.unwrap() })
    });
    let outcomes: Vec<ClaimOutcome> = futures::future::join_all(racers).await.into_iter().map(Result::unwrap).collect();
    let winners: Vec<&Claim> = outcomes
        .iter()
        .filter_map(|o| match o {
            ClaimOutcome::Claimed(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "exactly one claim wins: {outcomes:?}");
    assert_eq!(winners[0].epoch, 1);
    assert_eq!(winners[0].attempts, 0, "a fresh claim is not a recovery");
    for other in outcomes.iter().filter(|o| !matches!(o, ClaimOutcome::Claimed(_))) {
        assert!(matches!(other, ClaimOutcome::Held { .. }), "losers see a live lease: {other:?}");
    }
});

conformance!(expired_lease_is_reclaimed_with_an_attempt_and_fences_the_old_owner, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let old = claim(store.as_ref(), &run, "worker-a").await;
    // Not reclaimable while the lease is live.
    assert!(matches!(store.claim_run(&run, "worker-b", LEASE_MS).await.unwrap(), ClaimOutcome::Held { .. }));
    clock.advance(LEASE_MS + 1);
    let new = claim(store.as_ref(), &run, "worker-b").await;
    assert_eq!(new.epoch, old.epoch + 1);
    assert_eq!(new.attempts, 1, "a recovery claim spends one attempt");
    let before = store.list_events(&session, 0, 100).await.unwrap();
    // The old owner's late commit, renewal and settlement are all fenced and change nothing.
    let late = store.commit(&old, vec![agent_event(&session, "late")]).await;
    assert!(matches!(late, Err(StoreError::Fenced { .. })), "{late:?}");
    assert!(late.unwrap_err().is_certainly_not_committed());
    assert!(matches!(store.renew_lease(&old, LEASE_MS).await, Err(StoreError::Fenced { .. })));
    let settle = store.settle(&old, vec![], Settlement::Done { outcome: "completed".into() }).await;
    assert!(matches!(settle, Err(StoreError::Fenced { .. })));
    assert_eq!(store.list_events(&session, 0, 100).await.unwrap(), before, "history unchanged by fenced writes");
    // The new owner commits fine.
    let committed = store.commit(&new, vec![agent_event(&session, "ok")]).await.unwrap();
    assert_eq!(committed[0].seq, before.len() as i64 + 1);
    // A second expiry spends another attempt.
    clock.advance(LEASE_MS + 1);
    let third = claim(store.as_ref(), &run, "worker-c").await;
    assert_eq!((third.epoch, third.attempts), (3, 2));
});

conformance!(renewal_keeps_the_lease_and_settling_releases_it, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let held = claim(store.as_ref(), &run, "worker-a").await;
    clock.advance(LEASE_MS - 1_000);
    let until = store.renew_lease(&held, LEASE_MS).await.unwrap();
    assert_eq!(until, clock.now_ms() + LEASE_MS);
    clock.advance(2_000);
    assert!(
        matches!(store.claim_run(&run, "worker-b", LEASE_MS).await.unwrap(), ClaimOutcome::Held { .. }),
        "a renewed lease is not reclaimable at its original expiry"
    );
    // Park at a checkpoint: the budget resets and new input makes it runnable again.
    store.settle(&held, vec![agent_event(&session, "need input")], Settlement::Awaiting).await.unwrap();
    let parked = store.get_run(&run).await.unwrap().unwrap();
    assert_eq!(parked.status, agentd_schema::RunStatus::Awaiting);
    assert_eq!(parked.owner, None);
    assert_eq!(
        store.claim_run(&run, "worker-b", LEASE_MS).await.unwrap(),
        ClaimOutcome::Stale,
        "awaiting is not claimable"
    );
    let resumed = submit(store.as_ref(), &session, "here you go").await;
    assert_eq!(resumed.run_id, run);
    let again = claim(store.as_ref(), &run, "worker-b").await;
    assert_eq!(again.epoch, held.epoch + 1);
    store.settle(&again, vec![], Settlement::Done { outcome: "completed".into() }).await.unwrap();
    let done = store.get_run(&run).await.unwrap().unwrap();
    assert_eq!(done.status, agentd_schema::RunStatus::Done);
    assert_eq!(done.outcome.as_deref(), Some("completed"));
    assert_eq!(store.claim_run(&run, "worker-c", LEASE_MS).await.unwrap(), ClaimOutcome::Stale);
    // After the run is done, new input opens a new run.
    let next = submit(store.as_ref(), &session, "new turn").await;
    assert_ne!(next.run_id, run);
});

conformance!(input_while_leased_goes_to_the_live_attempt, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let held = claim(store.as_ref(), &run, "worker-a").await;
    let more = submit(store.as_ref(), &session, "also").await;
    assert_eq!(more.run_id, run);
    assert!(more.live);
    let row = store.get_run(&run).await.unwrap().unwrap();
    assert_eq!((row.epoch, row.owner.as_deref()), (held.epoch, Some("worker-a")), "the lease is untouched");
});

conformance!(idempotency_keys_replay_and_detect_mismatch, |store, clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let ws = workspace.id.as_str();
    assert_eq!(store.idempotency_begin(ws, "k1", "h1", 60_000).await.unwrap(), IdempotencyBegin::Fresh);
    assert_eq!(store.idempotency_begin(ws, "k1", "h1", 60_000).await.unwrap(), IdempotencyBegin::InFlight);
    store.idempotency_complete(ws, "k1", 200, "{\"id\":\"x\"}").await.unwrap();
    assert_eq!(
        store.idempotency_begin(ws, "k1", "h1", 60_000).await.unwrap(),
        IdempotencyBegin::Replay { status_code: 200, response: "{\"id\":\"x\"}".into() }
    );
    assert_eq!(store.idempotency_begin(ws, "k1", "h2", 60_000).await.unwrap(), IdempotencyBegin::Mismatch);
    clock.advance(60_001);
    assert_eq!(store.idempotency_begin(ws, "k1", "h2", 60_000).await.unwrap(), IdempotencyBegin::Fresh);
});

fn agent_event(thread: &str, text: &str) -> NewEvent {
    NewEvent {
        event_id: agentd_schema::ids::new_id("sevt"),
        thread_id: thread.to_owned(),
        kind: "agent.message".into(),
        body: json!({ "type": "agent.message", "content": [{ "type": "text", "text": text }] }),
    }
}

fn status_event(thread: &str, kind: &str) -> NewEvent {
    NewEvent {
        event_id: agentd_schema::ids::new_id("sevt"),
        thread_id: thread.to_owned(),
        kind: kind.into(),
        body: json!({ "type": kind }),
    }
}

conformance!(status_and_usage_follow_committed_events, |store, _clock| async move {
    let (workspace, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let held = claim(store.as_ref(), &run, "worker-a").await;
    let usage = |input: i64, output: i64| NewEvent {
        event_id: agentd_schema::ids::new_id("sevt"),
        thread_id: session.clone(),
        kind: "span.model_request_end".into(),
        body: json!({ "type": "span.model_request_end", "model_usage": {
            "input_tokens": input, "output_tokens": output, "cache_read_input_tokens": 1, "cache_creation_input_tokens": 2 } }),
    };
    store.commit(&held, vec![status_event(&session, "session.status_running"), usage(10, 5)]).await.unwrap();
    let running = store.get_session(&workspace, &session).await.unwrap().unwrap();
    assert_eq!(running.status, "running");
    store
        .settle(&held, vec![usage(3, 4), status_event(&session, "session.status_idle")], Settlement::Awaiting)
        .await
        .unwrap();
    let idle = store.get_session(&workspace, &session).await.unwrap().unwrap();
    assert_eq!(idle.status, "idle");
    assert_eq!(idle.usage["input_tokens"], 13);
    assert_eq!(idle.usage["output_tokens"], 9);
    assert_eq!(idle.usage["cache_read_input_tokens"], 2);
    assert_eq!(idle.usage["cache_creation"]["ephemeral_5m_input_tokens"], 4);
});

conformance!(input_during_an_attempt_keeps_the_run_runnable, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let held = claim(store.as_ref(), &run, "worker-a").await;
    // New input while the attempt runs bumps the generation past the claimed one.
    submit(store.as_ref(), &session, "and another thing").await;
    let settled = store.settle(&held, vec![], Settlement::Awaiting).await.unwrap();
    assert_eq!(settled.status, agentd_schema::RunStatus::Pending, "unconsumed input must not be parked");
    let again = claim(store.as_ref(), &run, "worker-a").await;
    let mut consumed = again.clone();
    consumed.generation = store.get_run(&run).await.unwrap().unwrap().generation;
    let settled = store.settle(&consumed, vec![], Settlement::Awaiting).await.unwrap();
    assert_eq!(settled.status, agentd_schema::RunStatus::Awaiting);
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
    let replaced = store.replace_session_resources(&workspace.id, "sesn_02", None, kept.body.clone(), vec![]);
    assert_eq!(replaced.await.unwrap().unwrap().0.body["agent"], agent, "resource changes keep the agent");
    assert_eq!(store.archive_session(&workspace.id, "sesn_02").await.unwrap().body["agent"], agent);
    // A session without an agent has no snapshot.
    let bare = create("sesn_03", json!({ "title": "bare" })).await;
    assert_eq!((bare.agent_snapshot_id, bare.body), (None, json!({ "title": "bare" })));
});

conformance!(relinquishing_hands_the_run_back_without_spending_budget, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let first = claim(store.as_ref(), &run, "worker-a").await;
    clock.advance(LEASE_MS + 1);
    let recovered = claim(store.as_ref(), &run, "worker-b").await;
    assert_eq!(recovered.attempts, 1);
    assert!(matches!(store.relinquish(&first).await, Err(StoreError::Fenced { .. })), "a lost claim cannot relinquish");
    store.relinquish(&recovered).await.unwrap();
    let row = store.get_run(&run).await.unwrap().unwrap();
    assert_eq!((row.status, row.owner), (agentd_schema::RunStatus::Pending, None));
    let next = claim(store.as_ref(), &run, "worker-c").await;
    assert_eq!(next.epoch, recovered.epoch + 1);
    assert_eq!(next.attempts, 1, "a relinquished run is not a recovery");
});

conformance!(work_items_move_through_the_protocol_states, |store, clock| async move {
    let (workspace, session) = session(store.as_ref()).await;
    let created = store.ensure_work_item(&workspace, "env_a", &session, "self_hosted").await.unwrap().unwrap();
    assert_eq!(created.state, "queued");
    assert!(
        store.ensure_work_item(&workspace, "env_a", &session, "self_hosted").await.unwrap().is_none(),
        "one open item per session"
    );
    let source = WorkSource::Environment("env_a".into());
    assert!(store.poll_work(&WorkSource::Environment("env_b".into()), 5_000, "h0").await.unwrap().is_none());
    let offered = store.poll_work(&source, 5_000, "hash-1").await.unwrap().unwrap();
    assert_eq!(offered.id, created.id);
    let stats = store.work_stats("env_a").await.unwrap();
    assert_eq!((stats.depth, stats.pending), (0, 1));
    assert!(
        store.poll_work(&source, 5_000, "hash-2").await.unwrap().is_none(),
        "offered items wait for the reclaim time"
    );
    clock.advance(5_001);
    let token = "wst-test-token";
    let reoffered = store.poll_work(&source, 5_000, &agentd_schema::ids::secret_hash(token)).await.unwrap().unwrap();
    assert_eq!(reoffered.id, created.id, "an unacked item is offered again after reclaim_older_than_ms");
    // Heartbeats need an ack first; the ack happens once.
    assert!(matches!(
        store.heartbeat_work("env_a", &created.id, "NO_HEARTBEAT", None).await.unwrap(),
        Some(Heartbeat::NotAcked(_))
    ));
    let acked = store.ack_work("env_a", &created.id).await.unwrap().unwrap();
    assert_eq!(acked.state, "starting");
    assert!(store.ack_work("env_a", &created.id).await.unwrap().is_err(), "a second ack conflicts");
    // First heartbeat claims with NO_HEARTBEAT; later ones echo the previous string.
    let Some(Heartbeat::Recorded { item: first, extended: true }) =
        store.heartbeat_work("env_a", &created.id, "NO_HEARTBEAT", Some(10)).await.unwrap()
    else {
        panic!("first heartbeat refused")
    };
    assert_eq!((first.state.as_str(), first.ttl_seconds), ("active", 10));
    let stamp = first.last_heartbeat.clone().unwrap();
    assert!(matches!(
        store.heartbeat_work("env_a", &created.id, "NO_HEARTBEAT", None).await.unwrap(),
        Some(Heartbeat::PreconditionFailed(_))
    ));
    assert!(matches!(
        store.heartbeat_work("env_a", &created.id, "2020-01-01T00:00:00Z", None).await.unwrap(),
        Some(Heartbeat::PreconditionFailed(_))
    ));
    let Some(Heartbeat::Recorded { item: second, extended: true }) =
        store.heartbeat_work("env_a", &created.id, &stamp, None).await.unwrap()
    else {
        panic!("echoed heartbeat refused")
    };
    assert_ne!(second.last_heartbeat.as_deref(), Some(stamp.as_str()), "every heartbeat string is new");
    // The sessions token of the current offer resolves until the item stops.
    let resolved = store.resolve_sessions_token(token).await.unwrap().expect("the current offer's token resolves");
    assert_eq!((resolved.work_id.as_str(), resolved.session_id.as_str()), (created.id.as_str(), session.as_str()));
    assert!(store.resolve_sessions_token("hash-1").await.unwrap().is_none());
    // Graceful stop of a held item asks it to stop; heartbeats are then not compared.
    let stopping = store.stop_work("env_a", &created.id, false).await.unwrap().unwrap().unwrap();
    assert_eq!(stopping.state, "stopping");
    assert!(matches!(
        store.heartbeat_work("env_a", &created.id, "anything", None).await.unwrap(),
        Some(Heartbeat::Recorded { extended: false, .. })
    ));
    let stopped = store.stop_work("env_a", &created.id, true).await.unwrap().unwrap().unwrap();
    assert_eq!(stopped.state, "stopped");
    assert!(store.stop_work("env_a", &created.id, true).await.unwrap().unwrap().is_err(), "already stopped");
    assert!(store.resolve_sessions_token(token).await.unwrap().is_none(), "a stopped item's token is dead");
    // A stopped item frees the session for a new one.
    assert!(store.ensure_work_item(&workspace, "env_a", &session, "self_hosted").await.unwrap().is_some());
    let patched =
        store.update_work_metadata("env_a", &created.id, &json!({ "a": "1", "b": null })).await.unwrap().unwrap();
    assert_eq!(patched.metadata, json!({ "a": "1" }));
    assert_eq!(store.list_work("env_a", None, 10).await.unwrap().len(), 2);
});

conformance!(lost_work_leases_are_reoffered_then_given_up, |store, clock| async move {
    let (workspace, session) = session(store.as_ref()).await;
    let item = store.ensure_work_item(&workspace, "env_c", &session, "cloud").await.unwrap().unwrap();
    let cloud = WorkSource::Cloud { workspace_id: workspace.clone() };
    for round in 1..=2 {
        let offered = store.poll_work(&cloud, 5_000, &format!("hash-{round}")).await.unwrap().unwrap();
        assert_eq!(offered.id, item.id);
        store.ack_work("env_c", &item.id).await.unwrap().unwrap();
        assert!(store.expire_work_leases(2).await.unwrap().is_empty(), "the lease is live");
        clock.advance(30_001);
        let lost = store.expire_work_leases(2).await.unwrap();
        let current = store.get_work("env_c", &item.id).await.unwrap().unwrap();
        if round == 1 {
            assert!(lost.is_empty());
            assert_eq!((current.state.as_str(), current.lost_leases), ("queued", 1), "offered again");
        } else {
            assert_eq!(lost.len(), 1, "given up after the second lost lease");
            assert_eq!(lost[0].session_id, session);
            assert_eq!(current.state, "stopped");
        }
    }
});
