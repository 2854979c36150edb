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

/// An A2A error: a JSON-RPC code, its ErrorInfo reason, and the REST status.
#[derive(Debug, Clone)]
pub struct A2aError {
    /// JSON-RPC error code.
    pub code: i64,
    /// `google.rpc.ErrorInfo.reason`.
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
}

impl A2aError {
    fn new(code: i64, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into() }
    }
    /// -32001.
    pub fn task_not_found(id: &str) -> Self {
        Self::new(-32001, "TASK_NOT_FOUND", format!("Task not found: {id}"))
    }
    /// -32002.
    pub fn not_cancelable(message: impl Into<String>) -> Self {
        Self::new(-32002, "TASK_NOT_CANCELABLE", message)
    }
    /// -32004.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(-32004, "UNSUPPORTED_OPERATION", message)
    }
    /// -32009.
    pub fn version(message: impl Into<String>) -> Self {
        Self::new(-32009, "VERSION_NOT_SUPPORTED", message)
    }
    /// -32602.
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(-32602, "INVALID_PARAMS", message)
    }
    /// -32600.
    pub fn request(message: impl Into<String>) -> Self {
        Self::new(-32600, "INVALID_REQUEST", message)
    }
    /// -32601.
    pub fn method(method: &str) -> Self {
        Self::new(-32601, "METHOD_NOT_FOUND", format!("Method not found: {method}"))
    }
    /// -32700.
    pub fn parse(message: impl Into<String>) -> Self {
        Self::new(-32700, "PARSE_ERROR", message)
    }
    /// -32603.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(-32603, "INTERNAL_ERROR", message)
    }

    /// The JSON-RPC `error` object with its ErrorInfo `data`.
    pub fn to_jsonrpc(&self) -> Value {
        json!({
            "code": self.code,
            "message": self.message,
            "data": [{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": self.reason,
                "domain": "a2a-protocol.org",
                "metadata": {},
            }],
        })
    }

    /// The REST status and `google.rpc.Status`-like body.
    pub fn to_rest(&self) -> (u16, Value) {
        let (http, status) = match self.code {
            -32001 | -32601 => (404, "NOT_FOUND"),
            -32002 | -32003 | -32004 | -32007 | -32008 | -32009 => (400, "FAILED_PRECONDITION"),
            -32005 | -32602 | -32600 | -32700 => (400, "INVALID_ARGUMENT"),
            _ => (500, "INTERNAL"),
        };
        let body = json!({ "error": {
            "code": http,
            "status": status,
            "message": self.message,
            "details": [{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": self.reason,
                "domain": "a2a-protocol.org",
                "metadata": {},
            }],
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
