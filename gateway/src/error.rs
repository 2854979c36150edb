//! The managed API's error type and its wire shape:
//! `{"type":"error","error":{"type":…,"message":…}}`.

use agentd_proto::Code;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered by a `/v1` route.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 `invalid_request_error`.
    #[error("{0}")]
    InvalidRequest(String),
    /// 404 `not_found_error`.
    #[error("{0}")]
    NotFound(String),
    /// 503 `api_error`: a dependency is down or the process is draining.
    #[error("{0}")]
    Unavailable(String),
}

impl ApiError {
    /// The transport-neutral code.
    pub fn code(&self) -> Code {
        match self {
            ApiError::InvalidRequest(_) => Code::InvalidRequest,
            ApiError::NotFound(_) => Code::NotFound,
            ApiError::Unavailable(_) => Code::Unavailable,
        }
    }

    /// The wire `error.type`.
    pub fn wire_type(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "invalid_request_error",
            ApiError::NotFound(_) => "not_found_error",
            ApiError::Unavailable(_) => "api_error",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code().http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = json!({ "type": "error", "error": { "type": self.wire_type(), "message": self.to_string() } });
        (status, Json(body)).into_response()
    }
}
