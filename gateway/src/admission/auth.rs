//! Authentication: a credential (`Authorization: Bearer <key>` or `x-api-key`) resolves to
//! the trusted workspace scope and to what it may reach ([`Access`]). Nothing the caller
//! sends can widen it: a workspace named by `anthropic-workspace-id` or by the
//! `/v1/workspaces/{workspace}/…` path must be the key's own.
//!
//! Credentials: API keys (the whole workspace), environment keys (one environment's
//! work queue and its sessions), runner keys (every `cloud` environment's work), and
//! the per-work-item sessions token (one session, its work item's heartbeat and stop,
//! skills and memory), valid until the item stops or is offered again.
//!
//! One exception takes no credential: the A2A agent cards ([`is_public`]), which a
//! generic A2A client fetches before it knows how to authenticate (docs/api/a2a.md,
//! "Discovery"). A request there without a credential goes on as [`Anonymous`] (no
//! [`Tenant`]); one that presents a credential is authenticated as everywhere else.

use agentd_schema::KeyKind;
use axum::extract::{OriginalUri, Request, State};
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::workspace_path::WorkspacePath;
use crate::AppState;
use crate::error::ApiError;

/// The trusted scope of an authenticated request (a request extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// Rate limits apply per organization.
    pub organization_id: String,
    /// Every managed resource is read and written in this workspace only.
    pub workspace_id: String,
    /// The key that authenticated (the work item, for a sessions token).
    pub key_id: String,
    /// What the credential may reach.
    pub access: Access,
}

/// What a credential may reach, checked per route by [`super::scope`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// An API key: the workspace, except `work.list` (environment keys only).
    Workspace,
    /// An environment key: that environment's work queue, its sessions, skills.
    Environment(String),
    /// A runner key: the work of every `cloud` environment of the workspace.
    Runner,
    /// A sessions token: one session, its work item's heartbeat and stop, skills, memory.
    Session {
        /// The session.
        session_id: String,
        /// The work item the token came with.
        work_id: String,
        /// Its environment.
        environment_id: String,
    },
    /// An application access token: the AI SDK and AG-UI routes it names, for the
    /// threads it binds (docs/api/app-tokens.md).
    App(AppGrant),
}

/// What an application access token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppGrant {
    /// `aat_…`
    pub token_id: String,
    /// `ai-sdk`, `ag-ui`.
    pub protocols: Vec<String>,
    /// `thread.run`, `thread.messages.read`.
    pub operations: Vec<String>,
    /// Each thread it may use and the session that thread is.
    pub bindings: Vec<agentd_schema::ThreadBinding>,
}

impl AppGrant {
    /// The session the token binds `thread` to.
    pub fn session_of(&self, thread: &str) -> Option<&str> {
        self.bindings.iter().find(|b| b.external_thread_id == thread).map(|b| b.managed_session_id.as_str())
    }
}

/// A request admitted without a credential on a public route ([`is_public`]): a request
/// extension in place of a [`Tenant`]. Every other layer and handler that needs a
/// tenant finds none and refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anonymous;

/// The prefix of the rate-limit buckets [`Anonymous`] requests draw from: one per client
/// address (`anonymous:<ip>`, [`super::client`]), never an organization's (organization
/// ids are `org_…`), so anonymous traffic cannot spend a tenant's requests, and one fast
/// keyless client cannot spend everyone else's.
pub const ANONYMOUS_BUCKET: &str = "anonymous";

/// Whether `method` on `path` answers without a credential: `GET` (or `HEAD`) of an A2A
/// agent card — `/.well-known/agent-card.json`, `/v1/a2a/agents/{agent_id}` and
/// `/v1/a2a/agents/{agent_id}/.well-known/agent-card.json`. `path` is the full path of the
/// request (after the `/v1/workspaces/{workspace}/…` projection) or the matched route's
/// template; every other A2A route, and everything else, takes a credential.
pub fn is_public(method: &Method, path: &str) -> bool {
    if method != Method::GET && method != Method::HEAD {
        return false;
    }
    let segments: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    match segments.as_slice() {
        [".well-known", "agent-card.json"] => true,
        ["v1", "a2a", "agents", agent] | ["v1", "a2a", "agents", agent, ".well-known", "agent-card.json"] => {
            !agent.is_empty()
        }
        _ => false,
    }
}

/// Application access tokens carry this prefix.
pub const APP_TOKEN_PREFIX: &str = "sk-agentd-aat-";

/// Sessions tokens carry this prefix (they are minted with each offered work item).
pub const SESSIONS_TOKEN_PREFIX: &str = "sk-agentd-wst";

/// The presented key: a Bearer token, else `x-api-key`. An `Authorization` header of
/// another scheme (a proxy's `Basic …`) is not ours and does not hide `x-api-key`.
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|value| {
        let (scheme, token) = value.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then_some(token.trim()).filter(|t| !t.is_empty())
    });
    bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim).filter(|t| !t.is_empty()))
}

/// Resolves the key and stores the [`Tenant`] in the request extensions. What the
/// credential may reach is checked after routing, by [`super::scope`].
pub async fn layer(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    // The full flat path: inside the `/v1` nest the request's own URI has lost its
    // prefix, and the original one may still be projected.
    let original = request.extensions().get::<OriginalUri>().map_or_else(|| request.uri().path(), |uri| uri.path());
    let public = match super::workspace_path::split(original) {
        Some((_, flat)) => is_public(request.method(), &flat),
        None => is_public(request.method(), original),
    };
    if presented_key(request.headers()).is_none() && public {
        request.extensions_mut().insert(Anonymous);
        return next.run(request).await;
    }
    let path_workspace = request.extensions().get::<WorkspacePath>().map(|p| p.0.clone());
    let tenant = match authenticate(&state, request.headers(), path_workspace).await {
        Ok(tenant) => tenant,
        Err(error) => return error.into_response(),
    };
    request.extensions_mut().insert(tenant);
    next.run(request).await
}

async fn authenticate(state: &AppState, headers: &HeaderMap, path: Option<String>) -> Result<Tenant, ApiError> {
    let Some(key) = presented_key(headers) else {
        return Err(ApiError::Unauthenticated(
            "missing API key: send it as `Authorization: Bearer <key>` or `x-api-key: <key>`".to_owned(),
        ));
    };
    let tenant = if key.starts_with(SESSIONS_TOKEN_PREFIX) {
        sessions_token(state, key).await?
    } else if key.starts_with(APP_TOKEN_PREFIX) {
        app_token(state, key).await?
    } else {
        api_key(state, key).await?
    };
    // Whatever the credential, a workspace the request names must be its own.
    let header = headers.get("anthropic-workspace-id").and_then(|v| v.to_str().ok()).map(str::trim);
    for (named, source) in [(header, "anthropic-workspace-id"), (path.as_deref(), "/v1/workspaces/{workspace}")] {
        if let Some(named) = named {
            check_workspace(state, &tenant, named, source).await?;
        }
    }
    Ok(tenant)
}

/// Resolves an API, environment or runner key (cached briefly).
async fn api_key(state: &AppState, key: &str) -> Result<Tenant, ApiError> {
    let scope = match state.key_cache.get(key) {
        Some(scope) => Some(scope),
        None => {
            let scope = state.backends.store.resolve_api_key(key).await.map_err(|error| {
                tracing::warn!(%error, "cannot resolve the workspace scope");
                ApiError::Unavailable("cannot resolve the workspace scope: the store is unavailable".to_owned())
            })?;
            if let Some(scope) = &scope {
                state.key_cache.put(key, scope.clone());
            }
            scope
        }
    };
    let Some(scope) = scope else {
        return Err(ApiError::Unauthenticated("invalid API key".to_owned()));
    };
    let access = match scope.kind {
        KeyKind::Api => Access::Workspace,
        KeyKind::Environment(environment) => Access::Environment(environment),
        KeyKind::Runner => Access::Runner,
    };
    Ok(Tenant {
        organization_id: scope.organization_id,
        workspace_id: scope.workspace_id,
        key_id: scope.key_id,
        access,
    })
}

/// Resolves a sessions token; never cached, so it dies with its work item.
async fn sessions_token(state: &AppState, token: &str) -> Result<Tenant, ApiError> {
    let resolved = state.backends.store.resolve_sessions_token(token).await.map_err(|error| {
        tracing::warn!(%error, "cannot resolve a sessions token");
        ApiError::Unavailable("cannot resolve the workspace scope: the store is unavailable".to_owned())
    })?;
    let Some(token) = resolved else {
        return Err(ApiError::Unauthenticated("invalid or expired sessions token".to_owned()));
    };
    Ok(Tenant {
        organization_id: token.organization_id,
        workspace_id: token.workspace_id,
        key_id: token.work_id.clone(),
        access: Access::Session {
            session_id: token.session_id,
            work_id: token.work_id,
            environment_id: token.environment_id,
        },
    })
}

/// Resolves an application access token; never cached, so a deleted token stops at once.
async fn app_token(state: &AppState, token: &str) -> Result<Tenant, ApiError> {
    let digest = agentd_schema::ids::secret_hash(token);
    let now = crate::managed::query::now_ms();
    let resolved = state.backends.store.resolve_app_token(&digest, now).await.map_err(|error| {
        tracing::warn!(%error, "cannot resolve an application access token");
        ApiError::Unavailable("cannot resolve the workspace scope: the store is unavailable".to_owned())
    })?;
    let Some(token) = resolved else {
        return Err(ApiError::Unauthenticated("invalid or expired application access token".to_owned()));
    };
    Ok(Tenant {
        organization_id: token.organization_id,
        workspace_id: token.workspace_id,
        key_id: token.id.clone(),
        access: Access::App(AppGrant {
            token_id: token.id,
            protocols: token.protocols,
            operations: token.operations,
            bindings: token.thread_bindings,
        }),
    })
}

/// A key acts on exactly its own workspace, named by id or by name.
async fn check_workspace(state: &AppState, tenant: &Tenant, named: &str, source: &str) -> Result<(), ApiError> {
    if named == tenant.workspace_id {
        return Ok(());
    }
    let workspace = state.backends.store.find_workspace(named).await.map_err(ApiError::from)?;
    match workspace {
        Some(workspace) if workspace.id == tenant.workspace_id => Ok(()),
        _ => Err(ApiError::PermissionDenied(format!("{source}: this credential cannot act on workspace {named:?}"))),
    }
}

/// Recently resolved keys, for `ttl`: saves a store read per request. Entries are keyed
/// by the key's SHA-256, never the key itself; only successful resolutions are cached,
/// so a revoked key stops working within `ttl`.
#[derive(Debug)]
pub struct KeyCache {
    ttl: std::time::Duration,
    entries: std::sync::Mutex<std::collections::HashMap<[u8; 32], (std::time::Instant, agentd_schema::Scope)>>,
}

impl KeyCache {
    /// A cache whose entries live for `ttl`.
    pub fn new(ttl: std::time::Duration) -> Self {
        Self { ttl, entries: std::sync::Mutex::default() }
    }

    fn digest(key: &str) -> [u8; 32] {
        use sha2::Digest;
        sha2::Sha256::digest(key.as_bytes()).into()
    }

    fn get(&self, key: &str) -> Option<agentd_schema::Scope> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(&Self::digest(key)).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, scope)| scope.clone())
    }

    fn put(&self, key: &str, scope: agentd_schema::Scope) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() > 10_000 {
            let ttl = self.ttl;
            entries.retain(|_, (at, _)| at.elapsed() < ttl);
        }
        entries.insert(Self::digest(key), (std::time::Instant::now(), scope));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_agent_cards_are_public() {
        for path in [
            "/.well-known/agent-card.json",
            "/v1/a2a/agents/agent_x",
            "/v1/a2a/agents/agent_x/.well-known/agent-card.json",
            "/v1/a2a/agents/{agent_id}",
            "/v1/a2a/agents/{agent_id}/.well-known/agent-card.json",
        ] {
            assert!(is_public(&Method::GET, path), "{path}");
            assert!(is_public(&Method::HEAD, path), "{path}");
            assert!(!is_public(&Method::POST, path), "{path}: JSON-RPC takes a key");
        }
        for path in [
            "/v1/a2a",
            "/v1/a2a/extendedAgentCard",
            "/v1/a2a/tasks",
            "/v1/a2a/agents/agent_x/extendedAgentCard",
            "/v1/a2a/agents/agent_x/tasks",
            "/v1/a2a/agents/agent_x/tasks/t",
            "/v1/a2a/agents/",
            "/v1/a2a/agents/agent_x/",
            "/v1/.well-known/agent-card.json",
            "/v1/a2a/.well-known/agent-card.json",
            "/v1/agents/agent_x",
            "/.well-known/agent-card.json/x",
            "/v1/openapi.json",
        ] {
            assert!(!is_public(&Method::GET, path), "{path}");
        }
    }
}
