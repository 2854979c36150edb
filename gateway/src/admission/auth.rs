//! Authentication: a credential (`Authorization: Bearer <key>` or `x-api-key`) resolves to
//! the trusted workspace scope and to what it may reach ([`Access`]). Nothing the caller
//! sends can widen it: a workspace named by `anthropic-workspace-id` or by the
//! `/v1/workspaces/{workspace}/…` path must be the key's own.
//!
//! Credentials: API keys (the whole workspace), environment keys (one environment's
//! work queue and its sessions), runner keys (every `cloud` environment's work), and
//! the per-work-item sessions token (one session, its work item's heartbeat and stop,
//! skills and memory), valid until the item stops or is offered again.

use agentd_schema::KeyKind;
use axum::extract::{Request, State};
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

/// What a credential may reach, checked per route by [`authorize`].
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
}

/// Sessions tokens carry this prefix (they are minted with each offered work item).
pub const SESSIONS_TOKEN_PREFIX: &str = "sk-agentd-wst";

fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        let (scheme, token) = value.trim().split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then_some(token.trim()).filter(|t| !t.is_empty());
    }
    headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim).filter(|t| !t.is_empty())
}

/// Resolves the key and stores the [`Tenant`] in the request extensions.
pub async fn layer(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let path_workspace = request.extensions().get::<WorkspacePath>().map(|p| p.0.clone());
    let tenant = match authenticate(&state, request.headers().clone(), path_workspace).await {
        Ok(tenant) => tenant,
        Err(error) => return error.into_response(),
    };
    if let Err(error) = authorize(&state, &tenant, request.method(), request.uri().path()).await {
        return error.into_response();
    }
    request.extensions_mut().insert(tenant);
    next.run(request).await
}

/// Checks that the credential reaches this route (`path` is relative to `/v1`).
async fn authorize(state: &AppState, tenant: &Tenant, method: &Method, path: &str) -> Result<(), ApiError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let denied = |message: &str| Err(ApiError::PermissionDenied(message.to_owned()));
    let work_route = |environment: &str| match segments.as_slice() {
        ["environments", e, "work"] | ["environments", e, "work", "poll" | "stats"] => {
            *e == environment && method == Method::GET
        }
        ["environments", e, "work", _, "ack" | "heartbeat" | "stop"] => *e == environment && method == Method::POST,
        _ => false,
    };
    match &tenant.access {
        Access::Workspace => match segments.as_slice() {
            ["environments", _, "work"] if method == Method::GET => {
                denied("work.list accepts the environment key; it rejects an API key")
            }
            ["ext", "runner", ..] => denied("runner routes accept only a runner key"),
            _ => Ok(()),
        },
        Access::Environment(_) | Access::Runner if segments.first() == Some(&"memory_stores") => {
            denied("the memory_stores endpoints accept the per-item sessions token but reject the environment key")
        }
        Access::Environment(environment) => match segments.as_slice() {
            _ if work_route(environment) => Ok(()),
            ["environments", e] if e == environment && method == Method::GET => Ok(()),
            ["sessions", session, ..] => session_in(state, tenant, session, |env| env == environment).await,
            ["skills", ..] if method == Method::GET => Ok(()),
            _ => denied("an environment key reaches only its environment's work queue and sessions"),
        },
        Access::Runner => match segments.as_slice() {
            ["ext", "runner", "work", "poll"] => Ok(()),
            ["environments", environment, ..] if work_route(environment) => {
                cloud_environment(state, tenant, environment).await
            }
            ["environments", environment] if method == Method::GET => {
                cloud_environment(state, tenant, environment).await
            }
            ["sessions", session, ..] => {
                let Some(environment) = session_environment(state, tenant, session).await? else {
                    return Ok(()); // the handler answers 404
                };
                cloud_environment(state, tenant, &environment).await
            }
            ["skills", ..] if method == Method::GET => Ok(()),
            _ => denied("a runner key reaches only the work and sessions of cloud environments"),
        },
        Access::Session { session_id, work_id, environment_id } => match segments.as_slice() {
            ["sessions", session, ..] if session == session_id => Ok(()),
            ["ext", "sessions", session, "sandbox-environment"] if session == session_id && method == Method::GET => {
                Ok(())
            }
            ["environments", e, "work", w, "heartbeat" | "stop"] if e == environment_id && w == work_id => Ok(()),
            ["skills", ..] if method == Method::GET => Ok(()),
            ["memory_stores", ..] => Ok(()),
            _ => denied("a sessions token reaches only its session, its work item and the session's skills and memory"),
        },
    }
}

/// The environment of a session of the caller's workspace, if it exists.
async fn session_environment(state: &AppState, tenant: &Tenant, session: &str) -> Result<Option<String>, ApiError> {
    let found = state.backends.store.get_session(&tenant.workspace_id, session).await?;
    Ok(found.map(|s| s.body["environment_id"].as_str().unwrap_or_default().to_owned()))
}

async fn session_in(
    state: &AppState,
    tenant: &Tenant,
    session: &str,
    allowed: impl Fn(&str) -> bool,
) -> Result<(), ApiError> {
    match session_environment(state, tenant, session).await? {
        Some(environment) if !allowed(&environment) => {
            Err(ApiError::PermissionDenied("this environment key cannot act on sessions of other environments".into()))
        }
        _ => Ok(()),
    }
}

async fn cloud_environment(state: &AppState, tenant: &Tenant, environment: &str) -> Result<(), ApiError> {
    let found = state.backends.store.get_resource(&tenant.workspace_id, "environment", environment).await?;
    match found {
        Some(env) if env.body["config"]["type"] == "cloud" => Ok(()),
        Some(_) => Err(ApiError::PermissionDenied("a runner key serves only cloud environments".into())),
        None => Ok(()), // the handler answers 404
    }
}

async fn authenticate(state: &AppState, headers: HeaderMap, path: Option<String>) -> Result<Tenant, ApiError> {
    let Some(key) = presented_key(&headers) else {
        return Err(ApiError::Unauthenticated(
            "missing API key: send it as `Authorization: Bearer <key>` or `x-api-key: <key>`".to_owned(),
        ));
    };
    if key.starts_with(SESSIONS_TOKEN_PREFIX) {
        return sessions_token(state, key).await;
    }
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
    let tenant = Tenant {
        organization_id: scope.organization_id,
        workspace_id: scope.workspace_id,
        key_id: scope.key_id,
        access,
    };
    let header = headers.get("anthropic-workspace-id").and_then(|v| v.to_str().ok()).map(str::trim);
    for (named, source) in [(header, "anthropic-workspace-id"), (path.as_deref(), "/v1/workspaces/{workspace}")] {
        if let Some(named) = named {
            check_workspace(state, &tenant, named, source).await?;
        }
    }
    Ok(tenant)
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

/// A key acts on exactly its own workspace, named by id or by name.
async fn check_workspace(state: &AppState, tenant: &Tenant, named: &str, source: &str) -> Result<(), ApiError> {
    if named == tenant.workspace_id {
        return Ok(());
    }
    let workspace = state.backends.store.find_workspace(named).await.map_err(ApiError::from)?;
    match workspace {
        Some(workspace) if workspace.id == tenant.workspace_id => Ok(()),
        _ => Err(ApiError::PermissionDenied(format!("{source}: this API key cannot act on workspace {named:?}"))),
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
