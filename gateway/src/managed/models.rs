//! `GET /v1/models` and `GET /v1/models/{model_id}` from the workspace's effective model
//! catalog (the bootstrap catalog overlaid with `/v1/config/*`). No beta selector is
//! required (the SDK sends none).

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::query::Query;
use crate::AppState;
use crate::admission::auth::Tenant;
use crate::error::{ApiError, ApiResult};

/// Lists models newest first with `after_id` / `before_id` / `limit` paging.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, 1000)?.unwrap_or(20) as usize;
    let catalog = state.catalogs.of(&tenant.workspace_id)?;
    let models = catalog.models();
    let position = |key: &str| -> ApiResult<usize> {
        let id = query.string(key).unwrap_or_default();
        models
            .iter()
            .position(|m| m.id == id)
            .ok_or_else(|| ApiError::invalid(format!("{key}: unknown model id {id:?}")))
    };
    let (start, end) = if query.string("before_id").is_some() {
        let end = position("before_id")?;
        (end.saturating_sub(limit), end)
    } else if query.string("after_id").is_some() {
        let start = position("after_id")? + 1;
        (start, (start + limit).min(models.len()))
    } else {
        (0, limit.min(models.len()))
    };
    let page = &models[start.min(end)..end];
    let has_more = if query.string("before_id").is_some() { start > 0 } else { end < models.len() };
    Ok(Json(json!({
        "data": page.iter().map(|m| m.to_wire()).collect::<Vec<_>>(),
        "has_more": has_more,
        "first_id": page.first().map(|m| m.id.as_str()),
        "last_id": page.last().map(|m| m.id.as_str()),
    })))
}

/// Retrieves one model.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(model_id): Path<String>,
) -> ApiResult<Json<Value>> {
    state
        .catalogs
        .of(&tenant.workspace_id)?
        .find(&model_id)
        .map(|model| Json(model.to_wire()))
        .ok_or_else(|| ApiError::NotFound(format!("model not found: {model_id}")))
}
