//! The Managed Agents API families, one module each. Handlers parse, call the store,
//! and render; admission (auth, scope, limits, beta) has already run.

pub(crate) mod agent_config;
pub mod agents;
pub mod app_tokens;
pub mod body;
pub(crate) mod content;
pub mod credentials;
pub mod deployments;
pub mod dreams;
pub mod environment_keys;
pub mod environments;
pub mod erasure;
pub mod events;
pub mod family;
pub mod files;
pub mod limits;
pub mod live_inbox;
mod mcp_probe;
pub mod memory;
pub mod models;
pub mod org_webhooks;
pub mod query;
pub mod sandbox_environment;
pub mod sandbox_policies;
pub mod session_resources;
pub mod sessions;
pub mod skills;
pub mod tunnels;
pub mod user_profiles;
pub mod vaults;
mod web_tool_config;
pub mod work;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post, put};

use crate::AppState;
use crate::admission::beta;

/// The managed routes, relative to `/v1`.
pub fn router() -> Router<AppState> {
    let managed_agents = Router::new()
        .route("/agents", post(agents::create).get(agents::list))
        .route("/agents/{agent_id}", get(agents::retrieve).post(agents::update))
        .route("/agents/{agent_id}/archive", post(agents::archive))
        .route("/agents/{agent_id}/disable", post(agents::disable))
        .route("/agents/{agent_id}/versions", get(agents::versions))
        .route("/environments", post(environments::create).get(environments::list))
        .route(
            "/environments/{environment_id}",
            get(environments::retrieve).post(environments::update).delete(environments::delete),
        )
        .route("/environments/{environment_id}/archive", post(environments::archive))
        .route("/environments/{environment_id}/work", get(work::list))
        .route("/environments/{environment_id}/work/poll", get(work::poll))
        .route("/environments/{environment_id}/work/stats", get(work::stats))
        .route("/environments/{environment_id}/work/{work_id}", get(work::retrieve).post(work::update))
        .route("/environments/{environment_id}/work/{work_id}/ack", post(work::ack))
        .route("/environments/{environment_id}/work/{work_id}/heartbeat", post(work::heartbeat))
        .route("/environments/{environment_id}/work/{work_id}/stop", post(work::stop))
        .route("/sessions", post(sessions::create).get(sessions::list))
        .route("/sessions/{session_id}", get(sessions::retrieve).post(sessions::update).delete(sessions::delete))
        .route("/sessions/{session_id}/archive", post(sessions::archive))
        .route("/sessions/{session_id}/resources", get(session_resources::list).post(session_resources::add))
        .route(
            "/sessions/{session_id}/resources/{resource_id}",
            get(session_resources::retrieve).post(session_resources::update).delete(session_resources::delete),
        )
        .route("/sessions/{session_id}/events", post(events::send).get(events::list))
        .route("/sessions/{session_id}/events/stream", get(events::stream))
        .route("/sessions/{session_id}/threads", get(events::threads))
        .route("/sessions/{session_id}/threads/{thread_id}", get(events::thread))
        .route("/sessions/{session_id}/threads/{thread_id}/archive", post(events::archive_thread))
        .route("/sessions/{session_id}/threads/{thread_id}/events", get(events::thread_events))
        .route("/sessions/{session_id}/threads/{thread_id}/stream", get(events::thread_stream))
        .route("/deployments", post(deployments::create).get(deployments::list))
        .route("/deployments/{deployment_id}", get(deployments::retrieve).post(deployments::update))
        .route("/deployments/{deployment_id}/archive", post(deployments::archive))
        .route("/deployments/{deployment_id}/pause", post(deployments::pause))
        .route("/deployments/{deployment_id}/unpause", post(deployments::unpause))
        .route("/deployments/{deployment_id}/run", post(deployments::run))
        .route("/deployment_runs", get(deployments::list_runs))
        .route("/deployment_runs/{deployment_run_id}", get(deployments::retrieve_run))
        .route("/vaults", post(vaults::create).get(vaults::list))
        .route("/vaults/{vault_id}", get(vaults::retrieve).post(vaults::update).delete(vaults::delete))
        .route("/vaults/{vault_id}/archive", post(vaults::archive))
        .route("/vaults/{vault_id}/credentials", post(credentials::create).get(credentials::list))
        .route(
            "/vaults/{vault_id}/credentials/{credential_id}",
            get(credentials::retrieve).post(credentials::update).delete(credentials::delete),
        )
        .route("/vaults/{vault_id}/credentials/{credential_id}/archive", post(credentials::archive))
        .route(
            "/vaults/{vault_id}/credentials/{credential_id}/mcp_oauth_validate",
            post(credentials::mcp_oauth_validate),
        )
        .route_layer(middleware::from_fn(beta::require_managed_agents));
    // Files and skills take no beta selector either (reference §1.4). Uploads are
    // multipart and streamed: no whole-body limit (the file limit is counted as the
    // bytes go to the object store).
    let files = Router::new()
        .route("/files", post(files::upload).layer(DefaultBodyLimit::disable()).get(files::list))
        .route("/files/{file_id}", get(files::retrieve).delete(files::delete))
        .route("/files/{file_id}/content", get(files::content))
        .route("/skills", post(skills::create).layer(DefaultBodyLimit::disable()).get(skills::list))
        .route("/skills/{skill_id}", get(skills::retrieve).delete(skills::delete))
        .route(
            "/skills/{skill_id}/versions",
            post(skills::create_version).layer(DefaultBodyLimit::disable()).get(skills::list_versions),
        )
        .route("/skills/{skill_id}/versions/{version}", get(skills::retrieve_version).delete(skills::delete_version))
        .route("/skills/{skill_id}/versions/{version}/content", get(skills::content));
    // Agent memory takes its own selector (reference §1.4).
    let memory_stores = Router::new()
        .route("/memory_stores", post(memory::create_store).get(memory::list_stores))
        .route(
            "/memory_stores/{memory_store_id}",
            get(memory::retrieve_store).post(memory::update_store).delete(memory::delete_store),
        )
        .route("/memory_stores/{memory_store_id}/archive", post(memory::archive_store))
        .route("/memory_stores/{memory_store_id}/memories", post(memory::create_memory).get(memory::list_memories))
        .route(
            "/memory_stores/{memory_store_id}/memories/{memory_id}",
            get(memory::retrieve_memory).post(memory::update_memory).delete(memory::delete_memory),
        )
        .route("/memory_stores/{memory_store_id}/memory_versions", get(memory::list_versions))
        .route("/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}", get(memory::retrieve_version))
        .route(
            "/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact",
            post(memory::redact_version),
        )
        .route_layer(middleware::from_fn(beta::require_agent_memory));
    // Dreams take their own selector (reference §1.4).
    let dream_routes = Router::new()
        .route("/dreams", post(dreams::create).get(dreams::list))
        .route("/dreams/{dream_id}", get(dreams::retrieve))
        .route("/dreams/{dream_id}/archive", post(dreams::archive))
        .route("/dreams/{dream_id}/cancel", post(dreams::cancel))
        .route_layer(middleware::from_fn(beta::require_dreaming));
    // MCP tunnels take their own selector (reference §2.16).
    let tunnel_routes = Router::new()
        .route("/tunnels", post(tunnels::create).get(tunnels::list))
        .route("/tunnels/{tunnel_id}", get(tunnels::retrieve))
        .route("/tunnels/{tunnel_id}/archive", post(tunnels::archive))
        .route("/tunnels/{tunnel_id}/reveal_token", post(tunnels::reveal_token))
        .route("/tunnels/{tunnel_id}/rotate_token", post(tunnels::rotate_token))
        .route("/tunnels/{tunnel_id}/certificates", post(tunnels::create_certificate).get(tunnels::list_certificates))
        .route("/tunnels/{tunnel_id}/certificates/{certificate_id}", get(tunnels::retrieve_certificate))
        .route("/tunnels/{tunnel_id}/certificates/{certificate_id}/archive", post(tunnels::archive_certificate))
        .route_layer(middleware::from_fn(beta::require_mcp_tunnels));
    // Erasure requires a user profiles selector (spec §5 rule 3).
    let erasure_routes = Router::new()
        .route("/user_profiles/{user_profile_id}/erasure", post(erasure::erase))
        .route_layer(middleware::from_fn(beta::require_user_profiles));
    // User profiles take no beta selector: the GA client sends none; the beta client's
    // `user-profiles-2026-08-18` (or `…-03-24`) selects the legacy shape (reference §2.14).
    let profiles = Router::new()
        .route("/user_profiles", post(user_profiles::create).get(user_profiles::list))
        .route(
            "/user_profiles/{user_profile_id}",
            get(user_profiles::retrieve).post(user_profiles::update).delete(user_profiles::delete),
        )
        .route("/user_profiles/{user_profile_id}/enrollment_url", post(user_profiles::enrollment_url))
        .route("/user_profiles/{user_profile_id}/action_urls", post(user_profiles::action_url));
    // Application access tokens (control plane, no beta selector; problem+json errors).
    let tokens = Router::new()
        .route("/application-access-tokens", post(app_tokens::create))
        .route("/application-access-tokens/{application_access_token_id}", axum::routing::delete(app_tokens::delete));
    // The organization webhook endpoint API: 404 without its selector (reference §6.1).
    let organization_webhooks = Router::new()
        .route("/organizations/webhooks", post(org_webhooks::create).get(org_webhooks::list))
        .route(
            "/organizations/webhooks/{webhook_endpoint_id}",
            get(org_webhooks::retrieve).post(org_webhooks::update).delete(org_webhooks::delete),
        )
        .route(
            "/organizations/webhooks/{webhook_endpoint_id}/regenerate_signing_secret",
            post(org_webhooks::regenerate_signing_secret),
        )
        .route_layer(middleware::from_fn(beta::require_webhooks));
    // Models take no beta selector: the SDK sends none.
    let models = Router::new().route("/models", get(models::list)).route("/models/{model_id}", get(models::retrieve));
    // Extension routes (documented in docs/api/hands.md and docs/api/skills.md); no
    // beta selector.
    let extensions = Router::new()
        .route("/ext/skills/{skill_id}/versions/{version}/files/{*path}", get(skills::file))
        .route("/ext/runner/work/poll", get(work::poll_cloud))
        .route("/ext/environments/{environment_id}/work/{work_id}/refuse", post(work::refuse))
        .route("/ext/sessions/{session_id}/live-inbox", get(live_inbox::snapshot).post(live_inbox::enqueue))
        .route(
            "/ext/sessions/{session_id}/resources",
            get(session_resources::get_manifest).put(session_resources::replace),
        )
        .route("/ext/sessions/{session_id}/live-inbox/order", put(live_inbox::reorder))
        .route("/ext/sessions/{session_id}/sandbox-environment", get(sandbox_environment::retrieve))
        .route("/ext/sessions/{session_id}/files", post(files::hands_upload).layer(DefaultBodyLimit::disable()))
        .route("/ext/sessions/{session_id}/files/{file_id}/content", get(files::hands_content))
        .route(
            "/ext/sessions/{session_id}/live-inbox/{message_id}",
            put(live_inbox::replace).delete(live_inbox::withdraw),
        )
        .route("/ext/environments/{environment_id}/keys", post(environment_keys::create).get(environment_keys::list))
        .route("/ext/environments/{environment_id}/keys/{key_id}/revoke", post(environment_keys::revoke))
        .route("/ext/memory-stores/{memory_store_id}/dream-policy", get(dreams::get_policy).put(dreams::put_policy))
        .route("/ext/sandbox-execution-policies", get(sandbox_policies::list).post(sandbox_policies::create))
        .route("/ext/sandbox-execution-policies/{sandbox_policy_id}", get(sandbox_policies::retrieve))
        .route("/ext/sandbox-execution-policies/{sandbox_policy_id}/versions", post(sandbox_policies::add_version))
        .route(
            "/ext/sandbox-execution-policies/{sandbox_policy_id}/versions/{version}",
            get(sandbox_policies::retrieve_version),
        )
        .route(
            "/ext/environments/{environment_id}/sandbox-execution-policy",
            get(sandbox_policies::binding).post(sandbox_policies::bind),
        );
    managed_agents
        .merge(memory_stores)
        .merge(dream_routes)
        .merge(tunnel_routes)
        .merge(erasure_routes)
        .merge(tokens)
        .merge(organization_webhooks)
        .merge(profiles)
        .merge(models)
        .merge(files)
        .merge(extensions)
}
