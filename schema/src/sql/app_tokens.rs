//! Application access tokens (`application_access_tokens`, migration 0021).

use async_trait::async_trait;
use serde_json::{Value, json};
use sqlx::FromRow;

use super::{JsonText, SqlStore};
use crate::error::{StoreError, StoreResult};
use crate::store::{AppTokenRow, AppTokenStore, NewAppToken, ThreadBinding};

const COLUMNS: &str = "id, workspace_id, organization_id, authority_id, application_scope, actor_key, protocols, operations, \
                       thread_bindings, created_at_ms, expires_at_ms";

/// An `application_access_tokens` row as stored.
#[derive(Debug, FromRow)]
struct Row {
    id: String,
    workspace_id: String,
    organization_id: String,
    authority_id: String,
    application_scope: String,
    actor_key: Option<String>,
    #[sqlx(try_from = "String")]
    protocols: JsonText,
    #[sqlx(try_from = "String")]
    operations: JsonText,
    #[sqlx(try_from = "String")]
    thread_bindings: JsonText,
    created_at_ms: i64,
    expires_at_ms: i64,
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
}

impl TryFrom<Row> for AppTokenRow {
    type Error = StoreError;

    fn try_from(row: Row) -> StoreResult<Self> {
        let mut thread_bindings = Vec::new();
        for binding in row.thread_bindings.0.as_array().into_iter().flatten() {
            match (binding["external_thread_id"].as_str(), binding["managed_session_id"].as_str()) {
                (Some(thread), Some(session)) => thread_bindings.push(ThreadBinding {
                    external_thread_id: thread.to_owned(),
                    managed_session_id: session.to_owned(),
                }),
                _ => return Err(StoreError::Backend(format!("token {}: corrupt thread_bindings", row.id))),
            }
        }
        Ok(AppTokenRow {
            protocols: strings(&row.protocols.0),
            operations: strings(&row.operations.0),
            thread_bindings,
            id: row.id,
            workspace_id: row.workspace_id,
            organization_id: row.organization_id,
            authority_id: row.authority_id,
            application_scope: row.application_scope,
            actor_key: row.actor_key,
            created_at_ms: row.created_at_ms,
            expires_at_ms: row.expires_at_ms,
        })
    }
}

#[async_trait]
impl AppTokenStore for SqlStore {
    async fn insert_app_token(&self, new: NewAppToken) -> StoreResult<AppTokenRow> {
        let r = &new.row;
        let bindings: Vec<Value> = r
            .thread_bindings
            .iter()
            .map(|b| json!({ "external_thread_id": b.external_thread_id, "managed_session_id": b.managed_session_id }))
            .collect();
        let row: Row = sqlx::query_as(&format!(
            "INSERT INTO application_access_tokens (id, workspace_id, organization_id, token_sha256, \
             authority_id, application_scope, actor_key, protocols, operations, thread_bindings, created_at_ms, \
             expires_at_ms, issued_by_key_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
             RETURNING {COLUMNS}"
        ))
        .bind(&r.id)
        .bind(&r.workspace_id)
        .bind(&r.organization_id)
        .bind(&new.token_sha256)
        .bind(&r.authority_id)
        .bind(&r.application_scope)
        .bind(r.actor_key.clone())
        .bind(json!(r.protocols).to_string())
        .bind(json!(r.operations).to_string())
        .bind(Value::Array(bindings).to_string())
        .bind(r.created_at_ms)
        .bind(r.expires_at_ms)
        .bind(&new.issued_by_key_id)
        .fetch_one(&self.primary)
        .await?;
        row.try_into()
    }

    async fn resolve_app_token(&self, token_sha256: &str, now_ms: i64) -> StoreResult<Option<AppTokenRow>> {
        let row: Option<Row> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM application_access_tokens t WHERE token_sha256 = $1 AND expires_at_ms > $2 \
             AND (issued_by_key_id IS NULL OR EXISTS \
                  (SELECT 1 FROM api_keys k WHERE k.id = t.issued_by_key_id AND k.revoked_at_ms IS NULL))"
        ))
        .bind(token_sha256)
        .bind(now_ms)
        .fetch_optional(&self.readers)
        .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn delete_app_token(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM application_access_tokens WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .execute(&self.primary)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn purge_app_tokens(&self, before_ms: i64) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM application_access_tokens WHERE expires_at_ms < $1")
            .bind(before_ms)
            .execute(&self.primary)
            .await?;
        Ok(done.rows_affected())
    }
}
