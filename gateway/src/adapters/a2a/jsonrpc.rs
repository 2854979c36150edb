//! The JSON-RPC binding at `/v1/a2a` and `/v1/a2a/agents/{agent_id}`: PascalCase 1.0
//! methods with ProtoJSON params; slash-named v0.3 methods go to `compat`. Errors are
//! JSON-RPC error objects (HTTP 200) with the A2A code and an ErrorInfo in `data`;
//! streams are SSE frames `data: <JSON-RPC response>\n\n`.

use agentd_schema::ids::AgentId;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;

use super::dispatch::{Answer, call, error_response, frame, result_response, sse};
use super::tasks;
use super::{A2aError, A2aResult, Endpoint, compat};
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
