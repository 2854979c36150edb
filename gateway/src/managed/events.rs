//! Session events: send (validated, committed, submitted to the run), list, and the
//! live SSE stream; plus the thread routes over the same history.
//!
//! The stream is subscribe-then-backfill: it subscribes to the session's bus channel,
//! then reads what was committed since it opened, then forwards live notifications,
//! de-duplicating by sequence number and filling any gap from the store. It works on
//! any gateway replica, whichever worker commits.

use agentd_schema::ids::{SessionId, ThreadId};
use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::time::Duration;

use agentd_proto::BusItem;
use agentd_proto::v1::{LiveEvent, live_event};
use agentd_schema::{EventQuery, NewEvent, Session, StoredEvent, Submission, TimeBounds, live};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::{Extension, Json};
use futures::{Stream, StreamExt};
use prost::Message;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::body;
use super::content;
use super::query::{ChunkedPage, Query, decode_cursor, rfc3339};
use super::sessions::load;
use crate::AppState;
use crate::admission::{Access, Tenant};
use crate::error::{ApiError, ApiResult};

/// Event types that make the thread's run runnable.
const RUN_INPUTS: &[&str] = &[
    "user.message",
    "user.custom_tool_result",
    "user.tool_result",
    "user.tool_confirmation",
    "user.define_outcome",
    "system.message",
    // Our runner's answers on `cloud` environments.
    "agent.tool_result",
];
/// Every type `events.list?types[]=` accepts.
const EVENT_TYPES: &[&str] = &[
    "user.message",
    "user.interrupt",
    "user.tool_confirmation",
    "user.custom_tool_result",
    "user.tool_result",
    "user.define_outcome",
    "system.message",
    "agent.message",
    "agent.thinking",
    "agent.tool_use",
    "agent.tool_result",
    "agent.mcp_tool_use",
    "agent.mcp_tool_result",
    "agent.custom_tool_use",
    "agent.thread_message_received",
    "agent.thread_message_sent",
    "agent.thread_context_compacted",
    "session.error",
    "session.status_rescheduled",
    "session.status_running",
    "session.status_idle",
    "session.status_terminated",
    "session.thread_created",
    "session.thread_status_running",
    "session.thread_status_idle",
    "session.thread_status_terminated",
    "session.thread_status_rescheduled",
    "session.updated",
    "session.usage",
    "span.model_request_start",
    "span.model_request_end",
    "span.outcome_evaluation_start",
    "span.outcome_evaluation_ongoing",
    "span.outcome_evaluation_end",
    "workflow_run.created",
    "workflow_run.status_running",
    "workflow_run.status_idle",
    "workflow_run.status_ended",
    "workflow_run.error",
    "workflow_run.phase_started",
    "workflow_run.phase_ended",
];
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// While a session is active and its stream hears nothing, the store is re-read after
/// this long, doubling up to [`RESYNC_MAX`]. Live publishing is best effort (a worker
/// can die between a commit and its publish); this bounds how long a stream can miss
/// committed events, at no cost for idle sessions.
const RESYNC_FIRST: Duration = Duration::from_secs(1);
const RESYNC_MAX: Duration = Duration::from_secs(16);

/// Life of a turn, steps 2–3: commit the input with the run and its outbox row in one
/// transaction, then publish the submission and the committed events. A failed publish
/// is left to the outbox relay.
pub async fn submit_and_publish(
    state: &AppState,
    session_id: &str,
    events: Vec<NewEvent>,
) -> ApiResult<Vec<StoredEvent>> {
    let (Some(queue), Some(bus)) = (&state.backends.queue, &state.backends.bus) else {
        return Err(ApiError::Unavailable("durable ingress is not configured on this process".to_owned()));
    };
    let store = state.backends.store.as_ref();
    // W3C trace context rides with the submission so the worker's span joins this trace
    // (empty when no OTLP exporter is configured).
    let mut trace_context = HashMap::new();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        propagator.inject_context(&tracing::Span::current().context(), &mut trace_context);
    });
    let submitted = store
        .submit(Submission {
            session_id: session_id.to_owned(),
            thread_id: session_id.to_owned(),
            events,
            max_attempts: state.max_attempts,
            trace_context: trace_context.into_iter().collect(),
        })
        .await?;
    if let Err(error) = agentd_schema::outbox::publish(store, queue.as_ref(), &submitted.outbox).await {
        tracing::warn!(%error, run = %submitted.run_id, "submission publish deferred to the outbox relay");
    }
    live::publish_committed(bus.as_ref(), &submitted.events).await;
    Ok(submitted.events)
}

/// Queues a work item for the session's hands unless one is open, and wakes pollers.
pub async fn queue_hands(state: &AppState, session: &Session, environment: &Value) -> ApiResult<()> {
    let Some(bus) = &state.backends.bus else { return Ok(()) };
    let environment_id = session.body["environment_id"].as_str().unwrap_or_default();
    agentd_schema::hands::ensure(
        state.backends.store.as_ref(),
        bus.as_ref(),
        &session.workspace_id,
        environment_id,
        &session.id,
        agentd_schema::hands::hands_of(environment),
    )
    .await?;
    Ok(())
}

/// The session's tool calls that await a confirmation (`evaluated_permission: ask`,
/// neither confirmed nor answered), oldest first.
pub async fn awaiting_confirmation(state: &AppState, session_id: &str) -> ApiResult<Vec<String>> {
    let ledger = tool_ledger(state, session_id).await?;
    let mut open: Vec<&String> = ledger
        .uses
        .iter()
        .filter(|(id, (_, permission))| {
            permission.as_deref() == Some("ask") && !ledger.answers.keys().any(|(_, answered)| answered == *id)
        })
        .map(|(id, _)| id)
        .collect();
    open.sort();
    Ok(open.into_iter().cloned().collect())
}

/// Tool calls of a session and what has answered them so far.
#[derive(Default)]
struct ToolLedger {
    /// tool use id → (event type, evaluated permission)
    uses: HashMap<String, (String, Option<String>)>,
    /// (answer type, tool use id) → the stored answer
    answers: HashMap<(String, String), StoredEvent>,
}

async fn tool_ledger(state: &AppState, session_id: &str) -> ApiResult<ToolLedger> {
    let types = [
        "agent.custom_tool_use",
        "agent.tool_use",
        "agent.mcp_tool_use",
        "user.custom_tool_result",
        "user.tool_result",
        "agent.tool_result",
        "user.tool_confirmation",
    ];
    let events = state
        .backends
        .store
        .query_events(
            session_id,
            &EventQuery {
                types: types.iter().map(|t| (*t).to_owned()).collect(),
                limit: 100_000,
                ..EventQuery::default()
            },
        )
        .await?;
    let mut ledger = ToolLedger::default();
    for event in events {
        match event.kind.as_str() {
            "agent.custom_tool_use" | "agent.tool_use" | "agent.mcp_tool_use" => {
                let permission = event.body["evaluated_permission"].as_str().map(str::to_owned);
                ledger.uses.insert(event.event_id.clone(), (event.kind.clone(), permission));
            }
            kind => {
                let key = if kind == "user.custom_tool_result" { "custom_tool_use_id" } else { "tool_use_id" };
                let id = event.body[key].as_str().unwrap_or_default().to_owned();
                // A call answered by the runner (or by a denial) takes no second result.
                let kind = if kind == "agent.tool_result" { "user.tool_result" } else { kind };
                ledger.answers.entry((kind.to_owned(), id)).or_insert(event);
            }
        }
    }
    Ok(ledger)
}

/// `POST /v1/sessions/{session_id}/events`.
pub async fn send(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["events"], "")?;
    let store = state.backends.store.as_ref();
    let session = load(store, &tenant, &id).await?;
    if session.archived_at_ms.is_some() {
        return Err(ApiError::invalid(format!("session {id} is archived and accepts no events")));
    }
    if session.status == "terminated" {
        return Err(ApiError::invalid(format!("session {id} is terminated and accepts no events")));
    }
    let items = body::array(request.get("events"), "events", super::limits::MAX_EVENTS_PER_REQUEST)?;
    let budget_reached = agentd_schema::budget::Standing::of(&session.body, &session.usage).reached();
    if items.is_empty() {
        return Err(ApiError::invalid("events: at least one event is required"));
    }
    let mut parsed = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        parsed.push(content::client_event(item, &format!("events[{i}]"))?);
    }
    for (i, event) in parsed.iter().enumerate() {
        let new_turn =
            matches!(event["type"].as_str(), Some("user.message" | "system.message" | "user.define_outcome"));
        if budget_reached && new_turn {
            return Err(ApiError::invalid_with_code(
                "budget_reached",
                format!(
                    "events[{i}]: the session's budget (max_list_cost) is reached; no further model request is admitted"
                ),
            ));
        }
        if event["type"] != "system.message" {
            continue;
        }
        let follows = i.checked_sub(1).and_then(|p| parsed[p]["type"].as_str());
        let valid = i == parsed.len() - 1
            && matches!(follows, Some("user.message" | "user.tool_result" | "user.custom_tool_result"));
        if !valid {
            return Err(ApiError::invalid(format!(
                "events[{i}]: a system.message must be the final event and immediately follow the user.message, \
                 user.tool_result or user.custom_tool_result it accompanies"
            )));
        }
    }
    let needs_ledger = parsed.iter().any(|e| {
        matches!(e["type"].as_str(), Some("user.custom_tool_result" | "user.tool_result" | "user.tool_confirmation"))
    });
    let ledger = if needs_ledger { tool_ledger(&state, &id).await? } else { ToolLedger::default() };
    // `user.tool_result` comes from hands: the customer's worker on `self_hosted`
    // environments; on `cloud` ones only our runner (with the item's sessions token or
    // a runner key), and its answers are committed as `agent.tool_result`.
    let hands = if parsed.iter().any(|e| e["type"] == "user.tool_result") {
        let environment = session.body["environment_id"].as_str().unwrap_or_default();
        let environment = store.get_resource(&tenant.workspace_id, "environment", environment).await?;
        environment.map(|env| agentd_schema::hands::hands_of(&env.body))
    } else {
        None
    };
    let from_runner = matches!(tenant.access, Access::Session { .. } | Access::Runner);
    let self_hosted = hands == Some("self_hosted");
    let runner_answer = hands == Some("cloud") && from_runner;
    // Each output slot is a new event to commit, an answer committed earlier, or a
    // repeat of an answer earlier in this same request.
    let mut slots: Vec<Slot> = Vec::with_capacity(parsed.len());
    let mut answered_now: HashMap<(String, String), String> = HashMap::new();
    for (i, event) in parsed.into_iter().enumerate() {
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        let answer_key = match kind.as_str() {
            "user.custom_tool_result" => Some(("custom_tool_use_id", &["agent.custom_tool_use"][..])),
            "user.tool_result" => Some(("tool_use_id", &["agent.tool_use"][..])),
            "user.tool_confirmation" => Some(("tool_use_id", &["agent.tool_use", "agent.mcp_tool_use"][..])),
            _ => None,
        };
        if let Some((field, kinds)) = answer_key {
            let use_id = event[field].as_str().unwrap_or_default().to_owned();
            let Some((use_kind, permission)) = ledger.uses.get(&use_id) else {
                return Err(ApiError::invalid(format!(
                    "events[{i}].{field}: no open tool call {use_id} in this session"
                )));
            };
            if !kinds.contains(&use_kind.as_str()) {
                return Err(ApiError::invalid(format!(
                    "events[{i}].{field}: {use_id} is an {use_kind}, which {kind} cannot answer"
                )));
            }
            if kind == "user.tool_confirmation" && permission.as_deref() != Some("ask") {
                return Err(ApiError::invalid(format!(
                    "events[{i}].tool_use_id: {use_id} does not await a confirmation"
                )));
            }
            if kind == "user.tool_result" && !self_hosted && !runner_answer {
                return Err(ApiError::invalid(format!(
                    "events[{i}]: user.tool_result is only valid on self_hosted environments"
                )));
            }
            // A repeated answer is idempotent: echo the first, commit nothing.
            let key = (kind, use_id);
            if let Some(earlier) = ledger.answers.get(&key) {
                slots.push(Slot::Earlier(earlier.clone()));
                continue;
            }
            if let Some(first) = answered_now.get(&key) {
                slots.push(Slot::SameAs(first.clone()));
                continue;
            }
            let mut event = event;
            if key.0 == "user.tool_result" && runner_answer {
                event.insert("type".into(), json!("agent.tool_result"));
            }
            let new = new_event(&id, event);
            answered_now.insert(key, new.event_id.clone());
            slots.push(Slot::New(new));
            continue;
        }
        slots.push(Slot::New(new_event(&id, event)));
    }
    let fresh: Vec<NewEvent> = slots
        .iter()
        .filter_map(|slot| match slot {
            Slot::New(new) => Some(new.clone()),
            _ => None,
        })
        .collect();
    let drives_run = fresh.iter().any(|e| RUN_INPUTS.contains(&e.kind.as_str()));
    let committed = if fresh.is_empty() {
        Vec::new()
    } else if drives_run {
        let committed = submit_and_publish(&state, &id, fresh).await?;
        // New input after the previous work item stopped needs hands again.
        if agentd_schema::hands::needs_hands(&session.body["agent"]) {
            let environment = session.body["environment_id"].as_str().unwrap_or_default();
            if let Some(environment) = store.get_resource(&tenant.workspace_id, "environment", environment).await? {
                queue_hands(&state, &session, &environment.body).await?;
            }
        }
        committed
    } else {
        let stored = store.append_events(&id, fresh).await?;
        if let Some(bus) = &state.backends.bus {
            live::publish_committed(bus.as_ref(), &stored).await;
        }
        stored
    };
    let by_id: HashMap<&str, &StoredEvent> = committed.iter().map(|e| (e.event_id.as_str(), e)).collect();
    let data: Vec<Value> = slots
        .iter()
        .map(|slot| match slot {
            Slot::New(NewEvent { event_id, .. }) | Slot::SameAs(event_id) => {
                by_id.get(event_id.as_str()).map_or(Value::Null, |e| live::render(e))
            }
            Slot::Earlier(earlier) => live::render(earlier),
        })
        .collect();
    Ok(Json(json!({ "data": data })))
}

/// One event of a send request, as it will be echoed.
enum Slot {
    /// To commit now.
    New(NewEvent),
    /// An answer committed by an earlier request.
    Earlier(StoredEvent),
    /// A repeat of the answer with this event id earlier in the same request.
    SameAs(String),
}

fn new_event(session_id: &str, body: serde_json::Map<String, Value>) -> NewEvent {
    NewEvent::new(session_id, Value::Object(body))
}

async fn list_events(
    state: &AppState,
    session: &Session,
    thread: Option<String>,
    uri: &Uri,
    full: bool,
) -> ApiResult<Value> {
    let query = Query::from_uri(uri);
    let limit = query.int("limit", 1, 1000)?.unwrap_or(if full { 20 } else { 1000 });
    let after_seq = match query.string("page").map(decode_cursor).transpose()? {
        Some(cursor) => Some(cursor.parse::<i64>().map_err(|_| ApiError::invalid("page: invalid or expired cursor"))?),
        None => None,
    };
    let mut types = Vec::new();
    let mut processed = TimeBounds::default();
    let mut descending = false;
    if full {
        for kind in query.list("types") {
            if !EVENT_TYPES.contains(&kind) {
                return Err(ApiError::invalid(format!("types[]: unknown event type {kind:?}")));
            }
            types.push(kind.to_owned());
        }
        processed = TimeBounds {
            gt: query.datetime_ms("created_at[gt]")?,
            gte: query.datetime_ms("created_at[gte]")?,
            lt: query.datetime_ms("created_at[lt]")?,
            lte: query.datetime_ms("created_at[lte]")?,
        };
        descending = query.descending(false)?;
    }
    let base = EventQuery { thread_id: thread, types, processed, after_seq: None, limit: 0, descending };
    // An event can be large (a 2 MiB message): read them in chunks, not all at once.
    let mut page = ChunkedPage::new(after_seq.map(|seq| seq.to_string()), limit, 32);
    while let Some((after, n)) = page.next_fetch() {
        let after_seq = after.and_then(|seq| seq.parse::<i64>().ok());
        let chunk = EventQuery { after_seq, limit: n, ..base.clone() };
        page.take(&state.backends.store.query_events(&session.id, &chunk).await?, |e| e.seq.to_string(), live::render);
    }
    Ok(page.finish())
}

/// `GET /v1/sessions/{session_id}/events`: ascending by default.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    Ok(Json(list_events(&state, &session, None, &uri, true).await?))
}

/// `GET /v1/sessions/{session_id}/events/stream`.
pub async fn stream(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    uri: Uri,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    open_stream(state, session, None, uri).await
}

async fn open_stream(
    state: AppState,
    session: Session,
    thread: Option<String>,
    uri: Uri,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let query = Query::from_uri(&uri);
    let mut deltas = HashSet::new();
    for kind in query.list("event_deltas") {
        if kind != "agent.message" && kind != "agent.thinking" {
            return Err(ApiError::invalid(format!(
                "event_deltas[]: must be agent.message or agent.thinking, got {kind:?}"
            )));
        }
        deltas.insert(kind.to_owned());
    }
    let bus =
        state.backends.bus.clone().ok_or_else(|| ApiError::Unavailable("live streams need the bus".to_owned()))?;
    // Everything committed after this point reaches the client: history up to the
    // high-water mark is the client's to list; later events come live or from the store.
    let high_water = session.next_seq - 1;
    let subscription = bus.subscribe(&live::session_channel(&session.id)).await.map_err(|error| {
        tracing::warn!(%error, "cannot subscribe to the live bus");
        ApiError::Unavailable("the live bus is unavailable; retry shortly".to_owned())
    })?;
    let (tx, rx) = mpsc::channel::<Event>(256);
    let active = !matches!(session.status.as_str(), "idle" | "terminated");
    let forwarder = Forwarder { state, session_id: session.id, thread, deltas, last_seq: high_water, active, tx };
    tokio::spawn(forwarder.run(subscription));
    metrics::gauge!("agentd_sse_connections").increment(1.0);
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keepalive")))
}

/// Moves one stream's events from the bus (and the store, for gaps) to the client.
struct Forwarder {
    state: AppState,
    session_id: String,
    thread: Option<String>,
    deltas: HashSet<String>,
    last_seq: i64,
    /// The last committed event left the session running (not idle or terminated).
    active: bool,
    tx: mpsc::Sender<Event>,
}

impl Forwarder {
    async fn run(mut self, mut subscription: agentd_proto::Subscription) {
        let _gauge = GaugeGuard;
        if self.fill_from_store().await.is_err() {
            return;
        }
        let mut resync = RESYNC_FIRST;
        loop {
            // A client that went away while nothing was published must still release its
            // subscription and task: watch for the channel closing, not only for sends.
            let quiet = async {
                if self.active {
                    tokio::time::sleep(resync).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            let item = tokio::select! {
                () = self.tx.closed() => return,
                item = subscription.next() => item,
                () = quiet => Some(BusItem::Gap),
            };
            let Some(item) = item else { return };
            resync = if matches!(item, BusItem::Gap) { (resync * 2).min(RESYNC_MAX) } else { RESYNC_FIRST };
            let delivered = match item {
                BusItem::Gap => self.fill_from_store().await,
                BusItem::Message(bytes) => match LiveEvent::decode(bytes.as_ref()) {
                    Ok(message) => self.forward(message).await,
                    Err(error) => {
                        tracing::warn!(%error, "undecodable live event");
                        Ok(true)
                    }
                },
            };
            if !matches!(delivered, Ok(true)) {
                return;
            }
        }
    }

    /// Forwards one live message; `Ok(false)` ends the stream.
    async fn forward(&mut self, message: LiveEvent) -> Result<bool, ()> {
        let on_thread = self.thread.as_deref().is_none_or(|thread| thread == message.thread_id);
        match message.kind {
            Some(live_event::Kind::Committed(committed)) => {
                if committed.seq <= self.last_seq {
                    return Ok(true);
                }
                if committed.seq > self.last_seq + 1 {
                    // Something between was not seen live: the store has it.
                    self.fill_from_store().await?;
                    if committed.seq <= self.last_seq {
                        return Ok(true);
                    }
                }
                self.last_seq = committed.seq;
                let body: Value = serde_json::from_str(&committed.body_json).unwrap_or(Value::Null);
                self.note_activity(body["type"].as_str().unwrap_or_default());
                if on_thread {
                    self.send(&body).await?;
                }
                Ok(true)
            }
            Some(live_event::Kind::Preview(preview)) => {
                if on_thread && self.deltas.contains(&preview.event_type) {
                    let body: Value = serde_json::from_str(&preview.body_json).unwrap_or(Value::Null);
                    self.send(&body).await?;
                }
                Ok(true)
            }
            Some(live_event::Kind::Terminal(terminal)) => {
                let body: Value = serde_json::from_str(&terminal.body_json).unwrap_or(Value::Null);
                let _ = self.send(&body).await;
                Ok(false)
            }
            None => Ok(true),
        }
    }

    /// Sends everything committed after `last_seq`, from the store.
    async fn fill_from_store(&mut self) -> Result<bool, ()> {
        loop {
            let query = EventQuery { after_seq: Some(self.last_seq), limit: 500, ..EventQuery::default() };
            let events = match self.state.backends.store.query_events(&self.session_id, &query).await {
                Ok(events) => events,
                Err(error) => {
                    tracing::warn!(%error, "stream cannot read history; closing it so the client reconnects");
                    return Err(());
                }
            };
            let done = events.len() < 500;
            for event in events {
                self.last_seq = event.seq;
                self.note_activity(&event.kind);
                if self.thread.as_deref().is_none_or(|thread| thread == event.thread_id) {
                    self.send(&live::render(&event)).await?;
                }
            }
            if done {
                return Ok(true);
            }
        }
    }

    fn note_activity(&mut self, kind: &str) {
        self.active = !matches!(kind, "session.status_idle" | "session.status_terminated");
    }

    async fn send(&self, body: &Value) -> Result<(), ()> {
        let kind = body["type"].as_str().unwrap_or("message");
        let mut event = Event::default().event(kind).data(body.to_string());
        if let Some(id) = body["id"].as_str() {
            event = event.id(id);
        }
        self.tx.send(event).await.map_err(|_| ())
    }
}

struct GaugeGuard;

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        metrics::gauge!("agentd_sse_connections").decrement(1.0);
    }
}

/// The primary thread of a session as a `session_thread`.
fn primary_thread(session: &Session) -> Value {
    let mut agent = session.body["agent"].clone();
    if let Some(map) = agent.as_object_mut() {
        map.remove("multiagent");
    }
    json!({
        "type": "session_thread",
        "id": session.id,
        "session_id": session.id,
        "agent": agent,
        "status": session.status,
        "parent_thread_id": null,
        "archived_at": session.archived_at_ms.map(rfc3339),
        "created_at": rfc3339(session.created_at_ms),
        "updated_at": rfc3339(session.updated_at_ms),
        "stats": null,
        "usage": null,
        "workflow_run_id": null,
    })
}

async fn load_thread(state: &AppState, tenant: &Tenant, session_id: &str, thread_id: &str) -> ApiResult<Session> {
    let session = load(state.backends.store.as_ref(), tenant, session_id).await?;
    if thread_id != session.id {
        return Err(ApiError::NotFound(format!("thread not found: {thread_id} in session {session_id}")));
    }
    Ok(session)
}

/// `GET /v1/sessions/{session_id}/threads`.
pub async fn threads(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    query.int("limit", 1, 1000)?;
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    let statuses = query.list("statuses");
    let thread = primary_thread(&session);
    let data = if statuses.is_empty() || statuses.contains(&session.status.as_str()) { vec![thread] } else { vec![] };
    Ok(Json(json!({ "data": data, "next_page": null })))
}

/// `GET /v1/sessions/{session_id}/threads/{thread_id}`.
pub async fn thread(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, thread_id)): Path<(SessionId, ThreadId)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(primary_thread(&load_thread(&state, &tenant, &id, &thread_id).await?)))
}

/// `POST /v1/sessions/{session_id}/threads/{thread_id}/archive`.
pub async fn archive_thread(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, thread_id)): Path<(SessionId, ThreadId)>,
) -> ApiResult<Json<Value>> {
    load_thread(&state, &tenant, &id, &thread_id).await?;
    Err(ApiError::invalid(format!("thread {thread_id} is the session's primary thread; archive the session instead")))
}

/// `GET /v1/sessions/{session_id}/threads/{thread_id}/events`.
pub async fn thread_events(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, thread_id)): Path<(SessionId, ThreadId)>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let session = load_thread(&state, &tenant, &id, &thread_id).await?;
    Ok(Json(list_events(&state, &session, Some(thread_id.into()), &uri, false).await?))
}

/// `GET /v1/sessions/{session_id}/threads/{thread_id}/stream`.
pub async fn thread_stream(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, thread_id)): Path<(SessionId, ThreadId)>,
    uri: Uri,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let session = load_thread(&state, &tenant, &id, &thread_id).await?;
    open_stream(state, session, Some(thread_id.into()), uri).await
}
