//! Workspace path projection: `/v1/workspaces/{workspace}/{rest}` is served by exactly
//! the route `/v1/{rest}`, scoped to that workspace once authentication has checked
//! the key may use it. There is no second store.

use axum::extract::Request;
use axum::http::Uri;

/// The workspace named by the request path (a request extension).
#[derive(Debug, Clone)]
pub struct WorkspacePath(pub String);

/// The workspace a projected path names and the flat path it is served by; `None` for
/// a path that is not projected.
pub fn split(path: &str) -> Option<(&str, String)> {
    let rest = path.strip_prefix("/v1/workspaces/")?;
    let (workspace, rest) = rest.split_once('/')?;
    Some((workspace, format!("/v1/{rest}")))
}

/// Rewrites a projected request to its flat route and records the workspace.
pub fn project(mut request: Request) -> Request {
    let Some((workspace, flat)) = split(request.uri().path()) else { return request };
    let workspace = workspace.to_owned();
    let flat = match request.uri().query() {
        Some(query) => format!("{flat}?{query}"),
        None => flat,
    };
    if let Ok(uri) = flat.parse::<Uri>() {
        *request.uri_mut() = uri;
        request.extensions_mut().insert(WorkspacePath(workspace));
    }
    request
}
