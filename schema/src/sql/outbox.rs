//! The transactional outbox: messages written with the state they announce and
//! published after commit; a relay republishes rows whose publish may have been lost.

use async_trait::async_trait;
use sqlx::FromRow;

use super::SqlStore;
use crate::error::StoreResult;
use crate::store::{OutboxMessage, OutboxStore};

/// An `outbox` row as stored.
#[derive(Debug, FromRow)]
struct OutboxRow {
    id: i64,
    topic: String,
    msg_id: String,
    payload: Vec<u8>,
    created_at_ms: i64,
}

#[async_trait]
impl OutboxStore for SqlStore {
    async fn outbox_due(&self, created_before_ms: i64, limit: i64) -> StoreResult<Vec<OutboxMessage>> {
        let rows: Vec<OutboxRow> = sqlx::query_as(include_str!("../../queries/outbox/due.sql"))
            .bind(created_before_ms)
            .bind(limit.max(0))
            .fetch_all(&self.readers)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| OutboxMessage {
                id: row.id,
                topic: row.topic,
                msg_id: row.msg_id,
                payload: row.payload,
                created_at_ms: row.created_at_ms,
            })
            .collect())
    }

    async fn outbox_delete(&self, id: i64) -> StoreResult<()> {
        sqlx::query("DELETE FROM outbox WHERE id = $1").bind(id).execute(&self.primary).await?;
        Ok(())
    }
}
