//! Sandbox execution policies (`sandbox_policy_versions`, `sandbox_policy_bindings`,
//! migration 0029).

use async_trait::async_trait;
use serde_json::Value;
use sqlx::FromRow;

use super::{Flag, JsonText, SqlStore};
use crate::error::{StoreError, StoreResult};
use crate::store::{NewSandboxPolicyVersion, SandboxPolicyBindingRow, SandboxPolicyStore, SandboxPolicyVersionRow};

const VERSION_COLUMNS: &str =
    "workspace_id, policy_id, version, config, provisioning, idle_retention, disabled, created_at_ms";
const BINDING_COLUMNS: &str = "workspace_id, environment_id, policy_id, version, bound_at_ms";

/// A `sandbox_policy_versions` row as stored.
#[derive(Debug, FromRow)]
struct StoredVersion {
    workspace_id: String,
    policy_id: String,
    version: i64,
    #[sqlx(try_from = "String")]
    config: JsonText,
    provisioning: String,
    idle_retention: Option<String>,
    #[sqlx(try_from = "i64")]
    disabled: Flag,
    created_at_ms: i64,
}

impl TryFrom<StoredVersion> for SandboxPolicyVersionRow {
    type Error = StoreError;

    fn try_from(row: StoredVersion) -> StoreResult<Self> {
        let idle_retention = match row.idle_retention {
            Some(text) => JsonText::try_from(text)?.0,
            None => Value::Null,
        };
        Ok(SandboxPolicyVersionRow {
            workspace_id: row.workspace_id,
            policy_id: row.policy_id,
            version: row.version,
            config: row.config.0,
            provisioning: row.provisioning,
            idle_retention,
            disabled: row.disabled.0,
            created_at_ms: row.created_at_ms,
        })
    }
}

/// A `sandbox_policy_bindings` row as stored.
#[derive(Debug, FromRow)]
struct StoredBinding {
    workspace_id: String,
    environment_id: String,
    policy_id: String,
    version: i64,
    bound_at_ms: i64,
}

impl From<StoredBinding> for SandboxPolicyBindingRow {
    fn from(row: StoredBinding) -> Self {
        SandboxPolicyBindingRow {
            workspace_id: row.workspace_id,
            environment_id: row.environment_id,
            policy_id: row.policy_id,
            version: row.version,
            bound_at_ms: row.bound_at_ms,
        }
    }
}

impl SqlStore {
    /// Inserts one version; a version already written (by a racing writer too) is a
    /// `Conflict` naming `what`.
    async fn insert_policy_version(
        &self,
        new: &NewSandboxPolicyVersion,
        version: i64,
        conflict: impl FnOnce() -> String,
    ) -> StoreResult<SandboxPolicyVersionRow> {
        let sql =
            include_str!("../../queries/sandbox_policies/insert_version.sql").replace("{columns}", VERSION_COLUMNS);
        let idle_retention = (!new.idle_retention.is_null()).then(|| new.idle_retention.to_string());
        let inserted: Result<StoredVersion, sqlx::Error> = sqlx::query_as(&sql)
            .bind(&new.workspace_id)
            .bind(&new.policy_id)
            .bind(version)
            .bind(new.config.to_string())
            .bind(&new.provisioning)
            .bind(idle_retention)
            .bind(i64::from(new.disabled))
            .bind(self.now())
            .fetch_one(&self.primary)
            .await;
        match inserted {
            Ok(row) => row.try_into(),
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => Err(StoreError::Conflict(conflict())),
            Err(error) => Err(error.into()),
        }
    }
}

#[async_trait]
impl SandboxPolicyStore for SqlStore {
    async fn create_sandbox_policy(&self, new: NewSandboxPolicyVersion) -> StoreResult<SandboxPolicyVersionRow> {
        let id = new.policy_id.clone();
        self.insert_policy_version(&new, 1, || format!("sandbox execution policy {id} already exists")).await
    }

    async fn add_sandbox_policy_version(
        &self,
        new: NewSandboxPolicyVersion,
        expected_current: i64,
    ) -> StoreResult<SandboxPolicyVersionRow> {
        let current = self
            .get_sandbox_policy(&new.workspace_id, &new.policy_id, None)
            .await?
            .ok_or_else(|| StoreError::NotFound { what: "sandbox execution policy", id: new.policy_id.clone() })?;
        let stale = |current: i64| {
            format!("sandbox execution policy's current version is {current}, not expected_current {expected_current}")
        };
        if current.version != expected_current {
            return Err(StoreError::Conflict(stale(current.version)));
        }
        // Another writer may take `expected_current + 1` between the read and the insert:
        // the primary key refuses the second, so the current version really was the
        // expected one for the write that lands.
        self.insert_policy_version(&new, expected_current + 1, || stale(expected_current + 1)).await
    }

    async fn get_sandbox_policy(
        &self,
        workspace_id: &str,
        policy_id: &str,
        version: Option<i64>,
    ) -> StoreResult<Option<SandboxPolicyVersionRow>> {
        let row: Option<StoredVersion> = match version {
            Some(version) => {
                sqlx::query_as(&format!(
                    "SELECT {VERSION_COLUMNS} FROM sandbox_policy_versions \
                     WHERE workspace_id = $1 AND policy_id = $2 AND version = $3"
                ))
                .bind(workspace_id)
                .bind(policy_id)
                .bind(version)
                .fetch_optional(&self.readers)
                .await?
            }
            None => {
                sqlx::query_as(&format!(
                    "SELECT {VERSION_COLUMNS} FROM sandbox_policy_versions \
                     WHERE workspace_id = $1 AND policy_id = $2 ORDER BY version DESC LIMIT 1"
                ))
                .bind(workspace_id)
                .bind(policy_id)
                .fetch_optional(&self.readers)
                .await?
            }
        };
        row.map(TryInto::try_into).transpose()
    }

    async fn list_sandbox_policies(
        &self,
        workspace_id: &str,
        after_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<SandboxPolicyVersionRow>> {
        let columns = VERSION_COLUMNS.split(", ").map(|c| format!("v.{c}")).collect::<Vec<_>>().join(", ");
        let sql = include_str!("../../queries/sandbox_policies/current_versions.sql").replace("{columns}", &columns);
        let rows: Vec<StoredVersion> = sqlx::query_as(&sql)
            .bind(workspace_id)
            .bind(after_id.unwrap_or_default())
            .bind(limit)
            .fetch_all(&self.readers)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn bind_sandbox_policy(
        &self,
        workspace_id: &str,
        environment_id: &str,
        policy_id: &str,
        version: i64,
    ) -> StoreResult<SandboxPolicyBindingRow> {
        let row: StoredBinding = sqlx::query_as(include_str!("../../queries/sandbox_policies/bind.sql"))
            .bind(workspace_id)
            .bind(environment_id)
            .bind(policy_id)
            .bind(version)
            .bind(self.now())
            .fetch_one(&self.primary)
            .await?;
        Ok(row.into())
    }

    async fn sandbox_policy_binding(
        &self,
        workspace_id: &str,
        environment_id: &str,
    ) -> StoreResult<Option<SandboxPolicyBindingRow>> {
        let row: Option<StoredBinding> = sqlx::query_as(&format!(
            "SELECT {BINDING_COLUMNS} FROM sandbox_policy_bindings WHERE workspace_id = $1 AND environment_id = $2"
        ))
        .bind(workspace_id)
        .bind(environment_id)
        .fetch_optional(&self.readers)
        .await?;
        Ok(row.map(Into::into))
    }
}
