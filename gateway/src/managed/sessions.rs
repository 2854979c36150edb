//! Sessions: create (snapshotting the agent), retrieve, update (emitting
//! `session.updated` with only what changed), list with bidirectional pages, archive
//! and delete (which ends open streams with `session.deleted`).

use std::collections::HashMap;
use std::sync::Arc;

use agentd_schema::capture;
use agentd_schema::ids::{SessionId, UserProfileId};
use agentd_schema::{NewEvent, Session, SessionQuery, Store, TimeBounds};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{Uri, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::agent_config::{self, normalize_in};
use super::body::{self, as_object, join, tag};
use super::content;
use super::limits::{
    MAX_CHECKOUT_BYTES, MAX_EVENTS_PER_REQUEST, MAX_ID_CHARS, MAX_INSTRUCTIONS_CHARS, MAX_LIST_PAGE_BYTES,
    MAX_MOUNT_PATH_CHARS, MAX_SESSION_RESOURCES, MAX_TITLE_CHARS, MAX_TOKEN_CHARS, MAX_URL_CHARS, MAX_VAULT_IDS,
};
use super::query::{Query, decode_cursor, encode_cursor, now_ms, rfc3339};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::memory_mounts;
use crate::domain::sessions::{self as domain, AgentRef, CreateSession};
use crate::error::{ApiError, ApiResult};

const CREATE_FIELDS: &[&str] = &[
    "agent",
    "environment_id",
    "budget",
    "initial_events",
    "metadata",
    "resources",
    "title",
    "vault_ids",
    "user_profile_id",
    "content_capture",
];
const UPDATE_FIELDS: &[&str] = &["agent", "budget", "metadata", "title", "vault_ids"];

/// The wire session: the stored body plus the projections kept by the store.
pub fn render(session: &Session) -> Value {
    let mut out = session.body.clone();
    // Internal fields (the price snapshot) are stored with a leading underscore.
    if let Some(map) = out.as_object_mut() {
        map.retain(|key, _| !key.starts_with('_'));
    }
    out["status"] = json!(session.status);
    out["usage"] = session.usage.clone();
    // The usage spent on each model other than the session's (ADR 0022 §7) is the store's.
    if let Some(usage) = out["usage"].as_object_mut() {
        usage.remove(agentd_schema::events::MODELS_KEY);
    }
    let standing = agentd_schema::budget::Standing::of(&session.body, &session.usage);
    if standing.spent_units.is_some() {
        out["usage"]["list_cost"] = standing.list_cost();
    }
    out["updated_at"] = json!(rfc3339(session.updated_at_ms));
    out["archived_at"] = json!(session.archived_at_ms.map(rfc3339));
    let now = now_ms();
    let duration = (now - session.created_at_ms).max(0) as f64 / 1000.0;
    out["stats"] = json!({ "duration_seconds": duration, "active_seconds": session.active_seconds(now) });
    out
}

/// Loads a session of the caller's workspace or answers 404.
pub async fn load(store: &dyn Store, tenant: &Tenant, id: &str) -> ApiResult<Session> {
    store
        .get_session(&tenant.workspace_id, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("session not found: {id}")))
}

/// The `agent` of a create request: an id, or `{type, id, version?, overrides…}`.
fn agent_ref(value: Option<&Value>) -> ApiResult<AgentRef> {
    match value {
        Some(Value::String(id)) => Ok(AgentRef { id: id.clone(), ..AgentRef::default() }),
        Some(Value::Object(map)) => {
            let kind = tag(map, "agent")?;
            let allowed: &[&str] = match kind {
                "agent" => &["type", "id", "version"],
                "agent_with_overrides" => {
                    &["type", "id", "version", "model", "system", "tools", "mcp_servers", "skills"]
                }
                other => {
                    return Err(ApiError::invalid(format!(
                        "agent.type: must be agent or agent_with_overrides, got {other:?}"
                    )));
                }
            };
            body::only_known(map, allowed, "agent")?;
            let version = match map.get("version") {
                None | Some(Value::Null) => None,
                Some(Value::Number(n)) if n.as_i64().is_some_and(|v| v >= 1) => n.as_i64(),
                Some(other) => {
                    return Err(ApiError::invalid(format!("agent.version: expected an integer ≥ 1, got {other}")));
                }
            };
            let overrides: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| !["type", "id", "version"].contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Ok(AgentRef { id: body::string(map.get("id"), "agent.id", 1, MAX_ID_CHARS)?, version, overrides })
        }
        None | Some(Value::Null) => Err(ApiError::invalid("agent: required")),
        Some(other) => Err(ApiError::invalid(format!("agent: expected a string or object, got {}", body::kind(other)))),
    }
}

/// `budget`: `{"type":"limit","max_list_cost":{"amount":"<canonical positive integer>","currency":"USD"}}`.
pub(super) fn budget_shape(value: &Value) -> ApiResult<Value> {
    let map = as_object(value, "budget")?;
    body::only_known(map, &["type", "max_list_cost"], "budget")?;
    if tag(map, "budget")? != "limit" {
        return Err(ApiError::invalid("budget.type: must be \"limit\""));
    }
    let cost = as_object(map.get("max_list_cost").unwrap_or(&Value::Null), "budget.max_list_cost")?;
    body::only_known(cost, &["amount", "currency"], "budget.max_list_cost")?;
    let amount = body::string(cost.get("amount"), "budget.max_list_cost.amount", 1, 30)?;
    let canonical = amount.chars().all(|c| c.is_ascii_digit()) && !amount.starts_with('0');
    if !canonical {
        return Err(ApiError::invalid(format!(
            "budget.max_list_cost.amount: must be a positive integer string in minor units with no leading zeros, got {amount:?}"
        )));
    }
    let currency = body::string(cost.get("currency"), "budget.max_list_cost.currency", 1, 8)?;
    if currency != "USD" {
        return Err(ApiError::invalid(format!(
            "budget.max_list_cost.currency: only USD is supported, got {currency:?}"
        )));
    }
    Ok(json!({ "type": "limit", "max_list_cost": { "amount": amount, "currency": "USD" } }))
}

pub(super) fn resources(value: Option<&Value>, secrets: &agentd_schema::secrets::SecretBox) -> ApiResult<Value> {
    resources_at_most(value, secrets, MAX_SESSION_RESOURCES)
}

/// [`resources`] with another bound on their number (a deployment's: up to 500).
pub(super) fn resources_at_most(
    value: Option<&Value>,
    secrets: &agentd_schema::secrets::SecretBox,
    max: usize,
) -> ApiResult<Value> {
    let now = rfc3339(now_ms());
    let mut out = Vec::new();
    for (i, item) in body::array(value, "resources", max)?.iter().enumerate() {
        let path = format!("resources[{i}]");
        let map = as_object(item, &path)?;
        let id = agentd_schema::ids::new_id("sres");
        let resource = match tag(map, &path)? {
            "file" => {
                body::only_known(map, &["type", "file_id", "mount_path"], &path)?;
                let file_id = body::string(map.get("file_id"), &join(&path, "file_id"), 1, MAX_ID_CHARS)?;
                let mount =
                    body::optional_string(map.get("mount_path"), &join(&path, "mount_path"), MAX_MOUNT_PATH_CHARS)?
                        .unwrap_or_else(|| format!("/mnt/session/uploads/{file_id}"));
                let mount = crate::domain::files::mount_path(&mount)
                    .map_err(|why| ApiError::invalid(format!("{}: {why}", join(&path, "mount_path"))))?;
                json!({ "type": "file", "id": id, "file_id": file_id, "mount_path": mount, "created_at": now, "updated_at": now })
            }
            "github_repository" => {
                body::only_known(map, &["type", "url", "authorization_token", "checkout", "mount_path"], &path)?;
                let url = body::string(map.get("url"), &join(&path, "url"), 1, MAX_URL_CHARS)?;
                let repo =
                    url.trim_end_matches('/').trim_end_matches(".git").rsplit('/').next().unwrap_or("repo").to_owned();
                let mount =
                    body::optional_string(map.get("mount_path"), &join(&path, "mount_path"), MAX_MOUNT_PATH_CHARS)?
                        .unwrap_or_else(|| format!("/workspace/{repo}"));
                let mut resource = json!({
                    "type": "github_repository", "id": id, "url": url, "mount_path": mount,
                    "checkout": body::bounded_json(map.get("checkout").unwrap_or(&Value::Null), &join(&path, "checkout"), MAX_CHECKOUT_BYTES)?, "created_at": now, "updated_at": now,
                });
                // Write-only: sealed, never rendered (see `render_resources`).
                if let Some(token) = body::optional_string(
                    map.get("authorization_token"),
                    &join(&path, "authorization_token"),
                    MAX_TOKEN_CHARS,
                )? {
                    resource["_sealed"] = json!(secrets.seal(&id, &json!({ "authorization_token": token })));
                }
                resource
            }
            "memory_store" => {
                body::only_known(map, &["type", "memory_store_id", "access", "instructions"], &path)?;
                let store_id =
                    body::string(map.get("memory_store_id"), &join(&path, "memory_store_id"), 1, MAX_ID_CHARS)?;
                let access = memory_mounts::Access::parse(map.get("access"))
                    .map_err(|why| ApiError::invalid(format!("{}: {why}", join(&path, "access"))))?;
                // The store's name, description and mount path are snapshotted by
                // `domain::memory_mounts::attach` when the resources are written.
                json!({
                    "type": "memory_store", "memory_store_id": store_id, "access": access.as_str(),
                    "instructions": body::optional_string(map.get("instructions"), &join(&path, "instructions"), MAX_INSTRUCTIONS_CHARS)?,
                })
            }
            other => {
                return Err(ApiError::invalid(format!(
                    "{path}.type: must be file, github_repository or memory_store, got {other:?}"
                )));
            }
        };
        out.push(resource);
    }
    Ok(Value::Array(out))
}

/// A content capture level (`off`, `structured`, `full`), or `None` when absent or null.
pub(super) fn capture_level(value: Option<&Value>, field: &str) -> ApiResult<Option<capture::Level>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(level)) => capture::Level::parse(level).map(Some).ok_or_else(|| {
            ApiError::invalid(format!("{field}: must be \"off\", \"structured\" or \"full\", got {level:?}"))
        }),
        Some(_) => Err(ApiError::invalid(format!("{field}: expected a string"))),
    }
}

/// Removes sealed fields from a session's resources before rendering.
pub(super) fn without_secrets(mut body: Value) -> Value {
    if let Some(resources) = body["resources"].as_array_mut() {
        for resource in resources {
            if let Some(map) = resource.as_object_mut() {
                map.remove("_sealed");
            }
        }
    }
    body
}

/// `POST /v1/sessions`: the wire body parsed into a typed request for the session service.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, CREATE_FIELDS, "")?;
    let agent = agent_ref(request.get("agent"))?;
    let environment_id = body::string(request.get("environment_id"), "environment_id", 1, MAX_ID_CHARS)?;
    let mut vault_ids = Vec::new();
    for (i, id) in body::array(request.get("vault_ids"), "vault_ids", MAX_VAULT_IDS)?.iter().enumerate() {
        let id = id.as_str().ok_or_else(|| ApiError::invalid(format!("vault_ids[{i}]: expected a string")))?;
        vault_ids.push(id.to_owned());
    }
    let budget = match request.get("budget") {
        None | Some(Value::Null) => None,
        Some(value) => Some(budget_shape(value)?),
    };
    let metadata = Value::Object(body::optional_metadata(request.get("metadata"))?);
    let mut initial_events = Vec::new();
    for (i, event) in
        body::array(request.get("initial_events"), "initial_events", MAX_EVENTS_PER_REQUEST)?.iter().enumerate()
    {
        initial_events.push(content::client_event(event, &format!("initial_events[{i}]"))?);
    }
    let create = CreateSession {
        agent,
        environment_id,
        vault_ids,
        budget,
        metadata,
        title: body::optional_string(request.get("title"), "title", MAX_TITLE_CHARS)?,
        resources: resources(request.get("resources"), &state.secrets)?,
        initial_events,
        id: None,
        deployment_id: None,
        user_profile_id: match request.get("user_profile_id") {
            None | Some(Value::Null) => None,
            Some(value) => {
                let id = body::string(Some(value), "user_profile_id", 1, MAX_ID_CHARS)?;
                Some(
                    UserProfileId::parse(&id)
                        .map_err(|_| ApiError::invalid(format!("user_profile_id: not a user profile id: {id:?}")))?,
                )
            }
        },
        content_capture: capture_level(request.get("content_capture"), "content_capture")?,
        capture_ceiling: None,
    };
    let session = domain::create(&state, &tenant, create).await?;
    Ok(Json(without_secrets(render(&session))))
}

/// `GET /v1/sessions/{session_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(without_secrets(render(&load(state.backends.store.as_ref(), &tenant, &id).await?))))
}

/// `POST /v1/sessions/{session_id}`: tri-state update; a change commits `session.updated`.
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, UPDATE_FIELDS, "")?;
    let store = state.backends.store.as_ref();
    let current = load(store, &tenant, &id).await?;
    if current.archived_at_ms.is_some() {
        return Err(ApiError::invalid(format!("session {id} is archived")));
    }
    if request.contains_key("vault_ids") {
        return Err(ApiError::invalid("vault_ids: updating vault_ids is not supported yet"));
    }
    let mut next = current.body.clone();
    let mut changed = Map::new();
    if let Some(agent) = request.get("agent") {
        let map = as_object(agent, "agent")?;
        body::only_known(map, &["tools", "mcp_servers"], "agent")?;
        if current.status == "running" {
            return Err(ApiError::invalid("agent: cannot be updated while the session is running"));
        }
        // The session's `multiagent` is its resolved snapshot, not an agent's
        // configuration: it is not checked again, only the new tools against it.
        let mut config: Map<String, Value> = agent_config::CONFIG_FIELDS
            .iter()
            .filter(|f| **f != "multiagent")
            .filter_map(|f| current.body["agent"].get(*f).map(|v| ((*f).to_owned(), v.clone())))
            .collect();
        for (key, value) in map {
            config.insert(key.clone(), value.clone());
        }
        let catalog = state.catalogs.of(&tenant.workspace_id)?;
        let resolved = normalize_in(&config, &catalog).map_err(|e| ApiError::invalid(format!("agent: {e}")))?;
        crate::domain::multiagent::check_tool_names(&resolved["tools"], &current.body["agent"]["multiagent"])
            .map_err(|e| ApiError::invalid(format!("agent.{e}")))?;
        let mut agent_next = current.body["agent"].clone();
        agent_next["tools"] = resolved["tools"].clone();
        agent_next["mcp_servers"] = resolved["mcp_servers"].clone();
        if agent_next != current.body["agent"] {
            changed.insert("agent".into(), agent_next.clone());
            next["agent"] = agent_next;
        }
    }
    if let Some(value) = request.get("budget") {
        let stored = &current.body["budget"];
        let updated = match value {
            Value::Null => Value::Null,
            value => {
                if stored.is_null() {
                    return Err(ApiError::invalid_with_code(
                        "budget_create_only",
                        "budget: a budget can only be set when the session is created",
                    ));
                }
                let updated = budget_shape(value)?;
                domain::check_budgetable(&*state.catalogs.of(&tenant.workspace_id)?, &current.body["agent"])?;
                let ceiling = agentd_schema::budget::ceiling_cents(&updated).unwrap_or(0);
                let spent = agentd_schema::budget::Standing::of(&current.body, &current.usage).spent_units.unwrap_or(0);
                if agentd_schema::budget::reached(spent, ceiling) {
                    return Err(ApiError::invalid_with_code(
                        "budget_not_raised",
                        "budget: max_list_cost must stay above the list cost already consumed",
                    ));
                }
                updated
            }
        };
        if &updated != stored {
            changed.insert("budget".into(), updated.clone());
            next["budget"] = updated;
        }
    }
    if let Some(patch) = request.get("metadata") {
        let merged = body::patch_metadata(&current.body["metadata"], patch, "metadata")?;
        if merged != current.body["metadata"] {
            if merged.as_object().is_some_and(|m| !m.is_empty()) {
                changed.insert("metadata".into(), merged.clone());
            }
            next["metadata"] = merged;
        }
    }
    if let Some(title) = request.get("title") {
        let title = json!(body::optional_string(Some(title), "title", MAX_TITLE_CHARS)?);
        if title != current.body["title"] {
            changed.insert("title".into(), title.clone());
            next["title"] = title;
        }
    }
    let metadata_cleared = next["metadata"] != current.body["metadata"] && !changed.contains_key("metadata");
    if changed.is_empty() && !metadata_cleared {
        return Ok(Json(without_secrets(render(&current))));
    }
    let events = vec![NewEvent::session_updated(&id, changed)];
    let (session, stored) = store.update_session(&tenant.workspace_id, &id, next, events).await?;
    if let Some(bus) = &state.backends.bus {
        agentd_schema::live::publish_committed(bus.as_ref(), &stored).await;
    }
    Ok(Json(without_secrets(render(&session))))
}

/// `GET /v1/sessions`: newest first by default, pages both ways, at most `limit`
/// sessions and about [`MAX_LIST_PAGE_BYTES`] of JSON per page.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Response> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, 1000)?.unwrap_or(20);
    let descending = query.descending(true)?;
    let (after_id, before_id) = match query.string("page").map(decode_cursor).transpose()? {
        None => (None, None),
        Some(cursor) => match cursor.split_once(':') {
            Some(("n", id)) => (Some(id.to_owned()), None),
            Some(("p", id)) => (None, Some(id.to_owned())),
            _ => return Err(ApiError::invalid("page: invalid or expired cursor")),
        },
    };
    let statuses: Vec<String> = query.list("statuses").into_iter().map(str::to_owned).collect();
    for status in &statuses {
        if !["idle", "running", "rescheduling", "terminated"].contains(&status.as_str()) {
            return Err(ApiError::invalid(format!("statuses[]: unknown status {status:?}")));
        }
    }
    let agent_id = query.string("agent_id").map(str::to_owned);
    let agent_version = query.int("agent_version", 1, i64::MAX)?;
    let memory_store_id = query
        .string("memory_store_id")
        .map(|id| {
            agentd_schema::ids::MemoryStoreId::parse(id)
                .map(|id| id.to_string())
                .map_err(|_| ApiError::invalid(format!("memory_store_id: {id:?} is not a memory store id")))
        })
        .transpose()?;
    let deployment_id = query
        .string("deployment_id")
        .map(|id| {
            agentd_schema::ids::DeploymentId::parse(id)
                .map(|id| id.to_string())
                .map_err(|_| ApiError::invalid(format!("deployment_id: {id:?} is not a deployment id")))
        })
        .transpose()?;
    let session_query = SessionQuery {
        deployment_id,
        statuses,
        agent_version: agent_version.filter(|_| agent_id.is_some()),
        agent_id,
        memory_store_id,
        created: TimeBounds {
            gt: query.datetime_ms("created_at[gt]")?,
            gte: query.datetime_ms("created_at[gte]")?,
            lt: query.datetime_ms("created_at[lt]")?,
            lte: query.datetime_ms("created_at[lte]")?,
        },
        include_archived: query.bool("include_archived")?.unwrap_or(false),
        after_id: after_id.clone(),
        before_id: before_id.clone(),
        limit: limit + 1,
        descending,
    };
    let mut rows = state.backends.store.list_sessions(&tenant.workspace_id, &session_query).await?;
    let store = state.backends.store.as_ref();
    let mut agents = AgentCache::default();
    let backwards = before_id.is_some();
    // Rows nearest the cursor come first in `scan`; the extra row (if any) comes last.
    let more = rows.len() as i64 > limit;
    if backwards {
        if more {
            rows.remove(0);
        }
        rows.reverse();
    } else {
        rows.truncate(limit as usize);
    }
    // The byte bound: stop once the page has passed it, the rest comes on the next page.
    let mut items = Vec::new();
    let mut bytes = 0;
    for session in &rows {
        if bytes > MAX_LIST_PAGE_BYTES {
            break;
        }
        let item = render_listed(store, &mut agents, session).await?;
        bytes += item.len() + 1;
        items.push(item);
    }
    let cut = items.len() < rows.len();
    rows.truncate(items.len());
    let (next_page, prev_page);
    if backwards {
        rows.reverse();
        items.reverse();
        // Paging backwards: rows after this page exist (we came from there).
        next_page = rows.last().map(|last| encode_cursor(&format!("n:{}", last.id)));
        prev_page = rows.first().filter(|_| more || cut).map(|first| encode_cursor(&format!("p:{}", first.id)));
    } else {
        next_page = rows.last().filter(|_| more || cut).map(|last| encode_cursor(&format!("n:{}", last.id)));
        prev_page = rows.first().filter(|_| after_id.is_some()).map(|first| encode_cursor(&format!("p:{}", first.id)));
    }
    let mut page = Vec::with_capacity(bytes + 128);
    page.extend_from_slice(b"{\"data\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            page.push(b',');
        }
        page.extend_from_slice(item);
    }
    page.extend_from_slice(b"],\"next_page\":");
    page.extend_from_slice(json!(next_page).to_string().as_bytes());
    page.extend_from_slice(b",\"prev_page\":");
    page.extend_from_slice(json!(prev_page).to_string().as_bytes());
    page.push(b'}');
    Ok(([(header::CONTENT_TYPE, "application/json")], page).into_response())
}

/// Agent snapshots of one list page, each loaded and serialized once however many
/// sessions share it.
#[derive(Default)]
struct AgentCache(HashMap<String, Arc<Vec<u8>>>);

/// One session of a list as JSON bytes: its rendered body with its agent snapshot
/// spliced in (the same object `retrieve` answers), without copying the agent per session.
async fn render_listed(store: &dyn Store, agents: &mut AgentCache, session: &Session) -> ApiResult<Vec<u8>> {
    let rest = serde_json::to_vec(&without_secrets(render(session)))
        .map_err(|e| ApiError::Internal(format!("session {}: {e}", session.id)))?;
    let Some(snapshot) = &session.agent_snapshot_id else { return Ok(rest) };
    let agent = match agents.0.get(snapshot) {
        Some(agent) => agent.clone(),
        None => {
            let agent = store.agent_snapshot(snapshot).await?.ok_or_else(|| {
                ApiError::Internal(format!("session {}: agent snapshot {snapshot} is missing", session.id))
            })?;
            let agent = Arc::new(serde_json::to_vec(&agent).unwrap_or_default());
            agents.0.insert(snapshot.clone(), agent.clone());
            agent
        }
    };
    // `rest` is a non-empty object (it has at least `type` and `id`): `{"agent":…,` + its members.
    let mut item = Vec::with_capacity(rest.len() + agent.len() + 10);
    item.extend_from_slice(b"{\"agent\":");
    item.extend_from_slice(&agent);
    item.push(b',');
    item.extend_from_slice(&rest[1..]);
    Ok(item)
}

/// `POST /v1/sessions/{session_id}/archive`.
pub async fn archive(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    let session = domain::archive(&state, &tenant, &id).await?;
    Ok(Json(without_secrets(render(&session))))
}

/// `DELETE /v1/sessions/{session_id}`.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    domain::delete(&state, &tenant, &id).await?;
    Ok(Json(json!({ "id": id, "type": "session_deleted" })))
}
