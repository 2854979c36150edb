//! Operator control of a thread's runs (`/v1/durable/threads/{thread}/…`): every change
//! is one statement under the run row's own condition, scoped to the addressed thread,
//! and whatever must run again gets its queue message through the outbox in the same
//! transaction.

use async_trait::async_trait;
use sqlx::Row;

use super::runs::run;
use super::{SqlStore, Tx};
use crate::error::StoreResult;
use crate::store::{DurableStore, OutboxMessage, Run};

/// Writes the queue message that makes `run` claimable, in `tx`.
async fn enqueue(tx: &mut Tx, run: &Run, now: i64, why: &str) -> StoreResult<OutboxMessage> {
    let message = agentd_proto::v1::RunSubmission {
        run_id: run.id.clone(),
        session_id: run.session_id.clone(),
        thread_id: run.thread_id.clone(),
        generation: run.generation as u64,
        trace_context: Default::default(),
        submitted_at_ms: now,
    };
    // Unique per operation, so the queue's dedupe window never swallows it.
    let msg_id = format!("{}:{}:{why}:{}", run.id, run.generation, run.epoch);
    super::runs::enqueue(tx, &message, msg_id, now).await
}

#[async_trait]
impl DurableStore for SqlStore {
    async fn thread_runs(&self, thread_id: &str) -> StoreResult<Vec<Run>> {
        let rows = sqlx::query(include_str!("../../queries/durable/thread_runs.sql"))
            .bind(thread_id)
            .fetch_all(&self.primary)
            .await?;
        rows.iter().map(run).collect()
    }

    async fn quarantine_expired(&self, thread_id: &str, max_attempts: i64, now_ms: i64) -> StoreResult<u64> {
        let done = sqlx::query(include_str!("../../queries/durable/quarantine.sql"))
            .bind(thread_id)
            .bind(max_attempts)
            .bind(now_ms)
            .execute(&self.primary)
            .await?;
        Ok(done.rows_affected())
    }

    async fn requeue_dead_letter(&self, thread_id: &str, run_id: &str) -> StoreResult<Option<OutboxMessage>> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let row = sqlx::query(include_str!("../../queries/durable/requeue.sql"))
            .bind(run_id)
            .bind(thread_id)
            .bind(now)
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let message = enqueue(&mut tx, &run(&row)?, now, "requeue").await?;
        tx.commit().await?;
        Ok(Some(message))
    }

    async fn purge_dead_letters(&self, thread_id: &str) -> StoreResult<u64> {
        let done =
            sqlx::query(include_str!("../../queries/durable/purge.sql")).bind(thread_id).execute(&self.primary).await?;
        Ok(done.rows_affected())
    }

    async fn cancel_run(&self, thread_id: &str, run_id: &str) -> StoreResult<Option<(Run, Option<OutboxMessage>)>> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        // A leased run's lease is revoked by a new epoch; it goes back to pending with the
        // intent so the next claim commits the cancelled outcome. Others just carry it.
        let row = sqlx::query(include_str!("../../queries/durable/cancel.sql"))
            .bind(run_id)
            .bind(thread_id)
            .bind(now)
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let cancelled = run(&row)?;
        let message = if cancelled.status == crate::store::RunStatus::Pending {
            Some(enqueue(&mut tx, &cancelled, now, "cancel").await?)
        } else {
            None
        };
        tx.commit().await?;
        Ok(Some((cancelled, message)))
    }

    async fn republish_runnable(&self, thread_id: &str) -> StoreResult<Vec<OutboxMessage>> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let rows = sqlx::query(include_str!("../../queries/durable/runnable.sql"))
            .bind(thread_id)
            .bind(now)
            .fetch_all(&mut tx)
            .await?;
        let mut messages = Vec::new();
        for row in &rows {
            messages.push(enqueue(&mut tx, &run(row)?, now, &format!("reconcile:{now}")).await?);
        }
        tx.commit().await?;
        Ok(messages)
    }

    async fn supersede_runs(&self, thread_id: &str) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(include_str!("../../queries/durable/supersede.sql"))
            .bind(thread_id)
            .bind(self.now())
            .fetch_all(&self.primary)
            .await?;
        rows.iter().map(|row| Ok(row.try_get("id")?)).collect()
    }

    async fn request_pause(&self, thread_id: &str, run_id: Option<&str>) -> StoreResult<Option<Run>> {
        let row = sqlx::query(include_str!("../../queries/durable/request_pause.sql"))
            .bind(thread_id)
            .bind(run_id)
            .bind(self.now())
            .fetch_optional(&self.primary)
            .await?;
        row.as_ref().map(run).transpose()
    }

    async fn take_pause(&self, thread_id: &str) -> StoreResult<Option<Run>> {
        let row = sqlx::query(include_str!("../../queries/durable/take_pause.sql"))
            .bind(thread_id)
            .bind(self.now())
            .fetch_optional(&self.primary)
            .await?;
        row.as_ref().map(run).transpose()
    }
}
