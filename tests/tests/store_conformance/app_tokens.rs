//! Application access tokens (`AppTokenStore`): resolved by hash until they expire,
//! deleted within their workspace only, expired rows purged.

use agentd_schema::ids::new_id;
use agentd_schema::{AppTokenRow, NewAppToken, ThreadBinding};

use super::*;

/// A token of `ws` issued by the API key `key`.
fn token(ws: &str, key: &str, expires_at_ms: i64) -> NewAppToken {
    NewAppToken {
        row: AppTokenRow {
            id: new_id("aat"),
            workspace_id: ws.to_owned(),
            organization_id: "org_1".into(),
            authority_id: "auth".into(),
            application_scope: "web".into(),
            actor_key: Some("u1".into()),
            protocols: vec!["ai-sdk".into()],
            operations: vec!["thread.run".into(), "thread.messages.read".into()],
            thread_bindings: vec![ThreadBinding {
                external_thread_id: "chat-1".into(),
                managed_session_id: "sesn_1".into(),
            }],
            created_at_ms: 1_000,
            expires_at_ms,
        },
        token_sha256: new_id("hash"),
        issued_by_key_id: key.to_owned(),
    }
}

/// A workspace with an API key: (workspace id, key id).
async fn issuer(store: &dyn Store, workspace: &str) -> (String, String) {
    let ws = store.ensure_workspace("acme", workspace).await.unwrap().id;
    let key = store.insert_api_key(&ws, "issuer", &new_id("sk-agentd-issuer"), &KeyKind::Api).await.unwrap();
    (ws, key.id)
}

conformance!(a_token_resolves_by_hash_until_it_expires_or_is_deleted, |store, _clock| async move {
    let (ws, key) = issuer(store.as_ref(), "tokens-1").await;
    let new = token(&ws, &key, 10_000);
    let stored = store.insert_app_token(new.clone()).await.unwrap();
    assert_eq!(stored, new.row, "every field round-trips");
    assert_eq!(store.resolve_app_token(&new.token_sha256, 9_999).await.unwrap(), Some(new.row.clone()));
    assert_eq!(store.resolve_app_token(&new.token_sha256, 10_000).await.unwrap(), None, "expired");
    assert_eq!(store.resolve_app_token("other", 5_000).await.unwrap(), None);
    assert!(!store.delete_app_token("ws_elsewhere", &new.row.id).await.unwrap(), "another workspace deletes nothing");
    assert!(store.delete_app_token(&ws, &new.row.id).await.unwrap());
    assert_eq!(store.resolve_app_token(&new.token_sha256, 5_000).await.unwrap(), None, "deleted");
    assert!(!store.delete_app_token(&ws, &new.row.id).await.unwrap());

    let (old, live) = (token(&ws, &key, 2_000), token(&ws, &key, 50_000));
    store.insert_app_token(old.clone()).await.unwrap();
    store.insert_app_token(live.clone()).await.unwrap();
    assert_eq!(store.purge_app_tokens(3_000).await.unwrap(), 1);
    assert!(store.resolve_app_token(&live.token_sha256, 3_000).await.unwrap().is_some());
});

conformance!(a_token_dies_with_the_api_key_that_issued_it, |store, _clock| async move {
    let (ws, key) = issuer(store.as_ref(), "tokens-2").await;
    let new = token(&ws, &key, 10_000);
    store.insert_app_token(new.clone()).await.unwrap();
    assert!(store.resolve_app_token(&new.token_sha256, 5_000).await.unwrap().is_some());
    assert!(store.revoke_api_key(&key).await.unwrap());
    assert_eq!(store.resolve_app_token(&new.token_sha256, 5_000).await.unwrap(), None, "its key is revoked");
});
