//! Idempotency keys: a repeated create with the same key replays the first response.

use async_trait::async_trait;

use crate::error::StoreResult;

/// The result of beginning an idempotent request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyBegin {
    /// First use of the key: proceed, then call `idempotency_complete`.
    Fresh,
    /// The key completed before: replay this response.
    Replay {
        /// The stored status code.
        status_code: i64,
        /// The stored response body.
        response: String,
    },
    /// The key is in use by a request that has not completed.
    InFlight,
    /// The key was used with a different request body.
    Mismatch,
}

/// Idempotency keys, scoped to a workspace. A key is reserved by the first `begin`
/// (an insert that only one caller wins) and forgotten once its TTL passes.
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Begins a request under an idempotency key: `Fresh` for exactly one caller per
    /// live key; the others see `InFlight`, `Replay` or `Mismatch`.
    async fn idempotency_begin(
        &self,
        workspace_id: &str,
        key: &str,
        request_hash: &str,
        ttl_ms: i64,
    ) -> StoreResult<IdempotencyBegin>;

    /// Records the response of a request begun with `idempotency_begin` (a no-op for a
    /// key that expired meanwhile).
    async fn idempotency_complete(
        &self,
        workspace_id: &str,
        key: &str,
        status_code: i64,
        response: &str,
    ) -> StoreResult<()>;
}
