//! The transactional outbox: messages written with the state they announce and
//! published after commit; a relay republishes rows whose publish may have been lost.

use async_trait::async_trait;
use sqlx::Row;

use super::SqlStore;
use crate::error::StoreResult;
use crate::store::{OutboxMessage, OutboxStore};

#[async_trait]
impl OutboxStore for SqlStore {
    async fn outbox_due(&self, created_before_ms: i64, limit: i64) -> StoreResult<Vec<OutboxMessage>> {
        let rows = sqlx::query(
            "SELECT id, topic, msg_id, payload, created_at_ms FROM outbox \
             WHERE created_at_ms <= $1 ORDER BY created_at_ms, id LIMIT $2",
        )
        .bind(created_before_ms)
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(OutboxMessage {
                    id: row.try_get("id")?,
                    topic: row.try_get("topic")?,
                    msg_id: row.try_get("msg_id")?,
                    payload: row.try_get("payload")?,
                    created_at_ms: row.try_get("created_at_ms")?,
                })
            })
            .collect()
    }

    async fn outbox_delete(&self, id: i64) -> StoreResult<()> {
        sqlx::query("DELETE FROM outbox WHERE id = $1").bind(id).execute(&self.pool).await?;
        Ok(())
    }
}
