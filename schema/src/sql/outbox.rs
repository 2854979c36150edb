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

/// Rows per DELETE, far below both dialects' limits on bound parameters.
const DELETES_PER_STATEMENT: usize = 500;

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

    async fn outbox_delete(&self, ids: &[i64]) -> StoreResult<()> {
        for chunk in ids.chunks(DELETES_PER_STATEMENT) {
            let placeholders: Vec<String> = (1..=chunk.len()).map(|n| format!("${n}")).collect();
            let sql = format!("DELETE FROM outbox WHERE id IN ({})", placeholders.join(", "));
            let mut statement = sqlx::query(&sql);
            for id in chunk {
                statement = statement.bind(id);
            }
            statement.execute(&self.primary).await?;
        }
        Ok(())
    }
}
