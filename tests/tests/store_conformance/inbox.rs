//! The live inbox (`InboxStore`): changes only while a run is live, taken into the
//! worker's fenced commit exactly once.

use agentd_schema::{InboxChange, InboxRefusal};

use super::*;

fn enqueue(text: &str) -> InboxChange {
    InboxChange::Enqueue { content: json!([{ "type": "text", "text": text }]) }
}

conformance!(inbox_changes_apply_only_while_a_run_is_live, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    assert_eq!(store.change_inbox(&session, enqueue("early")).await.unwrap(), Err(InboxRefusal::NoLiveRun));
    assert!(!store.inbox(&session).await.unwrap().active);
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let held = claim(store.as_ref(), &run, "worker-a").await;
    store.change_inbox(&session, enqueue("one")).await.unwrap().unwrap();
    let snapshot = store.change_inbox(&session, enqueue("two")).await.unwrap().unwrap();
    assert!(snapshot.active);
    let order: Vec<String> = snapshot.messages.iter().map(|m| m.id.clone()).collect();
    assert_eq!(order.len(), 2);
    let reversed: Vec<String> = order.iter().rev().cloned().collect();
    let stale = InboxChange::Reorder { expected_version: snapshot.version - 1, order: reversed.clone() };
    assert_eq!(
        store.change_inbox(&session, stale).await.unwrap(),
        Err(InboxRefusal::StaleVersion { current: snapshot.version }),
        "a reorder names the version it was computed from; a refused change writes nothing"
    );
    let current = store.inbox(&session).await.unwrap().version;
    let partial = InboxChange::Reorder { expected_version: current, order: vec![order[0].clone()] };
    assert_eq!(store.change_inbox(&session, partial).await.unwrap(), Err(InboxRefusal::NotAPermutation));
    let current = store.inbox(&session).await.unwrap().version;
    let reordered = store
        .change_inbox(&session, InboxChange::Reorder { expected_version: current, order: reversed.clone() })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reordered.messages.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), reversed);
    let unknown = InboxChange::Withdraw { id: "inbox_missing".into() };
    assert_eq!(store.change_inbox(&session, unknown).await.unwrap(), Err(InboxRefusal::UnknownMessage));
    let replace = InboxChange::Replace { id: order[0].clone(), content: json!([{ "type": "text", "text": "uno" }]) };
    store.change_inbox(&session, replace).await.unwrap().unwrap();
    assert!(store.inbox_pending(&session).await.unwrap());

    // The commit takes the inbox ahead of its own events, in inbox order.
    let committed = store.commit_with_inbox(&held, vec![agent_event(&session, "reply")]).await.unwrap();
    let kinds: Vec<&str> = committed.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["user.message", "user.message", "agent.message"]);
    assert_eq!(committed[0].event_id, reversed[0].replacen("inbox_", "sevt_", 1));
    assert_eq!(committed[1].body["content"][0]["text"], "uno");
    assert!(!store.inbox_pending(&session).await.unwrap());
    assert!(store.inbox(&session).await.unwrap().messages.is_empty());
    assert!(matches!(store.inbox("sesn_missing").await, Err(StoreError::NotFound { .. })));
});

conformance!(a_fenced_commit_leaves_the_inbox_in_place, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let old = claim(store.as_ref(), &run, "worker-a").await;
    clock.advance(LEASE_MS + 1);
    let new = claim(store.as_ref(), &run, "worker-b").await;
    store.change_inbox(&session, enqueue("keep me")).await.unwrap().unwrap();
    let late = store.commit_with_inbox(&old, vec![]).await;
    assert!(matches!(late, Err(StoreError::Fenced { .. })), "{late:?}");
    assert_eq!(store.inbox(&session).await.unwrap().messages.len(), 1, "nothing was taken");
    let taken = store.commit_with_inbox(&new, vec![]).await.unwrap();
    assert_eq!(taken.len(), 1);
});
