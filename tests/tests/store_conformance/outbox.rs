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
    store.outbox_delete(&[first.id]).await.unwrap();
    store.outbox_delete(&[first.id]).await.unwrap();
    assert_eq!(store.outbox_due(clock.now_ms(), 10).await.unwrap(), std::slice::from_ref(&second));
    // A batch removes every row it names, and skips the ones already gone.
    let third = submit(store.as_ref(), &session, "three").await.outbox;
    store.outbox_delete(&[first.id, second.id, third.id]).await.unwrap();
    assert!(store.outbox_due(clock.now_ms(), 10).await.unwrap().is_empty());
    store.outbox_delete(&[]).await.unwrap();
});

conformance!(a_sweeper_publishes_and_then_removes_the_rows, |store, clock| async move {
    use agentd_proto::Queue as _;
    let (_, session) = session(store.as_ref()).await;
    let queue = agentd_proto::MemoryQueue::new(Default::default());
    let sweeper = agentd_schema::outbox::Sweeper::spawn(store.clone());
    let mut published = Vec::new();
    for text in ["one", "two", "three"] {
        let message = submit(store.as_ref(), &session, text).await.outbox;
        sweeper.publish(&queue, &message).await.unwrap();
        published.push(message.msg_id);
    }
    let removed = async {
        while !store.outbox_due(clock.now_ms(), 10).await.unwrap().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), removed).await.expect("the rows are removed");
    let mut delivered = Vec::new();
    while delivered.len() < 3 {
        let fetched = queue.fetch(10, std::time::Duration::from_secs(5)).await.unwrap();
        assert!(!fetched.is_empty(), "the queue holds every published row");
        delivered.extend(fetched.into_iter().map(|delivery| delivery.msg_id));
    }
    delivered.sort();
    published.sort();
    assert_eq!(delivered, published, "every row was published before it was removed");
});
