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

/// The user profiles selector the SDK's beta client sends. User profiles require no
/// selector (the GA client sends none); this one and [`USER_PROFILES_2026_03_24`] select
/// the legacy shape (top-level `external_id`, and under this one
/// `external_user_onboarded_at`, instead of `external_user_details`).
pub const USER_PROFILES: &str = "user-profiles-2026-08-18";

/// The oldest user profiles selector: the legacy shape without `access_type` and
/// `external_user_onboarded_at`.
pub const USER_PROFILES_2026_03_24: &str = "user-profiles-2026-03-24";

/// A later user profiles selector the SDK knows (the current shape).
pub const USER_PROFILES_2026_09_04: &str = "user-profiles-2026-09-04";

/// The selector of the organization webhook endpoint API.
pub const WEBHOOKS: &str = "webhooks-2026-10-07";
/// The MCP tunnels selector (what the SDK's `tunnels` resource sends).
pub const MCP_TUNNELS: &str = "mcp-tunnels-2026-06-22";

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

/// Rejects an erasure request that lists none of the user profiles selectors (spec §5
/// rule 3: erasure requires the user-profiles beta selector).
pub async fn require_user_profiles(request: Request, next: Next) -> Response {
    let selectors = [USER_PROFILES, USER_PROFILES_2026_03_24, USER_PROFILES_2026_09_04];
    if !selectors.iter().any(|selector| has(request.headers(), selector)) {
        return ApiError::invalid(format!("anthropic-beta: this route requires the `{USER_PROFILES}` beta"))
            .into_response();
    }
    next.run(request).await
}

/// Rejects tunnel requests that lack the MCP tunnels selector (what the SDK sends).
pub async fn require_mcp_tunnels(request: Request, next: Next) -> Response {
    if !has(request.headers(), MCP_TUNNELS) {
        return ApiError::invalid(format!("anthropic-beta: this route requires the `{MCP_TUNNELS}` beta"))
            .into_response();
    }
    next.run(request).await
}

/// Answers 404 to an organization webhook endpoint request without its selector: the
/// SDK documents that such a request is answered "exactly as if this API did not exist".
pub async fn require_webhooks(request: Request, next: Next) -> Response {
    if !has(request.headers(), WEBHOOKS) {
        let message = format!("no route for {} {}", request.method(), request.uri().path());
        return ApiError::NotFound(message).into_response();
    }
    next.run(request).await
}
