//! The environment work queue (hands, ADR 0006): one work item per session that needs
//! hands, offered to pollers, acked, kept alive by heartbeats, stopped.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;

/// A work item of an environment's queue (`environments.work`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkItem {
    /// `work_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The environment whose queue holds it.
    pub environment_id: String,
    /// The session that needs hands.
    pub session_id: String,
    /// `cloud` (our runner) or `self_hosted` (the customer's worker).
    pub hands: String,
    /// `queued`, `starting`, `active`, `stopping`, `stopped`.
    pub state: String,
    /// User metadata.
    pub metadata: Value,
    /// Offered to a poller (and not acked) since, epoch ms.
    pub offered_at_ms: Option<i64>,
    /// Leases lost after an ack so far.
    pub lost_leases: i64,
    /// The exact heartbeat string a worker must echo; `None` before the first.
    pub last_heartbeat: Option<String>,
    /// Lease length.
    pub ttl_seconds: i64,
    /// Lease expiry, epoch ms.
    pub lease_until_ms: Option<i64>,
    /// Timestamps, epoch ms.
    pub created_at_ms: i64,
    /// Acked.
    pub acknowledged_at_ms: Option<i64>,
    /// First heartbeat.
    pub started_at_ms: Option<i64>,
    /// Latest heartbeat.
    pub latest_heartbeat_at_ms: Option<i64>,
    /// Stop requested.
    pub stop_requested_at_ms: Option<i64>,
    /// Stopped.
    pub stopped_at_ms: Option<i64>,
}

/// Which queue a poll takes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkSource {
    /// One environment's queue.
    Environment(String),
    /// Every `cloud` environment of a workspace (runner keys).
    Cloud {
        /// The workspace.
        workspace_id: String,
    },
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub enum Heartbeat {
    /// Recorded (or, when stopping or stopped, not compared and not extended).
    Recorded {
        /// The item after the heartbeat.
        item: WorkItem,
        /// Whether the lease was extended.
        extended: bool,
    },
    /// `expected_last_heartbeat` did not match: another worker may hold the lease.
    PreconditionFailed(WorkItem),
    /// The item is not in a state that takes heartbeats (queued).
    NotAcked(WorkItem),
}

/// A work transition that did not apply: the state the item is in.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkConflict {
    /// The item's current state.
    pub state: String,
}

/// What a sessions token grants: one session's routes and its work item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsToken {
    /// The work item it came with.
    pub work_id: String,
    /// The session.
    pub session_id: String,
    /// The environment.
    pub environment_id: String,
    /// Workspace and organization of the session.
    pub workspace_id: String,
    /// Organization.
    pub organization_id: String,
}

/// Queue statistics of one environment.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkStats {
    /// Queued and not offered.
    pub depth: i64,
    /// Offered, not acked.
    pub pending: i64,
    /// Oldest queued item, epoch ms.
    pub oldest_queued_at_ms: Option<i64>,
    /// Distinct pollers in the last 30 s.
    pub workers_polling: i64,
}

/// A session whose hands were given up on: its unanswered built-in calls fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostHands {
    /// The work item that was stopped.
    pub work_id: String,
    /// Its session.
    pub session_id: String,
    /// How many leases were lost.
    pub lost_leases: i64,
}

/// The environment work queue. Every transition is one conditional `UPDATE` on the
/// item's state, so concurrent pollers and gateways never both win; each is durable
/// when it returns. Methods scoped by `environment_id` treat another environment's item
/// as missing.
#[async_trait]
pub trait WorkStore: Send + Sync {
    /// Queues a work item for a session unless one is open (not `stopped`); `Some` when
    /// created. Idempotent per session.
    async fn ensure_work_item(
        &self,
        workspace_id: &str,
        environment_id: &str,
        session_id: &str,
        hands: &str,
    ) -> StoreResult<Option<WorkItem>>;

    /// Offers the oldest queued item of `source` that is not offered, or whose offer is
    /// older than `reclaim_older_than_ms`, with a new sessions token (stored hashed).
    /// Two concurrent polls never get the same offer.
    async fn poll_work(
        &self,
        source: &WorkSource,
        reclaim_older_than_ms: i64,
        token_hash: &str,
    ) -> StoreResult<Option<WorkItem>>;

    /// Records a poller of an environment (`workers_polling`).
    async fn note_work_poller(&self, environment_id: &str, worker_id: &str) -> StoreResult<()>;

    /// Reads a work item of an environment.
    async fn get_work(&self, environment_id: &str, work_id: &str) -> StoreResult<Option<WorkItem>>;

    /// Lists an environment's work items, newest id first, after the cursor.
    async fn list_work(&self, environment_id: &str, after_id: Option<&str>, limit: i64) -> StoreResult<Vec<WorkItem>>;

    /// `queued` (and offered) → `starting`, opening a lease of the item's TTL; a
    /// `WorkConflict` naming the current state otherwise, `NotFound` if missing.
    async fn ack_work(&self, environment_id: &str, work_id: &str) -> StoreResult<Result<WorkItem, WorkConflict>>;

    /// Records a heartbeat when `expected` matches the last one (`NO_HEARTBEAT` for the
    /// first): a compare-and-swap on the heartbeat string, which extends the lease.
    async fn heartbeat_work(
        &self,
        environment_id: &str,
        work_id: &str,
        expected: &str,
        ttl_seconds: Option<i64>,
    ) -> StoreResult<Option<Heartbeat>>;

    /// Graceful (`stopping`; an unheld item stops at once) or forced (`stopped`) stop;
    /// a conflict when already stopped.
    async fn stop_work(
        &self,
        environment_id: &str,
        work_id: &str,
        force: bool,
    ) -> StoreResult<Option<Result<WorkItem, WorkConflict>>>;

    /// Merge-patches an item's metadata (a null value deletes the key) in one
    /// transaction.
    async fn update_work_metadata(
        &self,
        environment_id: &str,
        work_id: &str,
        patch: &Value,
    ) -> StoreResult<Option<WorkItem>>;

    /// Queue statistics.
    async fn work_stats(&self, environment_id: &str) -> StoreResult<WorkStats>;

    /// Resolves a sessions token of an item that has not stopped.
    async fn resolve_sessions_token(&self, token: &str) -> StoreResult<Option<SessionsToken>>;

    /// Expired leases: `stopping` items stop; acked items go back to the queue, and
    /// after `max_lost_leases` lost leases stop and are reported for a session error.
    async fn expire_work_leases(&self, max_lost_leases: i64) -> StoreResult<Vec<LostHands>>;
}
