//! Erasure jobs and the removal of a data subject's records (`user_profile_erasures`,
//! migration 0020).

use async_trait::async_trait;
use sqlx::FromRow;

use super::{SqlStore, Tx};
use crate::error::{StoreError, StoreResult};
use crate::ids::new_id;
use crate::store::{ErasureRow, ErasureStore, SessionErasure};

const COLUMNS: &str =
    "id, workspace_id, user_profile_id, status, records_removed, created_at_ms, updated_at_ms, completed_at_ms";

/// A `user_profile_erasures` row as stored.
#[derive(Debug, FromRow)]
struct Row {
    id: String,
    workspace_id: String,
    user_profile_id: String,
    status: String,
    records_removed: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
    completed_at_ms: Option<i64>,
}

impl From<Row> for ErasureRow {
    fn from(row: Row) -> Self {
        ErasureRow {
            id: row.id,
            workspace_id: row.workspace_id,
            user_profile_id: row.user_profile_id,
            completed: row.status == "completed",
            records_removed: row.records_removed,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
            completed_at_ms: row.completed_at_ms,
        }
    }
}

/// Rows of a session's own tables, children first (SQLite enforces cascades only with
/// foreign keys on, so every table is named).
const SESSION_TABLES: &[&str] = &[
    "tool_calls",
    "session_events",
    "runs",
    "session_threads",
    "work_items",
    "live_inbox",
    "adapter_threads",
    "session_memory_stores",
];

/// Deletes with `statement` (binding `binds`) and returns how many rows went.
async fn delete(tx: &mut Tx, statement: &str, binds: &[&str]) -> StoreResult<i64> {
    let mut query = sqlx::query(statement);
    for bind in binds {
        query = query.bind(*bind);
    }
    Ok(query.execute(&mut *tx).await?.rows_affected() as i64)
}

/// Redacts the memory versions `session_id` authored; a memory whose current content is
/// the session's is deleted (recorded as an already-redacted `deleted` version by the
/// erasure). Returns the records removed.
async fn erase_memory(
    tx: &mut Tx,
    erasure_id: &str,
    workspace_id: &str,
    session_id: &str,
    now: i64,
) -> StoreResult<i64> {
    let versions: Vec<(String, String, String, i64)> =
        sqlx::query_as(include_str!("../../queries/erasure/subject_session_versions.sql"))
            .bind(workspace_id)
            .bind(session_id)
            .fetch_all(&mut *tx)
            .await?;
    let mut removed = 0;
    for (version_id, store_id, memory_id, current) in versions {
        if current != 0 {
            // Lock order: session rows were taken first; the store row now (as every
            // memory write does) so the count and the memory go together.
            sqlx::query("UPDATE memory_stores SET memory_count = memory_count - 1 WHERE id = $1")
                .bind(&store_id)
                .execute(&mut *tx)
                .await?;
            removed +=
                delete(tx, "DELETE FROM memories WHERE memory_store_id = $1 AND id = $2", &[&store_id, &memory_id])
                    .await?;
            sqlx::query(
                "INSERT INTO memory_versions (id, memory_store_id, workspace_id, memory_id, operation, actor_type, \
                 actor_id, redacted_at_ms, redacted_by_type, redacted_by_id, created_at_ms) \
                 VALUES ($1, $2, $3, $4, 'deleted', 'api_key', $5, $6, 'api_key', $5, $6)",
            )
            .bind(new_id("memver"))
            .bind(&store_id)
            .bind(workspace_id)
            .bind(&memory_id)
            .bind(erasure_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        removed += sqlx::query(include_str!("../../queries/memory/redact_version.sql"))
            .bind(workspace_id)
            .bind(&store_id)
            .bind(&version_id)
            .bind(now)
            .bind("api_key")
            .bind(erasure_id)
            .execute(&mut *tx)
            .await?
            .rows_affected() as i64;
    }
    Ok(removed)
}

#[async_trait]
impl ErasureStore for SqlStore {
    async fn begin_erasure(&self, id: &str, workspace_id: &str, user_profile_id: &str) -> StoreResult<ErasureRow> {
        let now = self.now();
        sqlx::query(include_str!("../../queries/erasure/begin.sql"))
            .bind(id)
            .bind(workspace_id)
            .bind(user_profile_id)
            .bind(now)
            .execute(&self.primary)
            .await?;
        let row: Option<Row> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM user_profile_erasures \
             WHERE workspace_id = $1 AND user_profile_id = $2 AND status = 'running'"
        ))
        .bind(workspace_id)
        .bind(user_profile_id)
        .fetch_optional(&self.primary)
        .await?;
        match row {
            Some(row) => Ok(row.into()),
            // Completed between the insert and the read by a racing request: start again.
            None => Err(StoreError::Conflict(format!("erasure of {user_profile_id} completed meanwhile; retry"))),
        }
    }

    async fn subject_sessions(
        &self,
        workspace_id: &str,
        user_profile_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT id FROM sessions WHERE workspace_id = $1 AND user_profile_id = $2 ORDER BY id LIMIT $3",
        )
        .bind(workspace_id)
        .bind(user_profile_id)
        .bind(limit.max(1))
        .fetch_all(&self.primary)
        .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    async fn erase_session(
        &self,
        erasure_id: &str,
        workspace_id: &str,
        session_id: &str,
        erasure: SessionErasure,
    ) -> StoreResult<i64> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        // The session row first (the lock order of every append), so no commit lands
        // between the removal of its history and of the row.
        let owned = sqlx::query("UPDATE sessions SET updated_at_ms = $3 WHERE id = $1 AND workspace_id = $2")
            .bind(session_id)
            .bind(workspace_id)
            .bind(now)
            .execute(&mut tx)
            .await?
            .rows_affected()
            > 0;
        let mut removed = erasure.removed_before;
        if owned {
            let tasks = "SELECT id FROM a2a_tasks WHERE session_id = $1";
            removed +=
                delete(&mut tx, &format!("DELETE FROM a2a_push_deliveries WHERE task_id IN ({tasks})"), &[session_id])
                    .await?;
            removed +=
                delete(&mut tx, &format!("DELETE FROM a2a_push_configs WHERE task_id IN ({tasks})"), &[session_id])
                    .await?;
            removed += delete(&mut tx, "DELETE FROM a2a_tasks WHERE session_id = $1", &[session_id]).await?;
            for table in SESSION_TABLES {
                removed +=
                    delete(&mut tx, &format!("DELETE FROM {table} WHERE session_id = $1"), &[session_id]).await?;
            }
            removed += erase_memory(&mut tx, erasure_id, workspace_id, session_id, now).await?;
            removed += delete(&mut tx, "DELETE FROM sessions WHERE id = $1", &[session_id]).await?;
            let fact = crate::webhooks::Fact::new(workspace_id, "session.deleted", session_id);
            super::webhooks::record(&mut tx, &[fact], now).await?;
        }
        sqlx::query(
            "UPDATE user_profile_erasures SET records_removed = records_removed + $2, updated_at_ms = $3 WHERE id = $1",
        )
        .bind(erasure_id)
        .bind(removed)
        .bind(now)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(removed)
    }

    async fn complete_erasure(&self, erasure_id: &str) -> StoreResult<ErasureRow> {
        let now = self.now();
        let row: Option<Row> = sqlx::query_as(&format!(
            "UPDATE user_profile_erasures SET status = 'completed', completed_at_ms = COALESCE(completed_at_ms, $2), \
             updated_at_ms = $2 WHERE id = $1 RETURNING {COLUMNS}"
        ))
        .bind(erasure_id)
        .bind(now)
        .fetch_optional(&self.primary)
        .await?;
        row.map(Into::into).ok_or_else(|| StoreError::NotFound { what: "erasure", id: erasure_id.to_owned() })
    }

    async fn stale_erasures(&self, before_ms: i64, limit: i64) -> StoreResult<Vec<ErasureRow>> {
        let rows: Vec<Row> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM user_profile_erasures WHERE status = 'running' AND updated_at_ms < $1 \
             ORDER BY updated_at_ms LIMIT $2"
        ))
        .bind(before_ms)
        .bind(limit.max(1))
        .fetch_all(&self.primary)
        .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }
}
