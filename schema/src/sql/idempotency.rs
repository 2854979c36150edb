//! Idempotency keys: a repeated create with the same key replays the first response.

use async_trait::async_trait;
use sqlx::Row;

use super::SqlStore;
use crate::error::StoreResult;
use crate::store::{IdempotencyBegin, IdempotencyStore};

#[async_trait]
impl IdempotencyStore for SqlStore {
    async fn idempotency_begin(
        &self,
        workspace_id: &str,
        key: &str,
        request_hash: &str,
        ttl_ms: i64,
    ) -> StoreResult<IdempotencyBegin> {
        let now = self.now();
        // An expired reservation is forgotten first, so the key can be reused.
        sqlx::query("DELETE FROM idempotency_keys WHERE workspace_id = $1 AND key = $2 AND expires_at_ms < $3")
            .bind(workspace_id)
            .bind(key)
            .bind(now)
            .execute(&self.primary)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (workspace_id, key, request_hash, created_at_ms, expires_at_ms) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (workspace_id, key) DO NOTHING",
        )
        .bind(workspace_id)
        .bind(key)
        .bind(request_hash)
        .bind(now)
        .bind(now + ttl_ms)
        .execute(&self.primary)
        .await?
        .rows_affected();
        if inserted == 1 {
            return Ok(IdempotencyBegin::Fresh);
        }
        let row = sqlx::query(
            "SELECT request_hash, status_code, response FROM idempotency_keys WHERE workspace_id = $1 AND key = $2",
        )
        .bind(workspace_id)
        .bind(key)
        .fetch_optional(&self.readers)
        .await?;
        let Some(row) = row else {
            // Expired and removed between our two statements: the caller may simply retry.
            return Ok(IdempotencyBegin::InFlight);
        };
        if row.try_get::<String, _>("request_hash")? != request_hash {
            return Ok(IdempotencyBegin::Mismatch);
        }
        let status_code: Option<i64> = row.try_get("status_code")?;
        let response: Option<String> = row.try_get("response")?;
        Ok(match (status_code, response) {
            (Some(status_code), Some(response)) => IdempotencyBegin::Replay { status_code, response },
            _ => IdempotencyBegin::InFlight,
        })
    }

    async fn idempotency_complete(
        &self,
        workspace_id: &str,
        key: &str,
        status_code: i64,
        response: &str,
    ) -> StoreResult<()> {
        sqlx::query("UPDATE idempotency_keys SET status_code = $3, response = $4 WHERE workspace_id = $1 AND key = $2")
            .bind(workspace_id)
            .bind(key)
            .bind(status_code)
            .bind(response)
            .execute(&self.primary)
            .await?;
        Ok(())
    }
}
