//! A2A 1.0 (as the `a2a-sdk` 1.3 and `@a2a-js/sdk` 1.3 clients speak it), docs/api/a2a.md,
//! ADR 0010.
//!
//! A `contextId` is an adapter thread (bound to a session like the other adapters); a
//! task is one exchange on it: the input that started it and the committed events until
//! the turn answering its latest input ends (`tasks`). The same operations are served
//! over JSON-RPC (`jsonrpc`, with the v0.3 method names translated by `compat`) and the
//! HTTP+JSON binding (`rest`) at `/v1/a2a` and `/v1/a2a/agents/{agent_id}`; agent cards
//! by `card`; push notifications by `push`.

pub mod card;
pub mod compat;
pub mod jsonrpc;
pub mod push;
pub mod rest;
pub mod tasks;

use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::AppState;
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

/// `GET /.well-known/agent-card.json` (outside `/v1`; the caller adds authentication).
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
}

impl A2aError {
    fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
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

    fn error_info(&self) -> Value {
        json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.kind.wire().1,
            "domain": "a2a-protocol.org",
            "metadata": {},
        })
    }

    /// The JSON-RPC `error` object with its ErrorInfo `data`.
    pub fn to_jsonrpc(&self) -> Value {
        json!({ "code": self.code(), "message": self.message, "data": [self.error_info()] })
    }

    /// The REST status and `google.rpc.Status`-like body.
    pub fn to_rest(&self) -> (u16, Value) {
        let (_, _, http, status) = self.kind.wire();
        let body = json!({ "error": {
            "code": http, "status": status, "message": self.message, "details": [self.error_info()],
        } });
        (http, body)
    }
}

impl From<ApiError> for A2aError {
    fn from(error: ApiError) -> Self {
        match error {
            ApiError::InvalidRequest { message, .. }
            | ApiError::NotFound(message)
            | ApiError::Conflict(message)
            | ApiError::Gone(message)
            | ApiError::PreconditionFailed { message, .. } => A2aError::params(message),
            ApiError::PermissionDenied(message) | ApiError::Unauthenticated(message) => A2aError::params(message),
            ApiError::RateLimited { message, .. } | ApiError::Unavailable(message) => A2aError::internal(message),
            ApiError::Internal(cause) => {
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
