//! Idempotency keys (`IdempotencyStore`).

use super::*;

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
