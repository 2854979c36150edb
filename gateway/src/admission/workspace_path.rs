//! Workspace path projection: `/v1/workspaces/{workspace}/{rest}` is served by exactly
//! the route `/v1/{rest}`, scoped to that workspace once authentication has checked
//! the key may use it. There is no second store.

use axum::extract::Request;
use axum::http::Uri;

/// The workspace named by the request path (a request extension).
#[derive(Debug, Clone)]
pub struct WorkspacePath(pub String);

/// Rewrites a projected request to its flat route and records the workspace.
pub fn project(mut request: Request) -> Request {
    let path = request.uri().path();
    let Some(rest) = path.strip_prefix("/v1/workspaces/") else { return request };
    let Some((workspace, rest)) = rest.split_once('/') else { return request };
    let workspace = workspace.to_owned();
    let flat = match request.uri().query() {
        Some(query) => format!("/v1/{rest}?{query}"),
        None => format!("/v1/{rest}"),
    };
    if let Ok(uri) = flat.parse::<Uri>() {
        *request.uri_mut() = uri;
        request.extensions_mut().insert(WorkspacePath(workspace));
    }
    request
}
