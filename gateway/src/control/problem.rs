//! The control plane's one error type: an RFC 9457 problem document
//! (`application/problem+json`), docs/api/config.md "Errors".
//!
//! ```json
//! {"type": "about:blank", "title": "Unprocessable Entity", "status": 422,
//!  "detail": "name: required", "code": "validation_failed", "request_id": "req_…",
//!  "errors": [{"path": "/name", "message": "name: required"}]}
//! ```
//!
//! `type` is `about:blank` (the status says what kind of problem it is, RFC 9457 §4.2.1)
//! and `code` is the stable machine-readable name clients branch on. Every answer of
//! `/v1/config/…` and `/v1/application-access-tokens` is one: handlers return
//! [`Problem`], and `envelope::layer` renders what admission and axum refuse before a
//! handler runs (401, 403, 404, 405, 413, 415, 429, 503) as one too.

use agentd_schema::StoreError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::admission::request_id;
use crate::domain::DomainError;
use crate::error::ApiError;
use crate::managed::body::FieldError;

/// The media type of every control-plane error.
pub const CONTENT_TYPE: &str = "application/problem+json";

/// A control-plane error: a status, a stable `code`, a lowercase `detail` naming what is
/// at fault, and for validation every field at fault. Boxed: handlers return it in the
/// `Err` of every result, which stays one pointer wide.
#[derive(Debug)]
pub struct Problem(Box<Details>);

#[derive(Debug)]
struct Details {
    status: StatusCode,
    code: &'static str,
    detail: String,
    errors: Vec<FieldError>,
    retry_after_secs: Option<u64>,
    allow: Option<HeaderValue>,
}

impl Problem {
    /// A problem of this status and code.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self(Box::new(Details {
            status,
            code,
            detail: detail.into(),
            errors: Vec::new(),
            retry_after_secs: None,
            allow: None,
        }))
    }

    /// 422 `validation_failed` listing every field at fault (at least one).
    pub fn validation(errors: Vec<FieldError>) -> Self {
        let detail = match errors.as_slice() {
            [one] => one.message.clone(),
            many => format!("{} problems; see errors", many.len()),
        };
        let mut problem = Self::new(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed", detail);
        problem.0.errors = errors;
        problem
    }

    /// The same problem with another code (a family's own name for it).
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.0.code = code;
        self
    }

    /// 422 `validation_failed` for one field, named by the message (`field: …`).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::validation(vec![FieldError::from_message(message)])
    }

    /// 404 `not_found`.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", detail)
    }

    /// The problem of a bare status (a rejection made before any handler ran), with the
    /// code that status has everywhere on the control plane.
    pub fn from_status(status: StatusCode, detail: impl Into<String>) -> Self {
        Self::new(status, code_of(status), detail)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.0.status
    }

    /// The machine-readable code.
    pub fn code(&self) -> &'static str {
        self.0.code
    }
}

/// The code of a status when nothing more specific is known.
fn code_of(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "invalid_request",
        401 => "unauthenticated",
        403 => "permission_denied",
        404 => "not_found",
        405 => "method_not_allowed",
        409 => "conflict",
        410 => "gone",
        412 => "precondition_failed",
        413 => "too_large",
        415 => "unsupported_media_type",
        422 => "validation_failed",
        429 => "rate_limited",
        503 => "unavailable",
        _ if status.is_client_error() => "invalid_request",
        _ => "internal",
    }
}

impl From<DomainError> for Problem {
    /// Validation is 422 (the domain's own code when it has one), a resource outside the
    /// workspace 404, a state that refuses the change 409, a store that cannot answer
    /// 503. The cause of an internal error is logged, never sent.
    fn from(error: DomainError) -> Self {
        let conflict = |code, message| Problem::new(StatusCode::CONFLICT, code, message);
        match error {
            DomainError::Invalid { message, code } => {
                Problem::invalid(message).with_code(code.unwrap_or("validation_failed"))
            }
            DomainError::NotFound(message) | DomainError::Deleted(message) => Problem::not_found(message),
            DomainError::Conflict(message) => conflict("conflict", message),
            DomainError::Archived(message) => conflict("archived", message),
            DomainError::Terminated(message) => conflict("terminated", message),
            DomainError::NameTaken(message) => conflict("name_taken", message),
            DomainError::MemoryPreconditionFailed(message) => conflict("memory_precondition_failed", message),
            DomainError::MemoryPathConflict(message) => conflict("memory_path_conflict", message),
            DomainError::BudgetReached(message) => conflict("budget_reached", message),
            DomainError::AgentDisabled(message) => conflict("agent_disabled", message),
            DomainError::AgentArchived(message) => conflict("agent_archived", message),
            DomainError::EnvironmentArchived(message) => conflict("environment_archived", message),
            DomainError::Gone(message) => Problem::new(StatusCode::GONE, "gone", message),
            DomainError::Expired(message) => Problem::new(StatusCode::GONE, "expired", message),
            DomainError::TooLarge(message) => Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message),
            DomainError::Unavailable(message) => Problem::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message),
            DomainError::Internal(cause) => {
                tracing::error!(%cause, "control plane: internal error");
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
            }
        }
    }
}

impl From<agentd_schema::catalogs::Unloaded> for Problem {
    fn from(error: agentd_schema::catalogs::Unloaded) -> Self {
        DomainError::from(error).into()
    }
}

/// A control-plane request body: a JSON object (whitespace alone is `{}`) of only
/// `fields`. A body that is not a JSON object is a 400 `invalid_request` (the shared
/// `managed::body` parsing); an unknown field is a 422 naming it.
pub fn object(
    bytes: &axum::body::Bytes,
    fields: &[&str],
) -> Result<serde_json::Map<String, serde_json::Value>, Problem> {
    let map = crate::managed::body::object(bytes)?;
    if let Some(unknown) = map.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(Problem::invalid(format!("{unknown}: unknown field")));
    }
    Ok(map)
}

impl From<StoreError> for Problem {
    fn from(error: StoreError) -> Self {
        DomainError::from(error).into()
    }
}

impl From<ApiError> for Problem {
    /// The managed helpers the control plane shares (query strings, cursors, JSON
    /// bodies) answer in the managed error; the same refusal as a problem.
    fn from(error: ApiError) -> Self {
        let detail = error.to_string();
        match error {
            ApiError::InvalidRequest { code, .. } => {
                Problem::from_status(StatusCode::BAD_REQUEST, detail).with_code(code.unwrap_or("invalid_request"))
            }
            ApiError::Coded { status, error_code, .. } => {
                let status = StatusCode::from_u16(status.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
                Problem::new(status, error_code, detail)
            }
            ApiError::RateLimited { retry_after_secs, .. } => {
                let mut problem = Problem::from_status(StatusCode::TOO_MANY_REQUESTS, detail);
                problem.0.retry_after_secs = Some(retry_after_secs);
                problem
            }
            ApiError::MethodNotAllowed { allow, .. } => {
                let mut problem = Problem::from_status(StatusCode::METHOD_NOT_ALLOWED, detail);
                problem.0.allow = allow;
                problem
            }
            ApiError::Internal(cause) => {
                tracing::error!(%cause, "control plane: internal error");
                Problem::from_status(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            }
            ApiError::Unauthenticated(_)
            | ApiError::PermissionDenied(_)
            | ApiError::NotFound(_)
            | ApiError::Conflict(_)
            | ApiError::TypedConflict { .. }
            | ApiError::PreconditionFailed { .. }
            | ApiError::InvalidFields { .. }
            | ApiError::Gone(_)
            | ApiError::PayloadTooLarge(_)
            | ApiError::UnsupportedMediaType(_)
            | ApiError::Unavailable(_) => {
                let status = StatusCode::from_u16(error.code().http_status()).unwrap_or(StatusCode::BAD_REQUEST);
                Problem::from_status(status, detail)
            }
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let problem = *self.0;
        let mut body = json!({
            "type": "about:blank",
            "title": problem.status.canonical_reason().unwrap_or("Error"),
            "status": problem.status.as_u16(),
            "detail": problem.detail,
            "code": problem.code,
            "request_id": request_id::current(),
        });
        if !problem.errors.is_empty() {
            body["errors"] = json!(problem.errors);
        }
        let mut response = (problem.status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
        if let Some(seconds) = problem.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(allow) = problem.allow {
            headers.insert(header::ALLOW, allow);
        }
        response
    }
}

/// Shorthand for control-plane handler results.
pub type ProblemResult<T> = Result<T, Problem>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_domain_error_has_a_status_and_a_code() {
        let cases = [
            (DomainError::NotFound("agent not found: agent_x".into()), 404, "not_found"),
            (DomainError::Deleted("x".into()), 404, "not_found"),
            (DomainError::invalid("name: required"), 422, "validation_failed"),
            (DomainError::invalid_with_code("catalog_invariant", "x"), 422, "catalog_invariant"),
            (DomainError::Archived("x".into()), 409, "archived"),
            (DomainError::Terminated("x".into()), 409, "terminated"),
            (DomainError::BudgetReached("x".into()), 409, "budget_reached"),
            (DomainError::AgentDisabled("x".into()), 409, "agent_disabled"),
            (DomainError::AgentArchived("x".into()), 409, "agent_archived"),
            (DomainError::EnvironmentArchived("x".into()), 409, "environment_archived"),
            (DomainError::Conflict("x".into()), 409, "conflict"),
            (DomainError::Gone("x".into()), 410, "gone"),
            (DomainError::Expired("x".into()), 410, "expired"),
            (DomainError::TooLarge("x".into()), 413, "too_large"),
            (DomainError::NameTaken("x".into()), 409, "name_taken"),
            (DomainError::MemoryPreconditionFailed("x".into()), 409, "memory_precondition_failed"),
            (DomainError::MemoryPathConflict("x".into()), 409, "memory_path_conflict"),
            (DomainError::Unavailable("x".into()), 503, "unavailable"),
            (DomainError::Internal("secret cause".into()), 500, "internal"),
        ];
        for (error, status, code) in cases {
            let problem = Problem::from(error.clone());
            assert_eq!((problem.status().as_u16(), problem.code()), (status, code), "{error:?}");
        }
        let internal = Problem::from(DomainError::Internal("secret cause".into()));
        assert_eq!(internal.0.detail, "internal error", "the cause is logged, not sent");
        let invalid = Problem::from(DomainError::invalid("tools[2].name: required"));
        assert_eq!(invalid.0.errors, vec![FieldError::from_message("tools[2].name: required")]);
        assert_eq!(invalid.0.errors[0].path, "/tools/2/name");
    }

    #[tokio::test]
    async fn the_wire_shape_is_rfc_9457() {
        let problem = Problem::validation(vec![
            FieldError::from_message("name: required"),
            FieldError::from_message("model: required"),
        ]);
        let response = problem.into_response();
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(response.headers()[header::CONTENT_TYPE], CONTENT_TYPE);
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["type"], "about:blank");
        assert_eq!(body["status"], 422);
        assert_eq!(body["code"], "validation_failed");
        assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()));
        assert_eq!(body["errors"][1], json!({"path": "/model", "message": "model: required"}));
        let limited = Problem::from(ApiError::RateLimited { message: "slow down".into(), retry_after_secs: 7 });
        let response = limited.into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "7");
    }
}
