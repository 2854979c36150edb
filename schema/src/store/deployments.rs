//! Deployments and deployment runs (docs/api/deployments.md).
//!
//! A deployment's schedule fires each slot once across any number of schedulers:
//! [`DeploymentStore::claim_deployment_slot`] moves `next_slot_ms` forward with a compare-and-swap on
//! the value the caller read and inserts the slot's run in the same transaction, and the
//! store refuses a second run for one (deployment, slot) whatever the race. Runs are
//! append-only: a run's `session_id` or `error` is written once, by a compare-and-swap on
//! both being unset.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;
use crate::store::TimeBounds;

/// A cron schedule as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRow {
    /// 5-field cron expression.
    pub expression: String,
    /// IANA time zone.
    pub timezone: String,
}

/// A deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRow {
    /// `depl_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The workspace's organization (whose limits its sessions count against).
    pub organization_id: String,
    /// Fields the caller writes.
    pub config: DeploymentConfig,
    /// The next slot its schedule fires, epoch ms (`None`: manual only, or archived).
    pub next_slot_ms: Option<i64>,
    /// When its most recent scheduled run started, epoch ms.
    pub last_run_at_ms: Option<i64>,
    /// `{"type":"manual"}` or `{"type":"error","error":{…}}` while paused.
    pub paused_reason: Option<Value>,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
    /// When it was archived, epoch ms.
    pub archived_at_ms: Option<i64>,
}

/// What a caller writes of a deployment (whole, on create and on update).
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentConfig {
    /// Human-readable name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// The pinned agent (`agent_…`).
    pub agent_id: String,
    /// Its pinned version.
    pub agent_version: i64,
    /// The environment its sessions run in.
    pub environment_id: String,
    /// Events sent to each session (JSON array).
    pub initial_events: Value,
    /// Session resources (JSON array, secrets sealed).
    pub resources: Value,
    /// Vault ids.
    pub vault_ids: Vec<String>,
    /// Metadata (JSON object).
    pub metadata: Value,
    /// The budget copied onto each session.
    pub budget: Option<Value>,
    /// The cron schedule (`None`: manual only).
    pub schedule: Option<ScheduleRow>,
    /// The data subject its sessions are attributed to (`uprof_…`).
    pub user_profile_id: Option<String>,
    /// The highest content capture its sessions may have (`None`: `full`).
    pub content_capture_ceiling: Option<crate::capture::Level>,
}

/// A deployment to create.
#[derive(Debug, Clone)]
pub struct NewDeployment {
    /// `depl_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The workspace's organization.
    pub organization_id: String,
    /// What the caller wrote.
    pub config: DeploymentConfig,
    /// The first slot of its schedule, epoch ms.
    pub next_slot_ms: Option<i64>,
}

/// A page of deployments, newest first.
#[derive(Debug, Clone, Default)]
pub struct DeploymentQuery {
    /// Only deployments of this agent.
    pub agent_id: Option<String>,
    /// `Some(true)`: only paused; `Some(false)`: only not paused.
    pub paused: Option<bool>,
    /// Include archived deployments.
    pub include_archived: bool,
    /// Creation bounds (`gte`, `lte` used).
    pub created: TimeBounds,
    /// Strictly older than this id (the cursor).
    pub before_id: Option<String>,
    /// At most this many.
    pub limit: i64,
}

/// What fired a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunTrigger {
    /// The schedule, for the slot at this time (epoch ms).
    Schedule(i64),
    /// `POST /v1/deployments/{id}/run`.
    Manual,
}

impl RunTrigger {
    /// `schedule` or `manual`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunTrigger::Schedule(_) => "schedule",
            RunTrigger::Manual => "manual",
        }
    }
}

/// A deployment run.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRunRow {
    /// `drun_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The deployment that fired it.
    pub deployment_id: String,
    /// `{"type":"agent","id","version"}` at fire time.
    pub agent: Value,
    /// What fired it.
    pub trigger: RunTrigger,
    /// The session it creates (derived from its id).
    pub planned_session_id: String,
    /// The session, once created.
    pub session_id: Option<String>,
    /// `{"type","message"}` when no session could be created.
    pub error: Option<Value>,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
}

/// A run to insert.
#[derive(Debug, Clone)]
pub struct NewDeploymentRun {
    /// `drun_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Its deployment.
    pub deployment_id: String,
    /// The agent reference at fire time.
    pub agent: Value,
    /// What fired it.
    pub trigger: RunTrigger,
    /// The session it will create.
    pub planned_session_id: String,
}

/// A page of runs, newest first.
#[derive(Debug, Clone, Default)]
pub struct DeploymentRunQuery {
    /// Only runs of this deployment.
    pub deployment_id: Option<String>,
    /// `Some(true)`: runs with an error; `Some(false)`: runs with a session.
    pub has_error: Option<bool>,
    /// Only `schedule` or `manual` runs.
    pub trigger_type: Option<String>,
    /// Creation bounds.
    pub created: TimeBounds,
    /// Strictly older than this id (the cursor).
    pub before_id: Option<String>,
    /// At most this many.
    pub limit: i64,
}

/// A slot to claim ([`DeploymentStore::claim_deployment_slot`]).
#[derive(Debug, Clone)]
pub struct SlotClaim {
    /// The `next_slot_ms` the caller read (the compare-and-swap's expected value).
    pub expected_next_ms: i64,
    /// The slot that fires (the latest slot not after now).
    pub slot_ms: i64,
    /// The slot after now, which becomes `next_slot_ms`.
    pub next_ms: i64,
    /// Now, epoch ms (the deployment's `last_run_at`).
    pub now_ms: i64,
    /// The slot's run.
    pub run: NewDeploymentRun,
}

/// Deployments and their runs. Every method commits before it returns.
#[async_trait]
pub trait DeploymentStore: Send + Sync {
    /// Inserts a deployment.
    async fn insert_deployment(&self, new: NewDeployment) -> StoreResult<DeploymentRow>;

    /// A deployment of the workspace.
    async fn get_deployment(&self, workspace_id: &str, id: &str) -> StoreResult<Option<DeploymentRow>>;

    /// Deployments of the workspace, newest first.
    async fn list_deployments(&self, workspace_id: &str, query: &DeploymentQuery) -> StoreResult<Vec<DeploymentRow>>;

    /// Writes an unarchived deployment's config whole. When `next_slot_ms` is `Some`,
    /// its next slot becomes the inner value (the schedule changed); `None` keeps it.
    /// `Ok(None)`: no such deployment, or it is archived.
    async fn update_deployment(
        &self,
        workspace_id: &str,
        id: &str,
        config: DeploymentConfig,
        next_slot_ms: Option<Option<i64>>,
    ) -> StoreResult<Option<DeploymentRow>>;

    /// Archives a deployment (idempotent; its schedule stops). `Ok(None)`: no such one.
    async fn archive_deployment(&self, workspace_id: &str, id: &str) -> StoreResult<Option<DeploymentRow>>;

    /// Pauses (`reason` set) or unpauses (`None`, the schedule resuming at
    /// `next_slot_ms`) an unarchived deployment. `Ok(None)`: no such one, or archived.
    async fn set_deployment_paused(
        &self,
        workspace_id: &str,
        id: &str,
        reason: Option<Value>,
        next_slot_ms: Option<i64>,
    ) -> StoreResult<Option<DeploymentRow>>;

    /// Unpaused, unarchived deployments whose next slot is at or before `now_ms`, of
    /// every workspace, earliest first (the scheduler's work list).
    async fn due_deployments(&self, now_ms: i64, limit: i64) -> StoreResult<Vec<DeploymentRow>>;

    /// Claims one slot, in one transaction: moves `next_slot_ms` from
    /// `claim.expected_next_ms` to `claim.next_ms` (only while unpaused and unarchived)
    /// and inserts the slot's run. `Ok(None)`: another scheduler claimed it, or the
    /// deployment changed since it was read; nothing was written.
    async fn claim_deployment_slot(
        &self,
        deployment_id: &str,
        claim: SlotClaim,
    ) -> StoreResult<Option<DeploymentRunRow>>;

    /// Inserts a manual run.
    async fn insert_deployment_run(&self, new: NewDeploymentRun) -> StoreResult<DeploymentRunRow>;

    /// Records the session a run created, once. `Ok(None)`: no such run, or it
    /// already has a session or an error (re-read it).
    async fn record_deployment_run_session(
        &self,
        run_id: &str,
        session_id: &str,
    ) -> StoreResult<Option<DeploymentRunRow>>;

    /// Records why a run created no session, once, and with `pause` pauses its
    /// deployment with `{"type":"error","error": error}` unless it is paused or archived,
    /// in the same transaction. `Ok(None)`: no such run, or it already has a session or
    /// an error.
    async fn record_deployment_run_error(
        &self,
        run_id: &str,
        error: Value,
        pause: bool,
    ) -> StoreResult<Option<DeploymentRunRow>>;

    /// A run of the workspace.
    async fn get_deployment_run(&self, workspace_id: &str, id: &str) -> StoreResult<Option<DeploymentRunRow>>;

    /// Runs of the workspace, newest first.
    async fn list_deployment_runs(
        &self,
        workspace_id: &str,
        query: &DeploymentRunQuery,
    ) -> StoreResult<Vec<DeploymentRunRow>>;

    /// Runs of every workspace with neither a session nor an error, created at or
    /// before `created_before_ms`, oldest first (a fire cut short by a crash).
    async fn unfinished_deployment_runs(
        &self,
        created_before_ms: i64,
        limit: i64,
    ) -> StoreResult<Vec<DeploymentRunRow>>;
}
