//! Runs and fencing (`RunStore`).

use super::*;

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

conformance!(a_claim_reads_its_session_as_a_read_would, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let (outcome, read) = store.claim_run_with_session(&run, "worker-a", LEASE_MS).await.unwrap();
    let ClaimOutcome::Claimed(held) = outcome else { panic!("expected a claim, got {outcome:?}") };
    assert_eq!(read, store.load_session(&session).await.unwrap(), "the claim's session is the session");
    assert_eq!(read.as_ref().map(|s| s.next_seq), Some(2));
    // Not claimed: no session.
    let (outcome, read) = store.claim_run_with_session(&run, "worker-b", LEASE_MS).await.unwrap();
    assert!(matches!(outcome, ClaimOutcome::Held { .. }), "{outcome:?}");
    assert_eq!(read, None);
    store.settle(&held, vec![], Settlement::Done { outcome: "completed".into() }).await.unwrap();
    assert_eq!(store.claim_run_with_session(&run, "worker-b", LEASE_MS).await.unwrap(), (ClaimOutcome::Stale, None));
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

conformance!(status_and_usage_follow_committed_events, |store, _clock| async move {
    let (workspace, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let held = claim(store.as_ref(), &run, "worker-a").await;
    let usage = |input: i64, output: i64| spent(&session, input, output);
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

/// A model request's end on `thread` that spent `input` and `output` tokens (and one
/// cache-read and two cache-creation tokens).
fn spent(thread: &str, input: i64, output: i64) -> NewEvent {
    NewEvent {
        event_id: agentd_schema::ids::new_id("sevt"),
        thread_id: thread.to_owned(),
        kind: "span.model_request_end".into(),
        body: json!({ "type": "span.model_request_end", "model_usage": {
            "input_tokens": input, "output_tokens": output, "cache_read_input_tokens": 1, "cache_creation_input_tokens": 2 } }),
    }
}

// A run's commit that spends writes the usage total with its allocation when it knows
// the session's usage from the claim's last commit; the total must be the same sum
// when others appended in between, and when a commit that spent was fenced.
conformance!(usage_adds_up_whoever_appended_in_between, |store, clock| async move {
    let (workspace, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let old = claim(store.as_ref(), &run, "worker-a").await;
    store.commit(&old, vec![status_event(&session, "session.status_running")]).await.unwrap();
    store.commit(&old, vec![spent(&session, 10, 1)]).await.unwrap();
    // Directly after the claim's own commit.
    store.commit(&old, vec![spent(&session, 20, 2)]).await.unwrap();
    // After input appended by someone else.
    submit(store.as_ref(), &session, "more").await;
    store.commit(&old, vec![spent(&session, 40, 4)]).await.unwrap();
    // A reclaim's commits, then the old owner's commit that spends, fenced.
    clock.advance(LEASE_MS + 1);
    let new = claim(store.as_ref(), &run, "worker-b").await;
    store.commit(&new, vec![spent(&session, 80, 8)]).await.unwrap();
    let fenced = store.commit(&old, vec![spent(&session, 1_000, 100)]).await;
    assert!(matches!(fenced, Err(StoreError::Fenced { .. })), "{fenced:?}");
    store.commit(&new, vec![agent_event(&session, "still here")]).await.unwrap();
    store
        .settle(
            &new,
            vec![spent(&session, 160, 16), status_event(&session, "session.status_idle")],
            Settlement::Awaiting,
        )
        .await
        .unwrap();
    let usage = store.get_session(&workspace, &session).await.unwrap().unwrap().usage;
    assert_eq!((usage["input_tokens"].as_i64(), usage["output_tokens"].as_i64()), (Some(310), Some(31)), "{usage}");
    assert_eq!(usage["cache_read_input_tokens"], 5);
    assert_eq!(usage["cache_creation"]["ephemeral_5m_input_tokens"], 10);
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

conformance!(settling_only_if_current_writes_nothing_after_new_input, |store, _clock| async move {
    let (workspace, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let held = claim(store.as_ref(), &run, "worker-a").await;
    let before = store.get_session(&workspace, &session).await.unwrap().unwrap();
    // Input while the attempt runs: the answer's idle would strand it, so nothing is written.
    submit(store.as_ref(), &session, "and another thing").await;
    let ending = vec![agent_event(&session, "done"), status_event(&session, "session.status_idle")];
    let refused = store.settle_if_current(&held, ending.clone(), Settlement::Awaiting, 0).await.unwrap();
    assert!(refused.is_none(), "input arrived since the claim");
    let query = agentd_schema::EventQuery { limit: 100, ..Default::default() };
    let events = store.query_events(&session, &query).await.unwrap();
    assert_eq!(events.len(), 2, "only the two messages: {events:?}");
    let row = store.get_run(&run).await.unwrap().unwrap();
    assert_eq!((row.status, row.epoch), (agentd_schema::RunStatus::Leased, held.epoch), "the claim holds");
    assert_eq!(store.get_session(&workspace, &session).await.unwrap().unwrap().status, before.status);
    // With the generation consumed it settles, events and all, in one transaction.
    let mut consumed = held.clone();
    consumed.generation = row.generation;
    // A live-inbox version other than the session's (messages queued meanwhile) writes nothing either.
    let inbox = store.get_session(&workspace, &session).await.unwrap().unwrap().inbox_version;
    let moved = store.settle_if_current(&consumed, ending.clone(), Settlement::Awaiting, inbox + 1).await.unwrap();
    assert!(moved.is_none(), "the inbox changed since the attempt read it");
    assert_eq!(store.query_events(&session, &query).await.unwrap().len(), 2);
    let settled = store.settle_if_current(&consumed, ending, Settlement::Awaiting, inbox).await.unwrap().unwrap();
    assert_eq!(settled.status, agentd_schema::RunStatus::Awaiting);
    assert_eq!(settled.events.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(store.get_session(&workspace, &session).await.unwrap().unwrap().status, "idle");
    // A stale claim is fenced, as for `settle`.
    let stale = store.settle_if_current(&held, vec![], Settlement::Awaiting, inbox).await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
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

/// PostgreSQL only (SQLite's one writer serializes every transaction): a commit under a
/// claim that meets a reclaim still in flight waits for the run row, then sees the new
/// epoch and is fenced. A fence that read the run without locking it (the statement's
/// snapshot) would commit the old owner's events beside the new owner's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_racing_a_reclaim_in_flight_is_fenced_on_postgres() {
    use sqlx::Connection;
    let clock = std::sync::Arc::new(agentd_schema::ManualClock::new(1_700_000_000_000));
    let test = agentd_tests::stores::TestStore::new(agentd_tests::stores::Kind::Postgres, clock).await;
    let store: std::sync::Arc<dyn Store> = test.store.clone();
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let old = claim(store.as_ref(), &run, "worker-a").await;
    store.commit(&old, vec![status_event(&session, "session.status_running")]).await.unwrap();
    let before = store.list_events(&session, 0, 100).await.unwrap();

    // Another worker's reclaim, holding the run row until it commits.
    let mut reclaim = sqlx::PgConnection::connect(&test.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut reclaim).await.unwrap();
    sqlx::query("UPDATE runs SET epoch = epoch + 1, owner = 'worker-b' WHERE id = $1")
        .bind(&run)
        .execute(&mut reclaim)
        .await
        .unwrap();
    let late = {
        let (store, old, session) = (store.clone(), old.clone(), session.clone());
        tokio::spawn(async move { store.commit(&old, vec![agent_event(&session, "late")]).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    sqlx::query("COMMIT").execute(&mut reclaim).await.unwrap();
    let late = late.await.unwrap();
    let after = store.list_events(&session, 0, 100).await.unwrap();
    reclaim.close().await.ok();
    test.cleanup().await;
    assert!(matches!(late, Err(StoreError::Fenced { .. })), "the old owner's commit after a reclaim: {late:?}");
    assert_eq!(after, before, "nothing of the fenced commit is stored");
}
