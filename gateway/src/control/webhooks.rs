//! `/v1/config/webhook-subscriptions` (docs/api/webhooks.md): subscriptions of the
//! workspace to signed lifecycle events, and their deliveries. RFC 9457 errors.
//!
//! `PUT …/{id}` creates (201, with the `whsec_` secret, shown only then) or replaces
//! (200; the secret is kept, and so is a disabled subscription's state unless the body
//! says `enabled`).

use agentd_schema::ids::WebhookSubscriptionId;
use agentd_schema::{WebhookDelivery, WebhookPut, WebhookSubscriptionRow};
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::problem::{self, Problem};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::webhooks::{self, SubscriptionSpec};
use crate::managed::query::rfc3339;

const FIELDS: &[&str] = &["url", "event_types", "enabled"];

/// How a subscription is doing: `active` (delivering), `degraded` (recent attempts
/// failed), `paused` (disabled by its owner), `delivery_failed` (disabled by agentd).
fn health(row: &WebhookSubscriptionRow) -> &'static str {
    match (row.enabled, row.consecutive_failures, row.disabled_reason.is_empty()) {
        (true, 0, _) => "active",
        (true, _, _) => "degraded",
        (false, _, true) => "paused",
        (false, _, false) => "delivery_failed",
    }
}

/// A subscription as the control plane shows it (never its secret).
pub fn render(row: &WebhookSubscriptionRow) -> Value {
    json!({
        "id": row.id,
        "object": "webhook_subscription",
        "url": row.url,
        "event_types": row.event_types,
        "enabled": row.enabled,
        "health": health(row),
        "disabled_reason": if row.disabled_reason.is_empty() { Value::Null } else { json!(row.disabled_reason) },
        "consecutive_failures": row.consecutive_failures,
        "created_at": rfc3339(row.created_at_ms),
        "updated_at": rfc3339(row.updated_at_ms),
    })
}

fn render_delivery(delivery: &WebhookDelivery) -> Value {
    json!({
        "id": delivery.id,
        "object": "webhook_delivery",
        "event_id": delivery.event_id,
        "event_type": delivery.event_type,
        "resource_id": delivery.resource_id,
        "state": delivery.state,
        "attempts": delivery.attempts,
        "next_attempt_at": (delivery.state == "pending").then(|| rfc3339(delivery.next_attempt_ms)),
        "last_status": delivery.last_status,
        "last_error": delivery.last_error,
        "created_at": rfc3339(delivery.occurred_at_ms),
        "updated_at": rfc3339(delivery.updated_at_ms),
    })
}

/// `event_types`: an array of strings (which ones, the service checks).
pub(crate) fn strings(map: &Map<String, Value>, field: &str) -> Result<Option<Vec<String>>, Problem> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| Problem::invalid(format!("{field}: every item must be a string"))),
        Some(_) => Err(Problem::invalid(format!("{field}: an array of event types is required"))),
    }
}

/// `GET /v1/config/webhook-subscriptions`.
pub async fn list(State(state): State<AppState>, Extension(tenant): Extension<Tenant>) -> Result<Response, Problem> {
    let rows = webhooks::list(&state, &tenant).await?;
    Ok(axum::Json(json!({ "data": rows.iter().map(render).collect::<Vec<_>>() })).into_response())
}

/// `PUT /v1/config/webhook-subscriptions/{id}`: 201 with `secret` when created, 200
/// when replaced.
pub async fn put(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<WebhookSubscriptionId>,
    bytes: Bytes,
) -> Result<Response, Problem> {
    let map = problem::object(&bytes, FIELDS)?;
    let url = match map.get("url") {
        Some(Value::String(url)) => url.clone(),
        _ => return Err(Problem::invalid("url: an https URL is required")),
    };
    let event_types = strings(&map, "event_types")?
        .ok_or_else(|| Problem::invalid("event_types: an array of event types is required"))?;
    let enabled = match map.get("enabled") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(enabled)) => Some(*enabled),
        Some(_) => return Err(Problem::invalid("enabled: a boolean is required")),
    };
    let spec = SubscriptionSpec {
        id: Some(id.as_str().to_owned()),
        url,
        event_types,
        name: String::new(),
        description: String::new(),
        enabled,
    };
    let written = webhooks::put(&state, &tenant, spec, WebhookPut::Upsert).await?;
    let mut body = render(&written.row);
    match written.secret {
        Some(secret) => {
            body["secret"] = json!(secret);
            Ok((StatusCode::CREATED, axum::Json(body)).into_response())
        }
        None => Ok(axum::Json(body).into_response()),
    }
}

/// `GET /v1/config/webhook-subscriptions/{id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<WebhookSubscriptionId>,
) -> Result<Response, Problem> {
    let row = webhooks::get(&state, &tenant, id.as_str()).await?;
    Ok(axum::Json(render(&row)).into_response())
}

/// `DELETE /v1/config/webhook-subscriptions/{id}` → 204; its pending deliveries go too.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<WebhookSubscriptionId>,
) -> Result<StatusCode, Problem> {
    webhooks::delete(&state, &tenant, id.as_str()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/config/webhook-subscriptions/{id}/deliveries`: the latest deliveries,
/// newest first, with their state.
pub async fn deliveries(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<WebhookSubscriptionId>,
) -> Result<Response, Problem> {
    let rows = webhooks::deliveries(&state, &tenant, id.as_str()).await?;
    Ok(axum::Json(json!({ "data": rows.iter().map(render_delivery).collect::<Vec<_>>() })).into_response())
}
