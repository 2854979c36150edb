//! Application access tokens (docs/api/app-tokens.md): short-lived bearer tokens for
//! browser apps. A token is stored by its SHA-256 only; resolving one is a single
//! indexed read that also checks its expiry, and deleting one takes effect on the next
//! request (nothing caches a resolution).

use async_trait::async_trait;

use crate::error::StoreResult;

/// One external thread bound to one managed session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadBinding {
    /// The app's thread id (an AI SDK chat id, an AG-UI thread id).
    pub external_thread_id: String,
    /// The session it reaches (`sesn_…`).
    pub managed_session_id: String,
}

/// An application access token as stored (without its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppTokenRow {
    /// `aat_…`
    pub id: String,
    /// The workspace it acts in.
    pub workspace_id: String,
    /// The workspace's organization.
    pub organization_id: String,
    /// Who issued it, as the caller names the authority (its own auth system).
    pub authority_id: String,
    /// The application it was issued to.
    pub application_scope: String,
    /// The end user it was issued for, if the caller named one.
    pub actor_key: Option<String>,
    /// `ai-sdk`, `ag-ui`.
    pub protocols: Vec<String>,
    /// `thread.run`, `thread.messages.read`.
    pub operations: Vec<String>,
    /// The threads it may use, each bound to one session.
    pub thread_bindings: Vec<ThreadBinding>,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Expiry, epoch ms.
    pub expires_at_ms: i64,
}

/// A token to store.
#[derive(Debug, Clone)]
pub struct NewAppToken {
    /// The row (its times set by the caller).
    pub row: AppTokenRow,
    /// SHA-256 of the secret, hex.
    pub token_sha256: String,
    /// The API key that issued it: the token resolves only while that key is not revoked.
    pub issued_by_key_id: String,
}

/// Application access tokens. Every method is one statement, durable when it returns.
#[async_trait]
pub trait AppTokenStore: Send + Sync {
    /// Stores a new token.
    async fn insert_app_token(&self, new: NewAppToken) -> StoreResult<AppTokenRow>;

    /// The unexpired token whose secret hashes to `token_sha256` (`None`: unknown,
    /// deleted, expired at `now_ms`, or its issuing API key revoked).
    async fn resolve_app_token(&self, token_sha256: &str, now_ms: i64) -> StoreResult<Option<AppTokenRow>>;

    /// Deletes a token of the workspace; `false` when there is none.
    async fn delete_app_token(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;

    /// Removes tokens that expired before `before_ms`; returns how many.
    async fn purge_app_tokens(&self, before_ms: i64) -> StoreResult<u64>;
}
