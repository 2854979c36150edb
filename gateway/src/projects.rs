//! The project API (`/api/projects/{project}/…`, docs/api/workflows.md): workflow
//! revisions and the project override. Mounted outside `/v1` behind the same admission
//! (`lib::admitted`): drain refusal, an API key of the workspace (other credentials are
//! refused by `admission::scope`), the rate limiter and the managed error envelope. The
//! rules are `domain::workflows`; this module parses and renders.

use agentd_schema::live::rfc3339;
use agentd_schema::{SavedWorkflowRevision, WorkflowOverrideRow, WorkflowRevisionRow};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::{Value, json};

use crate::AppState;
use crate::admission::Tenant;
use crate::domain::workflows::{self, Save};
use crate::error::{ApiError, ApiResult};
use crate::managed::body::{self, FieldError};

/// The project routes, relative to `/api`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/projects/{project}/workflows/{definition}/revision", post(save))
        .route("/projects/{project}/workflows/{definition}/revisions/{revision_id}", get(revision))
        .route("/projects/{project}/workflows/{definition}/override", get(current_override))
        .route("/projects/{project}/workflows/{definition}/override/clear", post(clear))
}

/// A revision as the API shows it.
fn render_revision(row: &WorkflowRevisionRow) -> Value {
    json!({
        "type": "workflow_revision",
        "id": row.id,
        "project": row.project,
        "definition": row.definition,
        "content_sha256": row.content_sha256,
        "declaration": row.declaration,
        "resolved": row.resolved,
        "created_at": rfc3339(row.created_at_ms),
    })
}

/// The project override as the API shows it (`revision_id` null once cleared).
fn render_override(row: &WorkflowOverrideRow) -> Value {
    json!({
        "type": "workflow_override",
        "project": row.project,
        "definition": row.definition,
        "revision_id": row.revision_id,
        "override_version": row.override_version,
        "updated_at": rfc3339(row.updated_at_ms),
    })
}

/// What a save answers: the revision (and whether it existed) and the override it moved.
fn render_saved(saved: &SavedWorkflowRevision) -> Value {
    let mut revision = render_revision(&saved.revision);
    revision["reused"] = json!(saved.reused);
    json!({ "revision": revision, "override": render_override(&saved.override_row) })
}

/// 400 `invalid_request_error` listing every problem with its JSON pointer.
fn invalid(problems: Vec<FieldError>) -> ApiError {
    let message = match problems.as_slice() {
        [] => "invalid request".to_owned(),
        [one] => one.message.clone(),
        [first, rest @ ..] => {
            format!("{} (and {} more; see error.details.errors)", first.message, rest.len())
        }
    };
    ApiError::InvalidFields { message, details: json!({ "error_code": "validation_failed", "errors": problems }) }
}

/// `POST /api/projects/{project}/workflows/{definition}/revision`.
pub async fn save(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((project, definition)): Path<(String, String)>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = Value::Object(body::object(&bytes)?);
    let store = state.backends.store.as_ref();
    match workflows::save(store, &tenant.workspace_id, &project, &definition, &request).await? {
        Save::Rejected(problems) => Err(invalid(problems)),
        Save::Saved(saved) => Ok(Json(render_saved(&saved))),
    }
}

/// `POST /api/projects/{project}/workflows/{definition}/override/clear`.
pub async fn clear(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((project, definition)): Path<(String, String)>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = Value::Object(body::object(&bytes)?);
    let store = state.backends.store.as_ref();
    match workflows::clear(store, &tenant.workspace_id, &project, &definition, &request).await? {
        Ok(row) => Ok(Json(json!({ "override": render_override(&row) }))),
        Err(problems) => Err(invalid(problems)),
    }
}

/// `GET /api/projects/{project}/workflows/{definition}/override`.
pub async fn current_override(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((project, definition)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    let row = workflows::current_override(store, &tenant.workspace_id, &project, &definition).await?;
    Ok(Json(render_override(&row)))
}

/// `GET /api/projects/{project}/workflows/{definition}/revisions/{revision_id}`.
pub async fn revision(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((project, definition, id)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    let row = workflows::revision(store, &tenant.workspace_id, &project, &definition, &id).await?;
    Ok(Json(render_revision(&row)))
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::StatusCode;
    use serde_json::json;

    use crate::test_rig::Rig;

    const OVERRIDE: &str = "/api/projects/web/workflows/bug-fix/override";
    const SAVE: &str = "/api/projects/web/workflows/bug-fix/revision";

    fn request() -> serde_json::Value {
        let done = json!({"name": "Done", "description": "", "icon": "", "state_group": "done", "completion": "completed", "transitions": []});
        let declaration =
            json!({"name": "f", "description": "", "icon": "", "start": "done", "states": {"done": done}});
        json!({"expected_override_version": 0, "idempotency_key": "k", "declaration": declaration})
    }

    fn assert_managed(answer: &crate::test_rig::Answer, status: StatusCode, kind: &str) {
        assert_eq!(answer.status, status, "{}", answer.text);
        assert_eq!((answer.body["type"].as_str(), answer.body["error"]["type"].as_str()), (Some("error"), Some(kind)));
        assert!(answer.body["request_id"].is_string(), "{}", answer.text);
    }

    #[tokio::test]
    async fn the_project_api_passes_the_managed_admission() {
        let rig = Rig::new().await;
        // No key: 401 on the routes and on every other `/api` path, in the managed envelope.
        for path in [OVERRIDE, "/api/projects/web/nothing", "/api/elsewhere"] {
            let anonymous = axum::http::Request::get(path).body(Body::empty()).unwrap();
            assert_managed(&rig.send(anonymous).await, StatusCode::UNAUTHORIZED, "authentication_error");
        }
        // An API key: metered like every managed route (the create bucket for a save).
        let saved = rig.call("POST", SAVE, request()).await;
        assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
        assert!(saved.headers.contains_key("anthropic-ratelimit-requests-limit"), "{:?}", saved.headers);
        assert_eq!(saved.body["override"]["override_version"], 1);
        let read = rig.send(rig.request("GET", OVERRIDE, Body::empty())).await;
        assert_eq!(read.status, StatusCode::OK, "{}", read.text);
        assert!(read.headers.contains_key("anthropic-ratelimit-requests-remaining"));
        // A path id that cannot exist, an unknown path, a wrong method, a non-JSON body.
        let bad_slug =
            rig.send(rig.request("GET", "/api/projects/Web/workflows/bug-fix/override", Body::empty())).await;
        assert_managed(&bad_slug, StatusCode::NOT_FOUND, "not_found_error");
        let unknown = rig.send(rig.request("GET", "/api/projects/web/nothing", Body::empty())).await;
        assert_managed(&unknown, StatusCode::NOT_FOUND, "not_found_error");
        let method = rig.send(rig.request("DELETE", OVERRIDE, Body::empty())).await;
        assert_managed(&method, StatusCode::METHOD_NOT_ALLOWED, "invalid_request_error");
        let mut labelled = rig.request("POST", SAVE, request().to_string());
        labelled.headers_mut().insert("content-type", "text/plain".parse().unwrap());
        labelled.headers_mut().insert("content-length", request().to_string().len().into());
        assert_managed(&rig.send(labelled).await, StatusCode::UNSUPPORTED_MEDIA_TYPE, "invalid_request_error");
        // Draining: refused before anything else, like `/v1`.
        rig.state.lifecycle.drain().await;
        let draining = rig.call("POST", SAVE, request()).await;
        assert_managed(&draining, StatusCode::SERVICE_UNAVAILABLE, "api_error");
    }

    #[tokio::test]
    async fn an_invalid_request_lists_every_problem_and_stores_nothing() {
        let rig = Rig::new().await;
        let mut body = request();
        body["surprise"] = json!(true);
        body["declaration"]["start"] = json!("nowhere");
        let answer = rig.call("POST", SAVE, body).await;
        assert_managed(&answer, StatusCode::BAD_REQUEST, "invalid_request_error");
        let details = &answer.body["error"]["details"];
        assert_eq!(details["error_code"], "validation_failed");
        let pointers: Vec<&str> =
            details["errors"].as_array().unwrap().iter().filter_map(|e| e["path"].as_str()).collect();
        assert_eq!(pointers, ["/surprise", "/declaration/start"], "{details}");
        assert!(answer.body["error"]["message"].as_str().unwrap().contains("and 1 more"), "{}", answer.text);
        let read = rig.send(rig.request("GET", OVERRIDE, Body::empty())).await;
        assert_managed(&read, StatusCode::NOT_FOUND, "not_found_error");
    }
}
