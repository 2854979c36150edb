//! `/v1/ext/sessions/{session_id}/live-inbox`: user messages queued for the session's
//! live run, delivered (committed as `user.message`) at its next model request. The
//! queue lives in the store, so any gateway serves it and the worker that owns the run
//! takes it inside its own fenced commit. Mutations need a live run (410 otherwise);
//! a reorder names the version it was computed from (409 when stale or not an exact
//! permutation). See docs/api/live-inbox.md.

use agentd_schema::ids::{InboxMessageId, SessionId};
use agentd_schema::{InboxChange, InboxSnapshot};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::body;
use super::query::rfc3339;
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::inbox;
use crate::error::{ApiError, ApiResult};

fn render(snapshot: &InboxSnapshot) -> Value {
    let messages: Vec<Value> = snapshot
        .messages
        .iter()
        .map(|m| json!({ "id": m.id, "content": m.content, "created_at": rfc3339(m.created_at_ms) }))
        .collect();
    json!({ "type": "live_inbox", "active": snapshot.active, "version": snapshot.version, "messages": messages })
}

/// Text content blocks: a non-empty array of `{"type":"text","text":…}`.
fn content(map: &Map<String, Value>) -> ApiResult<Value> {
    let blocks = body::array(map.get("content"), "content", super::limits::MAX_INBOX_BLOCKS)?;
    if blocks.is_empty() {
        return Err(ApiError::invalid("content: at least one block is required"));
    }
    for (i, block) in blocks.iter().enumerate() {
        let block = body::as_object(block, &format!("content[{i}]"))?;
        body::only_known(block, &["type", "text"], &format!("content[{i}]"))?;
        if block.get("type").and_then(Value::as_str) != Some("text") {
            return Err(ApiError::invalid(format!("content[{i}].type: only text blocks are accepted")));
        }
        body::string(block.get("text"), &format!("content[{i}].text"), 1, super::limits::MAX_INBOX_TEXT_CHARS)?;
    }
    Ok(Value::Array(blocks.to_vec()))
}

/// `GET …/live-inbox`: always 200, `active: false` when no run is live.
pub async fn snapshot(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&inbox::snapshot(&state, &tenant, &id).await?)))
}

/// `POST …/live-inbox` `{"content": [text blocks]}` → the new message's `id` and the inbox.
pub async fn enqueue(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["content"], "body")?;
    let content = content(&map)?;
    let snapshot = inbox::change(&state, &tenant, &id, InboxChange::Enqueue { content }).await?;
    let mut out = render(&snapshot);
    out["id"] = json!(snapshot.messages.last().map(|m| m.id.clone()));
    Ok(Json(out))
}

/// `PUT …/live-inbox/order` `{"version": n, "order": [ids]}`.
pub async fn reorder(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["version", "order"], "body")?;
    let expected_version =
        map.get("version").and_then(Value::as_i64).ok_or_else(|| ApiError::invalid("version: required integer"))?;
    let order = body::array(map.get("order"), "order", 1_000)?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str().map(str::to_owned).ok_or_else(|| ApiError::invalid(format!("order[{i}]: expected a message id")))
        })
        .collect::<ApiResult<Vec<String>>>()?;
    Ok(Json(render(&inbox::change(&state, &tenant, &id, InboxChange::Reorder { expected_version, order }).await?)))
}

/// `PUT …/live-inbox/{message_id}` `{"content": [text blocks]}`: replaced in place.
pub async fn replace(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, message)): Path<(SessionId, InboxMessageId)>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["content"], "body")?;
    let content = content(&map)?;
    let change = InboxChange::Replace { id: message.into(), content };
    Ok(Json(render(&inbox::change(&state, &tenant, &id, change).await?)))
}

/// `DELETE …/live-inbox/{message_id}`: withdrawn.
pub async fn withdraw(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, message)): Path<(SessionId, InboxMessageId)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&inbox::change(&state, &tenant, &id, InboxChange::Withdraw { id: message.into() }).await?)))
}
