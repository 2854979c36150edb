//! Organizations, workspaces and hashed API keys.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::SqlStore;
use crate::error::StoreResult;
use crate::ids::new_id;
use crate::store::{ApiKeyInfo, KeyKind, Scope, TenancyStore, Workspace};

/// The stored form of a secret: its SHA-256, hex. Keys are high-entropy random
/// strings, so a fast hash is enough (no password stretching needed).
pub(crate) fn hash_secret(secret: &str) -> String {
    crate::ids::secret_hash(secret)
}

fn workspace(row: &AnyRow) -> StoreResult<Workspace> {
    Ok(Workspace {
        id: row.try_get("id")?,
        organization_id: row.try_get("organization_id")?,
        name: row.try_get("name")?,
        created_at_ms: row.try_get("created_at_ms")?,
    })
}

fn api_key(row: &AnyRow) -> StoreResult<ApiKeyInfo> {
    Ok(ApiKeyInfo {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        name: row.try_get("name")?,
        hint: row.try_get("hint")?,
        created_at_ms: row.try_get("created_at_ms")?,
        revoked_at_ms: row.try_get("revoked_at_ms")?,
        kind: kind(row)?,
    })
}

fn kind(row: &AnyRow) -> StoreResult<KeyKind> {
    let kind: String = row.try_get("kind")?;
    Ok(match kind.as_str() {
        "environment" => KeyKind::Environment(row.try_get::<Option<String>, _>("environment_id")?.unwrap_or_default()),
        "runner" => KeyKind::Runner,
        _ => KeyKind::Api,
    })
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
        .execute(&self.pool)
        .await?;
        let org_id: String = sqlx::query("SELECT id FROM organizations WHERE name = $1")
            .bind(organization)
            .fetch_one(&self.pool)
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
        .execute(&self.pool)
        .await?;
        let row = sqlx::query(
            "SELECT id, organization_id, name, created_at_ms FROM workspaces WHERE organization_id = $1 AND name = $2",
        )
        .bind(&org_id)
        .bind(name)
        .fetch_one(&self.pool)
        .await?;
        workspace(&row)
    }

    async fn find_workspace(&self, id_or_name: &str) -> StoreResult<Option<Workspace>> {
        let row = sqlx::query(
            "SELECT id, organization_id, name, created_at_ms FROM workspaces \
             WHERE id = $1 OR name = $1 ORDER BY created_at_ms LIMIT 1",
        )
        .bind(id_or_name)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(workspace).transpose()
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
        sqlx::query(
            "INSERT INTO api_keys (id, workspace_id, name, key_hash, hint, created_at_ms, kind, environment_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (key_hash) DO NOTHING",
        )
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
        .execute(&self.pool)
        .await?;
        let row = sqlx::query(
            "SELECT id, workspace_id, name, hint, created_at_ms, revoked_at_ms, kind, environment_id FROM api_keys \
             WHERE key_hash = $1",
        )
        .bind(&hash)
        .fetch_one(&self.pool)
        .await?;
        api_key(&row)
    }

    async fn resolve_api_key(&self, secret: &str) -> StoreResult<Option<Scope>> {
        let row = sqlx::query(
            "SELECT k.id AS key_id, w.organization_id, w.id AS workspace_id, k.kind, k.environment_id FROM api_keys k \
             JOIN workspaces w ON w.id = k.workspace_id \
             WHERE k.key_hash = $1 AND k.revoked_at_ms IS NULL AND w.archived_at_ms IS NULL",
        )
        .bind(hash_secret(secret))
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(Scope {
                key_id: row.try_get("key_id")?,
                organization_id: row.try_get("organization_id")?,
                workspace_id: row.try_get("workspace_id")?,
                kind: kind(&row)?,
            })
        })
        .transpose()
    }

    async fn list_api_keys(&self, workspace_id: Option<&str>) -> StoreResult<Vec<ApiKeyInfo>> {
        let rows = sqlx::query(
            "SELECT id, workspace_id, name, hint, created_at_ms, revoked_at_ms, kind, environment_id FROM api_keys \
             WHERE ($1 IS NULL OR workspace_id = $1) ORDER BY id",
        )
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(api_key).collect()
    }

    async fn revoke_api_key(&self, key_id: &str) -> StoreResult<bool> {
        let result = sqlx::query("UPDATE api_keys SET revoked_at_ms = $2 WHERE id = $1 AND revoked_at_ms IS NULL")
            .bind(key_id)
            .bind(self.now())
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() == 1)
    }
}
