//! The control plane, `/v1/config/…` (docs/api/config.md): authoring the workspace's
//! configuration rather than using it. One module per resource family; every error is an
//! RFC 9457 problem ([`problem`]), also for refusals made before a handler runs
//! (`envelope::layer`). Admission (authentication, scope — an API key only —, the rate
//! limiter) is the managed routes'; no beta selector.

pub mod agents;
pub mod problem;
pub mod protocol_config;
pub mod providers;
pub mod webhooks;

use axum::Router;
use axum::routing::{get, post};

use crate::AppState;

/// The control-plane routes, relative to `/v1`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/config/agents", get(agents::list))
        .route("/config/agents/{agent_id}", get(agents::retrieve).put(agents::put).delete(agents::discard))
        .route("/config/agents/{agent_id}/validate", post(agents::validate))
        .route("/config/agents/{agent_id}/publish", post(agents::publish))
        .route("/config/publications/{fingerprint}", get(agents::publication))
        .route("/config/publications/{fingerprint}/export", get(agents::export))
        .route("/config/webhook-subscriptions", get(webhooks::list))
        .route(
            "/config/webhook-subscriptions/{webhook_subscription_id}",
            get(webhooks::retrieve).put(webhooks::put).delete(webhooks::delete),
        )
        .route("/config/webhook-subscriptions/{webhook_subscription_id}/deliveries", get(webhooks::deliveries))
        .merge(providers_router())
        .merge(protocols_router())
}

/// Providers, models and credentials (`providers`).
fn providers_router() -> Router<AppState> {
    use axum::routing::put;
    Router::new()
        .route("/config/providers/{provider_id}", get(providers::get_provider).put(providers::put_provider))
        .route(
            "/config/providers/{provider_id}/endpoints/{endpoint_id}",
            get(providers::get_endpoint).put(providers::put_endpoint),
        )
        .route("/config/offerings", post(providers::post_offering))
        .route("/config/model-attributes/{model_id}", put(providers::put_model_attributes))
        .route("/config/catalog", get(providers::get_catalog))
        .route("/config/credentials", get(providers::list_credentials).post(providers::create_credential))
        .route("/config/credentials/{provider_credential_id}", get(providers::get_credential))
        .route("/config/credentials/{provider_credential_id}/archive", post(providers::archive_credential))
        .route("/config/credential-pools/{credential_pool_id}", get(providers::get_pool).put(providers::put_pool))
        .route(
            "/config/inference-profiles/{inference_profile_id}",
            get(providers::get_profile).put(providers::put_profile),
        )
        .route("/config/inference-profiles/{inference_profile_id}/resolve", post(providers::resolve_profile))
}

/// MCP and A2A configuration: exposure gates, the MCP server registry, each agent's MCP
/// servers (`protocol_config`).
fn protocols_router() -> Router<AppState> {
    use protocol_config as pc;
    Router::new()
        .route("/config/exposure", get(pc::list_exposure))
        .route("/config/exposure/{protocol}", get(pc::get_exposure).put(pc::put_exposure))
        .route("/config/mcp-servers", get(pc::list_servers))
        .route("/config/mcp-servers/{mcp_server_id}", get(pc::get_server).put(pc::put_server).delete(pc::delete_server))
        .route("/config/agents/{agent_id}/mcp", get(pc::get_agent).put(pc::put_agent))
        .route("/config/agents/{agent_id}/mcp/resolve", post(pc::resolve_agent))
}
