//! Durable run control, `/v1/durable/threads/{thread}/…` (docs/api/durable.md). State
//! changes happen in the store under each run row's own condition, scoped to the
//! addressed thread; whatever must run again gets its queue message through the
//! outbox in the same transaction, published right after. Nothing depends on which
//! gateway or worker receives the request. Without a queue the routes fail closed (503).

use agentd_schema::ids::{RunId, SessionId};
use agentd_schema::{EventType, NewEvent, Run, RunStatus, StoredEvent};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::{Value, json};

use crate::AppState;
use crate::admission::Tenant;
use crate::domain::{input, runs};
use crate::error::{ApiError, ApiResult};
use crate::managed::{body, query::Query};

/// The durable routes, relative to `/v1`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/durable/threads/{thread}/submit_background", post(submit_background))
        .route("/durable/threads/{thread}/cancel", post(cancel))
        .route("/durable/threads/{thread}/dispatches", get(dispatches))
        .route("/durable/threads/{thread}/messages", get(messages))
        .route("/durable/threads/{thread}/reconcile", post(reconcile))
        .route("/durable/threads/{thread}/quarantine-retry-exhausted", post(quarantine))
        .route("/durable/threads/{thread}/dead-letters", get(dead_letters))
        .route("/durable/threads/{thread}/dead-letters/purge", post(purge))
        .route("/durable/threads/{thread}/dead-letters/{run_id}/requeue", post(requeue))
        .route("/durable/threads/{thread}/supersede", post(supersede))
        .route("/durable/threads/{thread}/superseded", get(superseded))
        .route("/durable/threads/{thread}/deliver", post(deliver))
        .route("/durable/threads/{thread}/pause", post(pause))
        .route("/durable/threads/{thread}/resume", post(resume))
        .route("/durable/threads/{thread}/wake", post(wake))
}

/// The addressed thread (a session id names its primary thread), checked against the
/// caller's workspace (404 otherwise) and durable ingress (503 without a queue).
async fn thread(state: &AppState, tenant: &Tenant, thread: &str) -> ApiResult<String> {
    if state.backends.queue.is_none() {
        return Err(ApiError::Unavailable("durable ingress is not configured on this process".into()));
    }
    let session = state.backends.store.get_session(&tenant.workspace_id, thread).await?;
    session.map(|s| s.id).ok_or_else(|| ApiError::NotFound(format!("thread not found: {thread}")))
}

async fn publish(state: &AppState, messages: &[agentd_schema::OutboxMessage]) {
    runs::publish(state, messages).await;
}

fn run_id(bytes: &Bytes) -> ApiResult<String> {
    let map = body::object(bytes)?;
    body::string(map.get("run_id"), "run_id", 1, 256)
}

fn status_name(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Pending => "pending",
        RunStatus::Leased => "leased",
        RunStatus::Awaiting => "awaiting",
        RunStatus::Done => "done",
        RunStatus::DeadLetter => "dead_letter",
        RunStatus::Superseded => "superseded",
    }
}

fn render_run(run: &Run) -> Value {
    json!({
        "run_id": run.id,
        "status": status_name(run.status),
        "attempts": run.attempts,
        "max_attempts": run.max_attempts,
        "epoch": run.epoch,
        "cancel_requested": run.cancel_requested,
        "paused": run.pause_requested && run.status == RunStatus::Awaiting,
        "outcome": run.outcome,
    })
}

/// `POST …/submit_background` `{"text": "…"}` → `{"run_id", "queued": true}`.
async fn submit_background(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["text"], "body")?;
    let text = body::string(map.get("text"), "text", 1, 100_000)?;
    let thread = thread(&state, &tenant, &thread_id).await?;
    input::submit(&state, &tenant, &thread_id, vec![NewEvent::user_message(&thread, &text)]).await?;
    let run = runs::open_run(&state, &thread).await?;
    let run_id = run.map(|r| r.id).unwrap_or_default();
    Ok(Json(json!({ "run_id": run_id, "queued": true })))
}

/// `POST …/cancel` `{"run_id"}` → `{"cancelled": true, "run_id", "status"}`.
async fn cancel(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let run_id = run_id(&bytes)?;
    let thread = thread(&state, &tenant, &thread_id).await?;
    let run = runs::cancel(&state, &thread, &run_id).await?;
    Ok(Json(json!({ "cancelled": true, "run_id": run.id, "status": status_name(run.status) })))
}

/// `GET …/dispatches` → `{"dispatches": [run…]}` in creation order.
async fn dispatches(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    let thread = thread(&state, &tenant, &thread_id).await?;
    let runs = state.backends.store.thread_runs(&thread).await?;
    Ok(Json(json!({ "dispatches": runs.iter().map(render_run).collect::<Vec<_>>() })))
}

fn message(event: &StoredEvent) -> Option<Value> {
    let role = match event.event_type() {
        Some(EventType::UserMessage) => "user",
        Some(EventType::AgentMessage) => "assistant",
        _ => return None,
    };
    let text: String = event.body["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("");
    Some(json!({ "id": event.event_id, "role": role, "text": text }))
}

/// `GET …/messages` → `{"messages": [{"id", "role", "text"}]}`: committed history only.
async fn messages(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    let thread = thread(&state, &tenant, &thread_id).await?;
    let query = agentd_schema::EventQuery {
        thread_id: Some(thread.clone()),
        types: vec![EventType::UserMessage.as_str().into(), EventType::AgentMessage.as_str().into()],
        limit: 100_000,
        ..Default::default()
    };
    let events = state.backends.store.query_events(&thread, &query).await?;
    Ok(Json(json!({ "messages": events.iter().filter_map(message).collect::<Vec<_>>() })))
}

/// `POST …/reconcile` → `{"recovered": [run_id…]}`: re-publishes runnable runs (pending,
/// or leased past their lease) whose submission may have been lost.
async fn reconcile(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    let thread = thread(&state, &tenant, &thread_id).await?;
    let messages = state.backends.store.republish_runnable(&thread).await?;
    publish(&state, &messages).await;
    let runs = state.backends.store.thread_runs(&thread).await?;
    let recovered: Vec<&str> = messages
        .iter()
        .filter_map(|m| runs.iter().find(|r| m.msg_id.starts_with(&format!("{}:", r.id))).map(|r| r.id.as_str()))
        .collect();
    Ok(Json(json!({ "recovered": recovered })))
}

/// `POST …/quarantine-retry-exhausted?max_attempts=N&now_ms=T` → `{"quarantined": n}`.
/// An omitted or unparsable `max_attempts` is 0: every expired leased run of the thread.
async fn quarantine(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let max_attempts = query.string("max_attempts").and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
    let now_ms = match query.string("now_ms") {
        Some(raw) => raw.parse::<i64>().map_err(|_| ApiError::invalid(format!("now_ms: not an integer: {raw:?}")))?,
        None => crate::managed::query::now_ms(),
    };
    let thread = thread(&state, &tenant, &thread_id).await?;
    let quarantined = state.backends.store.quarantine_expired(&thread, i64::from(max_attempts), now_ms).await?;
    Ok(Json(json!({ "quarantined": quarantined })))
}

/// `GET …/dead-letters` → `{"dead_letters": [run…]}`.
async fn dead_letters(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    let thread = thread(&state, &tenant, &thread_id).await?;
    let runs = state.backends.store.thread_runs(&thread).await?;
    let dead: Vec<Value> = runs.iter().filter(|r| r.status == RunStatus::DeadLetter).map(render_run).collect();
    Ok(Json(json!({ "dead_letters": dead })))
}

/// `POST …/dead-letters/{run_id}/requeue` → `{"run_id", "requeued": true}`; 409 unless
/// the run is dead-lettered in this thread (and carries no cancel intent).
async fn requeue(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((thread_id, run_id)): Path<(SessionId, RunId)>,
) -> ApiResult<Json<Value>> {
    let thread = thread(&state, &tenant, &thread_id).await?;
    let Some(message) = state.backends.store.requeue_dead_letter(&thread, &run_id).await? else {
        return Err(ApiError::Conflict(format!(
            "run {run_id} is not dead-lettered in thread {thread} (or carries a cancel intent)"
        )));
    };
    publish(&state, std::slice::from_ref(&message)).await;
    Ok(Json(json!({ "run_id": run_id, "requeued": true })))
}

/// `POST …/dead-letters/purge` → `{"purged": n}`: this thread's dead letters only.
async fn purge(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    let thread = thread(&state, &tenant, &thread_id).await?;
    let purged = state.backends.store.purge_dead_letters(&thread).await?;
    Ok(Json(json!({ "purged": purged })))
}

/// `POST …/supersede` `{"text"}` → `{"run_id", "status", "superseded": [run_id…]}`:
/// the thread's pending and awaiting runs (without a cancel intent) become `superseded`
/// and the text starts a new run. A leased run is not superseded (cancel it).
async fn supersede(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["text"], "body")?;
    let text = body::string(map.get("text"), "text", 1, 100_000)?;
    let thread = thread(&state, &tenant, &thread_id).await?;
    // Admitted before anything is superseded: a refused message changes nothing.
    input::admit_turn(&state, &tenant, &thread_id).await?;
    state.backends.store.supersede_runs(&thread).await?;
    input::submit(&state, &tenant, &thread_id, vec![NewEvent::user_message(&thread, &text)]).await?;
    let runs = state.backends.store.thread_runs(&thread).await?;
    let current =
        runs.iter().rev().find(|r| matches!(r.status, RunStatus::Pending | RunStatus::Leased | RunStatus::Awaiting));
    let superseded: Vec<&str> =
        runs.iter().filter(|r| r.status == RunStatus::Superseded).map(|r| r.id.as_str()).collect();
    Ok(Json(json!({
        "run_id": current.map(|r| r.id.as_str()),
        "status": current.map(|r| status_name(r.status)),
        "superseded": superseded,
    })))
}

/// `GET …/superseded` → `{"superseded": [run_id…]}`.
async fn superseded(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    let thread = thread(&state, &tenant, &thread_id).await?;
    let runs = state.backends.store.thread_runs(&thread).await?;
    let ids: Vec<&str> = runs.iter().filter(|r| r.status == RunStatus::Superseded).map(|r| r.id.as_str()).collect();
    Ok(Json(json!({ "superseded": ids })))
}

/// `POST …/deliver` `{"allow": bool (default true)}` → `{"run_id", "staged": true,
/// "tool_use_ids": […]}`: answers every tool call the thread's awaiting run asks to
/// confirm with one `user.tool_confirmation`, committed with the run's submission (the
/// outbox carries it to a worker). Applied once: a repeat finds nothing awaiting (409).
async fn deliver(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["allow"], "body")?;
    let allow = body::optional_bool(map.get("allow"), "allow")?.unwrap_or(true);
    let thread = thread(&state, &tenant, &thread_id).await?;
    let open = input::awaiting_confirmation(&state, &thread).await?;
    if open.is_empty() {
        return Err(ApiError::Conflict(format!("no run on thread {thread} awaits a decision")));
    }
    let result = if allow { "allow" } else { "deny" };
    let confirmations = open
        .iter()
        .map(|id| NewEvent {
            // One decision per call: a concurrent duplicate collides on this id and is
            // rejected by the store (409) instead of committing a second confirmation.
            event_id: format!("sevt_deliver_{}", id.trim_start_matches("sevt_")),
            thread_id: thread.clone(),
            kind: EventType::UserToolConfirmation.as_str().into(),
            body: json!({ "type": EventType::UserToolConfirmation, "tool_use_id": id, "result": result }),
        })
        .collect();
    input::submit(&state, &tenant, &thread_id, confirmations).await?;
    let runs = state.backends.store.thread_runs(&thread).await?;
    let run =
        runs.iter().rev().find(|r| matches!(r.status, RunStatus::Pending | RunStatus::Leased | RunStatus::Awaiting));
    Ok(Json(json!({ "run_id": run.map(|r| r.id.as_str()), "staged": true, "tool_use_ids": open })))
}

async fn signal(state: &AppState, thread: &str, run_id: &str, kind: agentd_proto::v1::control_signal::Kind) {
    if let Some(bus) = &state.backends.bus {
        agentd_schema::live::publish_control(bus.as_ref(), thread, run_id, kind).await;
    }
}

/// `POST …/pause` `{"run_id"?}` → `{"paused": true, "run_id"}`: the live run parks at its
/// next step boundary as a paused ticket (durable intent first, then a live signal).
/// 409 when no run of the thread is live.
async fn pause(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["run_id"], "body")?;
    let run_id = body::optional_string(map.get("run_id"), "run_id", 256)?;
    let thread = thread(&state, &tenant, &thread_id).await?;
    let Some(run) = state.backends.store.request_pause(&thread, run_id.as_deref()).await? else {
        return Err(ApiError::Conflict(format!("thread {thread} has no live run to pause")));
    };
    signal(&state, &thread, &run.id, agentd_proto::v1::control_signal::Kind::Pause).await;
    Ok(Json(json!({ "paused": true, "run_id": run.id })))
}

/// `POST …/resume` `{"text"}` → `{"resumed": true, "run_id"}`: releases the thread's
/// paused ticket with a user message. 409 when nothing is paused.
async fn resume(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["text"], "body")?;
    let text = body::string(map.get("text"), "text", 1, 100_000)?;
    let thread = thread(&state, &tenant, &thread_id).await?;
    input::admit_turn(&state, &tenant, &thread_id).await?;
    let Some(run) = state.backends.store.take_pause(&thread).await? else {
        return Err(ApiError::Conflict(format!("no paused run on thread {thread} to resume")));
    };
    input::submit(&state, &tenant, &thread_id, vec![NewEvent::user_message(&thread, &text)]).await?;
    Ok(Json(json!({ "resumed": true, "run_id": run.id })))
}

/// `POST …/wake` `{"run_id"}` → `{"woken": true, "run_id"}`: nudges the live attempt (a
/// provider-retry backoff ends at once). Creates no durable state; 409 when the run is
/// not live.
async fn wake(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread_id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let run_id = run_id(&bytes)?;
    let thread = thread(&state, &tenant, &thread_id).await?;
    let runs = state.backends.store.thread_runs(&thread).await?;
    match runs.iter().find(|r| r.id == run_id) {
        None => Err(ApiError::NotFound(format!("run not found in this thread: {run_id}"))),
        Some(run) if run.status != RunStatus::Leased => {
            Err(ApiError::Conflict(format!("run {run_id} is not live ({})", status_name(run.status))))
        }
        Some(run) => {
            signal(&state, &thread, &run.id, agentd_proto::v1::control_signal::Kind::Wake).await;
            Ok(Json(json!({ "woken": true, "run_id": run.id })))
        }
    }
}
