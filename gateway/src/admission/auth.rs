//! Authentication: an API key (`Authorization: Bearer <key>` or `x-api-key`) resolves to
//! the trusted workspace scope. Nothing the caller sends can widen it: a workspace
//! named by `anthropic-workspace-id` or by the `/v1/workspaces/{workspace}/…` path must
//! be the key's own.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
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
    /// The key that authenticated.
    pub key_id: String,
}

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
    match authenticate(&state, request.headers().clone(), path_workspace).await {
        Ok(tenant) => {
            request.extensions_mut().insert(tenant);
            next.run(request).await
        }
        Err(error) => error.into_response(),
    }
}

async fn authenticate(state: &AppState, headers: HeaderMap, path: Option<String>) -> Result<Tenant, ApiError> {
    let Some(key) = presented_key(&headers) else {
        return Err(ApiError::Unauthenticated(
            "missing API key: send it as `Authorization: Bearer <key>` or `x-api-key: <key>`".to_owned(),
        ));
    };
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
    let tenant =
        Tenant { organization_id: scope.organization_id, workspace_id: scope.workspace_id, key_id: scope.key_id };
    let header = headers.get("anthropic-workspace-id").and_then(|v| v.to_str().ok()).map(str::trim);
    for (named, source) in [(header, "anthropic-workspace-id"), (path.as_deref(), "/v1/workspaces/{workspace}")] {
        if let Some(named) = named {
            check_workspace(state, &tenant, named, source).await?;
        }
    }
    Ok(tenant)
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
