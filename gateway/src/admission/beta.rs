//! Beta selectors: `anthropic-beta` is a comma list; unknown values are ignored. A
//! family that requires a selector rejects a request without it.

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The selector of agents, sessions, environments, deployments and vaults.
pub const MANAGED_AGENTS: &str = "managed-agents-2026-04-01";

/// The selector of memory stores, memories and memory versions.
pub const AGENT_MEMORY: &str = "agent-memory-2026-07-22";

/// The selector of dreams.
pub const DREAMING: &str = "dreaming-2026-04-21";

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

/// Rejects memory store requests that list neither the agent-memory selector (what the
/// SDK sends) nor the managed-agents one (which the SDK documents as accepted too).
pub async fn require_agent_memory(request: Request, next: Next) -> Response {
    if !has(request.headers(), AGENT_MEMORY) && !has(request.headers(), MANAGED_AGENTS) {
        return ApiError::invalid(format!(
            "anthropic-beta: this route requires the `{AGENT_MEMORY}` (or `{MANAGED_AGENTS}`) beta"
        ))
        .into_response();
    }
    next.run(request).await
}

/// Rejects dream requests that lack the dreaming selector (what the SDK sends).
pub async fn require_dreaming(request: Request, next: Next) -> Response {
    if !has(request.headers(), DREAMING) {
        return ApiError::invalid(format!("anthropic-beta: this route requires the `{DREAMING}` beta")).into_response();
    }
    next.run(request).await
}
