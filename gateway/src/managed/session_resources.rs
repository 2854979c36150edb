//! A session's resources: the managed `sessions.resources` routes and the manifest
//! replace `PUT /v1/ext/sessions/{id}/resources` (docs/api/session-resources.md). Both
//! edit the same list in the session body; every change bumps the resources revision
//! (the manifest's `If-Match`). Tokens are sealed at rest and never rendered.

use agentd_schema::ids::{SessionId, SessionResourceId};
use agentd_schema::{IdempotencyBegin, Session};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::body;
use super::query::{Query, cursor_page, decode_cursor, now_ms, rfc3339};
use super::sessions::{load, resources as parse_resources};
use crate::AppState;
use crate::admission::Tenant;
use crate::error::{ApiError, ApiResult};

fn rendered(resource: &Value) -> Value {
    let mut out = resource.clone();
    if let Some(map) = out.as_object_mut() {
        map.remove("_sealed");
    }
    out
}

fn resource_id(resource: &Value) -> &str {
    resource["id"].as_str().or(resource["memory_store_id"].as_str()).unwrap_or_default()
}

fn list_of(session: &Session) -> Vec<Value> {
    session.body["resources"].as_array().cloned().unwrap_or_default()
}

fn find<'a>(list: &'a [Value], id: &str) -> ApiResult<&'a Value> {
    list.iter()
        .find(|r| resource_id(r) == id)
        .ok_or_else(|| ApiError::NotFound(format!("session resource not found: {id}")))
}

/// Writes `list` as the session's resources; `expected` is the `If-Match` revision.
async fn write(
    state: &AppState,
    tenant: &Tenant,
    session: &Session,
    list: Vec<Value>,
    expected: Option<i64>,
) -> ApiResult<Session> {
    if session.status == "terminated" || session.archived_at_ms.is_some() {
        return Err(ApiError::Conflict(format!(
            "session {} is {}: its resources are final",
            session.id,
            if session.archived_at_ms.is_some() { "archived" } else { "terminated" }
        )));
    }
    let mut list = Value::Array(list);
    // Each newly mounted file must be live and each new memory store attachable; the
    // ones already mounted stay as they are.
    crate::domain::sessions::check_resources(
        state.backends.store.as_ref(),
        &tenant.workspace_id,
        &mut list,
        &session.body["resources"],
    )
    .await?;
    let mut body = session.body.clone();
    body["resources"] = list;
    let outcome = state
        .backends
        .store
        .replace_session_resources(agentd_schema::ResourcesReplacement {
            workspace_id: tenant.workspace_id.clone(),
            session_id: session.id.clone(),
            expected_revision: expected,
            body,
            events: Vec::new(),
        })
        .await?;
    outcome.map(|(session, _)| session).map_err(|current| {
        ApiError::Conflict(format!(
            "If-Match names revision {} but the session's resources are at revision {current}",
            expected.unwrap_or_default()
        ))
    })
}

/// `GET /v1/sessions/{session_id}/resources`.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, 1000)?.unwrap_or(1000);
    let after = query.string("page").map(decode_cursor).transpose()?;
    let list = list_of(&session);
    let start = match &after {
        Some(after) => list.iter().position(|r| resource_id(r) == after).map_or(list.len(), |i| i + 1),
        None => 0,
    };
    let rows: Vec<Value> = list[start..].iter().take(limit as usize + 1).cloned().collect();
    Ok(Json(cursor_page(rows, limit, |r| resource_id(r).to_owned(), rendered)))
}

/// `GET /v1/sessions/{session_id}/resources/{resource_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, resource)): Path<(SessionId, SessionResourceId)>,
) -> ApiResult<Json<Value>> {
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    Ok(Json(rendered(find(&list_of(&session), &resource)?)))
}

/// `POST /v1/sessions/{session_id}/resources`: adds a `file` resource.
pub async fn add(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    match map.get("type").and_then(Value::as_str) {
        Some("file") => {}
        Some("memory_store") => {
            return Err(ApiError::invalid(
                "type: memory stores are attached when the session is created (resources of sessions.create), or \
                 with the manifest replace PUT /v1/ext/sessions/{session_id}/resources; resources.add adds files only",
            ));
        }
        _ => return Err(ApiError::invalid("type: only file resources can be added to a session")),
    }
    let parsed = parse_resources(Some(&Value::Array(vec![Value::Object(map)])), &state.secrets)?;
    let added = parsed[0].clone();
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    let mut list = list_of(&session);
    list.push(added.clone());
    write(&state, &tenant, &session, list, None).await?;
    Ok(Json(rendered(&added)))
}

/// `POST /v1/sessions/{session_id}/resources/{resource_id}` `{"authorization_token"}`:
/// rotates a `github_repository` token (sealed, never echoed).
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, resource)): Path<(SessionId, SessionResourceId)>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["authorization_token"], "body")?;
    let token = body::string(map.get("authorization_token"), "authorization_token", 1, 4096)?;
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    let mut list = list_of(&session);
    let index = list.iter().position(|r| resource_id(r) == resource);
    let Some(index) = index else { return Err(ApiError::NotFound(format!("session resource not found: {resource}"))) };
    if list[index]["type"] != "github_repository" {
        return Err(ApiError::invalid("authorization_token: only github_repository resources support token rotation"));
    }
    list[index]["_sealed"] = json!(state.secrets.seal(&resource, &json!({ "authorization_token": token })));
    list[index]["updated_at"] = json!(rfc3339(now_ms()));
    let updated = list[index].clone();
    write(&state, &tenant, &session, list, None).await?;
    Ok(Json(rendered(&updated)))
}

/// `DELETE /v1/sessions/{session_id}/resources/{resource_id}`.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, resource)): Path<(SessionId, SessionResourceId)>,
) -> ApiResult<Json<Value>> {
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    let mut list = list_of(&session);
    find(&list, &resource)?;
    list.retain(|r| resource_id(r) != resource);
    write(&state, &tenant, &session, list, None).await?;
    Ok(Json(json!({ "id": resource, "type": "session_resource_deleted" })))
}

/// The manifest view: revisions, phase and resources.
async fn manifest(state: &AppState, session: &Session) -> ApiResult<Value> {
    let desired = session.resources_revision;
    // Hands read a session's resources when they take its work item: while an item
    // taken before this revision is still open, the sandbox may not have them yet.
    let open =
        state.backends.store.list_work(session.body["environment_id"].as_str().unwrap_or_default(), None, 20).await?;
    let stale_hands = open.iter().any(|item| {
        item.session_id == session.id
            && matches!(item.state.as_str(), "starting" | "active" | "stopping")
            && item.acknowledged_at_ms.is_some_and(|acked| acked < session.updated_at_ms)
    });
    let (applied, phase) = if stale_hands { (Value::Null, "applying") } else { (json!(desired), "active") };
    Ok(json!({
        "type": "session_resource_manifest",
        "session_id": session.id,
        "desired_revision": desired,
        "applied_revision": applied,
        "phase": phase,
        "resources": list_of(session).iter().map(rendered).collect::<Vec<_>>(),
    }))
}

fn if_match(headers: &HeaderMap) -> ApiResult<Option<i64>> {
    let Some(value) = headers.get("if-match") else { return Ok(None) };
    let raw = value.to_str().unwrap_or_default().trim().trim_start_matches("W/").trim_matches('"');
    raw.parse::<i64>()
        .map(Some)
        .map_err(|_| ApiError::invalid(format!("If-Match: expected a resources revision such as \"3\", got {raw:?}")))
}

fn with_etag(body: Value) -> Response {
    let etag = format!("\"{}\"", body["desired_revision"]);
    let mut response = (StatusCode::OK, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response.headers_mut().insert("etag", value);
    }
    response
}

/// `GET /v1/ext/sessions/{session_id}/resources`: the manifest.
pub async fn get_manifest(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
) -> ApiResult<Response> {
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    Ok(with_etag(manifest(&state, &session).await?))
}

/// `PUT /v1/ext/sessions/{session_id}/resources` `{"resources": [...]}`: full replacement.
/// `If-Match: "<revision>"` (409 on mismatch); `Idempotency-Key` replays the first answer.
pub async fn replace(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    headers: HeaderMap,
    bytes: Bytes,
) -> ApiResult<Response> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["resources"], "body")?;
    if !map.contains_key("resources") {
        return Err(ApiError::invalid("resources: required (an empty list removes every resource)"));
    }
    let expected = if_match(&headers)?;
    let parsed = parse_resources(map.get("resources"), &state.secrets)?;
    let store = state.backends.store.as_ref();
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(key) = &key {
        let fingerprint =
            agentd_schema::ids::secret_hash(&format!("{id}\n{expected:?}\n{}", String::from_utf8_lossy(&bytes)));
        match store
            .idempotency_begin(&tenant.workspace_id, &format!("resources:{key}"), &fingerprint, 24 * 3_600_000)
            .await?
        {
            IdempotencyBegin::Fresh => {}
            IdempotencyBegin::Replay { status_code, response } => {
                return Ok(replayed(status_code, serde_json::from_str(&response).unwrap_or(Value::Null)));
            }
            IdempotencyBegin::InFlight => {
                return Err(ApiError::Conflict("a request with this Idempotency-Key is still in flight".into()));
            }
            IdempotencyBegin::Mismatch => {
                return Err(ApiError::Conflict("this Idempotency-Key was used with a different request".into()));
            }
        }
    }
    let outcome = async {
        let session = load(store, &tenant, &id).await?;
        let list = parsed.as_array().cloned().unwrap_or_default();
        let updated = write(&state, &tenant, &session, list, expected).await?;
        manifest(&state, &updated).await
    }
    .await;
    let Some(key) = key else { return outcome.map(with_etag) };
    // The answer, success or failure, is what a retry with the same key gets back.
    let (status, body) = match outcome {
        Ok(body) => (200, body),
        Err(error) => {
            let response = error.into_response();
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap_or_default();
            (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
        }
    };
    store
        .idempotency_complete(&tenant.workspace_id, &format!("resources:{key}"), i64::from(status), &body.to_string())
        .await?;
    Ok(replayed(i64::from(status), body))
}

/// A stored answer: the manifest (with its ETag) or the stored error.
fn replayed(status: i64, body: Value) -> Response {
    if status == 200 {
        return with_etag(body);
    }
    let status = StatusCode::from_u16(status as u16).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, Json(body)).into_response();
    if status == StatusCode::CONFLICT {
        response.headers_mut().insert("x-should-retry", HeaderValue::from_static("false"));
    }
    response
}
