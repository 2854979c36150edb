//! Deployments and deployment runs (docs/api/deployments.md): create, retrieve, update,
//! list, archive, pause, unpause, run; runs list and retrieve. The rules are
//! `domain::deployments`; this module parses the wire and renders
//! `BetaManagedAgentsDeployment` and `BetaManagedAgentsDeploymentRun`.

use agentd_schema::capture;
use agentd_schema::ids::{DeploymentId, DeploymentRunId, UserProfileId};
use agentd_schema::store::{
    DeploymentQuery, DeploymentRow, DeploymentRunQuery, DeploymentRunRow, RunTrigger, TimeBounds,
};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::body::{self, as_object, kind, tag};
use super::content;
use super::limits::{MAX_DESCRIPTION_CHARS, MAX_ID_CHARS, MAX_NAME_CHARS};
use super::query::{Query, cursor_page, decode_cursor, now_ms, rfc3339};
use super::sessions::{budget_shape, capture_level, resources_at_most};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::deployments::{
    self, AgentPin, CreateDeployment, MAX_INITIAL_EVENTS, MAX_RESOURCES, MAX_VAULTS, UpdateDeployment, schedule_of,
};
use crate::error::{ApiError, ApiResult};

const CREATE_FIELDS: &[&str] = &[
    "agent",
    "environment_id",
    "initial_events",
    "name",
    "budget",
    "description",
    "metadata",
    "resources",
    "schedule",
    "vault_ids",
    "user_profile_id",
    "content_capture_ceiling",
];
/// Deployments and runs per page by default and at most.
const DEFAULT_PAGE: i64 = 20;
const MAX_PAGE: i64 = 1000;
/// Upcoming slots a schedule renders.
const UPCOMING: usize = 5;

/// A resource as the deployment echoes it: the input, without ids or write-only secrets.
fn render_resource(resource: &Value) -> Value {
    let keep: &[&str] = match resource["type"].as_str() {
        Some("file") => &["type", "file_id", "mount_path"],
        Some("github_repository") => &["type", "url", "checkout", "mount_path"],
        Some("memory_store") => &["type", "memory_store_id", "access", "instructions"],
        _ => &["type"],
    };
    Value::Object(keep.iter().filter_map(|k| resource.get(*k).map(|v| ((*k).to_owned(), v.clone()))).collect())
}

/// `BetaManagedAgentsDeployment`.
pub fn render(row: &DeploymentRow) -> Value {
    let c = &row.config;
    let schedule = c.schedule.as_ref().map(|s| {
        let upcoming: Vec<String> = match (row.archived_at_ms, schedule_of(s)) {
            (None, Ok(schedule)) => schedule.upcoming(now_ms(), UPCOMING).into_iter().map(rfc3339).collect(),
            _ => Vec::new(),
        };
        json!({
            "type": "cron",
            "expression": s.expression,
            "timezone": s.timezone,
            "last_run_at": row.last_run_at_ms.map(rfc3339),
            "upcoming_runs_at": upcoming,
        })
    });
    let resources: Vec<Value> =
        c.resources.as_array().map(|r| r.iter().map(render_resource).collect()).unwrap_or_default();
    json!({
        "type": "deployment",
        "id": row.id,
        "name": c.name,
        "description": c.description,
        "agent": { "type": "agent", "id": c.agent_id, "version": c.agent_version },
        "environment_id": c.environment_id,
        "initial_events": c.initial_events,
        "resources": resources,
        "vault_ids": c.vault_ids,
        "metadata": c.metadata,
        "budget": c.budget,
        "schedule": schedule,
        "user_profile_id": c.user_profile_id,
        "content_capture_ceiling": c.content_capture_ceiling.unwrap_or(capture::Level::Full).as_str(),
        "status": if row.paused_reason.is_some() { "paused" } else { "active" },
        "paused_reason": row.paused_reason,
        "created_at": rfc3339(row.created_at_ms),
        "updated_at": rfc3339(row.updated_at_ms),
        "archived_at": row.archived_at_ms.map(rfc3339),
    })
}

/// `BetaManagedAgentsDeploymentRun`.
pub fn render_run(run: &DeploymentRunRow) -> Value {
    let trigger = match run.trigger {
        RunTrigger::Schedule(slot) => json!({ "type": "schedule", "scheduled_at": rfc3339(slot) }),
        RunTrigger::Manual => json!({ "type": "manual" }),
    };
    json!({
        "type": "deployment_run",
        "id": run.id,
        "deployment_id": run.deployment_id,
        "agent": run.agent,
        "trigger_context": trigger,
        "session_id": run.session_id,
        "error": run.error,
        "created_at": rfc3339(run.created_at_ms),
    })
}

/// `agent`: an id (pins the latest version) or `{"type":"agent","id","version"}`.
fn agent_pin(value: Option<&Value>) -> ApiResult<AgentPin> {
    match value {
        Some(Value::String(_)) => Ok(AgentPin { id: body::string(value, "agent", 1, MAX_ID_CHARS)?, version: None }),
        Some(Value::Object(map)) => {
            if tag(map, "agent")? != "agent" {
                return Err(ApiError::invalid("agent.type: must be \"agent\""));
            }
            body::only_known(map, &["type", "id", "version"], "agent")?;
            let id = body::string(map.get("id"), "agent.id", 1, MAX_ID_CHARS)?;
            let version = match map.get("version") {
                Some(Value::Number(n)) if n.as_i64().is_some_and(|v| v >= 1) => n.as_i64(),
                None | Some(Value::Null) => {
                    return Err(ApiError::invalid(
                        "agent.version: required with an agent object (or give the id alone)",
                    ));
                }
                Some(other) => {
                    return Err(ApiError::invalid(format!("agent.version: expected an integer ≥ 1, got {other}")));
                }
            };
            Ok(AgentPin { id, version })
        }
        None | Some(Value::Null) => Err(ApiError::invalid("agent: required")),
        Some(other) => Err(ApiError::invalid(format!("agent: expected a string or object, got {}", kind(other)))),
    }
}

/// `initial_events`: 1–50 of `user.message`, `user.define_outcome`, `system.message`.
fn initial_events(value: Option<&Value>) -> ApiResult<Vec<Map<String, Value>>> {
    let items = match value {
        Some(Value::Array(items)) => items,
        None | Some(Value::Null) => return Err(ApiError::invalid("initial_events: required (1 to 50 events)")),
        Some(other) => {
            return Err(ApiError::invalid(format!("initial_events: expected an array, got {}", kind(other))));
        }
    };
    if items.is_empty() || items.len() > MAX_INITIAL_EVENTS {
        return Err(ApiError::invalid(format!(
            "initial_events: give 1 to {MAX_INITIAL_EVENTS} events, got {}",
            items.len()
        )));
    }
    let mut events = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("initial_events[{i}]");
        let kind = tag(as_object(item, &path)?, &path)?;
        if !["user.message", "user.define_outcome", "system.message"].contains(&kind) {
            return Err(ApiError::invalid(format!(
                "{path}.type: must be user.message, user.define_outcome or system.message, got {kind:?}"
            )));
        }
        events.push(content::client_event(item, &path)?);
    }
    Ok(events)
}

fn vault_ids(value: Option<&Value>) -> ApiResult<Vec<String>> {
    let mut ids = Vec::new();
    for (i, id) in body::array(value, "vault_ids", MAX_VAULTS)?.iter().enumerate() {
        let id = id.as_str().ok_or_else(|| ApiError::invalid(format!("vault_ids[{i}]: expected a string")))?;
        ids.push(id.to_owned());
    }
    Ok(ids)
}

/// `schedule`: `null`, or `{"type":"cron","expression","timezone"}` (validated).
fn schedule(value: Option<&Value>) -> ApiResult<Option<(String, String)>> {
    let Some(value) = value.filter(|v| !v.is_null()) else { return Ok(None) };
    let map = as_object(value, "schedule")?;
    if tag(map, "schedule")? != "cron" {
        return Err(ApiError::invalid("schedule.type: must be \"cron\""));
    }
    body::only_known(map, &["type", "expression", "timezone"], "schedule")?;
    let expression = body::string(map.get("expression"), "schedule.expression", 1, 256)?;
    let timezone = body::string(map.get("timezone"), "schedule.timezone", 1, 64)?;
    crate::domain::cron::Schedule::parse(&expression, &timezone).map_err(ApiError::invalid)?;
    Ok(Some((expression, timezone)))
}

fn budget(value: Option<&Value>) -> ApiResult<Option<Value>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => budget_shape(value).map(Some),
    }
}

fn user_profile_id(value: Option<&Value>) -> ApiResult<Option<UserProfileId>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            let id = body::string(Some(value), "user_profile_id", 1, MAX_ID_CHARS)?;
            UserProfileId::parse(&id)
                .map(Some)
                .map_err(|_| ApiError::invalid(format!("user_profile_id: not a user profile id: {id:?}")))
        }
    }
}

fn name(value: Option<&Value>) -> ApiResult<String> {
    body::string(value, "name", 1, MAX_NAME_CHARS)
}

fn description(value: Option<&Value>) -> ApiResult<Option<String>> {
    Ok(body::optional_string(value, "description", MAX_DESCRIPTION_CHARS)?.filter(|d| !d.is_empty()))
}

/// `POST /v1/deployments`.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, CREATE_FIELDS, "")?;
    let request = CreateDeployment {
        name: name(map.get("name"))?,
        description: description(map.get("description"))?,
        agent: agent_pin(map.get("agent"))?,
        environment_id: body::string(map.get("environment_id"), "environment_id", 1, MAX_ID_CHARS)?,
        initial_events: initial_events(map.get("initial_events"))?,
        resources: resources_at_most(map.get("resources"), &state.secrets, MAX_RESOURCES)?,
        vault_ids: vault_ids(map.get("vault_ids"))?,
        metadata: Value::Object(body::optional_metadata(map.get("metadata"))?),
        budget: budget(map.get("budget"))?,
        schedule: schedule(map.get("schedule"))?,
        user_profile_id: user_profile_id(map.get("user_profile_id"))?,
        content_capture_ceiling: capture_level(map.get("content_capture_ceiling"), "content_capture_ceiling")?,
    };
    Ok(Json(render(&deployments::create(&state, &tenant, request).await?)))
}

/// `GET /v1/deployments/{deployment_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<DeploymentId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&deployments::get(&state, &tenant, &id).await?)))
}

/// `POST /v1/deployments/{deployment_id}`: every field optional; the reference's
/// tri-state rules (see docs/api/deployments.md).
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<DeploymentId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, CREATE_FIELDS, "")?;
    let cannot_clear = |field: &str| ApiError::invalid(format!("{field}: cannot be cleared; omit it to keep it"));
    let present = |field: &str| map.get(field);
    let mut change = UpdateDeployment::default();
    if let Some(value) = present("name") {
        if value.is_null() {
            return Err(cannot_clear("name"));
        }
        change.name = Some(name(Some(value))?);
    }
    if let Some(value) = present("description") {
        change.description = Some(description(Some(value))?);
    }
    if let Some(value) = present("agent") {
        if value.is_null() {
            return Err(cannot_clear("agent"));
        }
        change.agent = Some(agent_pin(Some(value))?);
    }
    if let Some(value) = present("environment_id") {
        if value.is_null() {
            return Err(cannot_clear("environment_id"));
        }
        change.environment_id = Some(body::string(Some(value), "environment_id", 1, MAX_ID_CHARS)?);
    }
    if let Some(value) = present("initial_events") {
        if value.is_null() {
            return Err(cannot_clear("initial_events"));
        }
        change.initial_events = Some(initial_events(Some(value))?);
    }
    if let Some(value) = present("resources") {
        let value = Some(value).filter(|v| !v.is_null());
        change.resources = Some(resources_at_most(value, &state.secrets, MAX_RESOURCES)?);
    }
    if let Some(value) = present("vault_ids") {
        change.vault_ids = Some(vault_ids(Some(value).filter(|v| !v.is_null()))?);
    }
    if let Some(value) = present("budget") {
        change.budget = Some(budget(Some(value))?);
    }
    if let Some(value) = present("schedule") {
        change.schedule = Some(schedule(Some(value))?);
    }
    if let Some(value) = present("user_profile_id") {
        change.user_profile_id = Some(user_profile_id(Some(value))?);
    }
    if let Some(value) = present("content_capture_ceiling") {
        change.content_capture_ceiling = Some(capture_level(Some(value), "content_capture_ceiling")?);
    }
    if let Some(patch) = present("metadata") {
        let current = deployments::get(&state, &tenant, &id).await?;
        change.metadata = Some(body::patch_metadata(&current.config.metadata, patch, "metadata")?);
    }
    Ok(Json(render(&deployments::update(&state, &tenant, &id, change).await?)))
}

/// `GET /v1/deployments`: newest first; `agent_id`, `status` (active|paused, not with
/// `include_archived`), `created_at[gte|lte]`, cursor pages.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, MAX_PAGE)?.unwrap_or(DEFAULT_PAGE);
    let include_archived = query.bool("include_archived")?.unwrap_or(false);
    let paused = match query.string("status") {
        None => None,
        Some(_) if include_archived => {
            return Err(ApiError::invalid(
                "status: cannot be combined with include_archived (archived deployments report active)",
            ));
        }
        Some("active") => Some(false),
        Some("paused") => Some(true),
        Some(other) => return Err(ApiError::invalid(format!("status: expected active or paused, got {other:?}"))),
    };
    let deployment_query = DeploymentQuery {
        agent_id: query.string("agent_id").map(str::to_owned),
        paused,
        include_archived,
        created: TimeBounds {
            gte: query.datetime_ms("created_at[gte]")?,
            lte: query.datetime_ms("created_at[lte]")?,
            ..TimeBounds::default()
        },
        before_id: query.string("page").map(decode_cursor).transpose()?,
        limit: limit + 1,
    };
    let rows = deployments::list(&state, &tenant, &deployment_query).await?;
    Ok(Json(cursor_page(rows, limit, |row| row.id.clone(), render)))
}

/// `POST /v1/deployments/{deployment_id}/archive`.
pub async fn archive(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<DeploymentId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&deployments::archive(&state, &tenant, &id).await?)))
}

/// `POST /v1/deployments/{deployment_id}/pause`.
pub async fn pause(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<DeploymentId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&deployments::set_paused(&state, &tenant, &id, true).await?)))
}

/// `POST /v1/deployments/{deployment_id}/unpause`.
pub async fn unpause(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<DeploymentId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&deployments::set_paused(&state, &tenant, &id, false).await?)))
}

/// `POST /v1/deployments/{deployment_id}/run`: a manual run, now.
pub async fn run(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<DeploymentId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render_run(&deployments::run_now(&state, &tenant, &id).await?)))
}

/// `GET /v1/deployment_runs/{deployment_run_id}`.
pub async fn retrieve_run(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<DeploymentRunId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render_run(&deployments::get_deployment_run(&state, &tenant, &id).await?)))
}

/// `GET /v1/deployment_runs`: newest first; `deployment_id` (unknown: an empty page),
/// `has_error`, `trigger_type`, `created_at[gt|gte|lt|lte]`, cursor pages.
pub async fn list_runs(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, MAX_PAGE)?.unwrap_or(DEFAULT_PAGE);
    let trigger_type = match query.string("trigger_type") {
        None => None,
        Some(t @ ("schedule" | "manual")) => Some(t.to_owned()),
        Some(other) => {
            return Err(ApiError::invalid(format!("trigger_type: expected schedule or manual, got {other:?}")));
        }
    };
    let run_query = DeploymentRunQuery {
        deployment_id: query.string("deployment_id").map(str::to_owned),
        has_error: query.bool("has_error")?,
        trigger_type,
        created: TimeBounds {
            gt: query.datetime_ms("created_at[gt]")?,
            gte: query.datetime_ms("created_at[gte]")?,
            lt: query.datetime_ms("created_at[lt]")?,
            lte: query.datetime_ms("created_at[lte]")?,
        },
        before_id: query.string("page").map(decode_cursor).transpose()?,
        limit: limit + 1,
    };
    let rows = deployments::list_deployment_runs(&state, &tenant, &run_query).await?;
    Ok(Json(cursor_page(rows, limit, |run| run.id.clone(), render_run)))
}
