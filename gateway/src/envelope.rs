//! Rejections made below the handlers — axum's method routing (405, empty body), body
//! limits (413, plain text), extractors (400/415/422, plain text) and paths outside
//! every route (404, empty) — re-rendered in the envelope of the surface the request
//! addressed: the managed `{"type":"error",…}` body everywhere under `/v1` (the AI SDK
//! and AG-UI adapters answer errors in it too), JSON-RPC error objects on the A2A
//! JSON-RPC endpoints and the MCP endpoint, and the A2A REST binding's status body.
//! One layer, so no handler (present or future) can leak a bare rejection.
//!
//! The control plane (`/v1/config/…`, `/v1/application-access-tokens`) answers every
//! error as an RFC 9457 problem (`control::problem`): besides axum's rejections, the
//! managed-envelope errors admission answers before a handler runs (401, 403, the scope's
//! 404, 429 with its `retry-after`, 503) are rendered as problems here too. The path is
//! the flat one: `/v1/workspaces/{workspace}/config/…` was rewritten before this layer.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::AppState;
use crate::error::ApiError;

/// Which error shape a path answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Surface {
    /// The managed envelope.
    Managed,
    /// A2A JSON-RPC (`POST /v1/a2a`, `POST /v1/a2a/agents/{agent_id}`).
    A2aJsonRpc,
    /// The A2A REST binding (the other `/v1/a2a/…` paths).
    A2aRest,
    /// The MCP endpoint (JSON-RPC).
    Mcp,
    /// The control plane: RFC 9457 problems.
    Control,
}

impl Surface {
    fn of(path: &str, mcp_path: &str) -> Self {
        if path == mcp_path {
            return Surface::Mcp;
        }
        if is_control(path) {
            return Surface::Control;
        }
        let Some(rest) = path.strip_prefix("/v1/a2a") else { return Surface::Managed };
        match rest {
            "" | "/" => Surface::A2aJsonRpc,
            rest if rest.starts_with('/') => match rest.strip_prefix("/agents/") {
                Some(agent) if !agent.trim_end_matches('/').contains('/') => Surface::A2aJsonRpc,
                _ => Surface::A2aRest,
            },
            // `/v1/a2aX` is another (unknown) managed path.
            _ => Surface::Managed,
        }
    }
}

/// Rejection bodies are short; anything longer is not a rejection we re-render.
const MAX_REJECTION: usize = 16 * 1024;

/// The layer: passes every response through except bare 4xx rejections.
pub async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // Cloning a `Uri` shares its bytes: nothing is copied for the answers that pass.
    let method = request.method().clone();
    let uri = request.uri().clone();
    let response = next.run(request).await;
    if Surface::of(uri.path(), &state.mcp.path) == Surface::Control {
        return problem(response, &method, uri.path()).await;
    }
    if !is_bare_rejection(&response) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, MAX_REJECTION).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let allow = parts.headers.get(header::ALLOW).cloned();
    let path = uri.path();
    let message = message(parts.status, &method, path, &text, allow.as_ref());
    match Surface::of(path, &state.mcp.path) {
        Surface::Managed => managed(parts.status, message, allow),
        Surface::A2aJsonRpc => with_allow(crate::adapters::a2a::rejection(parts.status, message, true), allow),
        Surface::A2aRest => with_allow(crate::adapters::a2a::rejection(parts.status, message, false), allow),
        Surface::Mcp => with_allow(jsonrpc(parts.status, message), allow),
        // Answered above.
        Surface::Control => problem_of(parts.status, message, &parts.headers),
    }
}

/// Marks the answer of a handler that panicked (`crate::panicked`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Panicked;

/// A panic's answer on the control plane is a problem (500 `internal`, the cause
/// logged, not sent) like its every other error; elsewhere the managed 500 stays.
pub(crate) async fn panic_as_problem(request: Request, next: Next) -> Response {
    let control = is_control(request.uri().path());
    let response = next.run(request).await;
    if control && response.extensions().get::<Panicked>().is_some() {
        return crate::control::problem::Problem::from_status(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            .into_response();
    }
    response
}

/// Whether a (flat) path is the control plane's.
fn is_control(path: &str) -> bool {
    ["/v1/config", "/v1/application-access-tokens"]
        .iter()
        .any(|root| path.strip_prefix(root).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
}

/// A control-plane answer: an error that is not a problem yet becomes one — a bare
/// rejection with the message [`message`] writes, a managed-envelope error with its own
/// message — with its status and its `retry-after` and `allow` headers.
async fn problem(response: Response, method: &Method, path: &str) -> Response {
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(crate::control::problem::CONTENT_TYPE));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_REJECTION).await.unwrap_or_default();
    let managed = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|body| body["error"]["message"].as_str().map(str::to_owned));
    let detail = managed.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(&bytes).trim().to_owned();
        message(status, method, path, &text, parts.headers.get(header::ALLOW))
    });
    problem_of(status, detail, &parts.headers)
}

fn problem_of(status: StatusCode, detail: String, headers: &axum::http::HeaderMap) -> Response {
    let mut response = crate::control::problem::Problem::from_status(status, detail).into_response();
    for name in [header::RETRY_AFTER, header::ALLOW] {
        if let Some(value) = headers.get(&name) {
            response.headers_mut().insert(name, value.clone());
        }
    }
    response
}

/// A 4xx whose body is empty or plain text: ours are always JSON (or an SSE stream).
fn is_bare_rejection(response: &Response) -> bool {
    if !response.status().is_client_error() {
        return false;
    }
    match response.headers().get(header::CONTENT_TYPE) {
        None => true,
        Some(value) => value.to_str().is_ok_and(|v| v.starts_with("text/plain")),
    }
}

/// A lowercase message naming what was refused; axum's own wording where it is specific.
fn message(status: StatusCode, method: &Method, path: &str, text: &str, allow: Option<&HeaderValue>) -> String {
    match status.as_u16() {
        405 => {
            // The `allow` header is not always set yet where this layer sees the answer
            // (the router adds it on the way out); name the methods when it is.
            match allow.and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()) {
                Some(allowed) => format!("method {method} is not allowed on {path}; allowed: {allowed}"),
                None => format!("method {method} is not allowed on {path} (see the allow header)"),
            }
        }
        413 => format!("the request body of {method} {path} is larger than the route accepts"),
        404 if text.is_empty() => format!("no route for {method} {path}"),
        _ if text.is_empty() => format!("{method} {path}: {}", status.canonical_reason().unwrap_or("refused")),
        _ => format!("{method} {path}: {}", lowercase_first(text)),
    }
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn managed(status: StatusCode, message: String, allow: Option<HeaderValue>) -> Response {
    let error = match status.as_u16() {
        404 => ApiError::NotFound(message),
        405 => ApiError::MethodNotAllowed { message, allow },
        413 => ApiError::PayloadTooLarge(message),
        415 => ApiError::UnsupportedMediaType(message),
        _ => ApiError::invalid(message),
    };
    let mut response = error.into_response();
    // A status with no variant of its own (408, 411, 422, …) keeps its number.
    *response.status_mut() = status;
    response
}

/// The MCP endpoint's shape: a JSON-RPC error object with a null id; the HTTP status is
/// kept (the transport refused the request before any JSON-RPC message was read).
fn jsonrpc(status: StatusCode, message: String) -> Response {
    let code = match status.as_u16() {
        400 if message.to_ascii_lowercase().contains("json") => -32700,
        _ => -32600,
    };
    let body = json!({ "jsonrpc": "2.0", "id": null, "error": { "code": code, "message": message } });
    let mut response = (status, Body::from(body.to_string())).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// Refuses a request body labelled with a content type the API does not read with a
/// bare 415 that [`layer`] renders in the surface's shape. Every `/v1` route reads JSON
/// (`application/json` or an `application/…+json` type) except the uploads, which read
/// `multipart/form-data` and only that ([`takes_multipart`]). A body without a content
/// type is read as JSON, as before; an empty body (body-less POSTs) passes whatever its
/// label.
pub async fn json_bodies(request: Request, next: Next) -> Response {
    if takes_multipart(request.method(), request.uri().path()) {
        let label = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let essence = label.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        if essence != "multipart/form-data" {
            return (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("content-type: expected multipart/form-data, got {label:?}"),
            )
                .into_response();
        }
        return next.run(request).await;
    }
    let has_body = request.headers().contains_key(header::TRANSFER_ENCODING)
        || request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|length| length > 0);
    let label = request.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap_or("?").to_owned());
    match label {
        Some(label) if has_body && !is_json(&label) => {
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, format!("content-type: expected application/json, got {label:?}"))
                .into_response()
        }
        _ => next.run(request).await,
    }
}

/// The upload routes (inside `/v1`): `POST /files`, `POST /skills`,
/// `POST /skills/{skill_id}/versions` and the hands' `POST /ext/sessions/{id}/files`.
fn takes_multipart(method: &Method, path: &str) -> bool {
    if method != Method::POST {
        return false;
    }
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    matches!(segments.as_slice(), ["files"] | ["skills"] | ["skills", _, "versions"] | ["ext", "sessions", _, "files"])
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn with_allow(mut response: Response, allow: Option<HeaderValue>) -> Response {
    if let Some(allow) = allow {
        response.headers_mut().insert(header::ALLOW, allow);
    }
    response
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::StatusCode;
    use serde_json::Value;

    use crate::test_rig::Rig;

    /// The managed envelope, with its request id.
    fn assert_managed(answer: &crate::test_rig::Answer, status: StatusCode, kind: &str) {
        assert_eq!(answer.status, status, "{}", answer.text);
        assert_eq!(answer.body["type"], "error", "{}", answer.text);
        assert_eq!(answer.body["error"]["type"], kind, "{}", answer.text);
        assert!(answer.body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", answer.text);
        assert!(answer.body["request_id"].as_str().is_some_and(|id| id.starts_with("req_")), "{}", answer.text);
        assert!(answer.headers["content-type"].to_str().unwrap().starts_with("application/json"));
    }

    /// A body past axum's default 2 MB limit.
    fn oversized() -> Vec<u8> {
        let mut body = b"{\"name\":\"".to_vec();
        body.resize(3 << 20, b'a');
        body.extend_from_slice(b"\"}");
        body
    }

    #[tokio::test]
    async fn a_wrong_method_is_a_managed_405_naming_the_allowed_methods() {
        let rig = Rig::new().await;
        for (method, path) in [("DELETE", "/v1/agents"), ("PUT", "/v1/sessions"), ("PUT", "/v1/ai-sdk/chat")] {
            let answer = rig.send(rig.request(method, path, Body::empty())).await;
            assert_managed(&answer, StatusCode::METHOD_NOT_ALLOWED, "invalid_request_error");
            assert!(answer.headers.contains_key("allow"), "{method} {path}");
            let message = answer.body["error"]["message"].as_str().unwrap();
            assert!(message.contains(method) && message.contains(path), "{message}");
            assert!(!message.trim_end().ends_with("allowed:"), "no empty list of methods: {message}");
        }
        // The workspace-scoped projection of a route answers the same way.
        let answer = rig.send(rig.request("DELETE", "/v1/workspaces/default/agents", Body::empty())).await;
        assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED, "{}", answer.text);
        assert_eq!(answer.body["type"], "error");
    }

    #[tokio::test]
    async fn an_oversized_body_is_a_managed_413() {
        let rig = Rig::new().await;
        for path in ["/v1/agents", "/v1/sessions", "/v1/ai-sdk/chat", "/v1/ag-ui"] {
            let answer = rig.send(rig.request("POST", path, oversized())).await;
            assert_managed(&answer, StatusCode::PAYLOAD_TOO_LARGE, "request_too_large");
        }
    }

    #[tokio::test]
    async fn malformed_and_non_utf8_bodies_are_managed_400s() {
        let rig = Rig::new().await;
        let bodies: [&[u8]; 4] = [b"{\"name\":\"\xff\xfe\"}", b"\xff\xfe\xfd", b"{\"name\":", b"not json"];
        for body in bodies {
            for path in ["/v1/agents", "/v1/ai-sdk/chat", "/v1/ag-ui"] {
                let answer = rig.send(rig.request("POST", path, body.to_vec())).await;
                assert_managed(&answer, StatusCode::BAD_REQUEST, "invalid_request_error");
            }
        }
        // A path whose id is not UTF-8 once decoded: whatever the status, the envelope.
        let answer = rig.send(rig.request("GET", "/v1/agents/%FF%FE", Body::empty())).await;
        assert!(answer.status.is_client_error(), "{}", answer.text);
        assert_eq!(answer.body["type"], "error", "{}", answer.text);
        assert!(answer.body["request_id"].is_string(), "{}", answer.text);
    }

    #[tokio::test]
    async fn a_body_labelled_with_another_content_type_is_a_415_in_the_surfaces_shape() {
        let rig = Rig::new().await;
        let labelled = |method: &str, path: &str, body: &str, content_type: &str| {
            let mut request = rig.request(method, path, body.to_owned());
            request.headers_mut().insert("content-type", content_type.parse().unwrap());
            request.headers_mut().insert("content-length", body.len().to_string().parse().unwrap());
            request
        };
        for content_type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
            let answer = rig.send(labelled("POST", "/v1/agents", "{\"name\":\"a\"}", content_type)).await;
            assert_managed(&answer, StatusCode::UNSUPPORTED_MEDIA_TYPE, "invalid_request_error");
            let answer = rig.send(labelled("POST", "/v1/ai-sdk/chat", "{}", content_type)).await;
            assert_managed(&answer, StatusCode::UNSUPPORTED_MEDIA_TYPE, "invalid_request_error");
            let answer = rig.send(labelled("POST", "/v1/a2a", "{}", content_type)).await;
            assert_eq!(answer.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", answer.text);
            assert_eq!(answer.body["error"]["code"], -32600, "{}", answer.text);
        }
        // JSON by any of its names is read (here: refused for its content, not its label).
        for content_type in ["application/json; charset=utf-8", "application/a2a+json", "Application/JSON"] {
            let answer = rig.send(labelled("POST", "/v1/agents", "{\"name\":1}", content_type)).await;
            assert_managed(&answer, StatusCode::BAD_REQUEST, "invalid_request_error");
        }
        // A body-less POST passes whatever its label.
        let answer = rig.send(labelled("POST", "/v1/agents/agent_missing/archive", "", "text/plain")).await;
        assert_managed(&answer, StatusCode::NOT_FOUND, "not_found_error");
    }

    /// An RFC 9457 problem of the control plane, with its request id.
    fn assert_problem(answer: &crate::test_rig::Answer, status: StatusCode, code: &str) {
        assert_eq!(answer.status, status, "{}", answer.text);
        assert!(
            answer.headers["content-type"].to_str().unwrap().starts_with("application/problem+json"),
            "{:?}: {}",
            answer.headers,
            answer.text
        );
        assert_eq!(answer.body["type"], "about:blank", "{}", answer.text);
        assert_eq!(answer.body["status"], status.as_u16(), "{}", answer.text);
        assert_eq!(answer.body["code"], code, "{}", answer.text);
        assert!(answer.body["title"].as_str().is_some_and(|t| !t.is_empty()), "{}", answer.text);
        assert!(answer.body["detail"].as_str().is_some_and(|d| !d.is_empty()), "{}", answer.text);
        assert!(answer.body["request_id"].as_str().is_some_and(|id| id.starts_with("req_")), "{}", answer.text);
    }

    #[tokio::test]
    async fn every_refusal_on_the_control_plane_is_a_problem() {
        let rig = Rig::new().await;
        let agent = agentd_schema::ids::new_id("agent");
        let draft = format!("/v1/config/agents/{agent}");
        // No route, flat and through the workspace projection.
        for path in ["/v1/config/nothing", "/v1/config", "/v1/workspaces/default/config/nothing"] {
            assert_problem(
                &rig.send(rig.request("GET", path, Body::empty())).await,
                StatusCode::NOT_FOUND,
                "not_found",
            );
        }
        // An id that does not parse (the scope layer's 404).
        for path in ["/v1/config/agents/nope", "/v1/config/publications/NOPE", "/v1/application-access-tokens/x"] {
            let method = if path.contains("tokens") { "DELETE" } else { "GET" };
            assert_problem(
                &rig.send(rig.request(method, path, Body::empty())).await,
                StatusCode::NOT_FOUND,
                "not_found",
            );
        }
        // 405 with the allowed methods.
        for path in ["/v1/config/agents", &draft, "/v1/workspaces/default/config/agents"] {
            let answer = rig.send(rig.request("PATCH", path, Body::empty())).await;
            assert_problem(&answer, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
        }
        let answer = rig.send(rig.request("GET", "/v1/application-access-tokens", Body::empty())).await;
        assert_problem(&answer, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
        // 413 and 415.
        let answer = rig.send(rig.request("PUT", &draft, oversized())).await;
        assert_problem(&answer, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
        let mut request = rig.request("PUT", &draft, "{}".to_owned());
        request.headers_mut().insert("content-type", "text/plain".parse().unwrap());
        request.headers_mut().insert("content-length", "2".parse().unwrap());
        assert_problem(&rig.send(request).await, StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
        // 400 for a body that is not a JSON object.
        let answer = rig.send(rig.request("PUT", &draft, "[1]".to_owned())).await;
        assert_problem(&answer, StatusCode::BAD_REQUEST, "invalid_request");
        // 401 before any route: no key, a wrong key.
        for key in [None, Some("sk-agentd-wrong")] {
            let mut request = rig.request("GET", "/v1/config/agents", Body::empty());
            request.headers_mut().remove("x-api-key");
            if let Some(key) = key {
                request.headers_mut().insert("x-api-key", key.parse().unwrap());
            }
            assert_problem(&rig.send(request).await, StatusCode::UNAUTHORIZED, "unauthenticated");
        }
        // 403: a workspace the key may not use.
        let answer = rig.send(rig.request("GET", "/v1/workspaces/elsewhere/config/agents", Body::empty())).await;
        assert_problem(&answer, StatusCode::FORBIDDEN, "permission_denied");
        // Managed paths keep the managed envelope.
        let answer = rig.send(rig.request("GET", "/v1/configs", Body::empty())).await;
        assert_managed(&answer, StatusCode::NOT_FOUND, "not_found_error");
    }

    #[tokio::test]
    async fn a_rate_limited_control_request_keeps_its_retry_after() {
        use axum::response::IntoResponse;
        let limited = crate::error::ApiError::RateLimited { message: "slow down".into(), retry_after_secs: 3 };
        let response =
            super::problem(limited.into_response(), &axum::http::Method::PUT, "/v1/config/agents/agent_x").await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()["retry-after"], "3");
        assert_eq!(response.headers()["content-type"], "application/problem+json");
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!((body["code"].as_str(), body["detail"].as_str()), (Some("rate_limited"), Some("slow down")));
        let draining = crate::error::ApiError::Unavailable("this gateway is draining".into());
        let response = super::problem(draining.into_response(), &axum::http::Method::GET, "/v1/config/agents").await;
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["content-type"], "application/problem+json");
    }

    #[tokio::test]
    async fn unknown_paths_outside_v1_answer_in_the_envelope() {
        let rig = Rig::new().await;
        let answer = rig.send(rig.request("GET", "/nothing-here", Body::empty())).await;
        assert_managed(&answer, StatusCode::NOT_FOUND, "not_found_error");
    }

    #[tokio::test]
    async fn a2a_rejections_answer_in_the_bindings_shapes() {
        let rig = Rig::new().await;
        // JSON-RPC endpoint: a JSON-RPC error object, id null, status kept.
        let jsonrpc = |answer: &crate::test_rig::Answer, status: StatusCode, code: i64| {
            assert_eq!(answer.status, status, "{}", answer.text);
            assert_eq!(answer.body["jsonrpc"], "2.0", "{}", answer.text);
            assert_eq!(answer.body["id"], Value::Null, "{}", answer.text);
            assert_eq!(answer.body["error"]["code"], code, "{}", answer.text);
        };
        jsonrpc(&rig.send(rig.request("GET", "/v1/a2a", Body::empty())).await, StatusCode::METHOD_NOT_ALLOWED, -32600);
        jsonrpc(&rig.send(rig.request("POST", "/v1/a2a", oversized())).await, StatusCode::PAYLOAD_TOO_LARGE, -32600);
        jsonrpc(
            &rig.send(rig.request(
                "POST",
                &format!("/v1/a2a/agents/{}", agentd_schema::ids::new_id("agent")),
                oversized(),
            ))
            .await,
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
        );
        // Bad JSON and bad UTF-8 were already the binding's parse error (-32700, HTTP 200).
        for body in [&b"{\"jsonrpc\":"[..], &b"\xff\xfe"[..]] {
            jsonrpc(&rig.send(rig.request("POST", "/v1/a2a", body.to_vec())).await, StatusCode::OK, -32700);
        }
        // REST binding: its status body.
        let answer = rig.send(rig.request("DELETE", "/v1/a2a/tasks", Body::empty())).await;
        assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED, "{}", answer.text);
        assert_eq!(answer.body["error"]["code"], 405, "{}", answer.text);
        assert_eq!(answer.body["error"]["status"], "UNIMPLEMENTED", "{}", answer.text);
        let answer = rig.send(rig.request("POST", "/v1/a2a/message:send", oversized())).await;
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", answer.text);
        assert_eq!(answer.body["error"]["status"], "INVALID_ARGUMENT", "{}", answer.text);
    }

    #[tokio::test]
    async fn mcp_transport_rejections_are_jsonrpc_errors() {
        let rig = Rig::new().await;
        let mut request = rig.request("PUT", "/v1/mcp", Body::empty());
        request.headers_mut().insert("host", "localhost".parse().unwrap());
        let answer = rig.send(request).await;
        assert!(answer.status.is_client_error(), "{}", answer.text);
        assert_eq!(answer.body["jsonrpc"], "2.0", "{}", answer.text);
        assert!(answer.body["error"]["code"].is_i64(), "{}", answer.text);
        // A body that is not JSON by its content type.
        let mut request = rig.request("POST", "/v1/mcp", b"{}".to_vec());
        request.headers_mut().insert("host", "localhost".parse().unwrap());
        request.headers_mut().insert("content-type", "text/plain".parse().unwrap());
        request.headers_mut().insert("accept", "application/json, text/event-stream".parse().unwrap());
        let answer = rig.send(request).await;
        assert!(answer.status.is_client_error(), "{}", answer.text);
        assert_eq!(answer.body["jsonrpc"], "2.0", "{}", answer.text);
        let mut request = rig.request("POST", "/v1/mcp", b"\xff{not json".to_vec());
        request.headers_mut().insert("host", "localhost".parse().unwrap());
        request.headers_mut().insert("accept", "application/json, text/event-stream".parse().unwrap());
        let answer = rig.send(request).await;
        assert!(answer.status.is_client_error(), "{}", answer.text);
        assert_eq!(answer.body["jsonrpc"], "2.0", "{}", answer.text);
    }

    #[tokio::test]
    async fn a_panic_on_the_control_plane_is_a_problem() {
        async fn boom() -> &'static str {
            panic!("boom")
        }
        let routes = axum::Router::new()
            .route("/v1/config/boom", axum::routing::get(boom))
            .route("/v1/application-access-tokens/boom", axum::routing::get(boom))
            .route("/v1/boom", axum::routing::get(boom));
        let app = crate::layered(routes);
        let send = |path: &'static str| {
            let app = app.clone();
            async move {
                let request = axum::http::Request::get(path).body(Body::empty()).unwrap();
                let response = tower::ServiceExt::oneshot(app, request).await.unwrap();
                let status = response.status();
                let headers = response.headers().clone();
                let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                crate::test_rig::Answer { status, headers, body, text }
            }
        };
        for path in ["/v1/config/boom", "/v1/application-access-tokens/boom"] {
            let answer = send(path).await;
            assert_problem(&answer, StatusCode::INTERNAL_SERVER_ERROR, "internal");
            assert!(!answer.text.contains("boom"), "the cause is logged, not sent: {}", answer.text);
        }
        let managed = send("/v1/boom").await;
        assert_eq!(managed.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(managed.body["type"], "error", "the managed envelope elsewhere: {}", managed.text);
    }
}
