//! Beta selectors: `anthropic-beta` is a comma list; unknown values are ignored. A
//! family that requires a selector rejects a request without it.

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The selector of agents, sessions, environments, deployments and vaults.
pub const MANAGED_AGENTS: &str = "managed-agents-2026-04-01";

/// Whether `anthropic-beta` (possibly repeated) lists `value`.
pub fn has(headers: &HeaderMap, value: &str) -> bool {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim() == value)
}

/// Rejects requests that lack the managed-agents selector.
pub async fn require_managed_agents(request: Request, next: Next) -> Response {
    if !has(request.headers(), MANAGED_AGENTS) {
        return ApiError::invalid(format!("anthropic-beta: this route requires the `{MANAGED_AGENTS}` beta"))
            .into_response();
    }
    next.run(request).await
}
