//! The transactional outbox: queue messages written with the state they announce.

use async_trait::async_trait;

use crate::error::StoreResult;

/// A message waiting in the transactional outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxMessage {
    /// Row id.
    pub id: i64,
    /// Where it goes (`submissions`).
    pub topic: String,
    /// Dedupe id for the queue.
    pub msg_id: String,
    /// Encoded message.
    pub payload: Vec<u8>,
    /// When it was written, epoch ms.
    pub created_at_ms: i64,
}

/// The outbox rows themselves. Rows are written by other areas inside their own
/// transactions (a submission, a durable requeue); this trait reads and removes them.
/// Publishing a row twice is harmless: the queue dedupes by `msg_id`.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Outbox rows written at or before `created_before_ms`, oldest first, at most `limit`.
    async fn outbox_due(&self, created_before_ms: i64, limit: i64) -> StoreResult<Vec<OutboxMessage>>;

    /// Removes published outbox rows, in one statement per few hundred (idempotent:
    /// ids already gone are skipped).
    async fn outbox_delete(&self, ids: &[i64]) -> StoreResult<()>;
}
