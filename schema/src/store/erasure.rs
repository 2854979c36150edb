//! Erasure of a data subject's records (docs/api/user-profiles.md, "Erasure").
//!
//! One erasure is a durable job (`user_profile_erasures`): `running` until every record
//! it finds is gone, carried on by whoever finds it running — the next request for the
//! same profile, or the sweeper once it is stale. Each session is erased in one
//! transaction that also adds what it removed to the job's count, so a job resumed
//! after a crash never counts a record twice and never leaves a session half erased.

use async_trait::async_trait;

use crate::error::StoreResult;

/// An erasure job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErasureRow {
    /// `uperas_…`
    pub id: String,
    /// The workspace of the profile.
    pub workspace_id: String,
    /// The data subject (`uprof_…`).
    pub user_profile_id: String,
    /// Whether every record it found is gone.
    pub completed: bool,
    /// Records removed so far.
    pub records_removed: i64,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last progress, epoch ms.
    pub updated_at_ms: i64,
    /// Completion, epoch ms.
    pub completed_at_ms: Option<i64>,
}

/// What erasing one session removes besides its own rows, found before the
/// transaction (its files' objects are deleted from blob storage first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionErasure {
    /// Records already removed outside the transaction (files, with their objects).
    pub removed_before: i64,
}

/// Erasure jobs and the removal of a data subject's records.
#[async_trait]
pub trait ErasureStore: Send + Sync {
    /// The profile's erasure still `running`, or a new one with id `id`.
    async fn begin_erasure(&self, id: &str, workspace_id: &str, user_profile_id: &str) -> StoreResult<ErasureRow>;

    /// Up to `limit` sessions attributed to the profile.
    async fn subject_sessions(&self, workspace_id: &str, user_profile_id: &str, limit: i64)
    -> StoreResult<Vec<String>>;

    /// Removes, in one transaction, every record of session `session_id` of the
    /// workspace — its events, threads, runs, tool calls, queued work, live inbox,
    /// adapter bindings, A2A tasks with their push configurations and deliveries,
    /// memory mounts, the session row — redacts every memory version it authored
    /// (deleting a memory whose current content it wrote), and adds the count (with
    /// `erasure.removed_before`) to job `erasure_id`. A session already gone removes 0.
    async fn erase_session(
        &self,
        erasure_id: &str,
        workspace_id: &str,
        session_id: &str,
        erasure: SessionErasure,
    ) -> StoreResult<i64>;

    /// Marks the job completed; returns it as it ends.
    async fn complete_erasure(&self, erasure_id: &str) -> StoreResult<ErasureRow>;

    /// Running jobs that made no progress since `before_ms` (the sweeper carries them on).
    async fn stale_erasures(&self, before_ms: i64, limit: i64) -> StoreResult<Vec<ErasureRow>>;
}
