//! One A2A 1.0 operation, whichever binding carried it: the JSON-RPC endpoints
//! (`jsonrpc`, and v0.3 through `compat`) and the HTTP+JSON binding (`rest`) all call
//! [`call`], and share the JSON-RPC and SSE framing of its answers. Every bounded
//! request field is read through `bounds` on this path, so a field out of bounds is
//! the same -32602 (REST: 400) naming it on every binding.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::tasks::{self, Item};
use super::{A2aError, A2aResult, Endpoint, bounds, card, push};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::DomainError;
use crate::domain::exposure::{self, Protocol};

/// A JSON-RPC error response: HTTP 200, or 429 with `Retry-After` when rate limited.
pub fn error_response(id: &Value, error: &A2aError) -> Response {
    let status = StatusCode::from_u16(error.jsonrpc_status()).unwrap_or(StatusCode::OK);
    let body = axum::Json(json!({ "jsonrpc": "2.0", "id": id, "error": error.to_jsonrpc() }));
    error.decorate((status, body).into_response())
}

/// A JSON-RPC result response.
pub fn result_response(id: &Value, result: Value) -> Response {
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
    // A per-agent endpoint of an agent A2A does not expose is the endpoint of a
    // missing agent, whatever the method.
    if let Some(agent) = &endpoint.agent {
        let missing = || DomainError::NotFound(format!("agent not found: {agent}"));
        exposure::require(state.backends.store.as_ref(), &tenant.workspace_id, Protocol::A2a, agent, missing).await?;
    }
    Ok(match method {
        "SendMessage" => Result(tasks::send_message(state, tenant, endpoint, headers, params).await?),
        "SendStreamingMessage" => Stream(tasks::send_streaming(state, tenant, endpoint, headers, params).await?),
        "GetTask" => Result(tasks::get_task(state, tenant, params).await?),
        "ListTasks" => Result(tasks::list_tasks(state, tenant, &bounds::ListTasks::parse(params)?).await?),
        "CancelTask" => Result(tasks::cancel_task(state, tenant, params).await?),
        "SubscribeToTask" => Stream(tasks::subscribe(state, tenant, params).await?),
        "CreateTaskPushNotificationConfig" => Result(push::create(state, tenant, params).await?),
        "GetTaskPushNotificationConfig" => Result(push::get(state, tenant, params).await?),
        "ListTaskPushNotificationConfigs" => {
            bounds::push_paging(params)?;
            Result(push::list(state, tenant, params).await?)
        }
        "DeleteTaskPushNotificationConfig" => Result(push::delete(state, tenant, params).await?),
        "GetExtendedAgentCard" => Result(card::extended(state, tenant, endpoint, headers).await?),
        other => return Err(A2aError::method(other)),
    })
}
