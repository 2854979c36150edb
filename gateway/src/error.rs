//! The managed API's error type and its wire shape:
//! `{"type":"error","error":{"type":…,"message":…},"request_id":…}`.
//!
//! Every variant maps to one status and one `error.type`; internal causes are logged,
//! never sent. Deterministic conflicts carry `x-should-retry: false` so the SDK does
//! not replay them.

use agentd_proto::Code;
use agentd_schema::StoreError;
use axum::Json;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::admission::request_id;
use crate::domain::DomainError;

/// An error answered by a managed (`/v1`) route.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 `invalid_request_error`; `code` goes to `error.details.error_code`.
    #[error("{message}")]
    InvalidRequest {
        /// Names the field at fault.
        message: String,
        /// Machine-readable detail, e.g. `environment_archived`.
        code: Option<&'static str>,
    },
    /// 400 `invalid_request_error` with every field at fault in `error.details`:
    /// `{error_code, errors: [{path, message}]}`, each `path` a JSON pointer.
    #[error("{message}")]
    InvalidFields {
        /// Names the first field at fault and how many there are.
        message: String,
        /// `error.details`.
        details: serde_json::Value,
    },
    /// 401 `authentication_error`.
    #[error("{0}")]
    Unauthenticated(String),
    /// 403 `permission_error`.
    #[error("{0}")]
    PermissionDenied(String),
    /// 404 `not_found_error`.
    #[error("{0}")]
    NotFound(String),
    /// 409 `conflict_error`, never worth replaying unchanged.
    #[error("{0}")]
    Conflict(String),
    /// 409 with an `error.type` of its own (`memory_precondition_failed_error`,
    /// `memory_path_conflict_error`), never worth replaying unchanged.
    #[error("{message}")]
    TypedConflict {
        /// The wire `error.type`.
        error_type: &'static str,
        /// What collided.
        message: String,
    },
    /// 412 `invalid_request_error` with `error.details` (`error_code` and more).
    #[error("{message}")]
    PreconditionFailed {
        /// What did not match.
        message: String,
        /// `error.details`.
        details: serde_json::Value,
    },
    /// 410 `invalid_request_error`: the target no longer takes the change.
    #[error("{0}")]
    Gone(String),
    /// 405 `invalid_request_error` with `allow`: the route exists, not for this method.
    #[error("{message}")]
    MethodNotAllowed {
        /// Names the method and the path.
        message: String,
        /// The methods the route serves (the `allow` header).
        allow: Option<HeaderValue>,
    },
    /// 413 `request_too_large`: the body is larger than the route accepts.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 415 `invalid_request_error`: the body's content type is not one the route reads.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 429 `rate_limit_error` with `retry-after`.
    #[error("{message}")]
    RateLimited {
        /// What was limited.
        message: String,
        /// Whole seconds until a request may succeed (≥ 1).
        retry_after_secs: u64,
    },
    /// A status of its own with `error.details.error_code` (`file_expired`,
    /// `skill_name_taken`).
    #[error("{message}")]
    Coded {
        /// The status.
        status: Code,
        /// What happened.
        message: String,
        /// `error.details.error_code`.
        error_code: &'static str,
    },
    /// 503 `api_error`: a dependency is down or the process is draining. Fail closed.
    #[error("{0}")]
    Unavailable(String),
    /// 500 `api_error`: a bug; the cause is logged, not sent.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    /// A 400 naming the field at fault.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::InvalidRequest { message: message.into(), code: None }
    }

    /// A 400 with a machine-readable `error_code`.
    pub fn invalid_with_code(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::InvalidRequest { message: message.into(), code: Some(code) }
    }

    /// The transport-neutral code.
    pub fn code(&self) -> Code {
        match self {
            ApiError::InvalidRequest { .. } | ApiError::InvalidFields { .. } => Code::InvalidRequest,
            ApiError::Unauthenticated(_) => Code::Unauthenticated,
            ApiError::PermissionDenied(_) => Code::PermissionDenied,
            ApiError::NotFound(_) => Code::NotFound,
            ApiError::Conflict(_) | ApiError::TypedConflict { .. } => Code::Conflict,
            ApiError::PreconditionFailed { .. } => Code::PreconditionFailed,
            ApiError::Gone(_) => Code::Gone,
            ApiError::MethodNotAllowed { .. } => Code::MethodNotAllowed,
            ApiError::PayloadTooLarge(_) => Code::PayloadTooLarge,
            ApiError::UnsupportedMediaType(_) => Code::UnsupportedMediaType,
            ApiError::RateLimited { .. } => Code::RateLimited,
            ApiError::Unavailable(_) => Code::Unavailable,
            ApiError::Internal(_) => Code::Internal,
            ApiError::Coded { status, .. } => *status,
        }
    }

    /// The wire `error.type`.
    pub fn wire_type(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest { .. }
            | ApiError::InvalidFields { .. }
            | ApiError::PreconditionFailed { .. }
            | ApiError::Gone(_)
            | ApiError::MethodNotAllowed { .. }
            | ApiError::UnsupportedMediaType(_) => "invalid_request_error",
            ApiError::PayloadTooLarge(_) => "request_too_large",
            ApiError::Unauthenticated(_) => "authentication_error",
            ApiError::PermissionDenied(_) => "permission_error",
            ApiError::NotFound(_) => "not_found_error",
            ApiError::Conflict(_) => "conflict_error",
            ApiError::TypedConflict { error_type, .. } => error_type,
            ApiError::RateLimited { .. } => "rate_limit_error",
            ApiError::Unavailable(_) | ApiError::Internal(_) => "api_error",
            ApiError::Coded { status, .. } => match status {
                Code::NotFound => "not_found_error",
                Code::Conflict => "conflict_error",
                Code::PayloadTooLarge => "request_too_large",
                Code::Unavailable | Code::Internal => "api_error",
                _ => "invalid_request_error",
            },
        }
    }
}

impl From<DomainError> for ApiError {
    /// The managed API's answer to each domain error. A session that is archived,
    /// terminated, over its budget or whose agent or environment refuses new turns is a
    /// 400 (the request cannot succeed as it is); a deleted session is a 404.
    fn from(error: DomainError) -> Self {
        match error {
            DomainError::NotFound(message) | DomainError::Deleted(message) => ApiError::NotFound(message),
            DomainError::Invalid { message, code } => ApiError::InvalidRequest { message, code },
            DomainError::Archived(message)
            | DomainError::Terminated(message)
            | DomainError::AgentDisabled(message)
            | DomainError::AgentArchived(message) => ApiError::invalid(message),
            DomainError::BudgetReached(message) => ApiError::invalid_with_code("budget_reached", message),
            DomainError::EnvironmentArchived(message) => ApiError::invalid_with_code("environment_archived", message),
            DomainError::Conflict(message) => ApiError::Conflict(message),
            DomainError::Gone(message) => ApiError::Gone(message),
            DomainError::Expired(message) => {
                ApiError::Coded { status: Code::NotFound, message, error_code: "file_expired" }
            }
            DomainError::TooLarge(message) => ApiError::PayloadTooLarge(message),
            DomainError::NameTaken(message) => {
                ApiError::Coded { status: Code::Conflict, message, error_code: "skill_name_taken" }
            }
            DomainError::MemoryPreconditionFailed(message) => {
                ApiError::TypedConflict { error_type: "memory_precondition_failed_error", message }
            }
            DomainError::MemoryPathConflict(message) => {
                ApiError::TypedConflict { error_type: "memory_path_conflict_error", message }
            }
            DomainError::Unavailable(message) => ApiError::Unavailable(message),
            DomainError::Internal(cause) => ApiError::Internal(cause),
        }
    }
}

impl From<agentd_schema::catalogs::Unloaded> for ApiError {
    fn from(error: agentd_schema::catalogs::Unloaded) -> Self {
        DomainError::from(error).into()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(cause) => {
                tracing::warn!(%cause, "store unavailable");
                ApiError::Unavailable("the store is unavailable; retry once it is back".to_owned())
            }
            StoreError::NotFound { what, id } => ApiError::NotFound(format!("{what} not found: {id}")),
            StoreError::Conflict(message) => ApiError::Conflict(message),
            StoreError::Fenced { .. } | StoreError::Backend(_) => ApiError::Internal(error.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(cause) = &self {
            tracing::error!(%cause, "internal error");
        }
        let status = StatusCode::from_u16(self.code().http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut error = json!({ "type": self.wire_type(), "message": self.to_string() });
        if let ApiError::InvalidRequest { code: Some(code), .. } = &self {
            error["details"] = json!({ "error_code": code });
        }
        if let ApiError::Coded { error_code, .. } = &self {
            error["details"] = json!({ "error_code": error_code });
        }
        if let ApiError::PreconditionFailed { details, .. } | ApiError::InvalidFields { details, .. } = &self {
            error["details"] = details.clone();
        }
        let mut body = json!({ "type": "error", "error": error });
        if let Some(id) = request_id::current() {
            body["request_id"] = json!(id);
        }
        let mut response = (status, Json(body)).into_response();
        let headers = response.headers_mut();
        match &self {
            ApiError::Conflict(_) | ApiError::TypedConflict { .. } | ApiError::Coded { status: Code::Conflict, .. } => {
                headers.insert("x-should-retry", HeaderValue::from_static("false"));
            }
            ApiError::RateLimited { retry_after_secs, .. } => {
                headers.insert("retry-after", HeaderValue::from(*retry_after_secs));
            }
            ApiError::MethodNotAllowed { allow: Some(allow), .. } => {
                headers.insert("allow", allow.clone());
            }
            _ => {}
        }
        response
    }
}

/// Shorthand for handler results.
pub type ApiResult<T> = Result<T, ApiError>;
