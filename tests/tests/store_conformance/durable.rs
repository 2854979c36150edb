//! Durable run control (`DurableStore`): quarantine, requeue, purge, cancel, pause,
//! supersede and republish, each scoped to its thread.

use agentd_schema::RunStatus;

use super::*;

conformance!(dead_letters_are_quarantined_requeued_and_purged, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    claim(store.as_ref(), &run, "worker-a").await;
    assert_eq!(store.quarantine_expired(&session, 0, clock.now_ms()).await.unwrap(), 0, "the lease is live");
    clock.advance(LEASE_MS + 1);
    assert_eq!(store.quarantine_expired("sthr_other", 0, clock.now_ms()).await.unwrap(), 0, "another thread");
    assert_eq!(store.quarantine_expired(&session, 0, clock.now_ms()).await.unwrap(), 1);
    let runs = store.thread_runs(&session).await.unwrap();
    assert_eq!((runs.len(), runs[0].status), (1, RunStatus::DeadLetter));
    assert_eq!(store.claim_run(&run, "worker-b", LEASE_MS).await.unwrap(), ClaimOutcome::Stale);
    assert!(store.requeue_dead_letter("sthr_other", &run).await.unwrap().is_none());
    let message = store.requeue_dead_letter(&session, &run).await.unwrap().expect("requeued");
    let decoded = <agentd_proto::v1::RunSubmission as prost::Message>::decode(message.payload.as_slice()).unwrap();
    assert_eq!(decoded.run_id, run);
    let requeued = store.get_run(&run).await.unwrap().unwrap();
    assert_eq!((requeued.status, requeued.attempts), (RunStatus::Pending, 0));
    assert!(store.requeue_dead_letter(&session, &run).await.unwrap().is_none(), "no longer a dead letter");
    claim(store.as_ref(), &run, "worker-b").await;
    clock.advance(LEASE_MS + 1);
    assert_eq!(store.quarantine_expired(&session, 0, clock.now_ms()).await.unwrap(), 1);
    assert_eq!(store.purge_dead_letters(&session).await.unwrap(), 1);
    assert!(store.thread_runs(&session).await.unwrap().is_empty());
});

conformance!(cancel_revokes_the_lease_and_requeues_the_run, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let held = claim(store.as_ref(), &run, "worker-a").await;
    assert!(store.cancel_run("sthr_other", &run).await.unwrap().is_none(), "another thread's run");
    let (cancelled, message) = store.cancel_run(&session, &run).await.unwrap().expect("cancelled");
    assert_eq!((cancelled.status, cancelled.cancel_requested), (RunStatus::Pending, true));
    assert_eq!(cancelled.epoch, held.epoch + 1, "the lease is revoked");
    assert!(message.is_some(), "a pending run gets its queue message");
    let late = store.commit(&held, vec![agent_event(&session, "late")]).await;
    assert!(matches!(late, Err(StoreError::Fenced { .. })), "{late:?}");
    let again = claim(store.as_ref(), &run, "worker-b").await;
    assert!(again.cancel_requested, "the next claim sees the intent");
});

conformance!(pause_supersede_and_republish, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    assert!(store.request_pause(&session, None).await.unwrap().is_none(), "no live run to pause");
    let held = claim(store.as_ref(), &run, "worker-a").await;
    let paused = store.request_pause(&session, None).await.unwrap().expect("pause recorded");
    assert!(paused.pause_requested);
    store.settle(&held, vec![], Settlement::Awaiting).await.unwrap();
    assert_eq!(store.take_pause(&session).await.unwrap().map(|r| r.id), Some(run.clone()));
    assert!(store.take_pause(&session).await.unwrap().is_none(), "taken once");
    assert_eq!(store.supersede_runs(&session).await.unwrap(), std::slice::from_ref(&run));
    assert_eq!(store.get_run(&run).await.unwrap().unwrap().status, RunStatus::Superseded);
    // New input opens a new run; a republish gives it a fresh queue message.
    let next = submit(store.as_ref(), &session, "again").await;
    assert_ne!(next.run_id, run);
    let messages = store.republish_runnable(&session).await.unwrap();
    assert_eq!(messages.len(), 1);
    assert_ne!(messages[0].msg_id, next.outbox.msg_id, "unique per operation");
});
