//! `/v1/ext/sandbox-execution-policies*` and `/v1/ext/environments/{id}/sandbox-execution-policy`
//! (docs/api/sandbox-policies.md): parse, call `domain::sandbox_policies`, render. Errors
//! are the managed envelope; binding a disabled version is 422.

use agentd_proto::Code;
use agentd_schema::ids::EnvironmentId;
use agentd_schema::live::rfc3339;
use agentd_schema::{SandboxPolicyBindingRow, SandboxPolicyVersionRow};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::body::{self, kind};
use super::query::Query;
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::error::DomainError;
use crate::domain::sandbox_policies::{self as policies, DISABLED, MAX_PAGE};
use crate::error::{ApiError, ApiResult};

const DEFAULT_PAGE: i64 = 20;

fn render(row: &SandboxPolicyVersionRow) -> Value {
    json!({
        "type": "sandbox_execution_policy",
        "id": row.policy_id,
        "version": row.version,
        "config": row.config,
        "provisioning": row.provisioning,
        "idle_retention": row.idle_retention,
        "disabled": row.disabled,
        "preset": policies::is_preset(&row.policy_id),
        "created_at": rfc3339(row.created_at_ms),
    })
}

fn render_binding(row: &SandboxPolicyBindingRow, provisioning: &str) -> Value {
    json!({
        "type": "sandbox_execution_policy_binding",
        "environment_id": row.environment_id,
        "policy_id": row.policy_id,
        "version": row.version,
        "provisioning": provisioning,
        "bound_at": rfc3339(row.bound_at_ms),
    })
}

/// A required integer field.
fn int(map: &Map<String, Value>, key: &str, min: i64) -> ApiResult<i64> {
    match map.get(key) {
        Some(Value::Number(n)) if n.as_i64().is_some_and(|v| v >= min) => Ok(n.as_i64().unwrap_or(min)),
        Some(Value::Number(n)) => {
            Err(ApiError::invalid(format!("{key}: expected an integer of at least {min}, got {n}")))
        }
        Some(other) => Err(ApiError::invalid(format!("{key}: expected an integer, got {}", kind(other)))),
        None => Err(ApiError::invalid(format!("{key}: required"))),
    }
}

/// `POST /v1/ext/sandbox-execution-policies`: `{id, config, provisioning?, idle_retention?, disabled?}` → 201, version 1.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let map = body::object(&bytes)?;
    let id = body::string(map.get("id"), "id", 1, 64)?;
    let content = policies::content(&map, "id")?;
    let row = policies::create(state.backends.store.as_ref(), &tenant.workspace_id, &id, content).await?;
    Ok((StatusCode::CREATED, Json(render(&row))))
}

/// `GET /v1/ext/sandbox-execution-policies`: the current version of each policy by id,
/// the presets first; `limit`, `after_id`.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, MAX_PAGE)?.unwrap_or(DEFAULT_PAGE);
    let after = query.string("after_id");
    let (page, has_more) = policies::list(state.backends.store.as_ref(), &tenant.workspace_id, after, limit).await?;
    let last = page.last().map(|row| row.policy_id.clone());
    Ok(Json(json!({
        "data": page.iter().map(render).collect::<Vec<_>>(),
        "has_more": has_more,
        "last_id": last,
    })))
}

/// `GET /v1/ext/sandbox-execution-policies/{sandbox_policy_id}`: the current version.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let row = policies::get(state.backends.store.as_ref(), &tenant.workspace_id, &id, None).await?;
    Ok(Json(render(&row)))
}

/// `POST /v1/ext/sandbox-execution-policies/{sandbox_policy_id}/versions`:
/// `{expected_current, config, …}` → the new version (409 when `expected_current` is stale).
pub async fn add_version(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    let expected = int(&map, "expected_current", 1)?;
    let content = policies::content(&map, "expected_current")?;
    let store = state.backends.store.as_ref();
    let row = policies::add_version(store, &tenant.workspace_id, &id, expected, content).await?;
    Ok(Json(render(&row)))
}

/// `GET /v1/ext/sandbox-execution-policies/{sandbox_policy_id}/versions/{version}`: the
/// exact version, unchanged forever.
pub async fn retrieve_version(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, version)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let version: i64 = version
        .parse()
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| ApiError::NotFound(format!("sandbox execution policy {id} has no version {version}")))?;
    let row = policies::get(state.backends.store.as_ref(), &tenant.workspace_id, &id, Some(version)).await?;
    Ok(Json(render(&row)))
}

/// `GET /v1/ext/environments/{environment_id}/sandbox-execution-policy`: the binding, or
/// for an unbound environment the same shape with `policy_id` and `version` `null` (a
/// 404 says the environment is missing, never that it is unbound).
pub async fn binding(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(environment): Path<EnvironmentId>,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    Ok(Json(match policies::binding(store, &tenant.workspace_id, &environment).await? {
        Some((row, provisioning)) => render_binding(&row, &provisioning),
        None => json!({
            "type": "sandbox_execution_policy_binding",
            "environment_id": environment,
            "policy_id": null,
            "version": null,
            "provisioning": null,
            "bound_at": null,
        }),
    }))
}

/// `POST /v1/ext/environments/{environment_id}/sandbox-execution-policy`:
/// `{policy_id, version}` pins that exact version for the environment's next sessions.
pub async fn bind(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(environment): Path<EnvironmentId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["policy_id", "version"], "")?;
    let policy = body::string(map.get("policy_id"), "policy_id", 1, 64)?;
    let version = int(&map, "version", 1)?;
    let store = state.backends.store.as_ref();
    let row = match policies::bind(store, &tenant.workspace_id, &environment, &policy, version).await {
        Ok(row) => row,
        Err(DomainError::Invalid { message, code: Some(DISABLED) }) => {
            return Err(ApiError::Coded { status: Code::Unprocessable, message, error_code: DISABLED });
        }
        Err(error) => return Err(error.into()),
    };
    let bound = policies::get(store, &tenant.workspace_id, &policy, Some(version)).await?;
    Ok(Json(render_binding(&row, &bound.provisioning)))
}
