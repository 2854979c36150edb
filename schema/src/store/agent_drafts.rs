//! Agent drafts and publications (docs/api/config.md): the control plane's authoring of
//! managed agents. A draft is a workspace's working copy of an agent's configuration,
//! stored as written (it may be invalid; validation is the gateway's). A publication is
//! an immutable record of a configuration that became a version of the agent, keyed by
//! the fingerprint of its content: written once, never changed.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;

/// A stored draft.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDraftRow {
    /// The workspace it belongs to.
    pub workspace_id: String,
    /// The agent it drafts (which may not exist yet).
    pub agent_id: String,
    /// The configuration as written (a JSON object).
    pub body: Value,
    /// 1 on the first write, bumped by every later one.
    pub revision: i64,
    /// First write, epoch ms.
    pub created_at_ms: i64,
    /// Last write, epoch ms.
    pub updated_at_ms: i64,
}

/// A publication: a configuration that became (or already was) a version of its agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentPublicationRow {
    /// The workspace it belongs to.
    pub workspace_id: String,
    /// Hex SHA-256 of the canonical JSON of `{agent_id, config}`.
    pub fingerprint: String,
    /// The agent published.
    pub agent_id: String,
    /// The agent's version that carried this content when it was first published.
    pub agent_version: i64,
    /// The normalized configuration published.
    pub config: Value,
    /// When it was first published, epoch ms (set by the store).
    pub created_at_ms: i64,
}

/// Drafts and publications, scoped to a workspace: another workspace's draft or
/// publication reads as missing. Every method is one statement, durable when it returns.
#[async_trait]
pub trait AgentDraftStore: Send + Sync {
    /// Creates the workspace's draft of `agent_id` at revision 1, or replaces its body
    /// and bumps its revision (last write wins).
    async fn put_agent_draft(&self, workspace_id: &str, agent_id: &str, body: &Value) -> StoreResult<AgentDraftRow>;

    /// The workspace's draft of `agent_id`, if there is one.
    async fn get_agent_draft(&self, workspace_id: &str, agent_id: &str) -> StoreResult<Option<AgentDraftRow>>;

    /// The workspace's drafts, newest agent id first, strictly after `after_agent_id` in
    /// that order, at most `limit`.
    async fn list_agent_drafts(
        &self,
        workspace_id: &str,
        after_agent_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<AgentDraftRow>>;

    /// Removes the workspace's draft of `agent_id`; `false` when there was none.
    async fn delete_agent_draft(&self, workspace_id: &str, agent_id: &str) -> StoreResult<bool>;

    /// The workspace that owns agent `agent_id`, in any workspace (`None`: no agent has
    /// the id). A draft may name only an agent of its own workspace or an unused id.
    async fn agent_workspace(&self, agent_id: &str) -> StoreResult<Option<String>>;

    /// Records a publication unless the workspace has one with its fingerprint already.
    /// Returns the stored row (the earlier one when it existed, unchanged; its
    /// `created_at_ms` is the store's clock) and whether this call wrote it.
    async fn insert_agent_publication(&self, new: AgentPublicationRow) -> StoreResult<(AgentPublicationRow, bool)>;

    /// The workspace's publication with this fingerprint, if any.
    async fn get_agent_publication(
        &self,
        workspace_id: &str,
        fingerprint: &str,
    ) -> StoreResult<Option<AgentPublicationRow>>;
}
