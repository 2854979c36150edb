//! Session threads (ADR 0022): the primary thread of every session (it shares the
//! session's id) and the child threads its agent spawns, each with its own run. Named
//! apart from the adapter threads of `store/adapters.rs`, which bind an adapter's
//! conversation to a session.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;

/// A thread of a session, with its projections.
///
/// While the session has no child threads its primary's row is not kept (a
/// single-agent turn pays no statement for it): the primary's `status`, `usage`,
/// running clock and `updated_at_ms` are then the session's, and its `stop_reason` is
/// `None`. The first spawn copies them into the row, which the appending transactions
/// keep from then on.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionThread {
    /// `sesn_…` for the primary thread (the session's id), else `sthr_…`.
    pub id: String,
    /// The session.
    pub session_id: String,
    /// The thread that spawned it; `None` for the primary.
    pub parent_id: Option<String>,
    /// `running`, `idle`, `rescheduling` or `terminated` (an archived child, or the
    /// primary of a terminated session).
    pub status: String,
    /// The `stop_reason` of its last `session.thread_status_idle` (the primary's: of
    /// its last `session.status_idle` since the first spawn).
    pub stop_reason: Option<Value>,
    /// The name of the agent it runs, as spawned (`None` for the primary: its agent's
    /// `name` is in [`SessionThread::agent`]).
    pub agent_name: Option<String>,
    /// The agent it runs: a child's snapshot taken when it was spawned, the session's
    /// agent for the primary.
    pub agent: Option<Value>,
    /// The parent's `tool_use_id` waiting for this thread's reply, if one is.
    pub awaited_by: Option<String>,
    /// Cumulative usage of its own model requests (same shape as the session's).
    pub usage: Value,
    /// Time spent in `running` up to its last status change, ms.
    pub active_ms: i64,
    /// When its current `running` stretch began; `None` unless running.
    pub running_since_ms: Option<i64>,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
    /// Set once archived (children only).
    pub archived_at_ms: Option<i64>,
}

impl SessionThread {
    /// Whether this is the session's primary thread.
    pub fn is_primary(&self) -> bool {
        self.parent_id.is_none()
    }

    /// Cumulative seconds spent in `running`, including a stretch still under way.
    pub fn active_seconds(&self, now_ms: i64) -> f64 {
        let ongoing = self.running_since_ms.map_or(0, |since| (now_ms - since).max(0));
        (self.active_ms + ongoing) as f64 / 1000.0
    }
}

/// A page request over a session's threads, in id order (the primary, `sesn_…`, first).
#[derive(Debug, Clone, Default)]
pub struct ThreadQuery {
    /// Only these statuses (any when empty).
    pub statuses: Vec<String>,
    /// Threads with ids strictly after this one.
    pub after_id: Option<String>,
    /// At most this many rows.
    pub limit: i64,
}

/// A session's threads.
///
/// Rows are written by `RunStore::handoff` (spawn, await, release, archive) and the
/// appending transactions of `SessionStore` and `RunStore` (status, stop reason, usage
/// and running clock from each thread's committed events, ADR 0022 §7); reads see
/// committed state only. A session's `child_threads` counts its children.
#[async_trait]
pub trait SessionThreadStore: Send + Sync {
    /// The session's threads as `query` says, in id order. Empty for an unknown session
    /// (the caller has found the session in its workspace).
    async fn list_threads(&self, session_id: &str, query: &ThreadQuery) -> StoreResult<Vec<SessionThread>>;

    /// One thread of the session, with its agent.
    async fn get_thread(&self, session_id: &str, thread_id: &str) -> StoreResult<Option<SessionThread>>;
}
