//! The agentd gateway: HTTP admission, protocol framing and streaming over the shared
//! store, queue and bus. [`app`] builds the whole router without binding a socket, so
//! tests drive it with `tower::ServiceExt::oneshot`.

pub mod adapters;
pub mod admission;
pub mod consent_page;
pub mod control;
pub mod domain;
pub mod durable;
pub mod envelope;
pub mod error;
pub mod managed;
pub mod openapi;
pub mod ops;
pub mod projects;
pub mod telemetry;
#[cfg(test)]
mod test_rig;
pub mod tunnel;

use std::sync::Arc;

use agentd_proto::Lifecycle;
use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower::Layer;
use tower_http::trace::TraceLayer;

use crate::admission::limiter::Limiter;
use crate::admission::{auth, limiter, request_id, scope, workspace_path};
use crate::error::ApiError;
use crate::ops::{Backends, OpsState};

/// Everything a gateway handler may use, behind one reference count: a request clones
/// the state once per layer and per extractor, so a clone must cost no more than that.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    /// The state of a gateway holding `shared`.
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What an [`AppState`] shares.
pub struct Shared {
    /// Store, queue and bus.
    pub backends: Backends,
    /// Drain state.
    pub lifecycle: Arc<Lifecycle>,
    /// Per-organization request buckets.
    pub limiter: Arc<dyn Limiter>,
    /// Seals write-only secrets (vault credentials) at rest.
    pub secrets: Arc<agentd_schema::secrets::SecretBox>,
    /// Recently resolved API keys (2 s).
    pub key_cache: Arc<admission::auth::KeyCache>,
    /// The largest file `POST /v1/files` stores (`AGENTD_MAX_FILE_BYTES`).
    pub max_file_bytes: u64,
    /// Removes published outbox rows in batches, off the request path.
    pub outbox: agentd_schema::outbox::Sweeper,
    /// Retry budget of new runs (recoveries before `retries_exhausted`).
    pub max_attempts: i64,
    /// The agent adapter threads start with when a request names none.
    pub default_agent: Option<Arc<str>>,
    /// The MCP endpoint's path, allowed hosts and shared sessions.
    pub mcp: Arc<adapters::mcp::McpSettings>,
    /// A2A settings (public URL of cards, push targets).
    pub a2a: Arc<adapters::a2a::Settings>,
    /// The proxies whose `X-Forwarded-For` names the client (`AGENTD_TRUSTED_PROXIES`).
    pub trusted_proxies: admission::client::TrustedProxies,
    /// Credential validation may probe MCP servers and token endpoints on private
    /// addresses (`AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`, as for workers).
    pub remote_allow_private: bool,
    /// The effective model catalog of each workspace (`agentd_schema::catalogs`).
    pub catalogs: Arc<agentd_schema::catalogs::Catalogs>,
    /// Webhook delivery settings (docs/api/webhooks.md).
    pub webhooks: Arc<domain::webhooks::Settings>,
    /// The MCP tunnel connectors this gateway holds (docs/api/tunnels.md).
    pub tunnels: Arc<tunnel::Connectors>,
}

impl AppState {
    fn ops(&self) -> OpsState {
        OpsState { backends: self.backends.clone(), lifecycle: self.lifecycle.clone(), drain_token: None }
    }
}

/// The public API routes (`/v1/…`, the project API `/api/…`) without the operations
/// routes. Managed routes pass admission in order: authentication (trusted scope), then
/// the rate limiter; the beta selector is checked per family.
/// `/v1/workspaces/{workspace}/{rest}` is served by the same routes (see
/// [`workspace_path`]).
pub fn api(state: AppState) -> Router {
    let managed = managed::router()
        .merge(control::router())
        .merge(durable::router())
        .merge(adapters_router())
        // The contract (docs/openapi.json): an API key like every `/v1` route.
        .merge(openapi::router());
    let v1 = admitted(managed, &state);
    // The project API (`/api/projects/…`, docs/api/workflows.md) lives outside `/v1` and
    // passes the same admission; its errors are the managed envelope.
    let projects = admitted(projects::router(), &state);
    // The A2A workspace card lives outside `/v1` (clients resolve
    // `<base>/.well-known/agent-card.json`) but passes the same admission. Like the
    // per-agent cards under `/v1`, it is public: without a credential, authentication
    // admits it as `Anonymous` (`auth::is_public`, the public card, the anonymous rate
    // bucket); with one, as everywhere. `route_layer`: other paths outside `/v1` stay
    // 404, not 401.
    let well_known = adapters::a2a::well_known_router()
        .route_layer(middleware::from_fn_with_state(state.clone(), limiter::layer))
        .route_layer(middleware::from_fn_with_state(state.clone(), scope::layer))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::layer))
        .route_layer(middleware::from_fn_with_state(state.clone(), refuse_while_draining));
    // The MCP endpoint has a configurable path (maybe outside `/v1`): it carries its own
    // copy of the admission layers.
    // Outermost: rejections made below any handler answer in their surface's envelope.
    Router::new()
        .nest("/v1", v1)
        .nest("/api", projects)
        .merge(well_known)
        .merge(adapters::mcp::routes(&state))
        // The consent page of user profiles: unauthenticated, its signed token authorizes.
        .merge(consent_page::router())
        // MCP tunnel connectors (docs/api/tunnels.md): their token authorizes.
        .merge(tunnel::router())
        // Paths outside every route: the managed 404 (unauthenticated, as before).
        .fallback(unknown_route)
        .layer(middleware::from_fn_with_state(state.clone(), envelope::layer))
        .with_state(state)
}

/// `routes` behind the admission of every API prefix (`/v1`, `/api`), outermost first:
/// drain refusal; authentication, which covers unknown routes too — a request without a
/// key is 401 wherever it goes under the prefix, except the A2A agent cards
/// (`auth::is_public`); the body limit; then, once routed, the scope check, the limiter and
/// the JSON body check.
fn admitted(routes: Router<AppState>, state: &AppState) -> Router<AppState> {
    let routes = routes
        .layer(middleware::from_fn(envelope::json_bodies))
        .layer(middleware::from_fn_with_state(state.clone(), limiter::layer))
        // After routing: what the matched route acts on, by its decoded, typed ids.
        .route_layer(middleware::from_fn_with_state(state.clone(), scope::layer));
    Router::new()
        .merge(routes)
        .fallback(unknown_route)
        // Every stored field comes from a body: this bounds what any one request can store.
        .layer(axum::extract::DefaultBodyLimit::max(managed::limits::MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), auth::layer))
        .layer(middleware::from_fn_with_state(state.clone(), refuse_while_draining))
}

/// The application adapters' routes, relative to `/v1` (no beta selector).
fn adapters_router() -> Router<AppState> {
    use axum::routing::{get, post};
    Router::new()
        .route("/ai-sdk/chat", post(adapters::ai_sdk::chat))
        .route("/ai-sdk/chat/{chat_id}/stream", get(adapters::ai_sdk::resume))
        .route("/ai-sdk/threads/{thread_id}/runs", post(adapters::ai_sdk::thread_run))
        .route("/ai-sdk/threads/{thread_id}/messages", get(adapters::ai_sdk::messages))
        .route("/ai-sdk/agents/{agent_id}/runs", post(adapters::ai_sdk::agent_run))
        .route("/ag-ui", post(adapters::ag_ui::run))
        .route("/ag-ui/agents/{agent_id}", post(adapters::ag_ui::agent_run))
        .route("/ag-ui/threads/{thread_id}/messages", get(adapters::ag_ui::messages))
        .merge(adapters::a2a::router())
}

/// The public listener: the API (`/v1/…`, the MCP endpoint, the workspace agent card)
/// and a bare `GET /readyz` for load balancers. `/metrics` and `/admin/*` are not
/// served here (the managed 404): they live on [`ops_app`]'s own listener.
pub fn app(state: AppState) -> Router {
    let readyz = ops::public_router(state.ops());
    let tunnels = state.clone();
    projected(layered(api(state).merge(readyz).fallback(unknown_route)))
        // Workers' `CONNECT` to MCP servers behind tunnels (no path to route by).
        .layer(middleware::from_fn(move |request: axum::extract::Request, next: middleware::Next| {
            let tunnels = tunnels.clone();
            async move {
                if request.method() == axum::http::Method::CONNECT {
                    tunnel::proxy(tunnels, request).await
                } else {
                    next.run(request).await
                }
            }
        }))
}

/// The operations listener (`AGENTD_OPS_ADDR`): `/readyz`, `/metrics`, `/admin/drain`.
pub fn ops_app(state: OpsState) -> Router {
    layered(ops::router(state))
}

/// Serves `/v1/workspaces/{workspace}/{rest}` by the flat routes: the URI is rewritten
/// before any routing happens, so handlers see exactly the flat request.
fn projected(inner: Router) -> Router {
    Router::new().fallback_service(tower::util::MapRequestLayer::new(workspace_path::project).layer(inner))
}

fn layered(router: Router) -> Router {
    router
        // A handler that panics answers the managed 500 (and is logged) instead of
        // dropping the connection; on the control plane, a problem. (Outside
        // `envelope::layer`, which a panic unwinds through.)
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .layer(middleware::from_fn(envelope::panic_as_problem))
        .layer(middleware::from_fn(close_after_refused_body))
        .layer(middleware::from_fn(telemetry::track_http))
        .layer(middleware::from_fn(request_id::layer))
        .layer(TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<_>| {
            // The path only (a query may hold a credential), and no consent token.
            let path = request_id::loggable_path(request.uri().path());
            tracing::debug_span!("http", method = %request.method(), path = %path, version = ?request.version())
        }))
}

/// A request refused before its body was read (authentication, scope, limits) leaves
/// that body unread on the connection, and the server closes it after answering; a
/// client that reuses the connection meanwhile sees a reset instead of the next answer.
/// Saying `Connection: close` on such answers makes the close expected.
async fn close_after_refused_body(request: Request, next: Next) -> Response {
    let has_body = request.headers().contains_key(axum::http::header::TRANSFER_ENCODING)
        || request
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|length| length.trim() != "0");
    let mut response = next.run(request).await;
    if has_body && (response.status().is_client_error() || response.status().is_server_error()) {
        response.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    response
}

fn panicked(cause: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    let cause = cause
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| cause.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a handler panicked".to_owned());
    let mut response = axum::response::IntoResponse::into_response(ApiError::Internal(format!("panic: {cause}")));
    response.extensions_mut().insert(envelope::Panicked);
    response
}

async fn unknown_route(request: Request) -> ApiError {
    let tenant = request.extensions().get::<admission::Tenant>();
    if let Some(refused) = tenant.and_then(|t| scope::unrouted(&t.access, request.method(), request.uri().path())) {
        return refused;
    }
    ApiError::NotFound(format!("no route for {} {}", request.method(), request.uri().path()))
}

pub use crate::admission::limiter::{Limits, MemoryLimiter, RedisLimiter};

/// While draining, new API requests are refused with 503 so a load balancer that has
/// not yet noticed `/readyz` moves them elsewhere; requests already running finish.
pub(crate) async fn refuse_while_draining(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.lifecycle.is_draining() {
        return ApiError::Unavailable("this gateway is draining; retry on another replica".to_owned()).into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_the_managed_500() {
        async fn boom() -> &'static str {
            panic!("kaboom")
        }
        let router = layered(Router::new().route("/boom", get(boom)));
        let response = router.oneshot(Request::get("/boom").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["error"]["type"], "api_error");
        assert!(!body.to_string().contains("kaboom"), "the cause is logged, not sent");
    }
}
