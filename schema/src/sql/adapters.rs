//! Adapter threads (migration 0009) and A2A tasks, push configs and push deliveries
//! (migration 0010, docs/api/a2a.md).

use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::{Flag, SqlStore};
use crate::error::{StoreError, StoreResult};
use crate::store::{A2aDelivery, A2aPushConfig, A2aTask, A2aWatch, AdapterStore};

const TASK_COLUMNS: &str = "id, workspace_id, context_id, session_id, run_id, first_seq, input_seq, canceled, \
                            notified_state, created_at_ms";
const CONFIG_COLUMNS: &str = "task_id, id, workspace_id, url, token, auth_scheme, auth_credentials, created_at_ms";

/// An `a2a_tasks` row (the [`TASK_COLUMNS`]).
#[derive(Debug, FromRow)]
struct TaskRow {
    id: String,
    workspace_id: String,
    context_id: String,
    session_id: String,
    run_id: String,
    first_seq: i64,
    input_seq: i64,
    #[sqlx(try_from = "i64")]
    canceled: Flag,
    notified_state: Option<String>,
    created_at_ms: i64,
}

fn task(row: &AnyRow) -> StoreResult<A2aTask> {
    let row = TaskRow::from_row(row)?;
    Ok(A2aTask {
        id: row.id,
        workspace_id: row.workspace_id,
        context_id: row.context_id,
        session_id: row.session_id,
        run_id: row.run_id,
        first_seq: row.first_seq,
        input_seq: row.input_seq,
        canceled: row.canceled.0,
        notified_state: row.notified_state,
        created_at_ms: row.created_at_ms,
    })
}

/// An `a2a_push_configs` row (the [`CONFIG_COLUMNS`]).
#[derive(Debug, FromRow)]
struct ConfigRow {
    task_id: String,
    id: String,
    workspace_id: String,
    url: String,
    token: Option<String>,
    auth_scheme: Option<String>,
    auth_credentials: Option<String>,
    created_at_ms: i64,
}

fn config(row: &AnyRow) -> StoreResult<A2aPushConfig> {
    let row = ConfigRow::from_row(row)?;
    Ok(A2aPushConfig {
        task_id: row.task_id,
        id: row.id,
        workspace_id: row.workspace_id,
        url: row.url,
        token: row.token,
        auth_scheme: row.auth_scheme,
        auth_credentials: row.auth_credentials,
        created_at_ms: row.created_at_ms,
    })
}

/// An `a2a_push_deliveries` row as claimed.
#[derive(Debug, FromRow)]
struct DeliveryRow {
    id: String,
    task_id: String,
    config_id: String,
    payload: String,
    attempts: i64,
}

fn delivery(row: &AnyRow) -> StoreResult<A2aDelivery> {
    let row = DeliveryRow::from_row(row)?;
    Ok(A2aDelivery {
        id: row.id,
        task_id: row.task_id,
        config_id: row.config_id,
        payload: row.payload,
        attempts: row.attempts,
    })
}

#[async_trait]
impl AdapterStore for SqlStore {
    async fn thread_session(&self, workspace_id: &str, thread_key: &str) -> StoreResult<Option<String>> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT session_id FROM adapter_threads WHERE workspace_id = $1 AND thread_key = $2")
                .bind(workspace_id)
                .bind(thread_key)
                .fetch_optional(&self.readers)
                .await?;
        Ok(row.map(|(session_id,)| session_id))
    }

    async fn bind_thread(&self, workspace_id: &str, thread_key: &str, session_id: &str) -> StoreResult<String> {
        sqlx::query(
            "INSERT INTO adapter_threads (workspace_id, thread_key, session_id, created_at_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (workspace_id, thread_key) DO NOTHING",
        )
        .bind(workspace_id)
        .bind(thread_key)
        .bind(session_id)
        .bind(self.now())
        .execute(&self.primary)
        .await?;
        self.thread_session(workspace_id, thread_key)
            .await?
            .ok_or_else(|| StoreError::Backend("adapter thread binding vanished".into()))
    }

    async fn a2a_create_task(&self, task: &A2aTask) -> StoreResult<()> {
        let now = self.now();
        sqlx::query(
            "INSERT INTO a2a_tasks (id, workspace_id, context_id, session_id, run_id, first_seq, input_seq, canceled, \
             notified_state, created_at_ms, updated_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, 0, NULL, $8, $8)",
        )
        .bind(&task.id)
        .bind(&task.workspace_id)
        .bind(&task.context_id)
        .bind(&task.session_id)
        .bind(&task.run_id)
        .bind(task.first_seq)
        .bind(task.input_seq)
        .bind(now)
        .execute(&self.primary)
        .await?;
        Ok(())
    }

    async fn a2a_get_task(&self, workspace_id: &str, id: &str) -> StoreResult<Option<A2aTask>> {
        let row = sqlx::query(&format!("SELECT {TASK_COLUMNS} FROM a2a_tasks WHERE workspace_id = $1 AND id = $2"))
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(task).transpose()
    }

    async fn a2a_list_tasks(
        &self,
        workspace_id: &str,
        context_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<A2aTask>> {
        let rows = match context_id {
            Some(context) => {
                sqlx::query(&format!(
                    "SELECT {TASK_COLUMNS} FROM a2a_tasks WHERE workspace_id = $1 AND context_id = $2 \
                     ORDER BY created_at_ms DESC, id DESC LIMIT $3"
                ))
                .bind(workspace_id)
                .bind(context)
                .bind(limit)
                .fetch_all(&self.readers)
                .await?
            }
            None => sqlx::query(&format!(
                "SELECT {TASK_COLUMNS} FROM a2a_tasks WHERE workspace_id = $1 ORDER BY created_at_ms DESC, id DESC LIMIT $2"
            ))
            .bind(workspace_id)
            .bind(limit)
            .fetch_all(&self.readers)
            .await?,
        };
        rows.iter().map(task).collect()
    }

    async fn a2a_lock_context(
        &self,
        workspace_id: &str,
        context_id: &str,
        holder: &str,
        lease_ms: i64,
    ) -> StoreResult<bool> {
        let now = self.now();
        // Inserts the lease, or takes over an expired one; a live lease returns no row.
        let row = sqlx::query(
            "INSERT INTO a2a_context_locks (workspace_id, context_id, holder, until_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (workspace_id, context_id) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms \
             WHERE a2a_context_locks.until_ms < $5 RETURNING holder",
        )
        .bind(workspace_id)
        .bind(context_id)
        .bind(holder)
        .bind(now + lease_ms)
        .bind(now)
        .fetch_optional(&self.primary)
        .await?;
        Ok(row.is_some())
    }

    async fn a2a_unlock_context(&self, workspace_id: &str, context_id: &str, holder: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM a2a_context_locks WHERE workspace_id = $1 AND context_id = $2 AND holder = $3")
            .bind(workspace_id)
            .bind(context_id)
            .bind(holder)
            .execute(&self.primary)
            .await?;
        Ok(())
    }

    async fn a2a_task_input(&self, id: &str, input_seq: i64) -> StoreResult<()> {
        sqlx::query("UPDATE a2a_tasks SET input_seq = $2, updated_at_ms = $3 WHERE id = $1")
            .bind(id)
            .bind(input_seq)
            .bind(self.now())
            .execute(&self.primary)
            .await?;
        Ok(())
    }

    async fn a2a_cancel_task(&self, id: &str) -> StoreResult<()> {
        // The cancel is looked at again even if the session does not move.
        sqlx::query("UPDATE a2a_tasks SET canceled = 1, watched_seq = 0, updated_at_ms = $2 WHERE id = $1")
            .bind(id)
            .bind(self.now())
            .execute(&self.primary)
            .await?;
        Ok(())
    }

    async fn a2a_put_push_config(&self, c: &A2aPushConfig) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO a2a_push_configs (task_id, id, workspace_id, url, token, auth_scheme, auth_credentials, created_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (task_id, id) DO UPDATE SET url = excluded.url, token = excluded.token, \
             auth_scheme = excluded.auth_scheme, auth_credentials = excluded.auth_credentials",
        )
        .bind(&c.task_id)
        .bind(&c.id)
        .bind(&c.workspace_id)
        .bind(&c.url)
        .bind(&c.token)
        .bind(&c.auth_scheme)
        .bind(&c.auth_credentials)
        .bind(c.created_at_ms)
        .execute(&self.primary)
        .await?;
        Ok(())
    }

    async fn a2a_get_push_config(&self, task_id: &str, id: &str) -> StoreResult<Option<A2aPushConfig>> {
        let row = sqlx::query(&format!("SELECT {CONFIG_COLUMNS} FROM a2a_push_configs WHERE task_id = $1 AND id = $2"))
            .bind(task_id)
            .bind(id)
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(config).transpose()
    }

    async fn a2a_list_push_configs(&self, task_id: &str) -> StoreResult<Vec<A2aPushConfig>> {
        let rows = sqlx::query(&format!(
            "SELECT {CONFIG_COLUMNS} FROM a2a_push_configs WHERE task_id = $1 ORDER BY created_at_ms, id"
        ))
        .bind(task_id)
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(config).collect()
    }

    async fn a2a_delete_push_config(&self, task_id: &str, id: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM a2a_push_configs WHERE task_id = $1 AND id = $2")
            .bind(task_id)
            .bind(id)
            .execute(&self.primary)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn a2a_push_watch(&self, terminal: &[&str], limit: i64) -> StoreResult<Vec<A2aWatch>> {
        // The terminal names are protocol constants, never input; a notified state reads
        // "{input_seq}.{state}".
        let terminal = terminal
            .iter()
            .map(|s| format!("t.notified_state LIKE '%.{}'", s.replace(['\'', '%'], "")))
            .collect::<Vec<_>>()
            .join(" OR ");
        let columns = TASK_COLUMNS.split(", ").map(|c| format!("t.{}", c.trim())).collect::<Vec<_>>().join(", ");
        let rows = sqlx::query(&format!(
            "SELECT {columns}, s.next_seq - 1 AS session_seq FROM a2a_tasks t JOIN sessions s ON s.id = t.session_id \
             WHERE s.next_seq - 1 > t.watched_seq \
             AND (t.notified_state IS NULL OR NOT ({terminal})) \
             AND EXISTS (SELECT 1 FROM a2a_push_configs c WHERE c.task_id = t.id) \
             ORDER BY t.updated_at_ms, t.id LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(&self.primary)
        .await?;
        rows.iter().map(|row| Ok(A2aWatch { task: task(row)?, session_seq: row.try_get("session_seq")? })).collect()
    }

    async fn a2a_push_watched(&self, task_id: &str, session_seq: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE a2a_tasks SET watched_seq = CASE WHEN watched_seq < $2 THEN $2 ELSE watched_seq END, \
             updated_at_ms = $3 WHERE id = $1",
        )
        .bind(task_id)
        .bind(session_seq)
        .bind(self.now())
        .execute(&self.primary)
        .await?;
        Ok(())
    }

    async fn a2a_enqueue_push(
        &self,
        task_id: &str,
        expected: Option<&str>,
        state: &str,
        deliveries: Vec<A2aDelivery>,
    ) -> StoreResult<bool> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let moved = sqlx::query(
            "UPDATE a2a_tasks SET notified_state = $2, updated_at_ms = $4 WHERE id = $1 AND COALESCE(notified_state, '') = $3",
        )
        .bind(task_id)
        .bind(state)
        .bind(expected.unwrap_or(""))
        .bind(now)
        .execute(&mut tx)
        .await?;
        if moved.rows_affected() == 0 {
            return Ok(false);
        }
        for d in deliveries {
            sqlx::query(
                "INSERT INTO a2a_push_deliveries (id, task_id, config_id, payload, attempts, next_attempt_ms, lease_until_ms, \
                 created_at_ms) VALUES ($1, $2, $3, $4, 0, $5, NULL, $5) ON CONFLICT (id) DO NOTHING",
            )
            .bind(&d.id)
            .bind(&d.task_id)
            .bind(&d.config_id)
            .bind(&d.payload)
            .bind(now)
            .execute(&mut tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn a2a_claim_deliveries(&self, lease_ms: i64, limit: i64) -> StoreResult<Vec<A2aDelivery>> {
        let now = self.now();
        // The due condition is repeated outside the subquery so that, on PostgreSQL, a
        // concurrent claimer re-checks it on the row it waited for and skips it.
        let rows = sqlx::query(
            "UPDATE a2a_push_deliveries SET lease_until_ms = $2, attempts = attempts + 1 \
             WHERE id IN (SELECT id FROM a2a_push_deliveries WHERE next_attempt_ms <= $1 \
                          AND (lease_until_ms IS NULL OR lease_until_ms < $1) ORDER BY next_attempt_ms LIMIT $3) \
             AND next_attempt_ms <= $1 AND (lease_until_ms IS NULL OR lease_until_ms < $1) \
             RETURNING id, task_id, config_id, payload, attempts",
        )
        .bind(now)
        .bind(now + lease_ms)
        .bind(limit)
        .fetch_all(&self.primary)
        .await?;
        rows.iter().map(delivery).collect()
    }

    async fn a2a_delivery_done(&self, id: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM a2a_push_deliveries WHERE id = $1").bind(id).execute(&self.primary).await?;
        Ok(())
    }

    async fn a2a_delivery_retry(&self, id: &str, next_attempt_ms: i64) -> StoreResult<()> {
        sqlx::query("UPDATE a2a_push_deliveries SET next_attempt_ms = $2, lease_until_ms = NULL WHERE id = $1")
            .bind(id)
            .bind(next_attempt_ms)
            .execute(&self.primary)
            .await?;
        Ok(())
    }
}
