//! Run control: cancel a run (durable routes, A2A CancelTask) and interrupt a turn
//! (AG-UI and MCP clients that go away mid-run).

use agentd_schema::{Run, RunStatus};

use super::error::{DomainError, DomainResult};
use crate::AppState;

/// The thread's open run (pending, leased or awaiting), newest first.
pub async fn open_run(state: &AppState, thread: &str) -> DomainResult<Option<Run>> {
    let runs = state.backends.store.thread_runs(thread).await?;
    Ok(runs
        .into_iter()
        .rev()
        .find(|r| matches!(r.status, RunStatus::Pending | RunStatus::Leased | RunStatus::Awaiting)))
}

/// Cancels `run_id` of `thread` (the caller authorized the thread): superseded and
/// ended runs are a conflict. Whatever must run again is published.
pub async fn cancel(state: &AppState, thread: &str, run_id: &str) -> DomainResult<Run> {
    let store = state.backends.store.as_ref();
    let existing = store.thread_runs(thread).await?;
    match existing.iter().find(|r| r.id == run_id) {
        None => return Err(DomainError::NotFound(format!("run not found in this thread: {run_id}"))),
        Some(run) if run.status == RunStatus::Superseded => {
            return Err(DomainError::Conflict(format!("run {run_id} was superseded and cannot be cancelled")));
        }
        Some(run) if run.status == RunStatus::Done => {
            return Err(DomainError::Conflict(format!(
                "run {run_id} already ended ({})",
                run.outcome.as_deref().unwrap_or("done")
            )));
        }
        Some(_) => {}
    }
    let Some((run, message)) = store.cancel_run(thread, run_id).await? else {
        return Err(DomainError::NotFound(format!("run not found in this thread: {run_id}")));
    };
    publish(state, message.as_slice()).await;
    Ok(run)
}

/// Cancels the thread's open run, if it has one.
pub async fn cancel_open(state: &AppState, thread: &str) -> DomainResult<Option<Run>> {
    let Some(run) = open_run(state, thread).await? else { return Ok(None) };
    let Some((run, message)) = state.backends.store.cancel_run(thread, &run.id).await? else { return Ok(None) };
    publish(state, message.as_slice()).await;
    Ok(Some(run))
}

/// Publishes submissions a run-control change wrote to the outbox (the relay retries).
pub async fn publish(state: &AppState, messages: &[agentd_schema::OutboxMessage]) {
    super::commit::publish_outbox(state, messages).await;
}

/// Interrupts the session's turn on every thread that is not archived: commits
/// `user.interrupt` on each (committed history stays; the worker stops the model request
/// and idles with `end_turn`; ADR 0022 §8).
pub async fn interrupt(state: &AppState, session_id: &str) -> DomainResult<()> {
    let session = state
        .backends
        .store
        .load_session(session_id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("session not found: {session_id}")))?;
    super::session_threads::interrupt_all(state, &session).await?;
    Ok(())
}
