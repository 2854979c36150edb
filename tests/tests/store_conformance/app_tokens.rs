//! Application access tokens (`AppTokenStore`): resolved by hash until they expire,
//! deleted within their workspace only, expired rows purged.

use agentd_schema::ids::new_id;
use agentd_schema::{AppTokenRow, NewAppToken, ThreadBinding};

use super::*;

fn token(ws: &str, expires_at_ms: i64) -> NewAppToken {
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
    }
}

conformance!(a_token_resolves_by_hash_until_it_expires_or_is_deleted, |store, _clock| async move {
    let new = token("ws_1", 10_000);
    let stored = store.insert_app_token(new.clone()).await.unwrap();
    assert_eq!(stored, new.row, "every field round-trips");
    assert_eq!(store.resolve_app_token(&new.token_sha256, 9_999).await.unwrap(), Some(new.row.clone()));
    assert_eq!(store.resolve_app_token(&new.token_sha256, 10_000).await.unwrap(), None, "expired");
    assert_eq!(store.resolve_app_token("other", 5_000).await.unwrap(), None);
    assert!(!store.delete_app_token("ws_2", &new.row.id).await.unwrap(), "another workspace deletes nothing");
    assert!(store.delete_app_token("ws_1", &new.row.id).await.unwrap());
    assert_eq!(store.resolve_app_token(&new.token_sha256, 5_000).await.unwrap(), None, "deleted");
    assert!(!store.delete_app_token("ws_1", &new.row.id).await.unwrap());

    let (old, live) = (token("ws_1", 2_000), token("ws_1", 50_000));
    store.insert_app_token(old.clone()).await.unwrap();
    store.insert_app_token(live.clone()).await.unwrap();
    assert_eq!(store.purge_app_tokens(3_000).await.unwrap(), 1);
    assert!(store.resolve_app_token(&live.token_sha256, 3_000).await.unwrap().is_some());
});
