//! Session events: send (validated, committed, submitted to the run), list, and the
//! live SSE stream; plus the thread routes over the same history.
//!
//! The stream is subscribe-then-backfill: it subscribes to the session's bus channel,
//! then reads what was committed since it opened, then forwards live notifications,
//! de-duplicating by sequence number and filling any gap from the store. It works on
//! any gateway replica, whichever worker commits.

use agentd_schema::ids::{SessionId, ThreadId};
use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agentd_proto::BusItem;
use agentd_proto::v1::{Batch, LiveEvent, live_event};
use agentd_schema::{EventQuery, EventType, NewEvent, Session, SessionThread, Store, TimeBounds, live};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::{Extension, Json};
use futures::{Stream, StreamExt};
use prost::Message;
use serde_json::{Value, json};

use super::body;
use super::content;
use super::query::{ChunkedPage, Query, decode_cursor, encode_cursor, now_ms, rfc3339};
use super::sessions::load;
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::{input, session_threads};
use crate::error::{ApiError, ApiResult};

/// Every type `events.list?types[]=` accepts: the wire's, and `session.budget_reached`,
/// which agentd commits into history itself.
const EVENT_TYPES: &[EventType] = &[
    EventType::UserMessage,
    EventType::UserInterrupt,
    EventType::UserToolConfirmation,
    EventType::UserCustomToolResult,
    EventType::UserToolResult,
    EventType::UserDefineOutcome,
    EventType::SystemMessage,
    EventType::AgentMessage,
    EventType::AgentThinking,
    EventType::AgentToolUse,
    EventType::AgentToolResult,
    EventType::AgentMcpToolUse,
    EventType::AgentMcpToolResult,
    EventType::AgentCustomToolUse,
    EventType::AgentThreadMessageReceived,
    EventType::AgentThreadMessageSent,
    EventType::AgentThreadContextCompacted,
    EventType::SessionError,
    EventType::SessionStatusRescheduled,
    EventType::SessionStatusRunning,
    EventType::SessionStatusIdle,
    EventType::SessionStatusTerminated,
    EventType::SessionThreadCreated,
    EventType::SessionThreadStatusRunning,
    EventType::SessionThreadStatusIdle,
    EventType::SessionThreadStatusTerminated,
    EventType::SessionThreadStatusRescheduled,
    EventType::SessionUpdated,
    EventType::SessionUsage,
    EventType::SessionBudgetReached,
    EventType::SpanModelRequestStart,
    EventType::SpanModelRequestEnd,
    EventType::SpanOutcomeEvaluationStart,
    EventType::SpanOutcomeEvaluationOngoing,
    EventType::SpanOutcomeEvaluationEnd,
    EventType::WorkflowRunCreated,
    EventType::WorkflowRunStatusRunning,
    EventType::WorkflowRunStatusIdle,
    EventType::WorkflowRunStatusEnded,
    EventType::WorkflowRunError,
    EventType::WorkflowRunPhaseStarted,
    EventType::WorkflowRunPhaseEnded,
];
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// While a session is active and its stream hears nothing, the store is re-read after
/// this long, doubling up to [`RESYNC_MAX`]. Live publishing is best effort (a worker
/// can die between a commit and its publish); this bounds how long a stream can miss
/// committed events, at no cost for idle sessions.
const RESYNC_FIRST: Duration = Duration::from_secs(1);
const RESYNC_MAX: Duration = Duration::from_secs(16);

/// `POST /v1/sessions/{session_id}/events`: parse, submit through the turn service
/// (every acceptance rule is there), echo what each event committed or repeated.
pub async fn send(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["events"], "")?;
    let items = body::array(request.get("events"), "events", super::limits::MAX_EVENTS_PER_REQUEST)?;
    let mut events = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        events.push(NewEvent::new(&id, Value::Object(content::client_event(item, &format!("events[{i}]"))?)));
    }
    let accepted = input::submit(&state, &tenant, &id, events).await?;
    Ok(Json(json!({ "data": accepted.echoed })))
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
            if !kind.parse().is_ok_and(|kind| EVENT_TYPES.contains(&kind)) {
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
    // The session-level list of a session with child threads is its primary view.
    let primary_view = thread.is_none() && session.child_threads > 0;
    let base = EventQuery { thread_id: thread, types, processed, after_seq: None, limit: 0, descending, primary_view };
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

/// Where a stream reconnecting with `Last-Event-ID` (the `id:` of the last event it
/// received, an event id) goes on from: that event's sequence number. The official SDK
/// reopens streams without it; a client that sends it, or a proxy that replays it, gets
/// every event committed since, from whichever gateway it lands on.
async fn resume_point(store: &dyn Store, session_id: &str, headers: &HeaderMap) -> ApiResult<Option<i64>> {
    let Some(value) = headers.get("last-event-id") else { return Ok(None) };
    let event_id = value.to_str().map_err(|_| ApiError::invalid("Last-Event-ID: must be an event id".to_owned()))?;
    match store.event_seq(session_id, event_id.trim()).await? {
        Some(seq) => Ok(Some(seq)),
        None => Err(ApiError::invalid(format!("Last-Event-ID: {event_id:?} is not an event of this session"))),
    }
}

/// `GET /v1/sessions/{session_id}/events/stream`.
pub async fn stream(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    let resume_after = resume_point(state.backends.store.as_ref(), &session.id, &headers).await?;
    open_stream(state, session, None, resume_after, uri).await
}

async fn open_stream(
    state: AppState,
    session: Session,
    thread: Option<String>,
    resume_after: Option<i64>,
    uri: Uri,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let query = Query::from_uri(&uri);
    let mut deltas = HashSet::new();
    for kind in query.list("event_deltas") {
        let previewed = kind
            .parse()
            .ok()
            .filter(|kind| matches!(kind, EventType::AgentMessage | EventType::AgentThinking))
            .ok_or_else(|| {
                ApiError::invalid(format!("event_deltas[]: must be agent.message or agent.thinking, got {kind:?}"))
            })?;
        deltas.insert(previewed);
    }
    let bus =
        state.backends.bus.clone().ok_or_else(|| ApiError::Unavailable("live streams need the bus".to_owned()))?;
    // Everything committed after this point reaches the client: history up to the
    // high-water mark is the client's to list; later events come live or from the store.
    // A stream resumed with `Last-Event-ID` starts from the store just after that event
    // instead: nothing committed while the client was away is missed.
    let high_water = resume_after.unwrap_or(session.next_seq - 1);
    let subscription = bus.subscribe(&live::session_channel(&session.id)).await.map_err(|error| {
        tracing::warn!(%error, "cannot subscribe to the live bus");
        ApiError::Unavailable("the live bus is unavailable; retry shortly".to_owned())
    })?;
    let active = !matches!(session.status.as_str(), "idle" | "terminated");
    // The stream holds only what it uses: an idle stream's cost is counted per stream.
    let forwarder = Forwarder {
        store: state.backends.store.clone(),
        session_id: session.id,
        thread,
        deltas,
        last_seq: high_water,
        active,
        subscription,
        out: VecDeque::new(),
        filling: true,
        held: None,
        resync: RESYNC_FIRST,
        ended: false,
        _gauge: GaugeGuard::open(),
    };
    Ok(Sse::new(forwarder.into_stream()).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keepalive")))
}

/// Moves one stream's events from the bus (and the store, for gaps) to the client. It
/// is the response body itself, polled by the connection: no task and no queue of its
/// own per stream, and a client that goes away drops it, its subscription with it.
struct Forwarder {
    store: Arc<dyn Store>,
    session_id: String,
    thread: Option<String>,
    deltas: HashSet<EventType>,
    last_seq: i64,
    /// The last committed event left the session running (not idle or terminated).
    active: bool,
    subscription: agentd_proto::Subscription,
    /// Frames for the client, oldest first.
    out: VecDeque<Event>,
    /// The store may hold events after `last_seq` not sent yet: read a page before
    /// listening again.
    filling: bool,
    /// A live event that arrived past a gap: forwarded once the gap is filled.
    held: Option<LiveEvent>,
    /// How long an active session's stream waits in silence before re-reading the store.
    resync: Duration,
    ended: bool,
    _gauge: GaugeGuard,
}

impl Forwarder {
    fn into_stream(self) -> impl Stream<Item = Result<Event, Infallible>> + Send {
        futures::stream::unfold(self, |mut forwarder| async move {
            loop {
                if let Some(event) = forwarder.out.pop_front() {
                    return Some((Ok(event), forwarder));
                }
                if forwarder.ended {
                    return None;
                }
                forwarder.advance().await;
            }
        })
    }

    /// Queues the next frames (possibly none), or ends the stream.
    async fn advance(&mut self) {
        if self.filling {
            if self.fill_page().await.is_err() {
                self.ended = true;
            }
            return;
        }
        if let Some(message) = self.held.take() {
            self.forward(message, false);
            return;
        }
        // Silence while the session is active may be a lost publish: re-read the store.
        let quiet = quiet(self.active.then_some(self.resync));
        let item = tokio::select! {
            item = self.subscription.next() => item,
            () = quiet => Some(BusItem::Gap),
        };
        let Some(item) = item else {
            self.ended = true;
            return;
        };
        self.resync = if matches!(item, BusItem::Gap) { (self.resync * 2).min(RESYNC_MAX) } else { RESYNC_FIRST };
        match item {
            BusItem::Gap => self.filling = true,
            BusItem::Message(bytes) => match LiveEvent::decode(bytes.as_ref()) {
                Ok(message) => self.forward(message, true),
                Err(error) => tracing::warn!(%error, "undecodable live event"),
            },
        }
    }

    /// Whether this stream shows an event of `kind` on `thread_id`: a thread's stream its
    /// thread's events, the session's stream its view (`session_threads::in_session_view`).
    fn shows(&self, thread_id: &str, kind: &str) -> bool {
        match &self.thread {
            Some(thread) => thread == thread_id,
            None => session_threads::in_session_view(&self.session_id, thread_id, kind),
        }
    }

    /// Queues what one live message shows this stream. A committed event past a gap is
    /// held while the store fills the gap (`may_fill`), then forwarded after it.
    fn forward(&mut self, message: LiveEvent, may_fill: bool) {
        match message.kind {
            Some(live_event::Kind::Committed(committed)) => {
                if committed.seq <= self.last_seq {
                    return;
                }
                if may_fill && committed.seq > self.last_seq + 1 {
                    // Something between was not seen live: the store has it.
                    self.filling = true;
                    self.held = Some(LiveEvent { kind: Some(live_event::Kind::Committed(committed)), ..message });
                    return;
                }
                self.last_seq = committed.seq;
                let head = Head::of(&committed.body_json);
                self.note_activity(head.as_ref().and_then(|head| head.kind.parse().ok()));
                let kind = head.as_ref().map_or("", |head| head.kind.as_ref());
                if self.shows(&message.thread_id, kind) {
                    self.push_framed(&committed.body_json, head);
                }
            }
            Some(live_event::Kind::Preview(preview)) => {
                // Previews are never cross-posted: a child's reach only its thread's stream.
                let on_thread = self.thread.as_deref().unwrap_or(&self.session_id) == message.thread_id;
                if on_thread && preview.event_type.parse().is_ok_and(|kind| self.deltas.contains(&kind)) {
                    self.push_framed(&preview.body_json, Head::of(&preview.body_json));
                }
            }
            Some(live_event::Kind::Terminal(terminal)) => {
                self.push_framed(&terminal.body_json, Head::of(&terminal.body_json));
                self.ended = true;
            }
            Some(live_event::Kind::Batch(batch)) => {
                let mut events = batch.events.into_iter();
                while let Some(event) = events.next() {
                    self.forward(event, may_fill);
                    if self.held.is_some() {
                        // A gap before this event: the rest of the batch waits with it.
                        let held = self.held.take().into_iter().chain(events).collect();
                        self.held =
                            Some(LiveEvent { kind: Some(live_event::Kind::Batch(Batch { events: held })), ..message });
                        return;
                    }
                }
            }
            None => {}
        }
    }

    /// Queues one page of what was committed after `last_seq`, from the store; the fill
    /// goes on while pages come back full.
    async fn fill_page(&mut self) -> Result<(), ()> {
        const PAGE: usize = 500;
        let query = EventQuery { after_seq: Some(self.last_seq), limit: PAGE as i64, ..EventQuery::default() };
        let events = self.store.query_events(&self.session_id, &query).await.map_err(|error| {
            tracing::warn!(%error, "stream cannot read history; closing it so the client reconnects");
        })?;
        self.filling = events.len() == PAGE;
        for event in events {
            self.last_seq = event.seq;
            self.note_activity(event.event_type());
            if self.shows(&event.thread_id, &event.kind) {
                self.push(&live::render(&event));
            }
        }
        Ok(())
    }

    fn note_activity(&mut self, kind: Option<EventType>) {
        self.active = !matches!(kind, Some(EventType::SessionStatusIdle | EventType::SessionStatusTerminated));
    }

    /// Queues a body that arrived as JSON text on the bus, with its head already read.
    /// Every stream of a session receives the same text: it is framed as it is (only its
    /// `type` and `id` are read), not parsed into a tree and written again per stream.
    /// Text that does not read as one compact JSON object takes the general path.
    fn push_framed(&mut self, json: &str, head: Option<Head<'_>>) {
        match head {
            Some(head) if !json.contains('\n') => {
                let mut event = Event::default().event(head.kind.as_ref()).data(json);
                if let Some(id) = &head.id {
                    event = event.id(id.as_ref());
                }
                self.out.push_back(event);
            }
            _ => self.push(&serde_json::from_str(json).unwrap_or(Value::Null)),
        }
    }

    fn push(&mut self, body: &Value) {
        let kind = body["type"].as_str().unwrap_or("message");
        let mut event = Event::default().event(kind).data(body.to_string());
        if let Some(id) = body["id"].as_str() {
            event = event.id(id);
        }
        self.out.push_back(event);
    }
}

/// Resolves after `after`, or never.
async fn quiet(after: Option<Duration>) {
    match after {
        Some(after) => tokio::time::sleep(after).await,
        None => std::future::pending().await,
    }
}

/// The two fields of a bus body a stream needs, read without building the tree.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    id: Option<std::borrow::Cow<'a, str>>,
}

impl<'a> Head<'a> {
    fn of(json: &'a str) -> Option<Self> {
        serde_json::from_str(json).ok()
    }
}

/// Counts an open stream in `agentd_sse_connections` for as long as it lives.
struct GaugeGuard;

impl GaugeGuard {
    fn open() -> Self {
        metrics::gauge!("agentd_sse_connections").increment(1.0);
        GaugeGuard
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        metrics::gauge!("agentd_sse_connections").decrement(1.0);
    }
}

/// A thread as the wire's `session_thread` (ADR 0022 §9): `agent` is its agent's
/// definition — the session's for the primary, without the roster the session already
/// shows; a child's snapshot (`agent` or `inline`) — and `stats` / `usage` its own.
fn render_thread(session: &Session, thread: &SessionThread) -> Value {
    let now = now_ms();
    let mut agent = thread.agent.clone().unwrap_or_else(|| session.body["agent"].clone());
    if let Some(map) = agent.as_object_mut() {
        map.remove("multiagent");
    }
    // The primary shows its session's archiving (a session's threads stop with it).
    let archived_at_ms = thread.archived_at_ms.or(session.archived_at_ms.filter(|_| thread.is_primary()));
    let until = archived_at_ms.unwrap_or(now);
    let active_seconds = thread.active_seconds(now);
    let mut usage = thread.usage.clone();
    let standing = agentd_schema::budget::Standing::of(&session.body, &usage);
    if let Some(map) = usage.as_object_mut() {
        map.remove(agentd_schema::events::MODELS_KEY);
        map.insert("active_seconds".into(), json!(active_seconds));
        if standing.spent_units.is_some() {
            map.insert("list_cost".into(), standing.list_cost());
        }
    }
    json!({
        "type": "session_thread",
        "id": thread.id,
        "session_id": session.id,
        "agent": agent,
        "status": thread.status,
        "parent_thread_id": thread.parent_id,
        "archived_at": archived_at_ms.map(rfc3339),
        "created_at": rfc3339(thread.created_at_ms),
        "updated_at": rfc3339(thread.updated_at_ms),
        "stats": {
            "active_seconds": active_seconds,
            "duration_seconds": (until - thread.created_at_ms).max(0) as f64 / 1000.0,
            // A child starts running as it is created.
            "startup_seconds": if thread.is_primary() { Value::Null } else { json!(0.0) },
        },
        "usage": usage,
        "workflow_run_id": null,
    })
}

/// `GET /v1/sessions/{session_id}/threads`: the primary first, then the children in id
/// order; `statuses[]` filters, `limit` defaults to 1000, `page` goes forward.
pub async fn threads(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, 1000)?.unwrap_or(1000);
    let after = query.string("page").map(decode_cursor).transpose()?;
    let statuses = query.list("statuses").into_iter().map(str::to_owned).collect();
    let session = load(state.backends.store.as_ref(), &tenant, &id).await?;
    let mut rows = session_threads::list(&state, &session, statuses, after, limit).await?;
    let next_page = if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        rows.last().map(|thread| encode_cursor(&thread.id))
    } else {
        None
    };
    let data: Vec<Value> = rows.iter().map(|thread| render_thread(&session, thread)).collect();
    Ok(Json(json!({ "data": data, "next_page": next_page })))
}

/// `GET /v1/sessions/{session_id}/threads/{thread_id}`.
pub async fn thread(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, thread_id)): Path<(SessionId, ThreadId)>,
) -> ApiResult<Json<Value>> {
    let (session, thread) = session_threads::load(&state, &tenant, &id, &thread_id).await?;
    Ok(Json(render_thread(&session, &thread)))
}

/// `POST /v1/sessions/{session_id}/threads/{thread_id}/archive`: a child thread that is
/// not running (`domain::session_threads::archive` has the rules).
pub async fn archive_thread(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, thread_id)): Path<(SessionId, ThreadId)>,
) -> ApiResult<Json<Value>> {
    let (session, thread) = session_threads::archive(&state, &tenant, &id, &thread_id).await?;
    Ok(Json(render_thread(&session, &thread)))
}

/// `GET /v1/sessions/{session_id}/threads/{thread_id}/events`: the thread's own events.
pub async fn thread_events(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, thread_id)): Path<(SessionId, ThreadId)>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let (session, thread) = session_threads::load(&state, &tenant, &id, &thread_id).await?;
    Ok(Json(list_events(&state, &session, Some(thread.id), &uri, false).await?))
}

/// `GET /v1/sessions/{session_id}/threads/{thread_id}/stream`: the thread's own events,
/// its previews included.
pub async fn thread_stream(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, thread_id)): Path<(SessionId, ThreadId)>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let (session, thread) = session_threads::load(&state, &tenant, &id, &thread_id).await?;
    let resume_after = resume_point(state.backends.store.as_ref(), &session.id, &headers).await?;
    open_stream(state, session, Some(thread.id), resume_after, uri).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agentd_proto::v1::{Batch, Committed, LiveEvent, live_event};
    use axum::body::{Body, BodyDataStream};
    use axum::http::StatusCode;
    use bytes::Bytes;
    use futures::StreamExt;
    use prost::Message;
    use serde_json::json;
    use tower::ServiceExt;

    use crate::test_rig::Rig;

    fn committed(session_id: &str, seq: i64) -> LiveEvent {
        let id = format!("sevt_live{seq}");
        let body = json!({ "type": "agent.message", "id": id, "content": [] });
        LiveEvent {
            session_id: session_id.to_owned(),
            thread_id: session_id.to_owned(),
            kind: Some(live_event::Kind::Committed(Committed { seq, event_id: id, body_json: body.to_string() })),
        }
    }

    fn batch(session_id: &str, seqs: &[i64]) -> Bytes {
        let events = seqs.iter().map(|seq| committed(session_id, *seq)).collect();
        let message = LiveEvent {
            session_id: session_id.to_owned(),
            thread_id: String::new(),
            kind: Some(live_event::Kind::Batch(Batch { events })),
        };
        Bytes::from(message.encode_to_vec())
    }

    /// The ids of the next `count` events the stream sends (keep-alives skipped).
    async fn ids(body: &mut BodyDataStream, count: usize) -> Vec<String> {
        let mut ids = Vec::new();
        let mut text = String::new();
        while ids.len() < count {
            let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
                .await
                .expect("the stream sent the next event in time")
                .expect("the stream is open")
                .unwrap();
            text.push_str(std::str::from_utf8(&chunk).unwrap());
            while let Some(end) = text.find("\n\n") {
                let frame: String = text.drain(..end + 2).collect();
                ids.extend(frame.lines().filter_map(|line| line.strip_prefix("id: ").map(str::to_owned)));
            }
        }
        ids
    }

    #[tokio::test]
    async fn a_batch_is_forwarded_in_order_and_one_past_a_gap_after_the_fill() {
        let rig = Rig::new().await;
        let model = agentd_schema::catalog::current().models().first().unwrap().id.clone();
        let agent = rig.call("POST", "/v1/agents", json!({ "name": "a", "model": model })).await;
        let environment =
            rig.call("POST", "/v1/environments", json!({ "name": "e", "config": { "type": "cloud" } })).await;
        let create = json!({ "agent": agent.body["id"], "environment_id": environment.body["id"] });
        let session = rig.call("POST", "/v1/sessions", create).await;
        assert_eq!(session.status, StatusCode::OK, "{}", session.text);
        let session_id = session.body["id"].as_str().unwrap();
        let store = &rig.state.backends.store;
        let workspace = store.ensure_workspace("acme", "default").await.unwrap();
        let next = store.get_session(&workspace.id, session_id).await.unwrap().unwrap().next_seq;

        let stream = rig.request("GET", &format!("/v1/sessions/{session_id}/events/stream"), Body::empty());
        let response = rig.app.clone().oneshot(stream).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.into_body().into_data_stream();
        let bus = rig.state.backends.bus.clone().unwrap();
        let channel = agentd_schema::live::session_channel(session_id);
        let id = |seq: i64| format!("sevt_live{seq}");

        // None of these events is in the store: what the stream sends came off the bus.
        bus.publish(&channel, batch(session_id, &[next, next + 1])).await.unwrap();
        assert_eq!(ids(&mut body, 2).await, [id(next), id(next + 1)]);
        // Past a gap, the batch waits for the store's fill, then follows in order.
        bus.publish(&channel, batch(session_id, &[next + 3, next + 4])).await.unwrap();
        assert_eq!(ids(&mut body, 2).await, [id(next + 3), id(next + 4)]);
        // What the stream has sent is not sent again.
        bus.publish(&channel, batch(session_id, &[next + 4, next + 1])).await.unwrap();
        let single = Bytes::from(committed(session_id, next + 5).encode_to_vec());
        bus.publish(&channel, single).await.unwrap();
        assert_eq!(ids(&mut body, 1).await, [id(next + 5)]);
    }
}
