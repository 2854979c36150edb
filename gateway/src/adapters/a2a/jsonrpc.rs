//! The JSON-RPC binding at `/v1/a2a` and `/v1/a2a/agents/{agent_id}`: PascalCase 1.0
//! methods with ProtoJSON params; slash-named v0.3 methods go to `compat`. Errors are
//! JSON-RPC error objects (HTTP 200) with the A2A code and an ErrorInfo in `data`;
//! streams are SSE frames `data: <JSON-RPC response>\n\n`.

use agentd_schema::ids::AgentId;
use std::convert::Infallible;
use std::time::Duration;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::tasks::{self, Item};
use super::{A2aError, A2aResult, Endpoint, card, compat, push};
use crate::AppState;
use crate::admission::Tenant;

/// `POST /v1/a2a`.
pub async fn workspace(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    handle(&state, &tenant, &Endpoint::default(), &headers, &bytes).await
}

/// `POST /v1/a2a/agents/{agent_id}`.
pub async fn agent(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent): Path<AgentId>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    handle(&state, &tenant, &Endpoint { agent: Some(agent.into()) }, &headers, &bytes).await
}

/// A JSON-RPC error response: HTTP 200, or 429 with `Retry-After` when rate limited.
pub fn error_response(id: &Value, error: &A2aError) -> Response {
    let status = StatusCode::from_u16(error.jsonrpc_status()).unwrap_or(StatusCode::OK);
    let body = axum::Json(json!({ "jsonrpc": "2.0", "id": id, "error": error.to_jsonrpc() }));
    error.decorate((status, body).into_response())
}

fn result_response(id: &Value, result: Value) -> Response {
    axum::Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response()
}

/// An SSE response: each item through `wrap` as one `data:` frame.
pub fn sse(rx: mpsc::Receiver<Item>, wrap: impl Fn(Item) -> Value + Send + 'static) -> Response {
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(move |item| Ok::<_, Infallible>(Event::default().data(wrap(item).to_string())));
    let mut response = Sse::new(frames).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response();
    response.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    response.headers_mut().insert("cache-control", HeaderValue::from_static("no-cache"));
    response
}

/// The JSON-RPC response frame for a stream item.
pub fn frame(id: &Value, item: Item) -> Value {
    match item {
        Item::Event(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Item::Error(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.to_jsonrpc() }),
    }
}

/// Whether `A2A-Version` allows the 1.0 methods: absent, or major version 1.
fn check_version(headers: &HeaderMap) -> A2aResult<()> {
    let Some(raw) = headers.get("a2a-version") else { return Ok(()) };
    let version = raw.to_str().unwrap_or("").trim();
    if version.is_empty() || version.split('.').next() == Some("1") {
        return Ok(());
    }
    Err(A2aError::version(format!(
        "A2A-Version {version} is not supported by these methods; this endpoint speaks 1.0 (and the v0.3 slash-named methods)"
    )))
}

/// What a call answers: one result or a stream.
pub enum Answer {
    /// A single result.
    Result(Value),
    /// A stream of items.
    Stream(mpsc::Receiver<Item>),
}

/// Runs one 1.0 method.
pub async fn call(
    state: &AppState,
    tenant: &Tenant,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    method: &str,
    params: &Value,
) -> A2aResult<Answer> {
    use Answer::{Result, Stream};
    Ok(match method {
        "SendMessage" => Result(tasks::send_message(state, tenant, endpoint, headers, params).await?),
        "SendStreamingMessage" => Stream(tasks::send_streaming(state, tenant, endpoint, headers, params).await?),
        "GetTask" => Result(tasks::get_task(state, tenant, params).await?),
        "ListTasks" => Result(tasks::list_tasks(state, tenant, params).await?),
        "CancelTask" => Result(tasks::cancel_task(state, tenant, params).await?),
        "SubscribeToTask" => Stream(tasks::subscribe(state, tenant, params).await?),
        "CreateTaskPushNotificationConfig" => Result(push::create(state, tenant, params).await?),
        "GetTaskPushNotificationConfig" => Result(push::get(state, tenant, params).await?),
        "ListTaskPushNotificationConfigs" => Result(push::list(state, tenant, params).await?),
        "DeleteTaskPushNotificationConfig" => Result(push::delete(state, tenant, params).await?),
        "GetExtendedAgentCard" => Result(card::extended(state, tenant, endpoint, headers).await?),
        other => return Err(A2aError::method(other)),
    })
}

async fn handle(
    state: &AppState,
    tenant: &Tenant,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Response {
    let request: Value = match serde_json::from_slice(bytes) {
        Ok(request) => request,
        Err(error) => {
            return error_response(&Value::Null, &A2aError::parse(format!("the body is not valid JSON: {error}")));
        }
    };
    let Some(object) = request.as_object() else {
        return error_response(&Value::Null, &A2aError::request("the request must be a JSON-RPC 2.0 object"));
    };
    let id = match object.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id.clone(),
        None => Value::Null,
        Some(_) => return error_response(&Value::Null, &A2aError::request("id: a string, number or null is required")),
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return error_response(&id, &A2aError::request("jsonrpc: \"2.0\" is required"));
    }
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        return error_response(&id, &A2aError::request("method: a string is required"));
    };
    let params = match tasks::params_object(object.get("params")) {
        Ok(params) => params,
        Err(error) => return error_response(&id, &error),
    };
    if method.contains('/') {
        return compat::handle(state, tenant, endpoint, headers, method, &params, id).await;
    }
    if let Err(error) = check_version(headers) {
        return error_response(&id, &error);
    }
    match call(state, tenant, endpoint, headers, method, &params).await {
        Ok(Answer::Result(result)) => result_response(&id, result),
        Ok(Answer::Stream(rx)) => sse(rx, move |item| frame(&id, item)),
        Err(error) => error_response(&id, &error),
    }
}
