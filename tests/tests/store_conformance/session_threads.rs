//! Session threads (ADR 0022): `SessionThreadStore`, `RunStore::handoff`, the status and
//! usage projections over threads, and the session-level view of their events.

use agentd_schema::events::{call_event_id, thread_id_for};
use agentd_schema::{EventQuery, HandedOff, Handoff, NewThread, RunStatus, SessionThread, StoredEvent, ThreadQuery};
use serde_json::Value;

use super::*;

/// A tool use of the primary that spawns a thread, and that thread's id.
fn call() -> (String, String) {
    let call = agentd_schema::ids::new_id("sevt");
    let thread = thread_id_for(&call);
    (call, thread)
}

fn body_event(thread: &str, body: Value) -> NewEvent {
    NewEvent::new(thread, body)
}

/// What a dispatch of `calls` commits: per call `session.thread_created` on the
/// primary, the child's first status and its request, the thread and the wait.
fn spawn(session: &str, calls: &[(String, String)]) -> Handoff {
    let mut handoff = Handoff { session_id: session.to_owned(), ..Handoff::default() };
    for (call, thread) in calls {
        handoff.events.push(
            body_event(
                session,
                json!({ "type": "session.thread_created", "session_thread_id": thread,
                                        "agent_name": "helper" }),
            )
            .with_id(call_event_id(call, "created")),
        );
        handoff.events.push(
            body_event(thread, json!({ "type": "session.thread_status_running", "agent_name": "helper" }))
                .with_id(call_event_id(call, "running")),
        );
        handoff.events.push(
            body_event(
                thread,
                json!({ "type": "agent.thread_message_received", "from_session_thread_id": session,
                                       "content": [{ "type": "text", "text": "go" }],
                                       "_thread_call": { "tool_use_id": call, "role": "request" } }),
            )
            .with_id(call_event_id(call, "received")),
        );
        handoff.new_threads.push(NewThread {
            id: thread.clone(),
            parent_id: session.to_owned(),
            agent: json!({ "type": "agent", "id": "agent_helper", "version": 1, "name": "helper",
                           "model": { "id": "small" } }),
            agent_name: "helper".into(),
        });
        handoff.awaits.push((thread.clone(), call.clone()));
        handoff.wake.push(thread.clone());
    }
    handoff
}

fn idle(thread: &str, session: &str, stop: &str) -> NewEvent {
    let kind = if thread == session { "session.status_idle" } else { "session.thread_status_idle" };
    body_event(thread, json!({ "type": kind, "stop_reason": { "type": stop } }))
}

fn span(thread: &str, input: i64, model: Option<&str>) -> NewEvent {
    let mut body = json!({ "type": "span.model_request_end", "model_request_start_id": "sevt_x", "is_error": false,
                           "model_usage": { "input_tokens": input, "output_tokens": 1,
                                            "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0 } });
    if let Some(model) = model {
        body["_model"] = json!(model);
    }
    body_event(thread, body)
}

async fn threads(store: &dyn Store, session: &str) -> Vec<SessionThread> {
    store.list_threads(session, &ThreadQuery { limit: 100, ..ThreadQuery::default() }).await.unwrap()
}

async fn thread(store: &dyn Store, session: &str, thread: &str) -> SessionThread {
    store.get_thread(session, thread).await.unwrap().unwrap()
}

/// Claims and parks every open run of `thread`, as a worker whose attempt went idle.
async fn settle_runs(store: &dyn Store, thread: &str) {
    for run in store.thread_runs(thread).await.unwrap() {
        if let ClaimOutcome::Claimed(claim) = store.claim_run(&run.id, "worker", 60_000).await.unwrap() {
            store.settle(&claim, Vec::new(), Settlement::Awaiting).await.unwrap();
        }
    }
}

async fn session_status(store: &dyn Store, session: &str) -> String {
    store.load_session(session).await.unwrap().unwrap().status
}

/// What the session holds, to show that a refused handoff wrote nothing.
async fn snapshot(store: &dyn Store, session: &str) -> (Vec<StoredEvent>, Vec<SessionThread>, String, i64) {
    let row = store.load_session(session).await.unwrap().unwrap();
    (store.list_events(session, 0, 1000).await.unwrap(), threads(store, session).await, row.status, row.child_threads)
}

conformance!(threads_list_in_id_order_page_and_filter_by_status, |store, _clock| async move {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let session = agentd_schema::ids::new_id("sesn");
    let agent = json!({ "type": "agent", "id": "agent_main", "version": 3, "name": "main" });
    store
        .create_session(NewSession {
            id: session.clone(),
            workspace_id: workspace.id,
            status: "idle".into(),
            body: json!({ "agent": agent }),
            agent_id: Some("agent_main".into()),
            agent_version: Some(3),
        })
        .await
        .unwrap();
    // A single-agent session: its primary thread is listed with the session's state.
    let only = threads(store.as_ref(), &session).await;
    assert_eq!(only.len(), 1);
    assert_eq!(
        (only[0].id.as_str(), only[0].parent_id.as_ref(), only[0].status.as_str()),
        (session.as_str(), None, "idle")
    );
    assert!(only[0].is_primary());
    assert_eq!(only[0].agent.as_ref(), Some(&agent));
    store.append_events(&session, vec![status_event(&session, "session.status_running")]).await.unwrap();
    assert_eq!(thread(store.as_ref(), &session, &session).await.status, "running");

    let (a, b) = (call(), call());
    let handed = store.handoff(None, spawn(&session, &[a.clone(), b.clone()])).await.unwrap();
    assert_eq!(handed.status, RunStatus::Pending);
    assert_eq!(store.load_session(&session).await.unwrap().unwrap().child_threads, 2);
    let all = threads(store.as_ref(), &session).await;
    let mut children = vec![a.1.clone(), b.1.clone()];
    children.sort();
    assert_eq!(
        all.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        [vec![session.clone()], children.clone()].concat()
    );
    let child = thread(store.as_ref(), &session, &a.1).await;
    assert_eq!(child.parent_id.as_deref(), Some(session.as_str()));
    assert_eq!((child.status.as_str(), child.agent_name.as_deref()), ("running", Some("helper")));
    assert_eq!(child.agent.as_ref().unwrap()["name"], "helper");
    assert_eq!(child.awaited_by.as_deref(), Some(a.0.as_str()));
    // The primary runs the session's agent.
    assert_eq!(thread(store.as_ref(), &session, &session).await.agent.as_ref(), Some(&agent));
    // Another session's thread is not found through this one.
    let (_, other) = super::session(store.as_ref()).await;
    assert!(store.get_thread(&other, &a.1).await.unwrap().is_none());
    assert_eq!(threads(store.as_ref(), &other).await.len(), 1);

    // Forward pages by id; statuses filter.
    let page = |after: Option<String>, limit: i64, statuses: Vec<String>| {
        let store = store.clone();
        let session = session.clone();
        async move {
            let query = ThreadQuery { statuses, after_id: after, limit };
            store.list_threads(&session, &query).await.unwrap().into_iter().map(|t| t.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(page(None, 2, vec![]).await, [session.clone(), children[0].clone()]);
    assert_eq!(page(Some(children[0].clone()), 2, vec![]).await, [children[1].clone()]);
    store.append_events(&session, vec![idle(&a.1, &session, "end_turn")]).await.unwrap();
    assert_eq!(page(None, 10, vec!["idle".into()]).await, std::slice::from_ref(&a.1));
    let running = page(None, 10, vec!["running".into()]).await;
    assert_eq!(running, [session.clone(), b.1.clone()]);
    assert_eq!(page(None, 10, vec!["idle".into(), "running".into()]).await.len(), 3);
    assert!(page(None, 10, vec!["terminated".into()]).await.is_empty());
});

conformance!(a_spawn_creates_rows_runs_and_outbox_in_one_fenced_handoff, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let submitted = submit(store.as_ref(), &session, "fan out").await;
    let parent = claim(store.as_ref(), &submitted.run_id, "w1").await;
    store.commit(&parent, vec![status_event(&session, "session.status_running")]).await.unwrap();
    clock.advance(1_000);
    let (a, b) = (call(), call());
    let mut handoff = spawn(&session, &[a.clone(), b.clone()]);
    handoff.settlement = Some(Settlement::Awaiting);
    let HandedOff { events, status, outbox } = store.handoff(Some(&parent), handoff).await.unwrap();
    assert_eq!(events.len(), 6);
    assert_eq!(status, RunStatus::Awaiting);
    assert_eq!(store.get_run(&parent.run_id).await.unwrap().unwrap().status, RunStatus::Awaiting);
    // Each child's run is new, pending, with the parent's retry budget, and its queue
    // message is in the outbox.
    assert_eq!(outbox.len(), 2);
    let due: Vec<String> =
        store.outbox_due(clock.now_ms() + 1, 10).await.unwrap().into_iter().map(|m| m.msg_id).collect();
    for (message, child) in outbox.iter().zip([&a.1, &b.1]) {
        assert!(due.contains(&message.msg_id), "{due:?}");
        let decoded = <agentd_proto::v1::RunSubmission as prost::Message>::decode(message.payload.as_slice()).unwrap();
        assert_eq!(
            (decoded.session_id.as_str(), decoded.thread_id.as_str(), decoded.generation),
            (session.as_str(), child.as_str(), 1)
        );
        let run = store.get_run(&decoded.run_id).await.unwrap().unwrap();
        assert_eq!(
            (run.status, run.max_attempts, run.thread_id.as_str()),
            (RunStatus::Pending, parent.max_attempts, child.as_str())
        );
    }
    // The events are on their threads; the session runs while its children do.
    let on = |thread: &str| events.iter().filter(|e| e.thread_id == thread).map(|e| e.kind.clone()).collect::<Vec<_>>();
    assert_eq!(on(&session), ["session.thread_created", "session.thread_created"]);
    assert_eq!(on(&a.1), ["session.thread_status_running", "agent.thread_message_received"]);
    assert_eq!(session_status(store.as_ref(), &session).await, "running");
    // The first spawn brought the primary's row in step with the session.
    let primary = thread(store.as_ref(), &session, &session).await;
    assert_eq!((primary.status.as_str(), primary.running_since_ms.is_some()), ("running", true));
    // A child's own run claims and answers like any run; its reply releases the wait
    // and wakes the parent.
    let run = <agentd_proto::v1::RunSubmission as prost::Message>::decode(outbox[0].payload.as_slice()).unwrap();
    let child = claim(store.as_ref(), &run.run_id, "w2").await;
    assert_eq!(child.thread_id, a.1);
    let reply = Handoff {
        session_id: session.clone(),
        events: vec![
            idle(&a.1, &session, "end_turn"),
            NewEvent::tool_result(&session, &a.0, json!([{ "type": "text", "text": "done" }]), false)
                .with_id(call_event_id(&a.0, "result")),
        ],
        releases: vec![(a.1.clone(), a.0.clone())],
        wake: vec![session.clone()],
        settlement: Some(Settlement::Awaiting),
        ..Handoff::default()
    };
    let replied = store.handoff(Some(&child), reply.clone()).await.unwrap();
    assert_eq!(replied.outbox.len(), 1);
    assert_eq!(store.get_run(&parent.run_id).await.unwrap().unwrap().status, RunStatus::Pending);
    assert_eq!(thread(store.as_ref(), &session, &a.1).await.awaited_by, None);
    // The same reply again is refused whole (its ids are derived, its release is gone).
    let before = snapshot(store.as_ref(), &session).await;
    assert!(store.handoff(Some(&child), reply).await.is_err());
    assert_eq!(snapshot(store.as_ref(), &session).await, before);
});

conformance!(a_refused_handoff_writes_nothing, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let (a, b) = (call(), call());
    store.handoff(None, spawn(&session, std::slice::from_ref(&a))).await.unwrap();
    let before = snapshot(store.as_ref(), &session).await;
    let outbox_before = store.outbox_due(i64::MAX, 100).await.unwrap().len();
    let refused = |handoff: Handoff| {
        let store = store.clone();
        async move { store.handoff(None, handoff).await }
    };
    // Awaiting a thread that is awaited already, with a new spawn and events alongside.
    let mut twice = spawn(&session, std::slice::from_ref(&b));
    twice.awaits.push((a.1.clone(), b.0.clone()));
    assert!(matches!(refused(twice).await, Err(StoreError::Conflict(_))));
    // Releasing with a call that is not the one awaiting it.
    let wrong = Handoff {
        session_id: session.clone(),
        events: vec![event(&session, "x")],
        releases: vec![(a.1.clone(), b.0.clone())],
        wake: vec![session.clone()],
        ..Handoff::default()
    };
    assert!(matches!(refused(wrong).await, Err(StoreError::Conflict(_))));
    // Spawning a thread that exists (a repeated dispatch).
    let again = Handoff { events: vec![], ..spawn(&session, std::slice::from_ref(&a)) };
    assert!(matches!(refused(again).await, Err(StoreError::Conflict(_))));
    // Archiving the primary, or a thread of another session.
    let (_, other) = super::session(store.as_ref()).await;
    for (target, archived) in [(&session, &session), (&session, &thread_id_for(&agentd_schema::ids::new_id("sevt")))] {
        let archive = Handoff { session_id: target.clone(), archive: vec![archived.clone()], ..Handoff::default() };
        assert!(matches!(refused(archive).await, Err(StoreError::Conflict(_))));
    }
    let foreign = Handoff { session_id: other.clone(), archive: vec![a.1.clone()], ..Handoff::default() };
    assert!(matches!(refused(foreign).await, Err(StoreError::Conflict(_))));
    assert_eq!(snapshot(store.as_ref(), &session).await, before);
    assert_eq!(store.outbox_due(i64::MAX, 100).await.unwrap().len(), outbox_before);

    // A stale claim is fenced and writes nothing either.
    let submitted = submit(store.as_ref(), &session, "go").await;
    let stale = claim(store.as_ref(), &submitted.run_id, "w1").await;
    clock.advance(LEASE_MS + 1);
    let current = claim(store.as_ref(), &submitted.run_id, "w2").await;
    assert_eq!(current.epoch, stale.epoch + 1);
    let before = snapshot(store.as_ref(), &session).await;
    let outbox_before = store.outbox_due(i64::MAX, 100).await.unwrap().len();
    let mut fenced = spawn(&session, std::slice::from_ref(&b));
    fenced.settlement = Some(Settlement::Awaiting);
    let result = store.handoff(Some(&stale), fenced.clone()).await;
    assert!(matches!(result, Err(StoreError::Fenced { .. })), "{result:?}");
    fenced.settlement = None;
    assert!(matches!(store.handoff(Some(&stale), fenced.clone()).await, Err(StoreError::Fenced { .. })));
    assert_eq!(snapshot(store.as_ref(), &session).await, before);
    assert_eq!(store.outbox_due(i64::MAX, 100).await.unwrap().len(), outbox_before);
    // The current claim commits the same handoff.
    store.handoff(Some(&current), fenced).await.unwrap();
    assert_eq!(store.load_session(&session).await.unwrap().unwrap().child_threads, 2);
    // An unknown session is not found.
    let missing = spawn("sesn_missing", std::slice::from_ref(&call()));
    assert!(matches!(store.handoff(None, missing).await, Err(StoreError::NotFound { .. })));
});

conformance!(the_session_is_idle_only_when_every_thread_is, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let append = |events: Vec<NewEvent>| {
        let store = store.clone();
        let session = session.clone();
        async move { store.append_events(&session, events).await.unwrap() }
    };
    append(vec![status_event(&session, "session.status_running")]).await;
    clock.advance(1_000);
    let (a, b) = (call(), call());
    store.handoff(None, spawn(&session, &[a.clone(), b.clone()])).await.unwrap();
    clock.advance(2_000);
    append(vec![idle(&session, &session, "end_turn")]).await;
    assert_eq!(session_status(store.as_ref(), &session).await, "running");
    clock.advance(1_000);
    append(vec![idle(&a.1, &session, "requires_action")]).await;
    assert_eq!(session_status(store.as_ref(), &session).await, "running");
    let a_row = thread(store.as_ref(), &session, &a.1).await;
    assert_eq!((a_row.status.as_str(), a_row.active_ms), ("idle", 3_000));
    assert_eq!(a_row.stop_reason, Some(json!({ "type": "requires_action" })));
    clock.advance(2_000);
    append(vec![idle(&b.1, &session, "end_turn")]).await;
    let row = store.load_session(&session).await.unwrap().unwrap();
    // Threads ran 3 s + 3 s + 5 s; the session ran 6 s: the overlap counts once.
    assert_eq!((row.status.as_str(), row.active_ms, row.running_since_ms), ("idle", 6_000, None));
    assert_eq!(thread(store.as_ref(), &session, &session).await.active_ms, 3_000);
    assert_eq!(thread(store.as_ref(), &session, &b.1).await.active_ms, 5_000);

    // A rescheduling child makes the session reschedule; archived, it no longer counts.
    clock.advance(1_000);
    append(vec![body_event(&a.1, json!({ "type": "session.thread_status_rescheduled" }))]).await;
    assert_eq!(session_status(store.as_ref(), &session).await, "rescheduling");
    let archive = Handoff {
        session_id: session.clone(),
        events: vec![body_event(&a.1, json!({ "type": "session.thread_status_terminated" }))],
        archive: vec![a.1.clone()],
        ..Handoff::default()
    };
    // Its run is pending (the spawn woke it): archiving it would leave a thread that runs.
    let result = store.handoff(None, archive.clone()).await;
    assert!(matches!(result, Err(StoreError::Conflict(_))), "{result:?}");
    settle_runs(store.as_ref(), &a.1).await;
    store.handoff(None, archive.clone()).await.unwrap();
    assert_eq!(session_status(store.as_ref(), &session).await, "idle");
    let archived = thread(store.as_ref(), &session, &a.1).await;
    assert_eq!((archived.status.as_str(), archived.archived_at_ms), ("terminated", Some(clock.now_ms())));
    assert!(matches!(store.handoff(None, archive).await, Err(StoreError::Conflict(_))));
    // A child running again makes the session run, and its clock with it.
    clock.advance(1_000);
    append(vec![body_event(&b.1, json!({ "type": "session.thread_status_running" }))]).await;
    let row = store.load_session(&session).await.unwrap().unwrap();
    assert_eq!((row.status.as_str(), row.running_since_ms), ("running", Some(clock.now_ms())));
    assert!(
        store
            .list_threads(
                &session,
                &ThreadQuery { statuses: vec!["terminated".into()], limit: 10, ..ThreadQuery::default() }
            )
            .await
            .unwrap()
            .iter()
            .all(|t| t.id == a.1)
    );
    // The primary's termination is the session's, whatever the children do.
    append(vec![status_event(&session, "session.status_terminated")]).await;
    assert_eq!(session_status(store.as_ref(), &session).await, "terminated");
});

conformance!(the_session_view_shows_the_primary_and_cross_posted_child_events, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let (a, _) = call();
    let child = thread_id_for(&a);
    let tool_use = body_event(&child, json!({ "type": "agent.tool_use", "name": "bash", "input": {} }));
    store
        .append_events(
            &session,
            vec![
                event(&session, "hi"),
                agent_event(&child, "child talk"),
                tool_use.clone(),
                span(&child, 1, None),
                idle(&child, &session, "end_turn"),
                agent_event(&session, "primary talk"),
            ],
        )
        .await
        .unwrap();
    let kinds = |query: EventQuery| {
        let store = store.clone();
        let session = session.clone();
        async move {
            store.query_events(&session, &query).await.unwrap().into_iter().map(|e| (e.seq, e.kind)).collect::<Vec<_>>()
        }
    };
    let view = EventQuery { limit: 100, primary_view: true, ..EventQuery::default() };
    assert_eq!(
        kinds(view.clone()).await,
        [
            (1, "user.message".to_owned()),
            (3, "agent.tool_use".to_owned()),
            (5, "session.thread_status_idle".to_owned()),
            (6, "agent.message".to_owned())
        ]
    );
    assert_eq!(kinds(EventQuery { limit: 100, ..EventQuery::default() }).await.len(), 6);
    assert_eq!(
        kinds(EventQuery { types: vec!["agent.message".into()], ..view.clone() }).await,
        [(6, "agent.message".to_owned())]
    );
    assert_eq!(
        kinds(EventQuery { descending: true, limit: 2, ..view.clone() }).await.iter().map(|e| e.0).collect::<Vec<_>>(),
        [6, 5]
    );
    assert_eq!(kinds(EventQuery { after_seq: Some(3), ..view }).await.len(), 2);
    // The thread's own view is everything on it.
    let own = EventQuery { thread_id: Some(child.clone()), limit: 100, ..EventQuery::default() };
    assert_eq!(kinds(own).await.len(), 4);
    // Rendered, a child's event names its thread; a primary's does not.
    let stored = store.list_events(&session, 0, 100).await.unwrap();
    assert_eq!(agentd_schema::live::render(&stored[2])["session_thread_id"], child);
    assert!(agentd_schema::live::render(&stored[0]).get("session_thread_id").is_none());
});

conformance!(usage_is_kept_per_thread_and_per_model, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    // Without child threads: the session's usage, `_models` for a named model.
    store.append_events(&session, vec![span(&session, 100, None), span(&session, 7, Some("small"))]).await.unwrap();
    let usage = store.load_session(&session).await.unwrap().unwrap().usage;
    assert_eq!(
        (usage["input_tokens"].as_i64(), usage["_models"]["small"]["input_tokens"].as_i64()),
        (Some(107), Some(7))
    );
    assert_eq!(thread(store.as_ref(), &session, &session).await.usage, usage);

    let (a, b) = (call(), call());
    store.handoff(None, spawn(&session, &[a.clone(), b.clone()])).await.unwrap();
    let advice = body_event(
        &session,
        json!({ "type": "agent.tool_result", "tool_use_id": "sevt_advisor",
        "content": [], "_model_usage": { "model": "big", "usage": { "input_tokens": 50, "output_tokens": 5 } } }),
    );
    store
        .append_events(
            &session,
            vec![span(&a.1, 10, Some("small")), span(&a.1, 20, Some("small")), span(&session, 1, None), advice],
        )
        .await
        .unwrap();
    store.append_events(&session, vec![span(&b.1, 1000, None)]).await.unwrap();
    let usage = store.load_session(&session).await.unwrap().unwrap().usage;
    assert_eq!(usage["input_tokens"], 107 + 30 + 1 + 50 + 1000);
    assert_eq!(usage["_models"]["small"]["input_tokens"], 37);
    assert_eq!(usage["_models"]["big"]["input_tokens"], 50);
    let child = thread(store.as_ref(), &session, &a.1).await.usage;
    assert_eq!((child["input_tokens"].as_i64(), child["output_tokens"].as_i64()), (Some(30), Some(2)));
    assert_eq!(child["_models"]["small"]["input_tokens"], 30);
    assert_eq!(thread(store.as_ref(), &session, &b.1).await.usage["input_tokens"], 1000);
    // The primary's row took the session's usage at the first spawn, then its own.
    let primary = thread(store.as_ref(), &session, &session).await.usage;
    assert_eq!(primary["input_tokens"], 107 + 1 + 50);
    assert_eq!(primary["_models"]["big"]["input_tokens"], 50);
});

conformance!(one_submission_wakes_several_threads, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let (a, b) = (call(), call());
    let spawned = store.handoff(None, spawn(&session, &[a.clone(), b.clone()])).await.unwrap();
    let child_run = |index: usize| {
        <agentd_proto::v1::RunSubmission as prost::Message>::decode(spawned.outbox[index].payload.as_slice()).unwrap()
    };
    let submitted = store
        .submit(Submission {
            session_id: session.clone(),
            thread_id: session.clone(),
            events: vec![event(&session, "answers")],
            max_attempts: 5,
            trace_context: vec![],
            also_wake: vec![a.1.clone(), b.1.clone()],
        })
        .await
        .unwrap();
    assert_eq!(submitted.also.len(), 2);
    for (index, message) in submitted.also.iter().enumerate() {
        let decoded = <agentd_proto::v1::RunSubmission as prost::Message>::decode(message.payload.as_slice()).unwrap();
        // The children's open runs, at their next generation.
        assert_eq!((decoded.run_id.clone(), decoded.generation), (child_run(index).run_id, 2));
        assert_eq!(message.msg_id, format!("{}:2", decoded.run_id));
    }
    assert_ne!(submitted.run_id, child_run(0).run_id);
});

conformance!(a_wake_from_another_thread_keeps_a_paused_ticket_paused, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    store.handoff(None, spawn(&session, &[call()])).await.unwrap();
    // The primary's run, leased with a pause intent, parks: a paused ticket.
    let submitted = store
        .submit(Submission {
            session_id: session.clone(),
            thread_id: session.clone(),
            events: Vec::new(),
            max_attempts: 3,
            also_wake: Vec::new(),
            trace_context: Vec::new(),
        })
        .await
        .unwrap();
    let ClaimOutcome::Claimed(claim) = store.claim_run(&submitted.run_id, "worker", 60_000).await.unwrap() else {
        panic!("the primary's run is claimable");
    };
    store.request_pause(&session, None).await.unwrap().expect("a live run to pause");
    store.settle(&claim, Vec::new(), Settlement::Awaiting).await.unwrap();
    let paused = store.get_run(&submitted.run_id).await.unwrap().unwrap();
    assert_eq!((paused.status, paused.pause_requested), (RunStatus::Awaiting, true));

    // A subagent's reply wakes the primary: the reply is committed, the ticket stays paused
    // and nothing is queued for it.
    let reply = Handoff {
        session_id: session.clone(),
        events: vec![NewEvent::user_message(&session, "the child's reply")],
        wake: vec![session.clone()],
        ..Handoff::default()
    };
    let handed = store.handoff(None, reply).await.unwrap();
    assert_eq!(handed.events.len(), 1);
    assert!(handed.outbox.is_empty(), "{:?}", handed.outbox);
    let still = store.get_run(&submitted.run_id).await.unwrap().unwrap();
    assert_eq!((still.status, still.pause_requested), (RunStatus::Awaiting, true));

    // A client's input (a resume) ends the pause.
    let resumed = store
        .submit(Submission {
            session_id: session.clone(),
            thread_id: session.clone(),
            events: vec![NewEvent::user_message(&session, "go on")],
            max_attempts: 3,
            also_wake: Vec::new(),
            trace_context: Vec::new(),
        })
        .await
        .unwrap();
    assert_eq!(resumed.run_id, submitted.run_id);
    let run = store.get_run(&submitted.run_id).await.unwrap().unwrap();
    assert_eq!((run.status, run.pause_requested), (RunStatus::Pending, false));
});
