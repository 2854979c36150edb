//! Dreams and dream policies (`DreamStore`).

use std::sync::Arc;

use agentd_schema::TimeBounds;
use agentd_schema::ids::new_id;
use agentd_schema::store::{
    DreamEnd, DreamPolicyRow, DreamQuery, DreamStatus, NewDream, NewMemoryStore, ScheduleOutcome,
};

use super::*;

async fn workspace_and_store(store: &dyn Store) -> (String, String) {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let id = new_id("memstore");
    store
        .create_memory_store(NewMemoryStore {
            id: id.clone(),
            workspace_id: ws.clone(),
            name: "notes".into(),
            description: String::new(),
            metadata: json!({}),
        })
        .await
        .unwrap();
    (ws, id)
}

fn new_dream(ws: &str, memory_store: &str, update_existing: bool) -> NewDream {
    NewDream {
        id: new_id("drm"),
        workspace_id: ws.to_owned(),
        memory_store_id: memory_store.to_owned(),
        session_ids: vec![new_id("sesn")],
        model: json!({ "id": "claude-sonnet-4-5", "speed": "standard" }),
        instructions: Some("focus".into()),
        update_existing,
    }
}

fn end(status: DreamStatus) -> DreamEnd {
    DreamEnd { status, error: None, usage: Some(json!({ "input_tokens": 1 })) }
}

/// A session of `ws` with `memory_store` among its resources.
async fn session_with(store: &dyn Store, ws: &str, memory_store: &str) -> String {
    let id = new_id("sesn");
    store
        .create_session(NewSession {
            id: id.clone(),
            workspace_id: ws.to_owned(),
            status: "idle".into(),
            body: json!({ "resources": [{ "type": "memory_store", "memory_store_id": memory_store }] }),
            agent_id: None,
            agent_version: None,
        })
        .await
        .unwrap();
    id
}

fn policy(ws: &str, memory_store: &str, enabled: bool, interval_seconds: i64) -> DreamPolicyRow {
    DreamPolicyRow {
        memory_store_id: memory_store.to_owned(),
        workspace_id: ws.to_owned(),
        enabled,
        interval_seconds,
        min_new_sessions: 1,
        max_sessions: 10,
        model: json!({ "id": "claude-sonnet-4-5", "speed": "standard" }),
        instructions: None,
        next_due_at_ms: None,
        last_completed_cutoff_ms: None,
    }
}

conformance!(a_dream_moves_forward_by_compare_and_swap_and_ends_once, |store, clock| async move {
    let (ws, memories) = workspace_and_store(store.as_ref()).await;
    let dream = store.insert_dream(new_dream(&ws, &memories, false)).await.unwrap();
    assert_eq!((dream.status, dream.session_id.as_deref(), dream.ended_at_ms), (DreamStatus::Pending, None, None));
    assert_eq!(store.get_dream(&ws, &dream.id).await.unwrap().as_ref(), Some(&dream));
    assert_eq!(store.get_dream("another", &dream.id).await.unwrap(), None, "confined to its workspace");

    // One starter at a time, until its claim expires.
    let now = clock.now_ms();
    assert!(store.claim_dream_start(&dream.id, now, 1_000).await.unwrap());
    assert!(!store.claim_dream_start(&dream.id, now + 10, 1_000).await.unwrap());
    assert!(store.claim_dream_start(&dream.id, now + 2_000, 1_000).await.unwrap(), "an expired claim is taken over");
    store.release_dream_start(&dream.id).await.unwrap();
    assert!(store.claim_dream_start(&dream.id, now + 2_010, 1_000).await.unwrap(), "a released claim is free at once");

    let session = new_id("sesn");
    let running = store.start_dream(&dream.id, &session, &memories).await.unwrap().expect("pending → running");
    assert_eq!(running.status, DreamStatus::Running);
    assert_eq!(
        (running.session_id.as_deref(), running.output_store_id.as_deref()),
        (Some(&*session), Some(&*memories))
    );
    assert_eq!(store.start_dream(&dream.id, "sesn_other", &memories).await.unwrap(), None, "started once");
    assert!(!store.claim_dream_start(&dream.id, now + 10_000, 1_000).await.unwrap(), "only pending dreams are claimed");
    assert_eq!(store.archive_dream(&ws, &dream.id).await.unwrap(), None, "a running dream is not archived");

    clock.advance(5);
    let error = json!({ "type": "retries_exhausted", "message": "gave up" });
    let failed = DreamEnd { status: DreamStatus::Failed, error: Some(error.clone()), usage: None };
    let ended = store.finish_dream(&dream.id, failed).await.unwrap().expect("running → failed");
    assert_eq!(
        (ended.status, ended.error.as_ref(), ended.ended_at_ms),
        (DreamStatus::Failed, Some(&error), Some(clock.now_ms()))
    );
    assert_eq!(store.finish_dream(&dream.id, end(DreamStatus::Completed)).await.unwrap(), None, "it ended once");
    assert_eq!(store.finish_dream(&dream.id, end(DreamStatus::Canceled)).await.unwrap(), None);
    assert_eq!(store.get_dream(&ws, &dream.id).await.unwrap().unwrap().status, DreamStatus::Failed);
    assert!(store.finish_dream(&dream.id, end(DreamStatus::Running)).await.is_err(), "running is not an end");

    let archived = store.archive_dream(&ws, &dream.id).await.unwrap().expect("an ended dream is archived");
    clock.advance(5);
    let again = store.archive_dream(&ws, &dream.id).await.unwrap().unwrap();
    assert_eq!(again.archived_at_ms, archived.archived_at_ms, "archiving is idempotent");
    assert_eq!(store.archive_dream("another", &dream.id).await.unwrap(), None);
});

conformance!(racing_finishers_end_a_dream_exactly_once, |store, _clock| async move {
    let (ws, memories) = workspace_and_store(store.as_ref()).await;
    let dream = store.insert_dream(new_dream(&ws, &memories, false)).await.unwrap();
    store.start_dream(&dream.id, &new_id("sesn"), &memories).await.unwrap().unwrap();
    let statuses = [DreamStatus::Completed, DreamStatus::Failed, DreamStatus::Canceled];
    let finishers = (0..9).map(|n| {
        let store = Arc::clone(&store);
        let id = dream.id.clone();
        let status = statuses[n % 3];
        tokio::spawn(async move { store.finish_dream(&id, end(status)).await.unwrap().map(|row| row.status) })
    });
    let outcomes: Vec<Option<DreamStatus>> =
        futures::future::join_all(finishers).await.into_iter().map(Result::unwrap).collect();
    let winners: Vec<DreamStatus> = outcomes.iter().flatten().copied().collect();
    assert_eq!(winners.len(), 1, "exactly one finisher ends the dream: {outcomes:?}");
    assert_eq!(store.get_dream(&ws, &dream.id).await.unwrap().unwrap().status, winners[0]);
});

conformance!(one_open_update_existing_dream_per_store, |store, _clock| async move {
    let (ws, memories) = workspace_and_store(store.as_ref()).await;
    let first = store.insert_dream(new_dream(&ws, &memories, true)).await.unwrap();
    let second = store.insert_dream(new_dream(&ws, &memories, true)).await;
    assert!(matches!(second, Err(StoreError::Conflict(_))), "{second:?}");
    // create_new dreams of the store are not limited.
    store.insert_dream(new_dream(&ws, &memories, false)).await.unwrap();
    store.insert_dream(new_dream(&ws, &memories, false)).await.unwrap();
    // Once the first has ended, another may start.
    store.finish_dream(&first.id, end(DreamStatus::Canceled)).await.unwrap().unwrap();
    store.insert_dream(new_dream(&ws, &memories, true)).await.unwrap();
    // Racing inserts: one wins.
    let (_, other) = workspace_and_store(store.as_ref()).await;
    let racers = (0..6).map(|_| {
        let store = Arc::clone(&store);
        let new = new_dream(&ws, &other, true);
        tokio::spawn(async move { store.insert_dream(new).await.is_ok() })
    });
    let won = futures::future::join_all(racers).await.into_iter().filter(|r| *r.as_ref().unwrap()).count();
    assert_eq!(won, 1, "one of the racing update_existing dreams is inserted");
});

conformance!(dreams_list_newest_first_with_filters_and_cursor, |store, clock| async move {
    let (ws, memories) = workspace_and_store(store.as_ref()).await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(store.insert_dream(new_dream(&ws, &memories, false)).await.unwrap());
        clock.advance(10);
    }
    store.finish_dream(&ids[0].id, end(DreamStatus::Canceled)).await.unwrap().unwrap();
    store.archive_dream(&ws, &ids[0].id).await.unwrap().unwrap();
    store.start_dream(&ids[1].id, &new_id("sesn"), &memories).await.unwrap().unwrap();
    let list = |query: DreamQuery| {
        let store = Arc::clone(&store);
        let ws = ws.clone();
        async move { store.list_dreams(&ws, &query).await.unwrap().into_iter().map(|d| d.id).collect::<Vec<_>>() }
    };
    let all = DreamQuery { limit: 10, ..DreamQuery::default() };
    assert_eq!(
        list(all.clone()).await,
        [ids[3].id.as_str(), ids[2].id.as_str(), ids[1].id.as_str()],
        "newest first, archived left out"
    );
    let with_archived = DreamQuery { include_archived: true, ..all.clone() };
    assert_eq!(list(with_archived.clone()).await.len(), 4);
    let running = DreamQuery { statuses: vec![DreamStatus::Running, DreamStatus::Canceled], ..with_archived.clone() };
    assert_eq!(list(running).await, [ids[1].id.as_str(), ids[0].id.as_str()]);
    // created_at bounds are exclusive.
    let bounds = TimeBounds { gt: Some(ids[1].created_at_ms), lt: Some(ids[3].created_at_ms), ..TimeBounds::default() };
    assert_eq!(list(DreamQuery { created: bounds, ..all.clone() }).await, [ids[2].id.as_str()]);
    let page = DreamQuery { before_id: Some(ids[3].id.clone()), limit: 1, ..all };
    assert_eq!(list(page).await, [ids[2].id.as_str()]);
    assert!(store.list_dreams("another", &with_archived).await.unwrap().is_empty());
    let open: Vec<String> = store.open_dreams(10).await.unwrap().into_iter().map(|d| d.id).collect();
    assert_eq!(open.len(), 3, "pending and running dreams are open: {open:?}");
    assert!(!open.contains(&ids[0].id));
});

conformance!(a_policy_keeps_its_schedule_until_enabled_or_reinterval, |store, clock| async move {
    let (ws, memories) = workspace_and_store(store.as_ref()).await;
    assert_eq!(store.get_dream_policy(&ws, &memories).await.unwrap(), None);
    let disabled = store.put_dream_policy(policy(&ws, &memories, false, 60)).await.unwrap();
    assert_eq!(disabled.next_due_at_ms, None, "a disabled policy is never due");
    let enabled = store.put_dream_policy(policy(&ws, &memories, true, 60)).await.unwrap();
    assert_eq!(enabled.next_due_at_ms, Some(clock.now_ms() + 60_000));
    clock.advance(1_000);
    let same = store.put_dream_policy(DreamPolicyRow { max_sessions: 5, ..policy(&ws, &memories, true, 60) }).await;
    let same = same.unwrap();
    assert_eq!((same.next_due_at_ms, same.max_sessions), (enabled.next_due_at_ms, 5), "the schedule is kept");
    let longer = store.put_dream_policy(policy(&ws, &memories, true, 120)).await.unwrap();
    assert_eq!(longer.next_due_at_ms, Some(clock.now_ms() + 120_000), "a new interval restarts the schedule");
    assert_eq!(store.get_dream_policy(&ws, &memories).await.unwrap(), Some(longer));
    assert_eq!(store.get_dream_policy("another", &memories).await.unwrap(), None);
});

conformance!(racing_schedulers_claim_each_due_tick_once, |store, clock| async move {
    let (ws, memories) = workspace_and_store(store.as_ref()).await;
    let first = session_with(store.as_ref(), &ws, &memories).await;
    let second = session_with(store.as_ref(), &ws, &memories).await;
    // Another store's session does not count.
    let (_, elsewhere) = workspace_and_store(store.as_ref()).await;
    session_with(store.as_ref(), &ws, &elsewhere).await;
    store.put_dream_policy(policy(&ws, &memories, true, 60)).await.unwrap();
    let now = clock.now_ms();
    assert_eq!(store.schedule_dream(&ws, &memories, now, &new_id("drm")).await.unwrap(), ScheduleOutcome::NotDue);
    assert!(store.due_dream_policies(now, 10).await.unwrap().is_empty());

    clock.advance(60_000);
    let now = clock.now_ms();
    assert_eq!(store.due_dream_policies(now, 10).await.unwrap(), [(ws.clone(), memories.clone())]);
    let schedulers = (0..8).map(|_| {
        let (store, ws, memories) = (Arc::clone(&store), ws.clone(), memories.clone());
        tokio::spawn(async move { store.schedule_dream(&ws, &memories, now, &new_id("drm")).await.unwrap() })
    });
    let outcomes: Vec<ScheduleOutcome> =
        futures::future::join_all(schedulers).await.into_iter().map(Result::unwrap).collect();
    let dreams: Vec<_> = outcomes
        .iter()
        .filter_map(|o| match o {
            ScheduleOutcome::Dreamed(dream) => Some(dream.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(dreams.len(), 1, "one scheduler claims the tick: {outcomes:?}");
    assert!(
        outcomes.iter().all(|o| matches!(o, ScheduleOutcome::Dreamed(_) | ScheduleOutcome::NotDue)),
        "{outcomes:?}"
    );
    let dream = &dreams[0];
    let mut expected = vec![first.clone(), second.clone()];
    expected.sort();
    assert_eq!(dream.session_ids, expected, "the store's sessions, sorted");
    assert_eq!((dream.status, dream.update_existing, dream.cutoff_ms), (DreamStatus::Pending, true, Some(now)));
    assert_eq!(dream.policy_store_id.as_deref(), Some(&*memories));
    let next = store.get_dream_policy(&ws, &memories).await.unwrap().unwrap().next_due_at_ms.unwrap();
    assert!(next > now && next <= now + 60_000, "the schedule advanced past now: {next}");

    // The next tick: a dream of the policy is open, so no second one.
    clock.advance(60_000);
    let now = clock.now_ms();
    assert_eq!(store.schedule_dream(&ws, &memories, now, &new_id("drm")).await.unwrap(), ScheduleOutcome::Advanced);
    assert!(store.due_dream_policies(now, 10).await.unwrap().is_empty(), "the tick was spent");

    // A failed dream does not move the cutoff: the same sessions qualify again.
    store.finish_dream(&dream.id, end(DreamStatus::Failed)).await.unwrap().unwrap();
    assert_eq!(store.get_dream_policy(&ws, &memories).await.unwrap().unwrap().last_completed_cutoff_ms, None);
    clock.advance(60_000);
    let now = clock.now_ms();
    let ScheduleOutcome::Dreamed(retry) = store.schedule_dream(&ws, &memories, now, &new_id("drm")).await.unwrap()
    else {
        panic!("the sessions still qualify after a failed dream");
    };
    // A completed one does: afterwards nothing new qualifies, the schedule only advances.
    store.finish_dream(&retry.id, end(DreamStatus::Completed)).await.unwrap().unwrap();
    let policy_now = store.get_dream_policy(&ws, &memories).await.unwrap().unwrap();
    assert_eq!(policy_now.last_completed_cutoff_ms, Some(now));
    clock.advance(60_000);
    let now = clock.now_ms();
    assert_eq!(store.schedule_dream(&ws, &memories, now, &new_id("drm")).await.unwrap(), ScheduleOutcome::Advanced);

    // A session updated since the cutoff qualifies at the next tick.
    store.append_events(&first, vec![event(&first, "more")]).await.unwrap();
    clock.advance(60_000);
    let now = clock.now_ms();
    match store.schedule_dream(&ws, &memories, now, &new_id("drm")).await.unwrap() {
        ScheduleOutcome::Dreamed(next) => assert_eq!(next.session_ids, [first.as_str()]),
        other => panic!("expected a dream over the updated session, got {other:?}"),
    }
});

conformance!(an_open_update_existing_dream_holds_the_policy_back, |store, clock| async move {
    let (ws, memories) = workspace_and_store(store.as_ref()).await;
    session_with(store.as_ref(), &ws, &memories).await;
    store.put_dream_policy(policy(&ws, &memories, true, 60)).await.unwrap();
    let manual = store.insert_dream(new_dream(&ws, &memories, true)).await.unwrap();
    clock.advance(60_000);
    let now = clock.now_ms();
    assert_eq!(store.schedule_dream(&ws, &memories, now, &new_id("drm")).await.unwrap(), ScheduleOutcome::Advanced);
    store.finish_dream(&manual.id, end(DreamStatus::Completed)).await.unwrap().unwrap();
    clock.advance(60_000);
    let outcome = store.schedule_dream(&ws, &memories, clock.now_ms(), &new_id("drm")).await.unwrap();
    assert!(matches!(outcome, ScheduleOutcome::Dreamed(_)), "{outcome:?}");
});

conformance!(a_dream_starts_first_message_is_submitted_once, |store, _clock| async move {
    // A retried start submits its first message again under the same derived id: the
    // repeat is a Conflict and writes nothing (no second event, run or outbox row).
    let (_ws, session) = super::session(store.as_ref()).await;
    let dream = new_id("drm");
    let message = || Submission {
        session_id: session.clone(),
        thread_id: session.clone(),
        events: vec![event(&session, "dream").with_id(agentd_schema::ids::derived_id(&dream, "sevt"))],
        max_attempts: 5,
        trace_context: vec![],
        also_wake: vec![],
    };
    store.submit(message()).await.unwrap();
    let again = store.submit(message()).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    let events = store.list_events(&session, 0, 100).await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(store.thread_runs(&session).await.unwrap().len(), 1);
});
