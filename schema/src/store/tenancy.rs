//! Tenancy: organizations, workspaces and hashed keys.

use async_trait::async_trait;

use crate::error::StoreResult;

/// An organization: the unit rate limits apply to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    /// `org_…`
    pub id: String,
    /// Unique name.
    pub name: String,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
}

/// A workspace: the scope every managed resource lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// `wrkspc_…`
    pub id: String,
    /// The owning organization.
    pub organization_id: String,
    /// Unique within the organization.
    pub name: String,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
}

/// An API key as listed: never the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyInfo {
    /// `apikey_…`
    pub id: String,
    /// The workspace the key acts on.
    pub workspace_id: String,
    /// Operator-chosen label.
    pub name: String,
    /// The last characters of the secret, to tell keys apart.
    pub hint: String,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Set once revoked; a revoked key authenticates nothing.
    pub revoked_at_ms: Option<i64>,
    /// What the key may do.
    pub kind: KeyKind,
}

/// What a key may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    /// An API key: everything in its workspace.
    Api,
    /// An environment key: that environment's work queue and its sessions.
    Environment(String),
    /// A runner key: the work of every `cloud` environment of its workspace.
    Runner,
}

impl KeyKind {
    /// The stored `kind` column.
    pub fn as_str(&self) -> &'static str {
        match self {
            KeyKind::Api => "api",
            KeyKind::Environment(_) => "environment",
            KeyKind::Runner => "runner",
        }
    }

    /// From the stored `kind` and `environment_id` columns; unknown kinds are API keys.
    pub fn from_columns(kind: &str, environment_id: Option<String>) -> Self {
        match kind {
            "environment" => KeyKind::Environment(environment_id.unwrap_or_default()),
            "runner" => KeyKind::Runner,
            _ => KeyKind::Api,
        }
    }
}

/// The trusted scope a key resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The key that authenticated.
    pub key_id: String,
    /// Its organization (rate limits are per organization).
    pub organization_id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// What it may do.
    pub kind: KeyKind,
}

/// Organizations, workspaces and keys. Every method is one short statement (or an
/// idempotent insert plus a re-read) and durable when it returns; secrets are stored as
/// their SHA-256 only.
#[async_trait]
pub trait TenancyStore: Send + Sync {
    /// Returns the named workspace of the named organization, creating either if
    /// missing. Idempotent; safe to race (concurrent first starts converge on one row).
    async fn ensure_workspace(&self, organization: &str, workspace: &str) -> StoreResult<Workspace>;

    /// Looks a workspace up by id or by name (the oldest of that name).
    async fn find_workspace(&self, id_or_name: &str) -> StoreResult<Option<Workspace>>;

    /// Stores the hash of `secret` as a new key of `workspace_id`. Idempotent when the
    /// same secret is stored twice (returns the existing key).
    async fn insert_api_key(
        &self,
        workspace_id: &str,
        name: &str,
        secret: &str,
        kind: &KeyKind,
    ) -> StoreResult<ApiKeyInfo>;

    /// Resolves a presented secret to its trusted scope; `None` for unknown or revoked
    /// keys and keys of archived workspaces.
    async fn resolve_api_key(&self, secret: &str) -> StoreResult<Option<Scope>>;

    /// Lists keys by id, optionally of one workspace, never with secrets.
    async fn list_api_keys(&self, workspace_id: Option<&str>) -> StoreResult<Vec<ApiKeyInfo>>;

    /// Revokes a key; `false` if it does not exist or was already revoked.
    async fn revoke_api_key(&self, key_id: &str) -> StoreResult<bool>;
}
