//! A2A 1.0 (as the `a2a-sdk` 1.3 and `@a2a-js/sdk` 1.3 clients speak it), docs/api/a2a.md,
//! ADR 0010.
//!
//! A `contextId` is an adapter thread (bound to a session like the other adapters); a
//! task is one exchange on it: the input that started it and the committed events until
//! the turn answering its latest input ends (`tasks`). The same operations are served
//! over JSON-RPC (`jsonrpc`, with the v0.3 method names translated by `compat`) and the
//! HTTP+JSON binding (`rest`) at `/v1/a2a` and `/v1/a2a/agents/{agent_id}`, every
//! request field within the bounds of the A2A 1.0 proto (`bounds`); agent cards by
//! `card` (a public card without a key, the full one with it); push notifications by
//! `push`.

pub mod bounds;
pub mod card;
pub mod compat;
pub mod dispatch;
pub mod jsonrpc;
mod live;
pub mod push;
pub mod rest;
pub mod tasks;
pub mod view;

use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::AppState;
use crate::domain::DomainError;
use crate::error::ApiError;

/// A2A settings of a gateway.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The public base URL cards advertise (`AGENTD_A2A_PUBLIC_URL`); otherwise the
    /// request's `X-Forwarded-Proto` / `X-Forwarded-Host` / `Host`.
    pub public_url: Option<String>,
    /// Push targets may be private or plain-HTTP addresses (tests only).
    pub push_allow_private: bool,
}

/// The A2A routes relative to `/v1` (JSON-RPC, REST binding, per-agent cards).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/a2a", post(jsonrpc::workspace))
        .route("/a2a/agents/{agent_id}", post(jsonrpc::agent).get(card::agent_card))
        .route("/a2a/agents/{agent_id}/.well-known/agent-card.json", get(card::agent_card))
        .nest("/a2a", rest::router())
        .nest("/a2a/agents/{agent_id}", rest::router())
}

/// `GET /.well-known/agent-card.json` (outside `/v1`; the caller adds admission, which
/// lets it in without a credential: `admission::auth::is_public`).
pub fn well_known_router() -> Router<AppState> {
    Router::new().route("/.well-known/agent-card.json", get(card::workspace_card))
}

/// Which endpoint a request came through: the workspace's or one agent's.
#[derive(Debug, Clone, Default)]
pub struct Endpoint {
    /// The agent of `/v1/a2a/agents/{agent_id}`.
    pub agent: Option<String>,
}

/// What went wrong, in A2A's terms (§3.6 of the protocol notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// -32700: the body is not JSON.
    Parse,
    /// -32600: not a JSON-RPC 2.0 request.
    InvalidRequest,
    /// -32601: unknown method or route.
    MethodNotFound,
    /// -32602: bad params.
    InvalidParams,
    /// -32603: a failure on our side.
    Internal,
    /// -32001.
    TaskNotFound,
    /// -32002.
    TaskNotCancelable,
    /// -32004.
    UnsupportedOperation,
    /// -32005.
    ContentTypeNotSupported,
    /// -32009.
    VersionNotSupported,
    /// A named resource (an agent) does not exist: -32602 over JSON-RPC, 404 over REST.
    NotFound,
    /// No (valid) API key: -32600 over JSON-RPC, 401 over REST.
    Unauthenticated,
    /// The key may not do this: -32600 over JSON-RPC, 403 over REST.
    PermissionDenied,
    /// Too many requests: -32000 with HTTP 429 and `Retry-After` over JSON-RPC too.
    RateLimited,
    /// A backend is unavailable: -32603 with HTTP 503 over REST.
    Unavailable,
}

impl Kind {
    /// JSON-RPC code, ErrorInfo reason, REST status and its gRPC status name.
    fn wire(self) -> (i64, &'static str, u16, &'static str) {
        match self {
            Kind::Parse => (-32700, "PARSE_ERROR", 400, "INVALID_ARGUMENT"),
            Kind::InvalidRequest => (-32600, "INVALID_REQUEST", 400, "INVALID_ARGUMENT"),
            Kind::MethodNotFound => (-32601, "METHOD_NOT_FOUND", 404, "NOT_FOUND"),
            Kind::InvalidParams => (-32602, "INVALID_PARAMS", 400, "INVALID_ARGUMENT"),
            Kind::Internal => (-32603, "INTERNAL_ERROR", 500, "INTERNAL"),
            Kind::TaskNotFound => (-32001, "TASK_NOT_FOUND", 404, "NOT_FOUND"),
            Kind::TaskNotCancelable => (-32002, "TASK_NOT_CANCELABLE", 400, "FAILED_PRECONDITION"),
            Kind::UnsupportedOperation => (-32004, "UNSUPPORTED_OPERATION", 400, "FAILED_PRECONDITION"),
            Kind::ContentTypeNotSupported => (-32005, "CONTENT_TYPE_NOT_SUPPORTED", 400, "INVALID_ARGUMENT"),
            Kind::VersionNotSupported => (-32009, "VERSION_NOT_SUPPORTED", 400, "FAILED_PRECONDITION"),
            Kind::NotFound => (-32602, "NOT_FOUND", 404, "NOT_FOUND"),
            Kind::Unauthenticated => (-32600, "UNAUTHENTICATED", 401, "UNAUTHENTICATED"),
            Kind::PermissionDenied => (-32600, "PERMISSION_DENIED", 403, "PERMISSION_DENIED"),
            Kind::RateLimited => (-32000, "RATE_LIMITED", 429, "RESOURCE_EXHAUSTED"),
            Kind::Unavailable => (-32603, "UNAVAILABLE", 503, "UNAVAILABLE"),
        }
    }
}

/// An A2A error: its kind and a message naming what is at fault.
#[derive(Debug, Clone)]
pub struct A2aError {
    /// The kind.
    pub kind: Kind,
    /// Human-readable message.
    pub message: String,
    /// Whole seconds until a rate-limited request may succeed (`Retry-After`).
    pub retry_after_secs: Option<u64>,
    /// The request field at fault, for a bound broken ([`bounds`]): named in the
    /// ErrorInfo's `metadata.field` and in a `google.rpc.BadRequest` field violation.
    pub field: Option<String>,
}

impl A2aError {
    fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), retry_after_secs: None, field: None }
    }
    /// -32602 (REST 400 `INVALID_ARGUMENT`) naming `field`: "`field`: `problem`".
    pub fn field(field: &str, problem: impl std::fmt::Display) -> Self {
        Self { field: Some(field.to_owned()), ..Self::params(format!("{field}: {problem}")) }
    }
    /// -32001.
    pub fn task_not_found(id: &str) -> Self {
        Self::new(Kind::TaskNotFound, format!("task not found: {id}"))
    }
    /// -32002.
    pub fn not_cancelable(message: impl Into<String>) -> Self {
        Self::new(Kind::TaskNotCancelable, message)
    }
    /// -32004.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(Kind::UnsupportedOperation, message)
    }
    /// -32005.
    pub fn content_type(message: impl Into<String>) -> Self {
        Self::new(Kind::ContentTypeNotSupported, message)
    }
    /// -32009.
    pub fn version(message: impl Into<String>) -> Self {
        Self::new(Kind::VersionNotSupported, message)
    }
    /// -32602.
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(Kind::InvalidParams, message)
    }
    /// -32600.
    pub fn request(message: impl Into<String>) -> Self {
        Self::new(Kind::InvalidRequest, message)
    }
    /// -32601.
    pub fn method(method: &str) -> Self {
        Self::new(Kind::MethodNotFound, format!("method not found: {method}"))
    }
    /// -32700.
    pub fn parse(message: impl Into<String>) -> Self {
        Self::new(Kind::Parse, message)
    }
    /// -32603.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Kind::Internal, message)
    }

    /// The JSON-RPC code.
    pub fn code(&self) -> i64 {
        self.kind.wire().0
    }

    /// The `google.rpc` details: the ErrorInfo the clients map to their error classes
    /// (its metadata names the field at fault, if one is), then, for a field at fault, a
    /// `BadRequest` with the field violation.
    fn details(&self) -> Value {
        let metadata = match &self.field {
            Some(field) => json!({ "field": field }),
            None => json!({}),
        };
        let mut details = vec![json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.kind.wire().1,
            "domain": "a2a-protocol.org",
            "metadata": metadata,
        })];
        if let Some(field) = &self.field {
            details.push(json!({
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{ "field": field, "description": self.message }],
            }));
        }
        Value::Array(details)
    }

    /// The HTTP status of a JSON-RPC error response: 200 (the error is in the body),
    /// except 429 for rate limiting so that clients and proxies back off.
    pub fn jsonrpc_status(&self) -> u16 {
        if self.kind == Kind::RateLimited { 429 } else { 200 }
    }

    /// Adds `Retry-After` to a response carrying this error, when it has one.
    pub fn decorate(&self, mut response: axum::response::Response) -> axum::response::Response {
        if let Some(secs) = self.retry_after_secs {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(secs));
        }
        response
    }

    /// The JSON-RPC `error` object with its ErrorInfo `data`.
    pub fn to_jsonrpc(&self) -> Value {
        json!({ "code": self.code(), "message": self.message, "data": self.details() })
    }

    /// The REST status and `google.rpc.Status`-like body.
    pub fn to_rest(&self) -> (u16, Value) {
        let (_, _, http, status) = self.kind.wire();
        let body = json!({ "error": {
            "code": http, "status": status, "message": self.message, "details": self.details(),
        } });
        (http, body)
    }
}

/// A rejection made below the A2A handlers (method routing, body limits, extractors),
/// in the binding's own shape with its HTTP `status` kept: a JSON-RPC error object
/// (`id` null) for the JSON-RPC endpoints, the `google.rpc.Status`-like body for REST.
pub fn rejection(status: axum::http::StatusCode, message: String, jsonrpc: bool) -> axum::response::Response {
    use axum::response::IntoResponse;
    let error = match status.as_u16() {
        400 if jsonrpc && message.to_ascii_lowercase().contains("json") => A2aError::parse(message),
        404 => A2aError::new(Kind::NotFound, message),
        _ => A2aError::request(message),
    };
    let body = if jsonrpc {
        json!({ "jsonrpc": "2.0", "id": null, "error": error.to_jsonrpc() })
    } else {
        let (_, mut body) = error.to_rest();
        body["error"]["code"] = json!(status.as_u16());
        body["error"]["status"] = json!(match status.as_u16() {
            404 => "NOT_FOUND",
            405 => "UNIMPLEMENTED",
            _ => "INVALID_ARGUMENT",
        });
        body
    };
    let content_type = if jsonrpc { "application/json" } else { "application/a2a+json" };
    (status, [(axum::http::header::CONTENT_TYPE, content_type)], body.to_string()).into_response()
}

impl From<ApiError> for A2aError {
    fn from(error: ApiError) -> Self {
        match error {
            ApiError::InvalidRequest { message, .. }
            | ApiError::InvalidFields { message, .. }
            | ApiError::Conflict(message)
            | ApiError::TypedConflict { message, .. }
            | ApiError::Gone(message)
            | ApiError::PreconditionFailed { message, .. } => A2aError::params(message),
            ApiError::MethodNotAllowed { message, .. }
            | ApiError::PayloadTooLarge(message)
            | ApiError::UnsupportedMediaType(message) => A2aError::request(message),
            ApiError::NotFound(message) => A2aError::new(Kind::NotFound, message),
            ApiError::Coded { status: agentd_proto::Code::NotFound, message, .. } => {
                A2aError::new(Kind::NotFound, message)
            }
            ApiError::Coded { message, .. } => A2aError::params(message),
            ApiError::Unauthenticated(message) => A2aError::new(Kind::Unauthenticated, message),
            ApiError::PermissionDenied(message) => A2aError::new(Kind::PermissionDenied, message),
            ApiError::RateLimited { message, retry_after_secs } => {
                A2aError { retry_after_secs: Some(retry_after_secs), ..A2aError::new(Kind::RateLimited, message) }
            }
            ApiError::Unavailable(message) => A2aError::new(Kind::Unavailable, message),
            ApiError::Internal(cause) => {
                tracing::error!(%cause, "a2a request failed");
                A2aError::internal("internal error")
            }
        }
    }
}

impl From<DomainError> for A2aError {
    /// A2A's answer to each domain error, on both bindings. A context whose session
    /// takes no input (archived, deleted, terminated, over budget, its agent or
    /// environment refusing new turns) is -32004 `UNSUPPORTED_OPERATION` (REST 400
    /// `FAILED_PRECONDITION`), as for input to a terminal task.
    fn from(error: DomainError) -> Self {
        match error {
            DomainError::Archived(message)
            | DomainError::Deleted(message)
            | DomainError::Terminated(message)
            | DomainError::BudgetReached(message)
            | DomainError::AgentDisabled(message)
            | DomainError::AgentArchived(message)
            | DomainError::EnvironmentArchived(message) => A2aError::unsupported(message),
            DomainError::Invalid { message, .. }
            | DomainError::Conflict(message)
            | DomainError::Gone(message)
            | DomainError::TooLarge(message)
            | DomainError::NameTaken(message)
            | DomainError::MemoryPreconditionFailed(message)
            | DomainError::MemoryPathConflict(message) => A2aError::params(message),
            DomainError::NotFound(message) | DomainError::Expired(message) => A2aError::new(Kind::NotFound, message),
            DomainError::Unavailable(message) => A2aError::new(Kind::Unavailable, message),
            DomainError::Internal(cause) => {
                tracing::error!(%cause, "a2a request failed");
                A2aError::internal("internal error")
            }
        }
    }
}

impl From<agentd_schema::StoreError> for A2aError {
    fn from(error: agentd_schema::StoreError) -> Self {
        A2aError::from(ApiError::from(error))
    }
}

/// Result of an A2A operation.
pub type A2aResult<T> = Result<T, A2aError>;

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;

    use super::*;

    #[test]
    fn managed_errors_keep_their_meaning() {
        let limited = A2aError::from(ApiError::RateLimited { message: "slow down".into(), retry_after_secs: 7 });
        assert_eq!((limited.code(), limited.jsonrpc_status(), limited.to_rest().0), (-32000, 429, 429));
        assert_eq!(limited.retry_after_secs, Some(7));
        let response = limited.decorate(axum::http::StatusCode::TOO_MANY_REQUESTS.into_response());
        assert_eq!(response.headers()[axum::http::header::RETRY_AFTER], "7");

        let denied = A2aError::from(ApiError::PermissionDenied("not yours".into()));
        assert_eq!((denied.code(), denied.jsonrpc_status(), denied.to_rest().0), (-32600, 200, 403));
        assert_eq!(denied.to_jsonrpc()["message"], "not yours");
        assert_eq!(denied.to_jsonrpc()["data"][0]["reason"], "PERMISSION_DENIED");
        let unauthenticated = A2aError::from(ApiError::Unauthenticated("no key".into()));
        assert_eq!((unauthenticated.code(), unauthenticated.to_rest().0), (-32600, 401));
        assert_eq!(unauthenticated.to_rest().1["error"]["status"], "UNAUTHENTICATED");

        let down = A2aError::from(ApiError::Unavailable("queue down".into()));
        assert_eq!((down.code(), down.to_rest().0), (-32603, 503));
        let missing = A2aError::from(ApiError::NotFound("agent x".into()));
        assert_eq!((missing.code(), missing.to_rest().0), (-32602, 404));
        let bound = A2aError::field("pageSize", "must be between 1 and 100, got 0");
        assert_eq!((bound.code(), bound.to_rest().0), (-32602, 400));
        assert_eq!(bound.message, "pageSize: must be between 1 and 100, got 0");
        for details in [&bound.to_jsonrpc()["data"], &bound.to_rest().1["error"]["details"]] {
            assert_eq!(details[0]["reason"], "INVALID_PARAMS");
            assert_eq!(details[0]["metadata"], json!({ "field": "pageSize" }));
            assert_eq!(details[1]["@type"], "type.googleapis.com/google.rpc.BadRequest");
            assert_eq!(details[1]["fieldViolations"][0]["field"], "pageSize");
        }
        assert_eq!(A2aError::params("x").to_jsonrpc()["data"].as_array().map(Vec::len), Some(1));
        let internal = A2aError::from(ApiError::Internal("db password in here".into()));
        assert_eq!((internal.code(), internal.message.as_str()), (-32603, "internal error"));
        assert!(A2aError::params("x").retry_after_secs.is_none());
    }
}
