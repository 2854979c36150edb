//! Agents: create, retrieve (latest or `version=n`), update with an optimistic
//! `version` precondition, list, archive, versions, and the `disable` extension.
//!
//! The stored body is the rendered agent; every change is a new immutable version.

use agentd_schema::ids::AgentId;
use agentd_schema::{Resource, Store};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::agent_config::{CONFIG_FIELDS, normalize_in};
use super::body;
use super::family::{Family, with_lifecycle};
use super::query::{ChunkedPage, Query, decode_cursor, now_ms, rfc3339};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::{agents, multiagent};
use crate::error::{ApiError, ApiResult};

/// The wire agent of the latest version, with lifecycle fields from the row.
const FAMILY: Family = Family { kind: agents::KIND, noun: "agent", max_page: 100 };

/// The wire agent: the stored body with its lifecycle fields and version, `self` in its
/// `multiagent` roster rendered as the agent itself.
pub(crate) fn render(resource: &Resource) -> Value {
    let mut agent = with_lifecycle(resource);
    agent["version"] = json!(resource.version);
    multiagent::render(&mut agent);
    agent
}

/// A stored version of an agent on the wire.
fn render_version(mut body: Value) -> Value {
    multiagent::render(&mut body);
    body
}

async fn load(store: &dyn Store, tenant: &Tenant, id: &str) -> ApiResult<Resource> {
    FAMILY.load(store, tenant, id, None).await
}

/// `POST /v1/agents`.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, CONFIG_FIELDS, "")?;
    let config = normalize_in(&request, &*state.catalogs.of(&tenant.workspace_id)?)?;
    let id = agentd_schema::ids::new_id("agent");
    let resource = agents::create(state.backends.store.as_ref(), &tenant.workspace_id, id, config).await?;
    Ok(Json(render(&resource)))
}

/// `GET /v1/agents/{agent_id}`, optionally `?version=n`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<AgentId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let resource = load(state.backends.store.as_ref(), &tenant, &id).await?;
    match query.int("version", 1, i64::MAX)? {
        None => Ok(Json(render(&resource))),
        Some(version) => state
            .backends
            .store
            .get_resource_version(&id, version)
            .await?
            .map(|body| Json(render_version(body)))
            .ok_or_else(|| ApiError::NotFound(format!("agent {id} has no version {version}"))),
    }
}

/// `POST /v1/agents/{agent_id}`: tri-state update (absent keeps, `null` clears,
/// a value replaces; metadata is a patch).
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<AgentId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    let mut allowed = CONFIG_FIELDS.to_vec();
    allowed.push("version");
    body::only_known(&request, &allowed, "")?;
    let expected = match request.get("version") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_i64().is_some_and(|v| v >= 1) => n.as_i64(),
        Some(other) => return Err(ApiError::invalid(format!("version: expected an integer ≥ 1, got {other}"))),
    };
    let store = state.backends.store.as_ref();
    let current = load(store, &tenant, &id).await?;
    agents::check_updatable(&current, expected)?;
    let mut config: Map<String, Value> =
        CONFIG_FIELDS.iter().filter_map(|f| current.body.get(*f).map(|v| ((*f).to_owned(), v.clone()))).collect();
    for (field, value) in &request {
        match (field.as_str(), value) {
            ("version", _) => {}
            ("name" | "model", Value::Null) => return Err(ApiError::invalid(format!("{field}: cannot be cleared"))),
            ("metadata", patch) => {
                let merged =
                    body::patch_metadata(current.body.get("metadata").unwrap_or(&Value::Null), patch, "metadata")?;
                config.insert("metadata".into(), merged);
            }
            // A `multiagent_20261001` onto a stored one merges level by level.
            ("multiagent", value) => {
                config.insert("multiagent".into(), multiagent::merge(current.body.get("multiagent"), value));
            }
            (_, value) => {
                config.insert(field.clone(), value.clone());
            }
        }
    }
    let config = normalize_in(&config, &*state.catalogs.of(&tenant.workspace_id)?)?;
    let skills_set = request.contains_key("skills");
    let updated = agents::update(store, &tenant.workspace_id, &current, config, skills_set).await?;
    Ok(Json(render(&updated)))
}

/// `GET /v1/agents`: newest first, cursor pages.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    Ok(Json(FAMILY.page(state.backends.store.as_ref(), &tenant, &uri, None, true, render).await?))
}

/// `POST /v1/agents/{agent_id}/archive`.
pub async fn archive(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<AgentId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&FAMILY.archive(state.backends.store.as_ref(), &tenant, &id, None).await?)))
}

/// `POST /v1/agents/{agent_id}/disable` (service extension): the agent stays
/// readable but cannot start new sessions. Body: empty or `{}`. Response: the agent,
/// with `disabled_at` set, at a new version. Idempotent.
pub async fn disable(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<AgentId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    body::only_known(&body::object(&bytes)?, &[], "")?;
    let store = state.backends.store.as_ref();
    let current = load(store, &tenant, &id).await?;
    if current.body.get("disabled_at").is_some_and(|v| !v.is_null()) {
        return Ok(Json(render(&current)));
    }
    let mut agent = current.body.as_object().cloned().unwrap_or_default();
    agent.insert("disabled_at".into(), json!(rfc3339(now_ms())));
    let updated = agents::save(store, &tenant.workspace_id, &current, agent).await?;
    Ok(Json(render(&updated)))
}

/// `GET /v1/agents/{agent_id}/versions`: every version, newest first.
pub async fn versions(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<AgentId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, 100)?.unwrap_or(20);
    let after = query.string("page").map(decode_cursor).transpose()?;
    if after.as_deref().is_some_and(|cursor| cursor.parse::<i64>().is_err()) {
        return Err(ApiError::invalid("page: invalid or expired cursor"));
    }
    let store = state.backends.store.as_ref();
    load(store, &tenant, &id).await?;
    // Versions are up to 1 MiB each: a few rows at a time.
    let mut page = ChunkedPage::new(after, limit, 8);
    while let Some((after, n)) = page.next_fetch() {
        let after = after.and_then(|version| version.parse::<i64>().ok());
        let rows = store.list_resource_versions(&id, after, n, true).await?;
        page.take(&rows, |(version, _)| version.to_string(), |(_, body)| render_version(body.clone()));
    }
    Ok(Json(page.finish()))
}
