//! The HTTP+JSON binding, relative to `/v1/a2a` and `/v1/a2a/agents/{agent_id}`:
//! ProtoJSON bodies, `application/a2a+json` answers, SSE frames of bare
//! `StreamResponse`s, errors as `{"error": {code, status, message, details}}` with the
//! HTTP status of the A2A error. `{id}:cancel` / `{id}:subscribe` are one path segment,
//! split here.

use std::collections::HashMap;

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Query, RawPathParams};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use super::dispatch::{Answer, call, sse};
use super::tasks::Item;
use super::{A2aError, A2aResult, Endpoint};
use crate::AppState;
use crate::admission::Tenant;

/// The REST routes, relative to a base.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/message:send", post(send))
        .route("/message:stream", post(stream))
        .route("/tasks", get(list))
        .route("/tasks/{task}", get(task_get).post(task_post))
        .route("/tasks/{task}/pushNotificationConfigs", post(push_create).get(push_list))
        .route("/tasks/{task}/pushNotificationConfigs/{config}", get(push_get).delete(push_delete))
        .route("/extendedAgentCard", get(extended_card))
}

struct Call {
    state: AppState,
    tenant: Tenant,
    endpoint: Endpoint,
    headers: HeaderMap,
    path: HashMap<String, String>,
}

/// Every REST handler's context, extracted once: the tenant admission resolved, the
/// endpoint (workspace or one agent), the headers and the path parameters.
impl FromRequestParts<AppState> for Call {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let raw = RawPathParams::from_request_parts(parts, state).await.map_err(IntoResponse::into_response)?;
        let Extension(tenant) =
            Extension::<Tenant>::from_request_parts(parts, state).await.map_err(IntoResponse::into_response)?;
        let path: HashMap<String, String> = raw.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        let endpoint = Endpoint { agent: path.get("agent_id").cloned() };
        Ok(Self { state: state.clone(), tenant, endpoint, headers: parts.headers.clone(), path })
    }
}

impl Call {
    fn path(&self, name: &str) -> String {
        self.path.get(name).cloned().unwrap_or_default()
    }

    /// Runs `method` with the JSON object in `bytes` (an empty body is `{}`), after
    /// `fill` adds what the path says.
    async fn run_with_body(&self, method: &str, bytes: &Bytes, fill: impl FnOnce(&Self, &mut Value)) -> Response {
        match body(bytes) {
            Ok(mut params) => {
                fill(self, &mut params);
                self.run(method, params).await
            }
            Err(error) => failure(&error),
        }
    }

    async fn run(&self, method: &str, params: Value) -> Response {
        if let Some(raw) = self.headers.get("a2a-version") {
            let version = raw.to_str().unwrap_or("").trim();
            if !version.is_empty() && version.split('.').next() != Some("1") {
                return failure(&A2aError::version(format!(
                    "A2A-Version {version} is not supported; this binding speaks 1.0"
                )));
            }
        }
        match call(&self.state, &self.tenant, &self.endpoint, &self.headers, method, &params).await {
            Ok(Answer::Result(result)) => ok(result),
            Ok(Answer::Stream(rx)) => sse(rx, |item| match item {
                Item::Event(event) => event,
                Item::Error(error) => error.to_rest().1,
            }),
            Err(error) => failure(&error),
        }
    }
}

fn ok(result: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/a2a+json")], result.to_string()).into_response()
}

/// An error response of this binding: the A2A error's HTTP status and body.
pub fn failure(error: &A2aError) -> Response {
    let (status, body) = error.to_rest();
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error.decorate((status, [(header::CONTENT_TYPE, "application/a2a+json")], body.to_string()).into_response())
}

fn body(bytes: &Bytes) -> A2aResult<Value> {
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(A2aError::params("the body must be a JSON object")),
        Err(error) => Err(A2aError::parse(format!("the body is not valid JSON: {error}"))),
    }
}

fn query(params: HashMap<String, String>) -> Value {
    Value::Object(params.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<Map<_, _>>())
}

async fn send(call: Call, bytes: Bytes) -> Response {
    call.run_with_body("SendMessage", &bytes, |_, _| {}).await
}

async fn stream(call: Call, bytes: Bytes) -> Response {
    call.run_with_body("SendStreamingMessage", &bytes, |_, _| {}).await
}

async fn list(call: Call, Query(q): Query<HashMap<String, String>>) -> Response {
    call.run("ListTasks", query(q)).await
}

/// `GET /tasks/{id}` or `GET /tasks/{id}:subscribe`.
async fn task_get(call: Call, Query(q): Query<HashMap<String, String>>) -> Response {
    let segment = call.path("task");
    let mut params = query(q);
    match segment.rsplit_once(':') {
        Some((id, "subscribe")) => {
            params["id"] = json!(id);
            call.run("SubscribeToTask", params).await
        }
        Some((_, action)) => failure(&A2aError::method(&format!("GET :{action}"))),
        None => {
            params["id"] = json!(segment);
            call.run("GetTask", params).await
        }
    }
}

/// `POST /tasks/{id}:cancel` or `POST /tasks/{id}:subscribe`.
async fn task_post(call: Call, bytes: Bytes) -> Response {
    let segment = call.path("task");
    let (id, method) = match segment.rsplit_once(':') {
        Some((id, "cancel")) => (id, "CancelTask"),
        Some((id, "subscribe")) => (id, "SubscribeToTask"),
        _ => return failure(&A2aError::method(&format!("POST /tasks/{segment}"))),
    };
    call.run_with_body(method, &bytes, |_, params| params["id"] = json!(id)).await
}

async fn push_create(call: Call, bytes: Bytes) -> Response {
    call.run_with_body("CreateTaskPushNotificationConfig", &bytes, |call, params| {
        params["taskId"] = json!(call.path("task"));
    })
    .await
}

async fn push_list(call: Call, Query(q): Query<HashMap<String, String>>) -> Response {
    let mut params = query(q);
    params["taskId"] = json!(call.path("task"));
    call.run("ListTaskPushNotificationConfigs", params).await
}

async fn push_get(call: Call) -> Response {
    let params = json!({ "taskId": call.path("task"), "id": call.path("config") });
    call.run("GetTaskPushNotificationConfig", params).await
}

async fn push_delete(call: Call) -> Response {
    let params = json!({ "taskId": call.path("task"), "id": call.path("config") });
    call.run("DeleteTaskPushNotificationConfig", params).await
}

async fn extended_card(call: Call) -> Response {
    call.run("GetExtendedAgentCard", json!({})).await
}
