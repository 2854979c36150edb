//! `/v1/tunnels*` (docs/api/tunnels.md; the SDK's `beta.tunnels`, selector
//! `mcp-tunnels-2026-06-22`): parse, call `domain::tunnels`, render.

use agentd_schema::Resource;
use agentd_schema::ids::{TunnelCertificateId, TunnelId};
use agentd_schema::tunnels::{CERTIFICATE, TUNNEL};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::{Extension, Json};
use serde_json::Value;

use super::body;
use super::family::Family;
use super::limits::MAX_DISPLAY_NAME_CHARS;
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::tunnels as domain;
use crate::error::ApiResult;

const TUNNELS: Family = Family { kind: TUNNEL, noun: "tunnel", max_page: MAX_PAGE };
const CERTIFICATES: Family = Family { kind: CERTIFICATE, noun: "tunnel certificate", max_page: MAX_PAGE };
/// The largest list page (the wire: "limit default 20 max 1000").
const MAX_PAGE: i64 = 1000;

/// `POST /v1/tunnels`: `{display_name?}`.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["display_name"], "")?;
    let name = body::optional_string(request.get("display_name"), "display_name", MAX_DISPLAY_NAME_CHARS)?;
    if name.as_deref() == Some("") {
        return Err(crate::error::ApiError::invalid("display_name: 1 to 255 characters, or null"));
    }
    Ok(Json(domain::render(&domain::create(&state, &tenant, name).await?)))
}

/// `GET /v1/tunnels/{tunnel_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<TunnelId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(domain::render(&domain::load(state.backends.store.as_ref(), &tenant, &id).await?)))
}

/// `GET /v1/tunnels`: newest first; `include_archived`, `limit` (≤ 1000), `page`.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    Ok(Json(TUNNELS.page(store, &tenant, &uri, None, false, domain::render).await?))
}

/// `POST /v1/tunnels/{tunnel_id}/archive`.
pub async fn archive(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<TunnelId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(domain::render(&domain::archive(&state, &tenant, &id).await?)))
}

/// `POST /v1/tunnels/{tunnel_id}/reveal_token` (empty body).
pub async fn reveal_token(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<TunnelId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(domain::reveal_token(&state, &tenant, &id).await?))
}

/// `POST /v1/tunnels/{tunnel_id}/rotate_token`: `{reason?}` (logged, not stored).
pub async fn rotate_token(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<TunnelId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["reason"], "")?;
    let reason = body::optional_string(request.get("reason"), "reason", 1024)?;
    tracing::info!(tunnel = %id, reason = reason.as_deref().unwrap_or(""), "tunnel token rotated");
    Ok(Json(domain::rotate_token(&state, &tenant, &id).await?))
}

fn render_certificate(certificate: &Resource) -> Value {
    domain::render_certificate(certificate)
}

/// `POST /v1/tunnels/{tunnel_id}/certificates`: `{ca_certificate_pem}`.
pub async fn create_certificate(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<TunnelId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["ca_certificate_pem"], "")?;
    let pem = body::string(request.get("ca_certificate_pem"), "ca_certificate_pem", 1, usize::MAX)?;
    Ok(Json(render_certificate(&domain::add_certificate(&state, &tenant, &id, &pem).await?)))
}

/// `GET /v1/tunnels/{tunnel_id}/certificates/{certificate_id}`.
pub async fn retrieve_certificate(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, certificate)): Path<(TunnelId, TunnelCertificateId)>,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    Ok(Json(render_certificate(&domain::load_certificate(store, &tenant, &id, &certificate).await?)))
}

/// `GET /v1/tunnels/{tunnel_id}/certificates`: newest first; `include_archived`, `limit`, `page`.
pub async fn list_certificates(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<TunnelId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    domain::load(store, &tenant, &id).await?;
    let parent = Some(id.to_string());
    Ok(Json(CERTIFICATES.page(store, &tenant, &uri, parent, false, render_certificate).await?))
}

/// `POST /v1/tunnels/{tunnel_id}/certificates/{certificate_id}/archive`.
pub async fn archive_certificate(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, certificate)): Path<(TunnelId, TunnelCertificateId)>,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    Ok(Json(render_certificate(&domain::archive_certificate(store, &tenant, &id, &certificate).await?)))
}
