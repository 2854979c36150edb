//! Operator control of a thread's runs (`/v1/durable/threads/{thread}/…`).

use async_trait::async_trait;

use super::outbox::OutboxMessage;
use super::runs::Run;
use crate::error::StoreResult;

/// Durable run control. Every change is one statement under the run row's own
/// condition, scoped to the addressed thread (a run of another thread is missing), and
/// whatever must run again gets its queue message through the outbox in the same
/// transaction; the caller publishes the returned messages.
#[async_trait]
pub trait DurableStore: Send + Sync {
    /// A thread's runs in creation order.
    async fn thread_runs(&self, thread_id: &str) -> StoreResult<Vec<Run>>;

    /// Moves this thread's leased runs whose lease expired before `now_ms` and whose
    /// attempts reached `max_attempts` to dead letters; returns how many.
    async fn quarantine_expired(&self, thread_id: &str, max_attempts: i64, now_ms: i64) -> StoreResult<u64>;

    /// A dead letter of this thread back to pending with a fresh retry budget, and its
    /// queue message (to publish); `None` if it is not dead-lettered in this thread.
    async fn requeue_dead_letter(&self, thread_id: &str, run_id: &str) -> StoreResult<Option<OutboxMessage>>;

    /// Deletes this thread's dead-lettered runs; returns how many.
    async fn purge_dead_letters(&self, thread_id: &str) -> StoreResult<u64>;

    /// Records a durable cancel intent; a leased run loses its lease (epoch + 1) and,
    /// like an awaiting one, becomes pending so a claim commits the cancelled outcome
    /// (its queue message is returned). `None` if the run is not of this thread.
    async fn cancel_run(&self, thread_id: &str, run_id: &str) -> StoreResult<Option<(Run, Option<OutboxMessage>)>>;

    /// Records a pause intent on this thread's leased run (`run_id`, or whichever is
    /// leased); `None` when no such run is live.
    async fn request_pause(&self, thread_id: &str, run_id: Option<&str>) -> StoreResult<Option<Run>>;

    /// Clears the paused ticket of this thread (an awaiting run with a pause intent);
    /// `None` when there is none.
    async fn take_pause(&self, thread_id: &str) -> StoreResult<Option<Run>>;

    /// Supersedes this thread's pending and awaiting runs that carry no cancel intent
    /// (a leased run is left alone: cancel it); returns their ids.
    async fn supersede_runs(&self, thread_id: &str) -> StoreResult<Vec<String>>;

    /// Fresh queue messages for this thread's runnable runs (pending, or leased past
    /// their lease), for when a submission may have been lost.
    async fn republish_runnable(&self, thread_id: &str) -> StoreResult<Vec<OutboxMessage>>;
}
