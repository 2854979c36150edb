//! The SDK's organization webhook endpoint API (`client.beta.organization.webhooks`,
//! `anthropic-beta: webhooks-2026-10-07`; without it every route is a 404, as the SDK
//! documents): `/v1/organizations/webhooks` over the same subscriptions as the control
//! plane's `/v1/config/webhook-subscriptions` (docs/api/webhooks.md).
//!
//! agentd's API keys belong to one workspace, so an endpoint made here receives the
//! events of that workspace; there is no key that reaches every workspace at once.

use agentd_schema::WebhookPut;
use agentd_schema::WebhookSubscriptionRow;
use agentd_schema::ids::WebhookSubscriptionId;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::query::{Query, rfc3339};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::webhooks::{self, SubscriptionSpec};
use crate::error::{ApiError, ApiResult};

/// The longest `name` and `description`.
const MAX_NAME: usize = 256;
const MAX_DESCRIPTION: usize = 1024;

/// An endpoint as the SDK reads it (`BetaOrganizationWebhookEndpoint`).
fn render(row: &WebhookSubscriptionRow) -> Value {
    json!({
        "id": row.id,
        "type": "webhook_endpoint",
        "created_at": rfc3339(row.created_at_ms),
        "updated_at": rfc3339(row.updated_at_ms),
        "description": row.description,
        "disabled_reason": row.disabled_reason,
        "enabled_events": row.event_types,
        "name": row.name,
        "state": if row.enabled { "enabled" } else { "disabled" },
        "url": row.url,
    })
}

fn object(bytes: &Bytes, fields: &[&str]) -> ApiResult<Map<String, Value>> {
    let map = super::body::object(bytes)?;
    super::body::only_known(&map, fields, "")?;
    Ok(map)
}

fn text(map: &Map<String, Value>, field: &str, max: usize) -> ApiResult<Option<String>> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        // NUL is refused: no store keeps it in text.
        Some(Value::String(value)) if value.chars().count() <= max && !value.contains('\0') => Ok(Some(value.clone())),
        Some(_) => {
            Err(ApiError::invalid(format!("{field}: a string of at most {max} characters (no NUL) is required")))
        }
    }
}

fn events(map: &Map<String, Value>) -> ApiResult<Option<Vec<String>>> {
    match map.get("enabled_events") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| ApiError::invalid("enabled_events: every item must be a string")),
        Some(_) => Err(ApiError::invalid("enabled_events: an array of event types is required")),
    }
}

/// `POST /v1/organizations/webhooks`: the endpoint with its `signing_secret`.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ApiResult<Response> {
    let map = object(&bytes, &["enabled_events", "url", "description", "name"])?;
    let spec = SubscriptionSpec {
        id: None,
        url: text(&map, "url", webhooks::MAX_URL)?.ok_or_else(|| ApiError::invalid("url: an https URL is required"))?,
        event_types: events(&map)?.ok_or_else(|| ApiError::invalid("enabled_events: required"))?,
        name: text(&map, "name", MAX_NAME)?.unwrap_or_default(),
        description: text(&map, "description", MAX_DESCRIPTION)?.unwrap_or_default(),
        enabled: None,
    };
    let written = webhooks::put(&state, &tenant, spec, WebhookPut::Create)
        .await
        .map_err(field_named(&[("event_types", "enabled_events")]))?;
    let mut body = render(&written.row);
    body["signing_secret"] = json!(written.secret.unwrap_or_default());
    Ok(axum::Json(body).into_response())
}

/// The service names the control plane's fields; this API calls `event_types`
/// `enabled_events`.
fn field_named(renames: &'static [(&'static str, &'static str)]) -> impl Fn(crate::domain::DomainError) -> ApiError {
    move |error| match error {
        crate::domain::DomainError::Invalid { message, code } => {
            let message = renames.iter().fold(message, |message, (from, to)| {
                match message.strip_prefix(from).filter(|rest| rest.starts_with(':')) {
                    Some(rest) => format!("{to}{rest}"),
                    None => message,
                }
            });
            crate::domain::DomainError::Invalid { message, code }.into()
        }
        other => other.into(),
    }
}

/// `GET /v1/organizations/webhooks`: a `SyncPage` by `created_at` (newest first unless
/// `order=asc`), `after_id` / `before_id` / `limit` (0 or absent: 20; at most 100).
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Response> {
    let query = Query::from_uri(&uri);
    let limit = match query.int("limit", 0, 100)? {
        None | Some(0) => 20,
        Some(limit) => limit as usize,
    };
    let mut rows = webhooks::list(&state, &tenant).await?;
    if query.descending(true)? {
        rows.reverse();
    }
    let position = |id: &str| rows.iter().position(|row| row.id == id);
    let (start, end) = match (query.string("after_id"), query.string("before_id")) {
        (Some(after), _) => {
            let start = position(after).map_or(rows.len(), |i| i + 1);
            (start, (start + limit).min(rows.len()))
        }
        // The first `limit` endpoints before it in list order (as the SDK documents).
        (None, Some(before)) => (0, position(before).unwrap_or(0).min(limit)),
        (None, None) => (0, limit.min(rows.len())),
    };
    let page = &rows[start..end];
    let has_more = match query.string("before_id") {
        Some(before) if query.string("after_id").is_none() => position(before).unwrap_or(0) > end,
        _ => end < rows.len(),
    };
    Ok(axum::Json(json!({
        "data": page.iter().map(render).collect::<Vec<_>>(),
        "has_more": has_more,
        "first_id": page.first().map(|row| row.id.as_str()),
        "last_id": page.last().map(|row| row.id.as_str()),
    }))
    .into_response())
}

/// `GET /v1/organizations/webhooks/{webhook_endpoint_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<WebhookSubscriptionId>,
) -> ApiResult<Response> {
    Ok(axum::Json(render(&webhooks::get(&state, &tenant, id.as_str()).await?)).into_response())
}

/// `POST /v1/organizations/webhooks/{webhook_endpoint_id}`: only the fields sent
/// change; an empty `enabled_events` leaves the set as it is; `state: enabled` resumes
/// deliveries and clears `disabled_reason`.
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<WebhookSubscriptionId>,
    bytes: Bytes,
) -> ApiResult<Response> {
    let map = object(&bytes, &["description", "enabled_events", "name", "state", "url"])?;
    let current = webhooks::get(&state, &tenant, id.as_str()).await?;
    let enabled = match map.get("state") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "enabled" => Some(true),
        Some(Value::String(s)) if s == "disabled" => Some(false),
        Some(_) => return Err(ApiError::invalid("state: expected enabled or disabled")),
    };
    let spec = SubscriptionSpec {
        id: Some(current.id.clone()),
        url: text(&map, "url", webhooks::MAX_URL)?.unwrap_or(current.url),
        event_types: events(&map)?.filter(|events| !events.is_empty()).unwrap_or(current.event_types),
        name: text(&map, "name", MAX_NAME)?.unwrap_or(current.name),
        description: text(&map, "description", MAX_DESCRIPTION)?.unwrap_or(current.description),
        enabled,
    };
    let written = webhooks::put(&state, &tenant, spec, WebhookPut::Replace)
        .await
        .map_err(field_named(&[("event_types", "enabled_events")]))?;
    Ok(axum::Json(render(&written.row)).into_response())
}

/// `DELETE /v1/organizations/webhooks/{webhook_endpoint_id}`.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<WebhookSubscriptionId>,
) -> ApiResult<Response> {
    webhooks::delete(&state, &tenant, id.as_str()).await?;
    Ok(axum::Json(json!({ "id": id.as_str(), "type": "webhook_endpoint_deleted" })).into_response())
}

/// `POST /v1/organizations/webhooks/{webhook_endpoint_id}/regenerate_signing_secret`.
pub async fn regenerate_signing_secret(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<WebhookSubscriptionId>,
) -> ApiResult<Response> {
    let secret = webhooks::regenerate_secret(&state, &tenant, id.as_str()).await?;
    Ok(axum::Json(json!({ "signing_secret": secret })).into_response())
}
