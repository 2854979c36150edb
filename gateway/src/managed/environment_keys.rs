//! `/v1/ext/environments/{environment_id}/keys`: environment keys over the API, for
//! operators who do not run `agentd keys`. Only an API key of the workspace may manage
//! them; a new key's secret is in the create response and never again.

use agentd_schema::ids::{ApiKeyId, EnvironmentId};
use agentd_schema::{ApiKeyInfo, KeyKind};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::body;
use super::family::Family;
use super::query::rfc3339;
use crate::AppState;
use crate::admission::Tenant;
use crate::error::{ApiError, ApiResult};

const ENVIRONMENTS: Family = Family { kind: "environment", noun: "environment", max_page: 100 };

fn render(key: &ApiKeyInfo, environment_id: &str) -> Value {
    json!({
        "type": "environment_key",
        "id": key.id,
        "environment_id": environment_id,
        "name": key.name,
        "hint": key.hint,
        "created_at": rfc3339(key.created_at_ms),
        "revoked_at": key.revoked_at_ms.map(rfc3339),
    })
}

async fn environment(state: &AppState, tenant: &Tenant, environment_id: &str) -> ApiResult<()> {
    ENVIRONMENTS.load(state.backends.store.as_ref(), tenant, environment_id, None).await.map(drop)
}

async fn keys_of(state: &AppState, tenant: &Tenant, environment_id: &str) -> ApiResult<Vec<ApiKeyInfo>> {
    let keys = state.backends.store.list_api_keys(Some(&tenant.workspace_id)).await?;
    Ok(keys.into_iter().filter(|k| k.kind == KeyKind::Environment(environment_id.to_owned())).collect())
}

/// `POST …/keys` with an optional `{"name": …}`: the answer carries `secret` once.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(environment_id): Path<EnvironmentId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["name"], "body")?;
    let name = body::optional_string(map.get("name"), "name", 64)?.unwrap_or_else(|| "api".to_owned());
    environment(&state, &tenant, &environment_id).await?;
    let secret = agentd_schema::ids::new_secret("sk-agentd-env");
    let kind = KeyKind::Environment(environment_id.to_string());
    let key = state.backends.store.insert_api_key(&tenant.workspace_id, &name, &secret, &kind).await?;
    let mut out = render(&key, &environment_id);
    out["secret"] = json!(secret);
    Ok(Json(out))
}

/// `GET …/keys`: never with secrets.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(environment_id): Path<EnvironmentId>,
) -> ApiResult<Json<Value>> {
    environment(&state, &tenant, &environment_id).await?;
    let keys = keys_of(&state, &tenant, &environment_id).await?;
    Ok(Json(json!({ "data": keys.iter().map(|k| render(k, &environment_id)).collect::<Vec<_>>(), "next_page": null })))
}

/// `POST …/keys/{key_id}/revoke`: the key stops authenticating within the key cache TTL.
pub async fn revoke(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((environment_id, key_id)): Path<(EnvironmentId, ApiKeyId)>,
) -> ApiResult<Json<Value>> {
    environment(&state, &tenant, &environment_id).await?;
    let Some(key) = keys_of(&state, &tenant, &environment_id).await?.into_iter().find(|k| k.id == key_id) else {
        return Err(ApiError::NotFound(format!("environment key not found: {key_id}")));
    };
    if key.revoked_at_ms.is_some() || !state.backends.store.revoke_api_key(&key_id).await? {
        return Err(ApiError::Conflict(format!("environment key {key_id} is already revoked")));
    }
    let revoked = keys_of(&state, &tenant, &environment_id).await?.into_iter().find(|k| k.id == key_id);
    Ok(Json(render(revoked.as_ref().unwrap_or(&key), &environment_id)))
}
