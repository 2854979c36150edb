//! Organizations, workspaces and hashed API keys.

use async_trait::async_trait;
use sqlx::{FromRow, Row};

use super::SqlStore;
use crate::error::{StoreError, StoreResult};
use crate::ids::new_id;
use crate::store::{ApiKeyInfo, KeyKind, Scope, TenancyStore, Workspace};

/// The stored form of a secret: its SHA-256, hex. Keys are high-entropy random
/// strings, so a fast hash is enough (no password stretching needed).
pub(crate) fn hash_secret(secret: &str) -> String {
    crate::ids::secret_hash(secret)
}

/// A `workspaces` row.
#[derive(Debug, FromRow)]
struct WorkspaceRow {
    id: String,
    organization_id: String,
    name: String,
    created_at_ms: i64,
}

impl From<WorkspaceRow> for Workspace {
    fn from(row: WorkspaceRow) -> Self {
        Workspace { id: row.id, organization_id: row.organization_id, name: row.name, created_at_ms: row.created_at_ms }
    }
}

/// An `api_keys` row as listed (`queries/tenancy/select_api_keys.sql`).
#[derive(Debug, FromRow)]
struct ApiKeyRow {
    id: String,
    workspace_id: String,
    name: String,
    hint: String,
    created_at_ms: i64,
    revoked_at_ms: Option<i64>,
    kind: String,
    environment_id: Option<String>,
}

impl From<ApiKeyRow> for ApiKeyInfo {
    fn from(row: ApiKeyRow) -> Self {
        ApiKeyInfo {
            id: row.id,
            workspace_id: row.workspace_id,
            name: row.name,
            hint: row.hint,
            created_at_ms: row.created_at_ms,
            revoked_at_ms: row.revoked_at_ms,
            kind: KeyKind::from_columns(&row.kind, row.environment_id),
        }
    }
}

/// What `queries/tenancy/resolve_api_key.sql` returns.
#[derive(Debug, FromRow)]
struct ScopeRow {
    key_id: String,
    organization_id: String,
    workspace_id: String,
    kind: String,
    environment_id: Option<String>,
}

impl From<ScopeRow> for Scope {
    fn from(row: ScopeRow) -> Self {
        Scope {
            key_id: row.key_id,
            organization_id: row.organization_id,
            workspace_id: row.workspace_id,
            kind: KeyKind::from_columns(&row.kind, row.environment_id),
        }
    }
}

impl SqlStore {
    async fn select_api_keys(&self, hash: Option<&str>, workspace_id: Option<&str>) -> StoreResult<Vec<ApiKeyInfo>> {
        let rows: Vec<ApiKeyRow> = sqlx::query_as(include_str!("../../queries/tenancy/select_api_keys.sql"))
            .bind(hash)
            .bind(workspace_id)
            .fetch_all(&self.readers)
            .await?;
        Ok(rows.into_iter().map(ApiKeyInfo::from).collect())
    }
}

#[async_trait]
impl TenancyStore for SqlStore {
    async fn ensure_workspace(&self, organization: &str, name: &str) -> StoreResult<Workspace> {
        let now = self.now();
        // ON CONFLICT DO NOTHING + re-read makes concurrent first starts converge.
        sqlx::query(
            "INSERT INTO organizations (id, name, created_at_ms) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
        )
        .bind(new_id("org"))
        .bind(organization)
        .bind(now)
        .execute(&self.primary)
        .await?;
        let org_id: String = sqlx::query("SELECT id FROM organizations WHERE name = $1")
            .bind(organization)
            .fetch_one(&self.primary)
            .await?
            .try_get("id")?;
        sqlx::query(
            "INSERT INTO workspaces (id, organization_id, name, created_at_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (organization_id, name) DO NOTHING",
        )
        .bind(new_id("wrkspc"))
        .bind(&org_id)
        .bind(name)
        .bind(now)
        .execute(&self.primary)
        .await?;
        let row: WorkspaceRow = sqlx::query_as(
            "SELECT id, organization_id, name, created_at_ms FROM workspaces WHERE organization_id = $1 AND name = $2",
        )
        .bind(&org_id)
        .bind(name)
        .fetch_one(&self.primary)
        .await?;
        Ok(row.into())
    }

    async fn find_workspace(&self, id_or_name: &str) -> StoreResult<Option<Workspace>> {
        let row: Option<WorkspaceRow> = sqlx::query_as(
            "SELECT id, organization_id, name, created_at_ms FROM workspaces \
             WHERE id = $1 OR name = $1 ORDER BY created_at_ms LIMIT 1",
        )
        .bind(id_or_name)
        .fetch_optional(&self.readers)
        .await?;
        Ok(row.map(Workspace::from))
    }

    async fn insert_api_key(
        &self,
        workspace_id: &str,
        name: &str,
        secret: &str,
        kind: &KeyKind,
    ) -> StoreResult<ApiKeyInfo> {
        let hash = hash_secret(secret);
        let hint: String = secret.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
        sqlx::query(include_str!("../../queries/tenancy/insert_api_key.sql"))
            .bind(new_id("apikey"))
            .bind(workspace_id)
            .bind(name)
            .bind(&hash)
            .bind(&hint)
            .bind(self.now())
            .bind(kind.as_str())
            .bind(match kind {
                KeyKind::Environment(environment_id) => Some(environment_id.as_str()),
                _ => None,
            })
            .execute(&self.primary)
            .await?;
        self.select_api_keys(Some(&hash), None)
            .await?
            .pop()
            .ok_or_else(|| StoreError::Backend("api key vanished after insert".into()))
    }

    async fn resolve_api_key(&self, secret: &str) -> StoreResult<Option<Scope>> {
        let row: Option<ScopeRow> = sqlx::query_as(include_str!("../../queries/tenancy/resolve_api_key.sql"))
            .bind(hash_secret(secret))
            .fetch_optional(&self.readers)
            .await?;
        Ok(row.map(Scope::from))
    }

    async fn list_api_keys(&self, workspace_id: Option<&str>) -> StoreResult<Vec<ApiKeyInfo>> {
        self.select_api_keys(None, workspace_id).await
    }

    async fn revoke_api_key(&self, key_id: &str) -> StoreResult<bool> {
        let result = sqlx::query("UPDATE api_keys SET revoked_at_ms = $2 WHERE id = $1 AND revoked_at_ms IS NULL")
            .bind(key_id)
            .bind(self.now())
            .execute(&self.primary)
            .await?;
        Ok(result.rows_affected() == 1)
    }
}
