//! Adapter threads and A2A (`AdapterStore`; migration 0010: tasks, push configs, push
//! deliveries).

use agentd_schema::store::prelude::*;
use agentd_schema::{A2aDelivery, A2aPushConfig, A2aTask, Clock, NewEvent};
use agentd_tests::store_conformance as conformance;

const TERMINAL: &[&str] = &["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"];

fn task(id: &str, workspace: &str, context: &str, created_at_ms: i64) -> A2aTask {
    A2aTask {
        id: id.into(),
        workspace_id: workspace.into(),
        context_id: context.into(),
        session_id: "sesn_1".into(),
        run_id: "run_1".into(),
        first_seq: 3,
        input_seq: 3,
        canceled: false,
        notified_state: None,
        created_at_ms,
    }
}

/// A session with `events` committed user messages; returns its id.
async fn session(store: &dyn Store, events: usize) -> String {
    let (_, id) = super::session(store).await;
    append(store, &id, events).await;
    id
}

async fn append(store: &dyn Store, session: &str, events: usize) {
    let events = (0..events).map(|i| NewEvent::user_message(session, &format!("m{i}"))).collect();
    store.append_events(session, events).await.unwrap();
}

fn watch_ids(watched: Vec<agentd_schema::A2aWatch>) -> Vec<String> {
    watched.into_iter().map(|w| w.task.id).collect()
}

fn config(task: &str, id: &str, url: &str) -> A2aPushConfig {
    A2aPushConfig {
        task_id: task.into(),
        id: id.into(),
        workspace_id: "ws".into(),
        url: url.into(),
        token: Some("tok".into()),
        auth_scheme: Some("Bearer".into()),
        auth_credentials: Some("sealed".into()),
        created_at_ms: 1,
    }
}

fn delivery(id: &str, task: &str) -> A2aDelivery {
    A2aDelivery { id: id.into(), task_id: task.into(), config_id: "c1".into(), payload: "{}".into(), attempts: 0 }
}

conformance!(tasks_are_workspace_scoped_listed_newest_first_and_updated, |store, clock| async move {
    store.a2a_create_task(&task("t1", "ws", "ctx-a", 0)).await.unwrap();
    clock.advance(10);
    store.a2a_create_task(&task("t2", "ws", "ctx-b", 0)).await.unwrap();
    clock.advance(10);
    store.a2a_create_task(&task("t3", "ws", "ctx-a", 0)).await.unwrap();
    store.a2a_create_task(&task("other", "ws-2", "ctx-a", 0)).await.unwrap();
    assert!(store.a2a_get_task("ws-2", "t1").await.unwrap().is_none(), "another workspace's task is invisible");
    let all: Vec<String> = store.a2a_list_tasks("ws", None, 10).await.unwrap().into_iter().map(|t| t.id).collect();
    assert_eq!(all, ["t3", "t2", "t1"]);
    let context: Vec<String> =
        store.a2a_list_tasks("ws", Some("ctx-a"), 10).await.unwrap().into_iter().map(|t| t.id).collect();
    assert_eq!(context, ["t3", "t1"]);
    assert_eq!(store.a2a_list_tasks("ws", Some("ctx-a"), 1).await.unwrap().len(), 1);
    store.a2a_task_input("t1", 9).await.unwrap();
    store.a2a_cancel_task("t1").await.unwrap();
    let t1 = store.a2a_get_task("ws", "t1").await.unwrap().unwrap();
    assert_eq!((t1.first_seq, t1.input_seq, t1.canceled), (3, 9, true));
    assert_eq!(t1.created_at_ms, 1_700_000_000_000);
});

conformance!(push_configs_upsert_list_and_delete, |store, _clock| async move {
    store.a2a_put_push_config(&config("t1", "c1", "https://a.example/1")).await.unwrap();
    store.a2a_put_push_config(&config("t1", "c2", "https://a.example/2")).await.unwrap();
    store.a2a_put_push_config(&config("t1", "c1", "https://a.example/replaced")).await.unwrap();
    let listed = store.a2a_list_push_configs("t1").await.unwrap();
    assert_eq!(listed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["c1", "c2"]);
    assert_eq!(store.a2a_get_push_config("t1", "c1").await.unwrap().unwrap().url, "https://a.example/replaced");
    assert!(store.a2a_get_push_config("t2", "c1").await.unwrap().is_none());
    assert!(store.a2a_delete_push_config("t1", "c2").await.unwrap());
    assert!(!store.a2a_delete_push_config("t1", "c2").await.unwrap());
    assert_eq!(store.a2a_list_push_configs("t1").await.unwrap().len(), 1);
});

conformance!(push_transitions_are_enqueued_once, |store, _clock| async move {
    let sesn = session(&*store, 3).await;
    store.a2a_create_task(&A2aTask { session_id: sesn.clone(), ..task("t1", "ws", "ctx", 0) }).await.unwrap();
    store.a2a_create_task(&A2aTask { session_id: sesn.clone(), ..task("t2", "ws", "ctx", 0) }).await.unwrap();
    store.a2a_put_push_config(&config("t1", "c1", "https://a.example/")).await.unwrap();
    // Only tasks with configs are watched.
    let watched = store.a2a_push_watch(TERMINAL, 10).await.unwrap();
    assert_eq!(watched[0].session_seq, 3);
    assert_eq!(watch_ids(watched), ["t1"]);
    assert!(store.a2a_enqueue_push("t1", None, "3.TASK_STATE_WORKING", vec![delivery("n1", "t1")]).await.unwrap());
    // A second watcher that saw the same old state writes nothing.
    assert!(!store.a2a_enqueue_push("t1", None, "3.TASK_STATE_WORKING", vec![delivery("n1b", "t1")]).await.unwrap());
    store.a2a_push_watched("t1", 3).await.unwrap();
    assert!(store.a2a_push_watch(TERMINAL, 10).await.unwrap().is_empty(), "nothing new in the session");
    append(&*store, &sesn, 1).await;
    assert_eq!(watch_ids(store.a2a_push_watch(TERMINAL, 10).await.unwrap()), ["t1"], "the session moved on");
    assert!(
        store
            .a2a_enqueue_push("t1", Some("3.TASK_STATE_WORKING"), "3.TASK_STATE_COMPLETED", vec![delivery("n2", "t1")])
            .await
            .unwrap()
    );
    append(&*store, &sesn, 1).await;
    assert!(store.a2a_push_watch(TERMINAL, 10).await.unwrap().is_empty(), "terminal-notified tasks are done");
    let mut claimed: Vec<String> =
        store.a2a_claim_deliveries(30_000, 10).await.unwrap().into_iter().map(|d| d.id).collect();
    claimed.sort();
    assert_eq!(claimed, ["n1", "n2"]);
});

conformance!(a_repeated_state_for_a_later_input_is_enqueued_again, |store, _clock| async move {
    let sesn = session(&*store, 3).await;
    store.a2a_create_task(&A2aTask { session_id: sesn, ..task("t1", "ws", "ctx", 0) }).await.unwrap();
    let waiting = "3.TASK_STATE_INPUT_REQUIRED";
    assert!(store.a2a_enqueue_push("t1", None, waiting, vec![delivery("n1", "t1")]).await.unwrap());
    // The caller answered (input 9) and the agent asks again before the watcher saw WORKING.
    store.a2a_task_input("t1", 9).await.unwrap();
    let again = "9.TASK_STATE_INPUT_REQUIRED";
    assert!(store.a2a_enqueue_push("t1", Some(waiting), again, vec![delivery("n2", "t1")]).await.unwrap());
    assert_eq!(store.a2a_get_task("ws", "t1").await.unwrap().unwrap().notified_state.as_deref(), Some(again));
});

conformance!(stuck_tasks_do_not_starve_a_new_one, |store, clock| async move {
    // 30 tasks that never end (nobody answers), each already looked at, in sessions
    // that never move again; a watch batch of 10.
    for i in 0..30 {
        let sesn = session(&*store, 2).await;
        let id = format!("stuck-{i:02}");
        store.a2a_create_task(&A2aTask { session_id: sesn, ..task(&id, "ws", "ctx", 0) }).await.unwrap();
        store.a2a_put_push_config(&config(&id, "c1", "https://a.example/")).await.unwrap();
        clock.advance(1);
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..3 {
        for watched in store.a2a_push_watch(TERMINAL, 10).await.unwrap() {
            seen.insert(watched.task.id.clone());
            store.a2a_push_watched(&watched.task.id, watched.session_seq).await.unwrap();
        }
    }
    assert_eq!(seen.len(), 30, "every stuck task is looked at once");
    assert!(store.a2a_push_watch(TERMINAL, 10).await.unwrap().is_empty(), "and then left alone");
    // A new task after them is the next one looked at.
    let sesn = session(&*store, 3).await;
    store.a2a_create_task(&A2aTask { session_id: sesn, ..task("new", "ws", "ctx", 0) }).await.unwrap();
    store.a2a_put_push_config(&config("new", "c1", "https://a.example/")).await.unwrap();
    assert_eq!(watch_ids(store.a2a_push_watch(TERMINAL, 10).await.unwrap()), ["new"]);
    // A task that failed to be looked at goes to the back of the order, not the front.
    let busy: Vec<String> = (0..12).map(|i| format!("busy-{i:02}")).collect();
    for id in &busy {
        clock.advance(1);
        let sesn = session(&*store, 2).await;
        store.a2a_create_task(&A2aTask { session_id: sesn, ..task(id, "ws", "ctx", 0) }).await.unwrap();
        store.a2a_put_push_config(&config(id, "c1", "https://a.example/")).await.unwrap();
    }
    let first = watch_ids(store.a2a_push_watch(TERMINAL, 10).await.unwrap());
    assert_eq!(first[0], "new");
    clock.advance(1);
    for id in &first {
        store.a2a_push_watched(id, 0).await.unwrap();
    }
    let second = watch_ids(store.a2a_push_watch(TERMINAL, 10).await.unwrap());
    assert_eq!(&second[..3], ["busy-09", "busy-10", "busy-11"], "not-yet-seen tasks come before the retried ones");
});

conformance!(deliveries_are_leased_retried_and_removed, |store, clock| async move {
    store.a2a_create_task(&task("t1", "ws", "ctx", 0)).await.unwrap();
    assert!(store.a2a_enqueue_push("t1", None, "3.TASK_STATE_WORKING", vec![delivery("n1", "t1")]).await.unwrap());
    let first = store.a2a_claim_deliveries(30_000, 10).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].attempts, 1);
    assert!(store.a2a_claim_deliveries(30_000, 10).await.unwrap().is_empty(), "leased: nobody else claims it");
    // The claimer died: after the lease another process takes it, counting the attempt.
    clock.advance(30_001);
    let second = store.a2a_claim_deliveries(30_000, 10).await.unwrap();
    assert_eq!(second[0].attempts, 2);
    // A failed attempt waits for its backoff.
    let now = Clock::now_ms(&*clock);
    store.a2a_delivery_retry("n1", now + 5_000).await.unwrap();
    assert!(store.a2a_claim_deliveries(30_000, 10).await.unwrap().is_empty());
    clock.advance(5_000);
    let third = store.a2a_claim_deliveries(30_000, 10).await.unwrap();
    assert_eq!(third[0].attempts, 3);
    store.a2a_delivery_done("n1").await.unwrap();
    clock.advance(60_000);
    assert!(store.a2a_claim_deliveries(30_000, 10).await.unwrap().is_empty());
});

conformance!(context_start_leases_exclude_until_released_or_expired, |store, clock| async move {
    assert!(store.a2a_lock_context("ws", "ctx", "a", 30_000).await.unwrap());
    assert!(!store.a2a_lock_context("ws", "ctx", "b", 30_000).await.unwrap(), "held by a");
    assert!(store.a2a_lock_context("ws", "other", "b", 30_000).await.unwrap(), "per context");
    assert!(store.a2a_lock_context("ws-2", "ctx", "b", 30_000).await.unwrap(), "per workspace");
    // Only the holder releases.
    store.a2a_unlock_context("ws", "ctx", "b").await.unwrap();
    assert!(!store.a2a_lock_context("ws", "ctx", "b", 30_000).await.unwrap());
    store.a2a_unlock_context("ws", "ctx", "a").await.unwrap();
    assert!(store.a2a_lock_context("ws", "ctx", "b", 30_000).await.unwrap());
    // A holder that never releases loses the lease when it expires.
    clock.advance(30_001);
    assert!(store.a2a_lock_context("ws", "ctx", "c", 30_000).await.unwrap());
});

conformance!(adapter_threads_bind_once_per_workspace, |store, _clock| async move {
    let first = session(store.as_ref(), 0).await;
    let second = session(store.as_ref(), 0).await;
    let workspace = store.ensure_workspace("acme", "default").await.unwrap().id;
    let other = store.ensure_workspace("acme", "other").await.unwrap().id;
    assert_eq!(store.thread_session(&workspace, "chat-1").await.unwrap(), None);
    assert_eq!(store.bind_thread(&workspace, "chat-1", &first).await.unwrap(), first);
    // A later binding of the same thread reads the first one back.
    assert_eq!(store.bind_thread(&workspace, "chat-1", &second).await.unwrap(), first, "the first binding wins");
    assert_eq!(store.thread_session(&workspace, "chat-1").await.unwrap().as_deref(), Some(first.as_str()));
    // Thread keys are per workspace.
    assert_eq!(store.thread_session(&other, "chat-1").await.unwrap(), None);
    assert_eq!(store.bind_thread(&other, "chat-1", &second).await.unwrap(), second);
});
