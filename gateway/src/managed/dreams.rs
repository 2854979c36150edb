//! Dreams (docs/api/dreams.md): `POST /v1/dreams`, retrieve, list, archive, cancel, and
//! the dream policy extension `GET`/`PUT /v1/ext/memory-stores/{id}/dream-policy`. The
//! rules are `domain::dreams`; this module parses the wire and renders `BetaDream`.

use agentd_schema::catalog::Catalog;
use agentd_schema::ids::{DreamId, MemoryStoreId, SessionId};
use agentd_schema::store::{DreamPolicyRow, DreamQuery, DreamStatus, TimeBounds};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::body::{self, kind};
use super::query::{Query, cursor_page, decode_cursor, rfc3339};
use crate::AppState;
use crate::admission::{Access, Tenant};
use crate::domain::DomainError;
use crate::domain::dreams::{
    self, CreateDream, Dream, MAX_DREAM_SESSIONS, MAX_INSTRUCTIONS_CHARS, MAX_MODEL_ID_CHARS, PolicyChange,
};
use crate::error::{ApiError, ApiResult};

const CREATE_FIELDS: &[&str] = &["inputs", "model", "instructions", "output_behavior"];
const POLICY_FIELDS: &[&str] =
    &["enabled", "interval_seconds", "min_new_sessions", "max_sessions", "model", "instructions"];
/// Dreams per page by default and at most (reference §1.8).
const DEFAULT_PAGE: i64 = 20;
const MAX_PAGE: i64 = 100;

/// `BetaDream`.
pub fn render(dream: &Dream) -> Value {
    let row = &dream.row;
    let output_behavior = if row.update_existing {
        json!({ "type": "update_existing", "memory_store_id": row.memory_store_id })
    } else {
        json!({ "type": "create_new" })
    };
    let outputs: Vec<Value> =
        row.output_store_id.iter().map(|id| json!({ "type": "memory_store", "memory_store_id": id })).collect();
    json!({
        "type": "dream",
        "id": row.id,
        "status": row.status.as_str(),
        "inputs": [
            { "type": "memory_store", "memory_store_id": row.memory_store_id },
            { "type": "sessions", "session_ids": row.session_ids },
        ],
        "model": row.model,
        "instructions": row.instructions,
        "output_behavior": output_behavior,
        "outputs": outputs,
        "session_id": row.session_id,
        "error": row.error,
        "usage": dream.usage,
        "created_at": rfc3339(row.created_at_ms),
        "ended_at": row.ended_at_ms.map(rfc3339),
        "archived_at": row.archived_at_ms.map(rfc3339),
    })
}

/// A model given as an id or as `{id, speed}`: `{id, speed: "standard"}` (dreams run
/// only at standard speed). `path` names the field.
fn parse_model(value: Option<&Value>, path: &str, catalog: &Catalog) -> Result<Value, String> {
    let (id, speed) = match value {
        Some(Value::String(_)) => (body::string(value, path, 1, MAX_MODEL_ID_CHARS).map_err(|e| e.to_string())?, None),
        Some(Value::Object(map)) => {
            if let Some(unknown) = map.keys().find(|k| !["id", "speed"].contains(&k.as_str())) {
                return Err(format!("{path}.{unknown}: unknown field (a model object has id and speed)"));
            }
            let id =
                body::string(map.get("id"), &format!("{path}.id"), 1, MAX_MODEL_ID_CHARS).map_err(|e| e.to_string())?;
            let speed = match map.get("speed") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => return Err(format!("{path}.speed: expected a string, got {}", kind(other))),
            };
            (id, speed)
        }
        None | Some(Value::Null) => return Err(format!("{path}: required")),
        Some(other) => return Err(format!("{path}: expected a model id or an object, got {}", kind(other))),
    };
    match speed.as_deref() {
        None | Some("standard") => {}
        Some(other) => return Err(format!("{path}.speed: dreams run only at \"standard\" speed, got {other:?}")),
    }
    if catalog.provider_of(&id).is_none() {
        return Err(format!("{path}.id: unknown model {id:?}; see GET /v1/models"));
    }
    Ok(json!({ "id": id, "speed": "standard" }))
}

/// `instructions`: `null`, or 1 to 4,096 characters.
fn parse_instructions(value: Option<&Value>) -> Result<Option<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(_) => body::string(value, "instructions", 1, MAX_INSTRUCTIONS_CHARS).map(Some).map_err(|e| e.to_string()),
    }
}

fn parse_create(map: &Map<String, Value>, catalog: &Catalog) -> ApiResult<CreateDream> {
    body::only_known(map, CREATE_FIELDS, "")?;
    let inputs = match map.get("inputs") {
        Some(Value::Array(items)) => items,
        None | Some(Value::Null) => return Err(ApiError::invalid("inputs: required")),
        Some(other) => return Err(ApiError::invalid(format!("inputs: expected an array, got {}", kind(other)))),
    };
    let mut memory_store: Option<(String, usize)> = None;
    let mut sessions: Option<(Vec<String>, usize)> = None;
    let (mut stores_seen, mut sessions_seen) = (0, 0);
    for (i, input) in inputs.iter().enumerate() {
        let path = format!("inputs[{i}]");
        let item = body::as_object(input, &path)?;
        match body::tag(item, &path)? {
            "memory_store" => {
                body::only_known(item, &["type", "memory_store_id"], &path)?;
                stores_seen += 1;
                let field = format!("{path}.memory_store_id");
                let id = body::string(item.get("memory_store_id"), &field, 1, 256)?;
                MemoryStoreId::parse(&id)
                    .map_err(|_| ApiError::invalid(format!("{field}: not a memory store id: {id:?}")))?;
                memory_store = Some((id, i));
            }
            "sessions" => {
                body::only_known(item, &["type", "session_ids"], &path)?;
                sessions_seen += 1;
                let field = format!("{path}.session_ids");
                let ids = match item.get("session_ids") {
                    Some(Value::Array(ids)) => ids,
                    None | Some(Value::Null) => return Err(ApiError::invalid(format!("{field}: required"))),
                    Some(other) => {
                        return Err(ApiError::invalid(format!("{field}: expected an array, got {}", kind(other))));
                    }
                };
                if ids.is_empty() || ids.len() > MAX_DREAM_SESSIONS {
                    return Err(ApiError::invalid(format!(
                        "{field}: give 1 to {MAX_DREAM_SESSIONS} session ids, got {}",
                        ids.len()
                    )));
                }
                let mut parsed: Vec<String> = Vec::with_capacity(ids.len());
                for (j, id) in ids.iter().enumerate() {
                    let at = format!("{field}[{j}]");
                    let id = body::string(Some(id), &at, 1, 256)?;
                    SessionId::parse(&id).map_err(|_| ApiError::invalid(format!("{at}: not a session id: {id:?}")))?;
                    if parsed.contains(&id) {
                        return Err(ApiError::invalid(format!("{at}: duplicate session id {id}")));
                    }
                    parsed.push(id);
                }
                sessions = Some((parsed, i));
            }
            other => {
                return Err(ApiError::invalid(format!(
                    "{path}.type: unknown input type {other:?} (expected memory_store or sessions)"
                )));
            }
        }
    }
    let (Some(memory_store), Some(sessions), 1, 1) = (memory_store, sessions, stores_seen, sessions_seen) else {
        return Err(ApiError::invalid(format!(
            "inputs: exactly one memory_store input and exactly one sessions input are required, got \
             {stores_seen} memory_store and {sessions_seen} sessions"
        )));
    };
    let model = parse_model(map.get("model"), "model", catalog).map_err(ApiError::invalid)?;
    let instructions = parse_instructions(map.get("instructions")).map_err(ApiError::invalid)?;
    let update_existing = match map.get("output_behavior") {
        None | Some(Value::Null) => false,
        Some(value) => {
            let item = body::as_object(value, "output_behavior")?;
            match body::tag(item, "output_behavior")? {
                "create_new" => {
                    body::only_known(item, &["type"], "output_behavior")?;
                    false
                }
                "update_existing" => {
                    body::only_known(item, &["type", "memory_store_id"], "output_behavior")?;
                    let id = body::string(item.get("memory_store_id"), "output_behavior.memory_store_id", 1, 256)?;
                    if id != memory_store.0 {
                        return Err(ApiError::invalid(format!(
                            "output_behavior.memory_store_id: must be the memory store of the memory_store input ({}), \
                             got {id}",
                            memory_store.0
                        )));
                    }
                    true
                }
                other => {
                    return Err(ApiError::invalid(format!(
                        "output_behavior.type: unknown output behavior {other:?} (expected create_new or update_existing)"
                    )));
                }
            }
        }
    };
    Ok(CreateDream { memory_store, sessions, model, instructions, update_existing })
}

/// `POST /v1/dreams`.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = parse_create(&body::object(&bytes)?, &*state.catalogs.of(&tenant.workspace_id)?)?;
    // Writing into an existing store takes a credential that may write memory stores:
    // an API key (scoped credentials are refused at admission already).
    if request.update_existing && tenant.access != Access::Workspace {
        return Err(ApiError::PermissionDenied(
            "output_behavior: update_existing writes the memory store and takes an API key".into(),
        ));
    }
    Ok(Json(render(&dreams::create(&state, &tenant, request).await?)))
}

/// `GET /v1/dreams/{dream_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<DreamId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&dreams::retrieve(&state, &tenant, &id).await?)))
}

/// `GET /v1/dreams`: newest first; `statuses[]`, `created_at[gt]`/`[lt]` (exclusive),
/// `include_archived`, cursor pages.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, MAX_PAGE)?.unwrap_or(DEFAULT_PAGE);
    let mut statuses = Vec::new();
    for status in query.list("statuses") {
        statuses.push(DreamStatus::parse(status).ok_or_else(|| {
            ApiError::invalid(format!(
                "statuses[]: unknown status {status:?} (expected pending, running, completed, failed or canceled)"
            ))
        })?);
    }
    let dream_query = DreamQuery {
        statuses,
        created: TimeBounds {
            gt: query.datetime_ms("created_at[gt]")?,
            lt: query.datetime_ms("created_at[lt]")?,
            ..TimeBounds::default()
        },
        include_archived: query.bool("include_archived")?.unwrap_or(false),
        before_id: query.string("page").map(decode_cursor).transpose()?,
        limit: limit + 1,
    };
    let rows = dreams::list(&state, &tenant, &dream_query).await?;
    Ok(Json(cursor_page(rows, limit, |dream| dream.row.id.clone(), render)))
}

/// `POST /v1/dreams/{dream_id}/archive`.
pub async fn archive(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<DreamId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&dreams::archive(&state, &tenant, &id).await?)))
}

/// `POST /v1/dreams/{dream_id}/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<DreamId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&dreams::cancel(&state, &tenant, &id).await?)))
}

/// The dream policy extension answers its own errors flat, `{"error": "<message>"}`, as
/// the reference's dream policy routes do (prior-art §4.5); admission errors keep the
/// managed envelope.
#[derive(Debug)]
pub struct PolicyError(StatusCode, String);

impl IntoResponse for PolicyError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<DomainError> for PolicyError {
    fn from(error: DomainError) -> Self {
        let status = match &error {
            DomainError::NotFound(_) | DomainError::Deleted(_) | DomainError::Expired(_) => StatusCode::NOT_FOUND,
            DomainError::Conflict(_)
            | DomainError::NameTaken(_)
            | DomainError::MemoryPreconditionFailed(_)
            | DomainError::MemoryPathConflict(_) => StatusCode::CONFLICT,
            DomainError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            DomainError::Internal(cause) => {
                tracing::error!(%cause, "dream policy request failed");
                StatusCode::INTERNAL_SERVER_ERROR
            }
            DomainError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            DomainError::Gone(_) => StatusCode::GONE,
            DomainError::Invalid { .. }
            | DomainError::Archived(_)
            | DomainError::Terminated(_)
            | DomainError::BudgetReached(_)
            | DomainError::AgentDisabled(_)
            | DomainError::AgentArchived(_)
            | DomainError::EnvironmentArchived(_) => StatusCode::BAD_REQUEST,
        };
        PolicyError(status, error.to_string())
    }
}

fn invalid(message: impl Into<String>) -> PolicyError {
    PolicyError(StatusCode::BAD_REQUEST, message.into())
}

/// The dream policy on the wire.
pub fn render_policy(policy: &DreamPolicyRow) -> Value {
    json!({
        "type": "dream_policy",
        "memory_store_id": policy.memory_store_id,
        "enabled": policy.enabled,
        "interval_seconds": policy.interval_seconds,
        "min_new_sessions": policy.min_new_sessions,
        "max_sessions": policy.max_sessions,
        "model": policy.model,
        "instructions": policy.instructions,
        "next_due_at": policy.next_due_at_ms.map(rfc3339),
        "last_completed_cutoff_at": policy.last_completed_cutoff_ms.map(rfc3339),
    })
}

/// `GET /v1/ext/memory-stores/{memory_store_id}/dream-policy`: the policy, or the
/// disabled default (nothing is written).
pub async fn get_policy(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<MemoryStoreId>,
) -> Result<Json<Value>, PolicyError> {
    Ok(Json(render_policy(&dreams::get_policy(&state, &tenant, &id).await?)))
}

/// An integer field in `min..=max`, `default` when absent or `null`.
fn int_field(map: &Map<String, Value>, key: &str, min: i64, max: i64, default: i64) -> Result<i64, PolicyError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(invalid(format!("{key}: must be an integer from {min} to {max}, got {n}"))),
        },
        Some(other) => Err(invalid(format!("{key}: expected an integer, got {}", kind(other)))),
    }
}

/// `PUT /v1/ext/memory-stores/{memory_store_id}/dream-policy`: the whole policy; absent
/// fields take their defaults.
pub async fn put_policy(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<MemoryStoreId>,
    bytes: Bytes,
) -> Result<Json<Value>, PolicyError> {
    let map = body::object(&bytes).map_err(|e| invalid(e.to_string()))?;
    body::only_known(&map, POLICY_FIELDS, "").map_err(|e| invalid(e.to_string()))?;
    let defaults = dreams::default_policy(&tenant.workspace_id, &id);
    let enabled = match map.get("enabled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(invalid(format!("enabled: expected a boolean, got {}", kind(other)))),
    };
    let min_interval = dreams::min_policy_interval_secs();
    let interval_seconds = int_field(&map, "interval_seconds", min_interval, 365 * 86_400, defaults.interval_seconds)?;
    let max_sessions = int_field(&map, "max_sessions", 1, MAX_DREAM_SESSIONS as i64, defaults.max_sessions)?;
    let min_new_sessions =
        int_field(&map, "min_new_sessions", 1, MAX_DREAM_SESSIONS as i64, defaults.min_new_sessions)?;
    if min_new_sessions > max_sessions {
        return Err(invalid(format!(
            "min_new_sessions: must be at most max_sessions ({max_sessions}), got {min_new_sessions}"
        )));
    }
    let model = match map.get("model") {
        None | Some(Value::Null) => defaults.model,
        value => parse_model(value, "model", &*state.catalogs.of(&tenant.workspace_id).map_err(DomainError::from)?)
            .map_err(invalid)?,
    };
    let instructions = parse_instructions(map.get("instructions")).map_err(invalid)?;
    let change = PolicyChange { enabled, interval_seconds, min_new_sessions, max_sessions, model, instructions };
    Ok(Json(render_policy(&dreams::put_policy(&state, &tenant, &id, change).await?)))
}
