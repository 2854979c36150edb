//! `GET /v1/models` and `GET /v1/models/{model_id}` from the model catalog. No beta
//! selector is required (the SDK sends none).

use axum::Json;
use axum::extract::Path;
use axum::http::Uri;
use serde_json::{Value, json};

use super::query::Query;
use crate::error::{ApiError, ApiResult};

/// Lists models newest first with `after_id` / `before_id` / `limit` paging.
pub async fn list(uri: Uri) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, 1000)?.unwrap_or(20) as usize;
    let models = agentd_schema::catalog::current().models();
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
pub async fn retrieve(Path(model_id): Path<String>) -> ApiResult<Json<Value>> {
    agentd_schema::catalog::current()
        .find(&model_id)
        .map(|model| Json(model.to_wire()))
        .ok_or_else(|| ApiError::NotFound(format!("model not found: {model_id}")))
}
