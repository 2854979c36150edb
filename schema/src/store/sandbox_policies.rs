//! Sandbox execution policies (docs/api/sandbox-policies.md, migration 0029): versions
//! that never change once written, the current version of a policy being its highest,
//! and each environment's binding to one exact version. The built-in presets are not
//! stored (the gateway's `domain::sandbox_policies` answers for them). Every row belongs
//! to one workspace; another workspace's row reads as missing.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;

/// One immutable version of a policy.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxPolicyVersionRow {
    /// The workspace.
    pub workspace_id: String,
    /// The policy's id (chosen by its author).
    pub policy_id: String,
    /// 1, 2, … in the order written.
    pub version: i64,
    /// The validated `config` (`isolation`, `limits`).
    pub config: Value,
    /// `eager`.
    pub provisioning: String,
    /// `idle_retention`, or `Null`.
    pub idle_retention: Value,
    /// A disabled version cannot be newly bound.
    pub disabled: bool,
    /// When it was written, epoch ms.
    pub created_at_ms: i64,
}

/// The content of a version to write.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSandboxPolicyVersion {
    /// The workspace.
    pub workspace_id: String,
    /// The policy's id.
    pub policy_id: String,
    /// The validated `config`.
    pub config: Value,
    /// `eager`.
    pub provisioning: String,
    /// `idle_retention`, or `Null`.
    pub idle_retention: Value,
    /// Whether the version is disabled.
    pub disabled: bool,
}

/// An environment's binding to one exact policy version.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxPolicyBindingRow {
    /// The workspace.
    pub workspace_id: String,
    /// The environment.
    pub environment_id: String,
    /// The bound policy.
    pub policy_id: String,
    /// Its pinned version.
    pub version: i64,
    /// When the binding was last written, epoch ms.
    pub bound_at_ms: i64,
}

/// Policy versions and environment bindings.
#[async_trait]
pub trait SandboxPolicyStore: Send + Sync {
    /// Writes version 1 of a new policy. `Conflict` when the policy exists.
    async fn create_sandbox_policy(&self, new: NewSandboxPolicyVersion) -> StoreResult<SandboxPolicyVersionRow>;

    /// Writes version `expected_current + 1`. `NotFound` when the policy does not exist;
    /// `Conflict` (nothing written) when its current version is not `expected_current`,
    /// racing writers included.
    async fn add_sandbox_policy_version(
        &self,
        new: NewSandboxPolicyVersion,
        expected_current: i64,
    ) -> StoreResult<SandboxPolicyVersionRow>;

    /// One version of a policy, or its current one when `version` is `None`.
    async fn get_sandbox_policy(
        &self,
        workspace_id: &str,
        policy_id: &str,
        version: Option<i64>,
    ) -> StoreResult<Option<SandboxPolicyVersionRow>>;

    /// The current version of each policy, by id, after `after_id`, at most `limit`.
    async fn list_sandbox_policies(
        &self,
        workspace_id: &str,
        after_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<SandboxPolicyVersionRow>>;

    /// Binds an environment to a version (replacing its binding). The caller checks that
    /// the version exists and may be bound.
    async fn bind_sandbox_policy(
        &self,
        workspace_id: &str,
        environment_id: &str,
        policy_id: &str,
        version: i64,
    ) -> StoreResult<SandboxPolicyBindingRow>;

    /// An environment's binding.
    async fn sandbox_policy_binding(
        &self,
        workspace_id: &str,
        environment_id: &str,
    ) -> StoreResult<Option<SandboxPolicyBindingRow>>;
}
