//! Dreams (docs/api/dreams.md, ADR 0016) and the dream policy of a memory store.
//!
//! A dream's `status` only moves forward — `pending` → `running` → `completed`,
//! `failed` or `canceled` — and every move is a compare-and-swap on the status it
//! leaves, so concurrent reconcilers, a cancel and a crashed attempt's retry cannot end
//! a dream twice. At most one `update_existing` dream per memory store, and one dream
//! per policy, is open (`pending` or `running`) at a time: the store refuses a second
//! with `Conflict`, whatever the race.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;
use crate::store::TimeBounds;

/// Where a dream is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DreamStatus {
    /// Written; its session has not started.
    Pending,
    /// Its session runs.
    Running,
    /// Its session's turn ended normally.
    Completed,
    /// Its session failed (retries exhausted, terminated, deleted, …).
    Failed,
    /// Canceled through the API.
    Canceled,
}

impl DreamStatus {
    /// The wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            DreamStatus::Pending => "pending",
            DreamStatus::Running => "running",
            DreamStatus::Completed => "completed",
            DreamStatus::Failed => "failed",
            DreamStatus::Canceled => "canceled",
        }
    }

    /// From the wire or stored name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "pending" => Some(DreamStatus::Pending),
            "running" => Some(DreamStatus::Running),
            "completed" => Some(DreamStatus::Completed),
            "failed" => Some(DreamStatus::Failed),
            "canceled" => Some(DreamStatus::Canceled),
            _ => None,
        }
    }

    /// `completed`, `failed` or `canceled`: it never changes again.
    pub fn is_final(self) -> bool {
        matches!(self, DreamStatus::Completed | DreamStatus::Failed | DreamStatus::Canceled)
    }
}

/// A dream.
#[derive(Debug, Clone, PartialEq)]
pub struct DreamRow {
    /// `drm_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Its status.
    pub status: DreamStatus,
    /// The memory store it reads (`memstore_…`).
    pub memory_store_id: String,
    /// The sessions whose transcripts it reads, sorted.
    pub session_ids: Vec<String>,
    /// `{"id", "speed"}`.
    pub model: Value,
    /// Guidance for the dream agent.
    pub instructions: Option<String>,
    /// Writes into the input store instead of a new one.
    pub update_existing: bool,
    /// The session that runs it, once started.
    pub session_id: Option<String>,
    /// The store it writes, once started.
    pub output_store_id: Option<String>,
    /// `{"type", "message"}` when failed.
    pub error: Option<Value>,
    /// Token counts frozen when it ended (`None` before: read from its session).
    pub usage: Option<Value>,
    /// The store whose policy scheduled it.
    pub policy_store_id: Option<String>,
    /// For a scheduled dream: sessions updated up to this time were considered, epoch ms.
    pub cutoff_ms: Option<i64>,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
    /// When it reached a final status, epoch ms.
    pub ended_at_ms: Option<i64>,
    /// When it was archived, epoch ms.
    pub archived_at_ms: Option<i64>,
}

/// A dream to create (`pending`).
#[derive(Debug, Clone)]
pub struct NewDream {
    /// `drm_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The memory store it reads.
    pub memory_store_id: String,
    /// The sessions it reads, sorted and unique.
    pub session_ids: Vec<String>,
    /// `{"id", "speed"}`.
    pub model: Value,
    /// Guidance for the dream agent.
    pub instructions: Option<String>,
    /// Writes into the input store.
    pub update_existing: bool,
}

/// How a dream ended (see [`DreamStore::finish_dream`]).
#[derive(Debug, Clone)]
pub struct DreamEnd {
    /// `completed`, `failed` or `canceled`.
    pub status: DreamStatus,
    /// `{"type", "message"}` for `failed`.
    pub error: Option<Value>,
    /// The token counts to freeze (`None` keeps reading them from the session).
    pub usage: Option<Value>,
}

/// A page of dreams, newest first.
#[derive(Debug, Clone, Default)]
pub struct DreamQuery {
    /// Only these statuses (any when empty).
    pub statuses: Vec<DreamStatus>,
    /// Creation time bounds (`gt`, `lt` used).
    pub created: TimeBounds,
    /// Include archived dreams.
    pub include_archived: bool,
    /// Strictly older than this id (the cursor).
    pub before_id: Option<String>,
    /// At most this many.
    pub limit: i64,
}

/// A memory store's dream policy.
#[derive(Debug, Clone, PartialEq)]
pub struct DreamPolicyRow {
    /// The store (`memstore_…`).
    pub memory_store_id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Whether the scheduler dreams over the store.
    pub enabled: bool,
    /// Time between due ticks.
    pub interval_seconds: i64,
    /// Fewer new sessions than this at a tick: no dream, the schedule only advances.
    pub min_new_sessions: i64,
    /// At most this many sessions per dream (the most recently updated).
    pub max_sessions: i64,
    /// `{"id", "speed"}`.
    pub model: Value,
    /// Guidance for the dream agent.
    pub instructions: Option<String>,
    /// The next due tick, epoch ms (`None` while disabled).
    pub next_due_at_ms: Option<i64>,
    /// Sessions updated up to this time were dreamed over by a completed dream.
    pub last_completed_cutoff_ms: Option<i64>,
}

/// What a scheduler's tick did to one policy ([`DreamStore::schedule_dream`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleOutcome {
    /// Not due (or another scheduler claimed this tick): nothing changed.
    NotDue,
    /// The tick was claimed and the schedule advanced, without a dream: one is still
    /// open, or fewer than `min_new_sessions` sessions qualified.
    Advanced,
    /// The tick was claimed, the schedule advanced and this dream inserted.
    Dreamed(Box<DreamRow>),
}

/// Dreams and dream policies. Every method commits before it returns.
#[async_trait]
pub trait DreamStore: Send + Sync {
    /// Inserts a `pending` dream. `Conflict` when it is `update_existing` and another
    /// `update_existing` dream on the store is open.
    async fn insert_dream(&self, new: NewDream) -> StoreResult<DreamRow>;

    /// A dream of the workspace.
    async fn get_dream(&self, workspace_id: &str, id: &str) -> StoreResult<Option<DreamRow>>;

    /// Dreams of the workspace, newest first.
    async fn list_dreams(&self, workspace_id: &str, query: &DreamQuery) -> StoreResult<Vec<DreamRow>>;

    /// Open dreams of every workspace, oldest first (the reconciler's work list).
    async fn open_dreams(&self, limit: i64) -> StoreResult<Vec<DreamRow>>;

    /// Claims the start of a `pending` dream until `now_ms + lease_ms`, unless another
    /// caller holds an unexpired claim: `false` when it is not pending or claimed.
    async fn claim_dream_start(&self, id: &str, now_ms: i64, lease_ms: i64) -> StoreResult<bool>;

    /// Gives up a claim of [`DreamStore::claim_dream_start`] (the start failed and may be
    /// retried at once, by any gateway).
    async fn release_dream_start(&self, id: &str) -> StoreResult<()>;

    /// `pending` → `running`, recording the session and the output store.
    /// `Ok(None)`: no such dream, or it is no longer `pending` (re-read it).
    async fn start_dream(&self, id: &str, session_id: &str, output_store_id: &str) -> StoreResult<Option<DreamRow>>;

    /// `pending` or `running` → a final status, once; `ended_at` is set here. A
    /// `completed` dream of a policy advances the policy's `last_completed_cutoff_ms` to
    /// its cutoff in the same transaction. `Ok(None)`: no such dream, or it had ended.
    async fn finish_dream(&self, id: &str, end: DreamEnd) -> StoreResult<Option<DreamRow>>;

    /// Archives a dream that has ended (idempotent). `Ok(None)`: no such dream, or it
    /// has not ended (re-read it for the status).
    async fn archive_dream(&self, workspace_id: &str, id: &str) -> StoreResult<Option<DreamRow>>;

    /// The store's policy, if one was ever written.
    async fn get_dream_policy(&self, workspace_id: &str, memory_store_id: &str) -> StoreResult<Option<DreamPolicyRow>>;

    /// Writes the store's policy whole. `next_due_at_ms` is kept while the policy stays
    /// enabled with the same interval, set to now + interval when it is enabled or its
    /// interval changes, and cleared when disabled; `last_completed_cutoff_ms` is kept.
    async fn put_dream_policy(&self, policy: DreamPolicyRow) -> StoreResult<DreamPolicyRow>;

    /// Enabled policies due at `now_ms`: `(workspace_id, memory_store_id)`.
    async fn due_dream_policies(&self, now_ms: i64, limit: i64) -> StoreResult<Vec<(String, String)>>;

    /// One due tick of a policy, in one transaction: claim it by moving `next_due_at_ms`
    /// forward (a conditional update: of racing schedulers one claims the tick, the
    /// others get [`ScheduleOutcome::NotDue`]); then, unless a dream of the policy or an
    /// `update_existing` dream of the store is open, pick the most recently updated sessions with the store attached that are
    /// not running, not archived and updated after the policy's last completed cutoff
    /// (at most `max_sessions`), and when at least `min_new_sessions` qualify insert the
    /// dream `dream_id` (`pending`, `update_existing`: a policy consolidates its store in
    /// place; cutoff `now_ms`).
    async fn schedule_dream(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        now_ms: i64,
        dream_id: &str,
    ) -> StoreResult<ScheduleOutcome>;
}
