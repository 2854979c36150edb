//! The transactional outbox (`OutboxStore`).

use super::*;

conformance!(outbox_rows_are_due_by_age_and_deleted_once, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let written = clock.now_ms();
    let first = submit(store.as_ref(), &session, "one").await.outbox;
    clock.advance(5);
    let second = submit(store.as_ref(), &session, "two").await.outbox;
    assert!(store.outbox_due(written - 1, 10).await.unwrap().is_empty(), "nothing written before");
    assert_eq!(store.outbox_due(written, 10).await.unwrap(), std::slice::from_ref(&first));
    assert_eq!(store.outbox_due(clock.now_ms(), 10).await.unwrap(), [first.clone(), second.clone()]);
    assert_eq!(
        store.outbox_due(clock.now_ms(), 1).await.unwrap(),
        std::slice::from_ref(&first),
        "oldest first, bounded"
    );
    store.outbox_delete(first.id).await.unwrap();
    store.outbox_delete(first.id).await.unwrap();
    assert_eq!(store.outbox_due(clock.now_ms(), 10).await.unwrap(), [second]);
});
