//! `POST /v1/application-access-tokens` and `DELETE /v1/application-access-tokens/{id}`
//! (docs/api/app-tokens.md). Errors are the control plane's RFC 9457 problem documents
//! (`control::problem`: `application/problem+json`, `type` `about:blank`, `title`,
//! `status`, `detail`, `code`): a broken rule is 422, a session or token outside the
//! workspace 404, a session that takes no new turn 409, a store that cannot answer 503.

use agentd_schema::ThreadBinding;
use agentd_schema::ids::ApplicationAccessTokenId;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::query::rfc3339;
use crate::AppState;
use crate::admission::Tenant;
use crate::control::problem::Problem;
use crate::domain::app_tokens::{self, DEFAULT_LIFETIME_SECS, IssueToken};

const FIELDS: &[&str] = &[
    "authority_id",
    "application_scope",
    "actor_key",
    "protocols",
    "operations",
    "thread_bindings",
    "expires_in_seconds",
];

fn text(map: &Map<String, Value>, field: &str, required: bool) -> Result<Option<String>, Problem> {
    match map.get(field) {
        None | Some(Value::Null) if !required => Ok(None),
        Some(Value::String(value)) if !value.is_empty() && value.chars().count() <= 255 => Ok(Some(value.clone())),
        _ => Err(Problem::invalid(format!("{field}: a string of 1 to 255 characters is required"))),
    }
}

fn strings(map: &Map<String, Value>, field: &str) -> Result<Vec<String>, Problem> {
    let items = map
        .get(field)
        .and_then(Value::as_array)
        .ok_or_else(|| Problem::invalid(format!("{field}: an array of strings is required")))?;
    items
        .iter()
        .map(|item| item.as_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Problem::invalid(format!("{field}: every item must be a string")))
}

fn bindings(map: &Map<String, Value>) -> Result<Vec<ThreadBinding>, Problem> {
    let items = map.get("thread_bindings").and_then(Value::as_array).ok_or_else(|| {
        Problem::invalid("thread_bindings: an array of {external_thread_id, managed_session_id} is required")
    })?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let object =
                item.as_object().filter(|o| o.keys().all(|k| k == "external_thread_id" || k == "managed_session_id"));
            match object.map(|o| (o.get("external_thread_id"), o.get("managed_session_id"))) {
                Some((Some(Value::String(thread)), Some(Value::String(session)))) => {
                    Ok(ThreadBinding { external_thread_id: thread.clone(), managed_session_id: session.clone() })
                }
                _ => Err(Problem::invalid(format!(
                    "thread_bindings[{i}]: exactly the strings external_thread_id and managed_session_id"
                ))),
            }
        })
        .collect()
}

/// `POST /v1/application-access-tokens` → 201 with the token (shown only here).
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> Result<Response, Problem> {
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| Problem::invalid(format!("the body is not JSON: {e}")))?;
    let map = value.as_object().ok_or_else(|| Problem::invalid("the body must be a JSON object"))?;
    if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(Problem::invalid(format!("{unknown}: unknown field")));
    }
    let expires_in_seconds = match map.get("expires_in_seconds") {
        None | Some(Value::Null) => DEFAULT_LIFETIME_SECS,
        Some(value) => {
            value.as_i64().ok_or_else(|| Problem::invalid("expires_in_seconds: an integer of 1 to 900 is required"))?
        }
    };
    let request = IssueToken {
        authority_id: text(map, "authority_id", true)?.unwrap_or_default(),
        application_scope: text(map, "application_scope", true)?.unwrap_or_default(),
        actor_key: text(map, "actor_key", false)?,
        protocols: strings(map, "protocols")?,
        operations: strings(map, "operations")?,
        bindings: bindings(map)?,
        expires_in_seconds,
    };
    let issued = app_tokens::issue(&state, &tenant, request).await?;
    let row = &issued.row;
    let body = json!({
        "id": row.id,
        "object": "application_access_token",
        "token_type": "Bearer",
        "access_token": issued.access_token,
        "expires_at": rfc3339(row.expires_at_ms),
        "application_scope": row.application_scope,
        "actor_key": row.actor_key,
        "protocols": row.protocols,
        "operations": row.operations,
        "thread_bindings": row.thread_bindings.iter().map(|b| json!({
            "external_thread_id": b.external_thread_id, "managed_session_id": b.managed_session_id,
        })).collect::<Vec<_>>(),
    });
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

/// `DELETE /v1/application-access-tokens/{id}` → 204; the token stops working at once.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<ApplicationAccessTokenId>,
) -> Result<StatusCode, Problem> {
    app_tokens::revoke(&state, &tenant, id.as_str()).await?;
    Ok(StatusCode::NO_CONTENT)
}
