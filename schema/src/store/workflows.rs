//! Workflow revisions (docs/api/workflows.md): a project's workflow definitions saved as
//! immutable, content-addressed revisions, and the project override — the pointer from
//! (project, definition) to the revision new work uses — moved by compare-and-swap on its
//! `override_version`.
//!
//! Everything is scoped to a workspace: another workspace's project, revision or override
//! reads as missing. The store checks nothing about a declaration; validation and the
//! content address are the gateway's.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;

/// Which workflow definition of which project of a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowKey {
    /// The owning workspace.
    pub workspace_id: String,
    /// The project's slug.
    pub project: String,
    /// The definition's slug.
    pub definition: String,
}

/// A stored revision: immutable once written.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowRevisionRow {
    /// `wfrev_` + `content_sha256`.
    pub id: String,
    /// The project's slug.
    pub project: String,
    /// The definition's slug.
    pub definition: String,
    /// Hex SHA-256 of the canonical JSON of `{declaration, resolved}`.
    pub content_sha256: String,
    /// The validated declaration.
    pub declaration: Value,
    /// What the declaration's references resolved to when it was first saved.
    pub resolved: Value,
    /// When it was first saved, epoch ms (the store's clock).
    pub created_at_ms: i64,
}

/// The project override of a definition: `revision_id` is `None` once cleared.
/// `override_version` counts every save and clear (0: never saved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowOverrideRow {
    /// The project's slug.
    pub project: String,
    /// The definition's slug.
    pub definition: String,
    /// The revision new work uses, if the project overrides the definition.
    pub revision_id: Option<String>,
    /// Bumped by every save and clear; never reused.
    pub override_version: i64,
    /// The last save or clear, epoch ms.
    pub updated_at_ms: i64,
}

/// A save: create or reuse a revision and point the override at it.
#[derive(Debug, Clone)]
pub struct SaveWorkflowRevision {
    /// Where.
    pub key: WorkflowKey,
    /// The revision to create unless the definition has one with this id already.
    pub id: String,
    /// Its content address.
    pub content_sha256: String,
    /// The validated declaration.
    pub declaration: Value,
    /// Its resolved references.
    pub resolved: Value,
    /// The override version the caller saw (0: no save yet).
    pub expected_override_version: i64,
    /// The caller's idempotency key.
    pub idempotency_key: String,
    /// Hex SHA-256 of the canonical request body the key is bound to.
    pub request_sha256: String,
}

/// What a successful save did (also what its replay answers).
#[derive(Debug, Clone, PartialEq)]
pub struct SavedWorkflowRevision {
    /// The revision the override points to.
    pub revision: WorkflowRevisionRow,
    /// Whether the revision existed before this save.
    pub reused: bool,
    /// The override as the save left it.
    pub override_row: WorkflowOverrideRow,
}

/// The outcome of [`WorkflowStore::save_workflow_revision`].
#[derive(Debug, Clone, PartialEq)]
pub enum SaveOutcome {
    /// Saved now.
    Saved(SavedWorkflowRevision),
    /// The key's first save, with the same request: its result, as it was then.
    Replayed(SavedWorkflowRevision),
    /// The key was used for another request body; nothing changed.
    KeyReused,
    /// `expected_override_version` is not the current version; nothing changed.
    VersionConflict {
        /// The current version.
        current: i64,
    },
}

/// The outcome of [`WorkflowStore::clear_workflow_override`].
#[derive(Debug, Clone, PartialEq)]
pub enum ClearOutcome {
    /// Cleared: the override as it is now (no revision, the next version).
    Cleared(WorkflowOverrideRow),
    /// No revision of the definition was ever saved in the project.
    NotFound,
    /// `expected_override_version` is not the current version; nothing changed.
    VersionConflict {
        /// The current version.
        current: i64,
    },
}

/// Workflow revisions and project overrides. Every method that writes is one transaction,
/// durable when it returns; a failed precondition writes nothing.
#[async_trait]
pub trait WorkflowStore: Send + Sync {
    /// One transaction, in this order: claims `idempotency_key` for (workspace, project,
    /// definition) — a key already saved answers `Replayed` (same `request_sha256`) or
    /// `KeyReused`, and a concurrent save with the same key waits for this one and then
    /// replays it —; inserts the revision unless the definition has it (`reused`);
    /// moves the override to it by compare-and-swap on `expected_override_version`
    /// (0: no override row yet) to `expected + 1`; records the result under the key.
    /// Of concurrent saves expecting one version, exactly one succeeds.
    async fn save_workflow_revision(&self, save: SaveWorkflowRevision) -> StoreResult<SaveOutcome>;

    /// The result of the first save under `idempotency_key` and the request hash it is
    /// bound to, if the key was used.
    async fn workflow_save_replay(
        &self,
        key: &WorkflowKey,
        idempotency_key: &str,
    ) -> StoreResult<Option<(String, SavedWorkflowRevision)>>;

    /// Clears the override by compare-and-swap on `expected_override_version`: no revision,
    /// the next version. The revisions stay.
    async fn clear_workflow_override(
        &self,
        key: &WorkflowKey,
        expected_override_version: i64,
    ) -> StoreResult<ClearOutcome>;

    /// The definition's revision `id`, if it was saved in the project.
    async fn get_workflow_revision(&self, key: &WorkflowKey, id: &str) -> StoreResult<Option<WorkflowRevisionRow>>;

    /// The definition's override (`None`: no revision of it was ever saved in the project).
    async fn get_workflow_override(&self, key: &WorkflowKey) -> StoreResult<Option<WorkflowOverrideRow>>;
}
