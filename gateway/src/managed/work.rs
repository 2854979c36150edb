//! `environments.work`: the self-hosted environment work protocol. The queue lives in
//! the store, so any gateway answers any request; a long-poll sleeps on the bus and
//! wakes when work is announced (or re-checks after a short tick, so a lost
//! announcement costs latency, never work).

use agentd_schema::ids::{EnvironmentId, WorkId};
use std::time::Duration;

use agentd_schema::{Heartbeat, WorkItem, WorkSource, hands};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::{Extension, Json};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::body;
use super::family::Family;
use super::query::{Query, cursor_page, decode_cursor, rfc3339};
use crate::AppState;
use crate::admission::Tenant;
use crate::admission::auth::SESSIONS_TOKEN_PREFIX;
use crate::error::{ApiError, ApiResult};

const ENVIRONMENTS: Family = Family { kind: "environment", noun: "environment", max_page: 100 };
/// `reclaim_older_than_ms` when the poller does not say.
const DEFAULT_RECLAIM_MS: i64 = 5_000;
/// How often a blocked poll re-checks the store even without an announcement.
const RECHECK: Duration = Duration::from_millis(250);

/// The wire `work` object; `secret` only on the poll that offers it.
pub fn render(item: &WorkItem, secret: Option<&str>) -> Value {
    let at = |ms: Option<i64>| ms.map(rfc3339);
    json!({
        "type": "work",
        "id": item.id,
        "environment_id": item.environment_id,
        "data": { "type": "session", "id": item.session_id },
        "state": item.state,
        "metadata": item.metadata,
        "secret": secret,
        "created_at": rfc3339(item.created_at_ms),
        "acknowledged_at": at(item.acknowledged_at_ms),
        "started_at": at(item.started_at_ms),
        "latest_heartbeat_at": at(item.latest_heartbeat_at_ms),
        "stop_requested_at": at(item.stop_requested_at_ms),
        "stopped_at": at(item.stopped_at_ms),
    })
}

/// `GET /v1/environments/{environment_id}/work/poll`.
pub async fn poll(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(environment_id): Path<EnvironmentId>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    ENVIRONMENTS.load(state.backends.store.as_ref(), &tenant, &environment_id, None).await?;
    if let Some(worker) = headers.get("anthropic-worker-id").and_then(|v| v.to_str().ok()) {
        let worker: String = worker.chars().take(128).collect();
        state.backends.store.note_work_poller(&environment_id, &worker).await?;
    }
    let channel = hands::environment_channel(&environment_id);
    offer(&state, WorkSource::Environment(environment_id.into()), &channel, &uri).await
}

/// `GET /v1/ext/runner/work/poll`: the runner's poll across every `cloud` environment
/// of its workspace (the one route of the protocol a runner key adds).
pub async fn poll_cloud(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let channel = hands::cloud_channel(&tenant.workspace_id);
    offer(&state, WorkSource::Cloud { workspace_id: tenant.workspace_id.clone() }, &channel, &uri).await
}

async fn offer(state: &AppState, source: WorkSource, channel: &str, uri: &Uri) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(uri);
    let block_ms = query.int("block_ms", 1, 999)?;
    let reclaim = query.int("reclaim_older_than_ms", 0, i64::MAX)?.unwrap_or(DEFAULT_RECLAIM_MS);
    let store = state.backends.store.as_ref();
    // Subscribe before the first look so an announcement in between is not missed.
    let mut wake = match (block_ms, state.backends.bus.as_ref()) {
        (Some(_), Some(bus)) => bus.subscribe(channel).await.ok(),
        _ => None,
    };
    let deadline = tokio::time::Instant::now() + Duration::from_millis(block_ms.unwrap_or(0) as u64);
    loop {
        let token = agentd_schema::ids::new_secret(SESSIONS_TOKEN_PREFIX);
        let hash = agentd_schema::ids::secret_hash(&token);
        if let Some(item) = store.poll_work(&source, reclaim, &hash).await? {
            metrics::counter!("agentd_work_offered_total").increment(1);
            let secret = URL_SAFE_NO_PAD.encode(json!({ "sessions_token": token }).to_string());
            return Ok(Json(render(&item, Some(&secret))));
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Ok(Json(Value::Null));
        }
        let tick = (deadline - now).min(RECHECK);
        match wake.as_mut() {
            Some(subscription) => {
                use futures::StreamExt;
                let _ = tokio::time::timeout(tick, subscription.next()).await;
            }
            None => tokio::time::sleep(tick).await,
        }
    }
}

async fn item(state: &AppState, tenant: &Tenant, environment_id: &str, work_id: &str) -> ApiResult<WorkItem> {
    ENVIRONMENTS.load(state.backends.store.as_ref(), tenant, environment_id, None).await?;
    state
        .backends
        .store
        .get_work(environment_id, work_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("work not found: {work_id}")))
}

/// `GET /v1/environments/{environment_id}/work/{work_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((environment_id, work_id)): Path<(EnvironmentId, WorkId)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&item(&state, &tenant, &environment_id, &work_id).await?, None)))
}

/// `POST /v1/environments/{environment_id}/work/{work_id}`: metadata merge-patch.
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((environment_id, work_id)): Path<(EnvironmentId, WorkId)>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["metadata"], "body")?;
    let patch = match map.get("metadata") {
        Some(Value::Object(patch)) => patch.clone(),
        Some(_) => return Err(ApiError::invalid("metadata: expected an object")),
        None => return Err(ApiError::invalid("metadata: required")),
    };
    let (deletions, upserts): (serde_json::Map<String, Value>, serde_json::Map<String, Value>) =
        patch.clone().into_iter().partition(|(_, value)| value.is_null());
    body::metadata(&upserts, "metadata")?;
    let _ = deletions;
    item(&state, &tenant, &environment_id, &work_id).await?;
    let updated = state
        .backends
        .store
        .update_work_metadata(&environment_id, &work_id, &Value::Object(patch))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("work not found: {work_id}")))?;
    if updated.metadata.as_object().is_some_and(|m| m.len() > 16) {
        return Err(ApiError::invalid_with_code("invalid_metadata", "metadata: at most 16 keys"));
    }
    Ok(Json(render(&updated, None)))
}

/// `GET /v1/environments/{environment_id}/work`: newest first.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(environment_id): Path<EnvironmentId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    ENVIRONMENTS.load(state.backends.store.as_ref(), &tenant, &environment_id, None).await?;
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, 100)?.unwrap_or(20);
    let after = query.string("page").map(decode_cursor).transpose()?;
    let rows = state.backends.store.list_work(&environment_id, after.as_deref(), limit + 1).await?;
    Ok(Json(cursor_page(rows, limit, |item| item.id.clone(), |item| render(item, None))))
}

/// `POST /v1/environments/{environment_id}/work/{work_id}/ack`.
pub async fn ack(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((environment_id, work_id)): Path<(EnvironmentId, WorkId)>,
) -> ApiResult<Json<Value>> {
    item(&state, &tenant, &environment_id, &work_id).await?;
    match state.backends.store.ack_work(&environment_id, &work_id).await? {
        Ok(acked) => Ok(Json(render(&acked, None))),
        Err(conflict) => Err(ApiError::Conflict(format!(
            "work {work_id} cannot be acknowledged: it is {} (only an offered, queued item can be)",
            conflict.state
        ))),
    }
}

/// `POST /v1/environments/{environment_id}/work/{work_id}/heartbeat`.
pub async fn heartbeat(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((environment_id, work_id)): Path<(EnvironmentId, WorkId)>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let ttl = query.int("desired_ttl_seconds", 1, 86_400)?;
    let expected = query.string("expected_last_heartbeat").unwrap_or("NO_HEARTBEAT").to_owned();
    item(&state, &tenant, &environment_id, &work_id).await?;
    let outcome = state
        .backends
        .store
        .heartbeat_work(&environment_id, &work_id, &expected, ttl)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("work not found: {work_id}")))?;
    match outcome {
        Heartbeat::Recorded { item, extended } => Ok(Json(json!({
            "type": "work_heartbeat",
            "last_heartbeat": item.last_heartbeat.clone().unwrap_or_default(),
            "lease_extended": extended,
            "state": item.state,
            "ttl_seconds": item.ttl_seconds,
        }))),
        Heartbeat::PreconditionFailed(item) => Err(ApiError::PreconditionFailed {
            message: format!(
                "expected_last_heartbeat {expected:?} does not match the stored heartbeat: another worker may hold the lease"
            ),
            details: json!({
                "error_code": "heartbeat_precondition_failed",
                "current_state": {
                    "last_heartbeat": item.last_heartbeat,
                    "lease_extended": false,
                    "state": item.state,
                    "ttl_seconds": item.ttl_seconds,
                },
            }),
        }),
        Heartbeat::NotAcked(_) => {
            Err(ApiError::Conflict(format!("work {work_id} is queued: acknowledge it before heartbeating")))
        }
    }
}

/// `POST /v1/environments/{environment_id}/work/{work_id}/stop`.
pub async fn stop(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((environment_id, work_id)): Path<(EnvironmentId, WorkId)>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["force"], "body")?;
    let force = body::optional_bool(map.get("force"), "force")?.unwrap_or(false);
    item(&state, &tenant, &environment_id, &work_id).await?;
    match state.backends.store.stop_work(&environment_id, &work_id, force).await? {
        Some(Ok(stopped)) => Ok(Json(render(&stopped, None))),
        Some(Err(_)) => Err(ApiError::Conflict(format!("work {work_id} is already stopped"))),
        None => Err(ApiError::NotFound(format!("work not found: {work_id}"))),
    }
}

/// `POST /v1/ext/environments/{environment_id}/work/{work_id}/refuse` `{reason}`: the
/// hands cannot serve the session as its sandbox execution policy asks
/// (`domain::hands::refuse`). The stopped item.
pub async fn refuse(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((environment_id, work_id)): Path<(EnvironmentId, WorkId)>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["reason"], "body")?;
    // Its rules (length, characters) are the domain's.
    let reason = body::string(map.get("reason"), "reason", 0, usize::MAX)?;
    let item = item(&state, &tenant, &environment_id, &work_id).await?;
    let stopped = crate::domain::hands::refuse(&state, &item, &reason).await?;
    Ok(Json(render(&stopped, None)))
}

/// `GET /v1/environments/{environment_id}/work/stats`.
pub async fn stats(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(environment_id): Path<EnvironmentId>,
) -> ApiResult<Json<Value>> {
    ENVIRONMENTS.load(state.backends.store.as_ref(), &tenant, &environment_id, None).await?;
    let stats = state.backends.store.work_stats(&environment_id).await?;
    Ok(Json(json!({
        "type": "work_queue_stats",
        "depth": stats.depth,
        "pending": stats.pending,
        "oldest_queued_at": stats.oldest_queued_at_ms.map(rfc3339),
        "workers_polling": stats.workers_polling,
    })))
}
