//! The MCP endpoint (docs/api/mcp.md, ADR 0008): the workspace's agents as MCP tools over
//! streamable HTTP, served by rmcp's `StreamableHttpService` inside the gateway router.
//!
//! One path (`AGENTD_MCP_PATH`, default `/v1/mcp`) takes `POST`, `GET` and `DELETE`.
//! Both protocol eras work: the 2025-11-25 `initialize` handshake with `Mcp-Session-Id`
//! (sessions shared across gateways through Redis, see [`sessions`]) and the stateless
//! 2026-07-28 requests that start with `server/discover`. Every request passes the same
//! admission as the managed API (draining, API key → [`Tenant`], rate limit) and only
//! API keys reach it; rmcp then checks `Host` against `AGENTD_MCP_ALLOWED_HOSTS`. The
//! handler reads the tenant from the HTTP request parts rmcp hands it per request.

#![allow(deprecated, reason = "logging is deprecated by SEP-2577 but still part of the 2025-11-25 protocol")]

mod elicit;
mod logging;
pub mod replay;
pub mod sessions;
mod tools;
mod turn;

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorCode, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, SetLevelRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use self::logging::LogLevels;
use self::replay::StreamLog;
use self::sessions::{RedisSessions, SharedSessions, WorkspaceBindings};
use crate::AppState;
use crate::admission::{Access, Tenant, auth, limiter};
use crate::error::ApiError;

/// Tools per `tools/list` page.
const PAGE: usize = 100;

/// The endpoint's settings (from `AGENTD_MCP_*`).
#[derive(Clone)]
pub struct McpSettings {
    /// The one path of the endpoint, e.g. `/v1/mcp`.
    pub path: String,
    /// `Host` values accepted (`host` or `host:port`); `None` accepts any.
    pub allowed_hosts: Option<Vec<String>>,
    /// Where handshake-era sessions live beyond this process (`None`: memory only).
    pub sessions: Option<Arc<RedisSessions>>,
    /// The log of handshake-era SSE streams that reconnects resume from ([`replay`]).
    pub streams: Arc<StreamLog>,
}

impl McpSettings {
    /// Loopback host names: what `agentd dev` accepts by default.
    pub fn loopback_hosts() -> Vec<String> {
        ["localhost", "127.0.0.1", "::1"].map(str::to_owned).to_vec()
    }
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            path: "/v1/mcp".to_owned(),
            allowed_hosts: Some(Self::loopback_hosts()),
            sessions: None,
            streams: Arc::new(StreamLog::memory()),
        }
    }
}

/// The endpoint's route at `state.mcp.path` with its admission layers, to merge into
/// the top-level router (it is not nested under `/v1`, so any path gets the same layers).
pub fn routes(state: &AppState) -> Router<AppState> {
    let settings = &state.mcp;
    let mut config = StreamableHttpServerConfig::default();
    config = match &settings.allowed_hosts {
        Some(hosts) => config.with_allowed_hosts(hosts.clone()),
        None => config.disable_allowed_hosts(),
    };
    config.session_store =
        settings.sessions.clone().map(|s| s as Arc<dyn rmcp::transport::streamable_http_server::session::SessionStore>);
    let sessions =
        Arc::new(SharedSessions::new(settings.sessions.clone(), settings.streams.clone(), state.backends.bus.clone()));
    let server = AgentsServer {
        state: state.clone(),
        levels: Arc::new(LogLevels::new(settings.sessions.clone())),
        sessions: sessions.clone(),
    };
    let service = StreamableHttpService::new(move || Ok(server.clone()), sessions, config);
    Router::new()
        .route_service(&settings.path, service)
        .route_layer(middleware::from_fn_with_state(
            Arc::new(WorkspaceBindings::new(settings.sessions.clone())),
            sessions::bind_workspace,
        ))
        .route_layer(middleware::from_fn(api_keys_only))
        .route_layer(middleware::from_fn_with_state(state.clone(), limiter::mcp_layer))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::layer))
        .route_layer(middleware::from_fn_with_state(state.clone(), crate::refuse_while_draining))
}

/// Environment keys, runner keys and sessions tokens serve hands, not callers of agents.
async fn api_keys_only(request: Request, next: Next) -> Response {
    match request.extensions().get::<Tenant>().map(|tenant| &tenant.access) {
        Some(Access::Workspace) => next.run(request).await,
        _ => ApiError::PermissionDenied("the MCP endpoint accepts only API keys".to_owned()).into_response(),
    }
}

/// The MCP server: one instance per MCP session (handshake era) or per request.
#[derive(Clone)]
struct AgentsServer {
    state: AppState,
    /// The log levels sessions chose with `logging/setLevel`.
    levels: Arc<LogLevels>,
    /// The sessions, for relaying client replies between gateways.
    sessions: Arc<SharedSessions>,
}

impl ServerHandler for AgentsServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
            .with_server_info(Implementation::new("agentd", env!("CARGO_PKG_VERSION")).with_title("agentd agents"))
            .with_instructions(
                "Each tool is an agentd agent. Call it with a `prompt`; the result is the agent's final reply. \
                 Pass the `agentd/thread_id` from a result's _meta as `thread_id` to continue that conversation.",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tenant = tenant(&context)?;
        let tools = tools::agent_tools(&self.state, &tenant).await.map_err(protocol_error)?;
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => tools.iter().position(|tool| tool.agent_id == cursor).map(|i| i + 1).ok_or_else(|| {
                ErrorData::invalid_params(format!("cursor: unknown or expired cursor {cursor:?}"), None)
            })?,
        };
        let page: Vec<_> = tools.iter().skip(start).take(PAGE).collect();
        let mut result = ListToolsResult::with_all_items(page.iter().map(|tool| tool.definition()).collect())
            .with_cache_scope(CacheScope::Private)
            .with_ttl_ms(0);
        if start + page.len() < tools.len() {
            result.next_cursor = page.last().map(|tool| tool.agent_id.clone());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tenant = tenant(&context)?;
        let tools = tools::agent_tools(&self.state, &tenant).await.map_err(protocol_error)?;
        let Some(tool) = tools.into_iter().find(|tool| tool.name == request.name) else {
            return Err(ErrorData::invalid_params(format!("unknown tool {:?}", request.name), None));
        };
        let arguments = tools::arguments(request.arguments.as_ref())?;
        let level = self.levels.of(&context).await;
        Ok(turn::run(&self.state, &self.sessions, &tenant, &tool, arguments, level, &context).await?.into())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.levels.set(&context, request.level).await
    }

    /// Requests rmcp could not type. A `logging/setLevel` lands here when its level is
    /// not one of the eight: a bad parameter, not an unknown method.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method == "logging/setLevel" {
            return Err(ErrorData::invalid_params(
                "level: expected one of debug, info, notice, warning, error, critical, alert, emergency",
                None,
            ));
        }
        Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, request.method, None))
    }
}

/// The handshake-era MCP session a request belongs to (its `Mcp-Session-Id`).
fn mcp_session(context: &RequestContext<RoleServer>) -> Option<String> {
    let parts = context.extensions.get::<axum::http::request::Parts>()?;
    parts.headers.get("mcp-session-id")?.to_str().ok().map(str::to_owned)
}

/// The tenant the admission layer resolved for this HTTP request.
fn tenant(context: &RequestContext<RoleServer>) -> Result<Tenant, ErrorData> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Tenant>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request carries no authenticated workspace", None))
}

/// A managed-API error as a JSON-RPC error: bad input is -32602 (naming the field),
/// everything else -32603 (internal causes are logged, not sent).
fn protocol_error(error: ApiError) -> ErrorData {
    match error {
        ApiError::InvalidRequest { message, .. }
        | ApiError::InvalidFields { message, .. }
        | ApiError::NotFound(message)
        | ApiError::Gone(message)
        | ApiError::Coded { message, .. } => ErrorData::invalid_params(message, None),
        ApiError::PreconditionFailed { message, .. }
        | ApiError::RateLimited { message, .. }
        | ApiError::MethodNotAllowed { message, .. }
        | ApiError::PayloadTooLarge(message)
        | ApiError::UnsupportedMediaType(message) => ErrorData::invalid_request(message, None),
        ApiError::Unauthenticated(message)
        | ApiError::PermissionDenied(message)
        | ApiError::Conflict(message)
        | ApiError::TypedConflict { message, .. } => ErrorData::invalid_request(message, None),
        ApiError::Unavailable(message) => ErrorData::internal_error(message, None),
        ApiError::Internal(cause) => {
            tracing::error!(%cause, "internal error in an MCP call");
            ErrorData::internal_error("internal error", None)
        }
    }
}
