//! Driving one claimed run: decide from committed history, act, commit under the
//! claim, repeat until the thread parks. Every write is fenced by the claim's epoch; a
//! fenced write means another worker owns the run, and this attempt stops at once
//! without writing anything else.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentd_proto::v1::{LiveEvent, live_event};
use agentd_proto::{Bus, BusItem};
use agentd_schema::budget::Standing;
use agentd_schema::{Claim, EventQuery, NewEvent, RunStatus, Settlement, Store, StoreError, StoredEvent, live};
use futures::StreamExt;
use prost::Message;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use agentd_schema::secrets::SecretBox;

use crate::agent_loop::{self, Decision, ToolClass};
use crate::providers::{BlockKind, ModelEvent, ModelRequest, ProviderError, Registry, Usage};
use crate::remote::Remote;

/// Retries of a retryable provider failure before the turn ends.
const PROVIDER_RETRIES: u32 = 3;

/// What a run needs from its process.
#[derive(Clone)]
pub struct RunContext {
    /// Committed truth.
    pub store: Arc<dyn Store>,
    /// Live previews and commit notifications.
    pub bus: Arc<dyn Bus>,
    /// Model providers.
    pub providers: Registry,
    /// Recently driven threads' history, so a turn reads only what is new.
    pub histories: Arc<HistoryCache>,
    /// Opens vault credentials for remote tools (the gateway's `AGENTD_SECRET_KEY`);
    /// without it, remote tools run without credentials.
    pub secrets: Option<Arc<SecretBox>>,
    /// Remote tools may reach private and loopback addresses
    /// (`AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`); otherwise the egress guard refuses them.
    pub remote_allow_private: bool,
}

/// Committed history of recently driven threads. History is append-only and numbered,
/// so a cached copy is always a valid prefix: a turn extends it from its last sequence
/// number instead of re-reading everything (per-turn cost stays flat as history grows).
/// Bounded by the total number of events held, so memory stays flat however many
/// sessions a worker serves: the least recently used threads are dropped first (and
/// read again in full if they come back).
#[derive(Debug)]
pub struct HistoryCache {
    max_events: usize,
    entries: std::sync::Mutex<CachedHistories>,
}

/// Use counter, events held, and per thread (last use, history).
#[derive(Debug, Default)]
struct CachedHistories {
    tick: u64,
    events: usize,
    threads: std::collections::HashMap<String, (u64, Vec<StoredEvent>)>,
}

impl HistoryCache {
    /// A cache holding at most `max_events` events across all threads.
    pub fn new(max_events: usize) -> Self {
        Self { max_events, entries: std::sync::Mutex::default() }
    }

    fn take(&self, thread_id: &str) -> Vec<StoredEvent> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let history = entries.threads.remove(thread_id).map(|(_, history)| history).unwrap_or_default();
        entries.events -= history.len();
        history
    }

    fn put(&self, thread_id: &str, history: Vec<StoredEvent>) {
        if history.len() > self.max_events {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.tick += 1;
        let tick = entries.tick;
        entries.events += history.len();
        if let Some((_, old)) = entries.threads.insert(thread_id.to_owned(), (tick, history)) {
            entries.events -= old.len();
        }
        while entries.events > self.max_events {
            let Some(oldest) = entries.threads.iter().min_by_key(|(_, (t, _))| *t).map(|(k, _)| k.clone()) else {
                break;
            };
            if let Some((_, dropped)) = entries.threads.remove(&oldest) {
                entries.events -= dropped.len();
            }
        }
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptEnd {
    /// Settled; `Pending` means input arrived meanwhile and the run should be claimed again.
    Settled(RunStatus),
    /// Another worker owns the run now; nothing more was written.
    Fenced,
    /// The attempt could not continue (store unavailable, …); the lease will expire and
    /// the run will be recovered.
    Abandoned(String),
    /// The process is shutting down: the run was handed back to the queue unfinished.
    Relinquished,
}

enum Stop {
    Fenced,
    Abandoned(String),
}

impl From<StoreError> for Stop {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Fenced { .. } => Stop::Fenced,
            other => Stop::Abandoned(other.to_string()),
        }
    }
}

/// Drives a claimed run until it parks, is fenced, or cannot continue. `cancel` fires
/// when the lease is lost.
pub async fn drive(ctx: &RunContext, claim: &mut Claim, cancel: CancellationToken) -> AttemptEnd {
    match attempt(ctx, claim, cancel).await {
        Ok(status) => AttemptEnd::Settled(status),
        Err(Stop::Fenced) => AttemptEnd::Fenced,
        Err(Stop::Abandoned(why)) => AttemptEnd::Abandoned(why),
    }
}

async fn attempt(ctx: &RunContext, claim: &mut Claim, cancel: CancellationToken) -> Result<RunStatus, Stop> {
    let store = ctx.store.as_ref();
    let Some(session) = store.load_session(&claim.session_id).await? else {
        // The session was deleted: nothing to do, and nothing to write.
        return Ok(RunStatus::Done);
    };
    let agent = session.body["agent"].clone();
    // The watcher lives exactly as long as this attempt.
    let watching = cancel.child_token();
    let _stop_watching = watching.clone().drop_guard();
    let interrupts = watch_interrupts(ctx.bus.as_ref(), &claim.session_id, &claim.thread_id, &watching).await;
    let control = watch_control(ctx.bus.as_ref(), &claim.thread_id, &claim.run_id, &watching).await;
    // History comes from the cache (or is read once), then is extended with what was
    // committed since (our own commits and any input that arrived): each step costs one
    // small read, whatever the length of the conversation.
    let mut history = ctx.histories.take(&claim.thread_id);
    // Remote tools connect on the first step that needs them and close with the attempt.
    let mut remote = Remote::new(ctx.store.clone(), ctx.secrets.clone(), &session, ctx.remote_allow_private);
    let result = steps(ctx, claim, &agent, &interrupts, &control, &cancel, &mut history, &mut remote).await;
    remote.close().await;
    if result.is_ok() {
        ctx.histories.put(&claim.thread_id, history);
    }
    result
}

#[allow(clippy::too_many_arguments)] // the attempt's context, passed down as borrowed parts
async fn steps(
    ctx: &RunContext,
    claim: &mut Claim,
    agent: &Value,
    interrupts: &watch::Receiver<i64>,
    control: &Control,
    cancel: &CancellationToken,
    history: &mut Vec<StoredEvent>,
    remote: &mut Remote,
) -> Result<RunStatus, Stop> {
    let store = ctx.store.as_ref();
    loop {
        if cancel.is_cancelled() {
            return Err(Stop::Fenced);
        }
        // `claim.generation` is the generation the claim saw; input committed since has
        // a higher one, so settling leaves the run runnable and it is claimed again. That
        // costs a spare cycle when such input was already read here, and saves a read on
        // every step.
        let query = EventQuery {
            thread_id: Some(claim.thread_id.clone()),
            after_seq: Some(history.last().map_or(0, |e| e.seq)),
            limit: i64::MAX / 2,
            ..EventQuery::default()
        };
        history.extend(store.query_events(&claim.session_id, &query).await?);
        // A pause parks the run here, between steps, as an awaiting ticket that only
        // `resume` (or new input) releases. The session goes idle if it was running.
        if claim.pause_requested || *control.pause.borrow() > 0 {
            let running = history
                .iter()
                .rev()
                .find(|e| e.kind.starts_with("session.status_"))
                .is_some_and(|e| e.kind == "session.status_running");
            let events = if running {
                vec![
                    json!({ "type": "session.status_idle", "stop_reason": { "type": "end_turn" }, "stop_details": null }),
                ]
            } else {
                Vec::new()
            };
            tracing::info!(run = %claim.run_id, "paused at a step boundary");
            return settle(ctx, claim, events).await;
        }
        // The session row carries the budget and the usage projection; reconciling
        // against it before every step keeps a reached budget from admitting a request.
        let Some(session) = store.load_session(&claim.session_id).await? else {
            return Ok(RunStatus::Done);
        };
        let standing = Standing::of(&session.body, &session.usage);
        let decision = agent_loop::decide(agent, history);
        let decision = if standing.reached() { within_budget(decision, history, &session, standing) } else { decision };
        match decision {
            Decision::Park => return settle(ctx, claim, Vec::new()).await,
            Decision::AwaitHands { events } => {
                // The hands may have stopped their work item (idle timeout, lost lease):
                // make sure one is queued before parking.
                let environment_id = session.body["environment_id"].as_str().unwrap_or_default();
                if let Some(environment) =
                    store.get_resource(&session.workspace_id, "environment", environment_id).await?
                {
                    agentd_schema::hands::ensure(
                        store,
                        ctx.bus.as_ref(),
                        &session.workspace_id,
                        environment_id,
                        &session.id,
                        agentd_schema::hands::hands_of(&environment.body),
                    )
                    .await?;
                }
                return settle(ctx, claim, events).await;
            }
            // Messages queued in the live inbox after the last request keep the turn going.
            Decision::Idle { events }
                if session.inbox_version > 0
                    && events.last().is_some_and(|e| e["stop_reason"]["type"] == "end_turn")
                    && store.inbox_pending(&session.id).await? =>
            {
                let taken = store.commit_with_inbox(claim, Vec::new()).await?;
                live::publish_committed(ctx.bus.as_ref(), &taken).await;
            }
            Decision::Idle { events } => return settle(ctx, claim, events).await,
            Decision::CallModel { before, mut request } => {
                let offered = tokio::select! {
                    () = cancel.cancelled() => return Err(Stop::Fenced),
                    offered = remote.offer(agent, &mut request) => offered,
                };
                if let Err(failure) = offered {
                    // The agent's tools are not all available: the turn ends, and says why.
                    tracing::warn!(run = %claim.run_id, server = %failure.server, "MCP server unavailable; ending the turn");
                    let mut events = before;
                    events.push(failure.session_error());
                    events.push(json!({ "type": "session.status_idle", "stop_reason": { "type": "retries_exhausted" }, "stop_details": null }));
                    commit(ctx, claim, events).await?;
                    continue;
                }
                let reconcile = Reconcile { before: session.usage.clone(), body: &session.body };
                let step = ModelStep { before, request, reconcile, take_inbox: session.inbox_version > 0 };
                model_request(ctx, claim, agent, step, interrupts, &control.wake, cancel, remote).await?;
            }
            Decision::CallRemote { before, calls } => {
                commit(ctx, claim, before).await?;
                remote_calls(ctx, claim, agent, calls, interrupts, cancel, remote, history.last().map_or(0, |e| e.seq))
                    .await?;
            }
        }
    }
}

/// Turns a decision into the budget stop once the ceiling is reached: no model request
/// is admitted, and a turn that would end normally ends with `budget_reached`.
/// `session.budget_reached` is committed once per budget (again only after the
/// budget is changed). Idles that wait for the client (requires_action) stand.
fn within_budget(
    decision: Decision,
    history: &[StoredEvent],
    session: &agentd_schema::Session,
    standing: Standing,
) -> Decision {
    let before = match decision {
        Decision::CallModel { before, .. } => {
            before.into_iter().filter(|e| e["type"] != "session.status_running").collect()
        }
        Decision::Idle { events } if events.last().is_some_and(|e| e["stop_reason"]["type"] == "end_turn") => {
            events[..events.len() - 1].to_vec()
        }
        other => return other,
    };
    let last_budget_change =
        history.iter().rposition(|e| e.kind == "session.updated" && e.body.get("budget").is_some());
    let already = history
        .iter()
        .enumerate()
        .any(|(i, e)| e.kind == "session.budget_reached" && last_budget_change.is_none_or(|change| i > change));
    let mut events = before;
    let mut usage = session.usage.clone();
    usage["list_cost"] = standing.list_cost();
    if !already {
        events.push(json!({ "type": "session.budget_reached", "budget": session.body["budget"], "usage": usage }));
    }
    events.push(json!({ "type": "session.usage", "usage": usage, "budget": session.body["budget"] }));
    events.push(
        json!({ "type": "session.status_idle", "stop_reason": { "type": "budget_reached" }, "stop_details": null }),
    );
    Decision::Idle { events }
}

/// One model request to make: what to commit first, the request, and how to reconcile.
struct ModelStep<'a> {
    before: Vec<Value>,
    request: ModelRequest,
    reconcile: Reconcile<'a>,
    /// The session's live inbox may hold messages to deliver with this request.
    take_inbox: bool,
}

/// What a model request needs to reconcile usage afterwards.
struct Reconcile<'a> {
    /// The session's cumulative usage before the request.
    before: Value,
    /// The session body (budget and price snapshot).
    body: &'a Value,
}

impl Reconcile<'_> {
    /// The `session.usage` snapshot after a request: cumulative usage including it, and
    /// its list cost when the session froze prices.
    fn snapshot(&self, request: &Usage) -> Value {
        let n = |key: &str| self.before[key].as_u64().unwrap_or(0);
        let cache_5m = self.before["cache_creation"]["ephemeral_5m_input_tokens"].as_u64().unwrap_or(0);
        let mut usage = json!({
            "input_tokens": n("input_tokens") + request.input_tokens,
            "output_tokens": n("output_tokens") + request.output_tokens,
            "cache_read_input_tokens": n("cache_read_input_tokens") + request.cache_read_input_tokens,
            "cache_creation": { "ephemeral_5m_input_tokens": cache_5m + request.cache_creation_input_tokens, "ephemeral_1h_input_tokens": 0 },
        });
        let list_cost = Standing::of(self.body, &usage).list_cost();
        if !list_cost.is_null() {
            usage["list_cost"] = list_cost;
        }
        json!({ "type": "session.usage", "usage": usage, "budget": self.body["budget"] })
    }
}

/// Commits `bodies` under the claim and announces them. A body's `id`, if present,
/// becomes the event id (previews promise it in advance).
async fn commit(ctx: &RunContext, claim: &Claim, bodies: Vec<Value>) -> Result<Vec<StoredEvent>, Stop> {
    if bodies.is_empty() {
        return Ok(Vec::new());
    }
    let events = bodies.into_iter().map(|body| new_event(claim, body)).collect();
    let stored = ctx.store.commit(claim, events).await?;
    live::publish_committed(ctx.bus.as_ref(), &stored).await;
    Ok(stored)
}

async fn settle(ctx: &RunContext, claim: &Claim, bodies: Vec<Value>) -> Result<RunStatus, Stop> {
    let events = bodies.into_iter().map(|body| new_event(claim, body)).collect();
    let settled = ctx.store.settle(claim, events, Settlement::Awaiting).await?;
    live::publish_committed(ctx.bus.as_ref(), &settled.events).await;
    Ok(settled.status)
}

fn new_event(claim: &Claim, mut body: Value) -> NewEvent {
    let event_id = body
        .as_object_mut()
        .and_then(|map| map.remove("id"))
        .and_then(|id| id.as_str().map(str::to_owned))
        .unwrap_or_else(|| agentd_schema::ids::new_id("sevt"));
    NewEvent {
        event_id,
        thread_id: claim.thread_id.clone(),
        kind: body["type"].as_str().unwrap_or_default().to_owned(),
        body,
    }
}

/// Control signals to this attempt (`/v1/durable/…/pause` and `wake`).
struct Control {
    /// Pause requests seen.
    pause: watch::Receiver<u64>,
    /// Wake nudges seen.
    wake: watch::Receiver<u64>,
}

async fn watch_control(bus: &dyn Bus, thread_id: &str, run_id: &str, cancel: &CancellationToken) -> Control {
    use agentd_proto::v1::{ControlSignal, control_signal::Kind};
    let (pause_tx, pause) = watch::channel(0u64);
    let (wake_tx, wake) = watch::channel(0u64);
    let run_id = run_id.to_owned();
    // Without the bus a pause still reaches the next attempt through the store.
    on_bus_messages(bus, &live::control_channel(thread_id), cancel, move |bytes| {
        let Ok(signal) = ControlSignal::decode(bytes) else { return };
        if signal.run_id != run_id {
            return;
        }
        match Kind::try_from(signal.kind) {
            Ok(Kind::Pause) => pause_tx.send_modify(|n| *n += 1),
            Ok(Kind::Wake) => wake_tx.send_modify(|n| *n += 1),
            _ => {}
        }
    })
    .await;
    Control { pause, wake }
}

/// Watches the session's bus channel for committed `user.interrupt` events of this
/// thread; the value is the highest interrupt sequence number seen.
async fn watch_interrupts(
    bus: &dyn Bus,
    session_id: &str,
    thread_id: &str,
    cancel: &CancellationToken,
) -> watch::Receiver<i64> {
    let (tx, rx) = watch::channel(0);
    let thread_id = thread_id.to_owned();
    // Without the bus an interrupt still lands in history and stops the next step.
    on_bus_messages(bus, &live::session_channel(session_id), cancel, move |bytes| {
        let Ok(message) = LiveEvent::decode(bytes) else { return };
        if let Some(live_event::Kind::Committed(committed)) = message.kind
            && message.thread_id == thread_id
            && committed.body_json.contains("\"user.interrupt\"")
        {
            tx.send_replace(committed.seq);
        }
    })
    .await;
    rx
}

/// Hands every message published on `channel` to `on_message`, in a task that ends
/// with `cancel` or the subscription. Does nothing when the bus cannot be subscribed.
async fn on_bus_messages(
    bus: &dyn Bus,
    channel: &str,
    cancel: &CancellationToken,
    mut on_message: impl FnMut(&[u8]) + Send + 'static,
) {
    let Ok(mut subscription) = bus.subscribe(channel).await else { return };
    let cancel = cancel.clone();
    tokio::spawn(async move {
        loop {
            let item = tokio::select! {
                () = cancel.cancelled() => return,
                item = subscription.next() => item,
            };
            match item {
                Some(BusItem::Message(bytes)) => on_message(bytes.as_ref()),
                Some(BusItem::Gap) => {}
                None => return,
            }
        }
    });
}

/// The state of one streamed content block.
struct OpenBlock {
    kind: BlockKind,
    event_id: String,
    text: String,
    json: String,
}

/// Why a model stream stopped early.
enum Cut {
    Interrupted,
    Failed(ProviderError),
}

/// What one streamed response produced.
#[derive(Default)]
struct Streamed {
    /// Events for the completed blocks.
    outputs: Vec<Value>,
    /// Token usage.
    usage: Usage,
    /// Why it stopped early, if it did.
    cut: Option<Cut>,
    /// The model refused: the turn ends with a `refusal` stop reason.
    refused: bool,
}

/// One model request: mark it started, stream it (previews live), commit what it
/// produced, mark it ended. Retryable provider failures are retried a few times.
#[allow(clippy::too_many_arguments)] // the attempt's context, passed down as borrowed parts
async fn model_request(
    ctx: &RunContext,
    claim: &Claim,
    agent: &Value,
    step: ModelStep<'_>,
    interrupts: &watch::Receiver<i64>,
    wake: &watch::Receiver<u64>,
    cancel: &CancellationToken,
    remote: &mut Remote,
) -> Result<(), Stop> {
    let ModelStep { before, mut request, reconcile, take_inbox } = step;
    let mut opening = before;
    let mut retries = 0;
    loop {
        let start_id = agentd_schema::ids::new_id("sevt");
        opening.push(json!({ "type": "span.model_request_start", "id": start_id }));
        let started = if take_inbox {
            // Live-inbox messages are committed ahead of this request and sent with it.
            let events = std::mem::take(&mut opening).into_iter().map(|body| new_event(claim, body)).collect();
            let stored = ctx.store.commit_with_inbox(claim, events).await?;
            live::publish_committed(ctx.bus.as_ref(), &stored).await;
            for delivered in stored.iter().filter(|e| e.kind == "user.message") {
                agent_loop::append_user_input(&mut request, &delivered.body["content"]);
            }
            stored
        } else {
            commit(ctx, claim, std::mem::take(&mut opening)).await?
        };
        let start_seq = started.last().map_or(0, |e| e.seq);
        let started_at = std::time::Instant::now();
        let Streamed { outputs, usage, cut, refused } =
            stream_model(ctx, claim, agent, &request, interrupts, start_seq, cancel, remote).await?;
        metrics::histogram!("agentd_model_request_duration_seconds").record(started_at.elapsed().as_secs_f64());
        let mut closing = outputs;
        let failed = matches!(cut, Some(Cut::Failed(_)));
        closing.push(json!({
            "type": "span.model_request_end",
            "model_request_start_id": start_id,
            "is_error": failed,
            "model_usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_read_input_tokens": usage.cache_read_input_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            },
        }));
        // Whether the failed response produced anything, before usage is appended.
        let produced = closing.len() > 1;
        closing.push(reconcile.snapshot(&usage));
        let Some(Cut::Failed(error)) = cut else {
            if refused {
                closing.push(json!({
                    "type": "session.status_idle",
                    "stop_reason": { "type": "refusal" },
                    "stop_details": { "type": "refusal", "category": null, "explanation": null },
                }));
            }
            remote.note_released(&closing);
            commit(ctx, claim, closing).await?;
            return Ok(());
        };
        if error.retryable && !produced && retries < PROVIDER_RETRIES {
            retries += 1;
            closing.push(session_error(&error, "retrying"));
            closing.push(json!({ "type": "session.status_rescheduled" }));
            commit(ctx, claim, closing).await?;
            let backoff =
                Duration::from_millis(250 * 2u64.pow(retries)) + Duration::from_millis(rand::random_range(0..250));
            let mut watcher = interrupts.clone();
            let mut woken = wake.clone();
            woken.mark_unchanged();
            let interrupted_during_wait = tokio::select! {
                () = cancel.cancelled() => return Err(Stop::Fenced),
                () = tokio::time::sleep(backoff) => false,
                // `wake` cuts the backoff short: retry now.
                Ok(()) = woken.changed() => false,
                changed = async {
                    loop {
                        if *watcher.borrow_and_update() > start_seq {
                            return true;
                        }
                        if watcher.changed().await.is_err() {
                            return false;
                        }
                    }
                } => changed,
            };
            if interrupted_during_wait {
                // The next decision sees the interrupt and ends the turn.
                return Ok(());
            }
            opening.push(json!({ "type": "session.status_running" }));
            continue;
        }
        tracing::warn!(run = %claim.run_id, error = %error, "model request failed; ending the turn");
        closing.push(session_error(&error, "exhausted"));
        closing.push(json!({ "type": "session.status_idle", "stop_reason": { "type": "retries_exhausted" }, "stop_details": null }));
        commit(ctx, claim, closing).await?;
        return Ok(());
    }
}

fn session_error(error: &ProviderError, retry: &str) -> Value {
    json!({
        "type": "session.error",
        "error": { "type": error.kind.wire_type(), "message": error.message, "retry_status": { "type": retry } },
    })
}

/// Streams one model response, publishing previews as it goes.
#[allow(clippy::too_many_arguments)] // the attempt's context, passed down as borrowed parts
async fn stream_model(
    ctx: &RunContext,
    claim: &Claim,
    agent: &Value,
    request: &ModelRequest,
    interrupts: &watch::Receiver<i64>,
    start_seq: i64,
    cancel: &CancellationToken,
    remote: &Remote,
) -> Result<Streamed, Stop> {
    let mut out = Streamed::default();
    let (provider, model) = match ctx.providers.route(&request.model) {
        Ok(route) => route,
        Err(error) => return Ok(Streamed { cut: Some(Cut::Failed(error)), ..out }),
    };
    let mut request = request.clone();
    request.model = model;
    // Race the connection against an interrupt, so a slow or failing provider cannot
    // hold an interrupted turn.
    let mut watcher = interrupts.clone();
    let connected = tokio::select! {
        () = cancel.cancelled() => return Err(Stop::Fenced),
        connected = provider.stream(request) => connected,
        () = async {
            loop {
                if *watcher.borrow_and_update() > start_seq {
                    return;
                }
                if watcher.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        } => return Ok(Streamed { cut: Some(Cut::Interrupted), ..out }),
    };
    let mut stream = match connected {
        Ok(stream) => stream,
        Err(error) => return Ok(Streamed { cut: Some(Cut::Failed(error)), ..out }),
    };
    let mut interrupts = interrupts.clone();
    let mut blocks: BTreeMap<usize, OpenBlock> = BTreeMap::new();
    let mut finished = false;
    let mut watching = true;
    // Previews are best-effort: after the bus refuses one, the rest of this response is
    // committed without previews rather than waiting on a bus that is down.
    let mut previews = true;
    let interrupted = |seq: i64| seq > start_seq;
    if interrupted(*interrupts.borrow()) {
        return Ok(Streamed { cut: Some(Cut::Interrupted), ..out });
    }
    loop {
        let item = tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Fenced),
            changed = interrupts.changed(), if watching => {
                match changed {
                    Ok(()) if interrupted(*interrupts.borrow()) => {
                        // Dropping the stream closes the provider connection.
                        out.cut = Some(Cut::Interrupted);
                        return Ok(out);
                    }
                    Ok(()) => {}
                    // The watcher is gone (no bus): interrupts reach the next step from history.
                    Err(_) => watching = false,
                }
                continue;
            }
            item = stream.next() => item,
        };
        let event = match item {
            None if finished => return Ok(out),
            // A response that stops without its end marker was cut off: not a success.
            None => {
                out.cut = Some(Cut::Failed(ProviderError::transport("the response ended before it was complete")));
                return Ok(out);
            }
            Some(Err(error)) => {
                out.cut = Some(Cut::Failed(error));
                return Ok(out);
            }
            Some(Ok(event)) => event,
        };
        match event {
            ModelEvent::BlockStart { index, kind } => {
                let event_id = agentd_schema::ids::new_id("sevt");
                let preview = match kind {
                    BlockKind::Text => Some("agent.message"),
                    BlockKind::Thinking => Some("agent.thinking"),
                    BlockKind::ToolUse { .. } => None,
                };
                if let Some(preview) = preview.filter(|_| previews) {
                    let frame = json!({ "type": "event_start", "event": { "type": preview, "id": event_id } });
                    previews =
                        live::publish_preview(ctx.bus.as_ref(), &claim.session_id, &claim.thread_id, preview, &frame)
                            .await;
                }
                blocks.insert(index, OpenBlock { kind, event_id, text: String::new(), json: String::new() });
            }
            ModelEvent::TextDelta { index, text } => {
                if let Some(block) = blocks.get_mut(&index).filter(|b| b.kind == BlockKind::Text) {
                    block.text.push_str(&text);
                    if !previews {
                        continue;
                    }
                    let frame = json!({
                        "type": "event_delta",
                        "event_id": block.event_id,
                        "delta": { "type": "content_delta", "index": 0, "content": { "type": "text", "text": text } },
                    });
                    live::publish_preview(
                        ctx.bus.as_ref(),
                        &claim.session_id,
                        &claim.thread_id,
                        "agent.message",
                        &frame,
                    )
                    .await;
                }
            }
            ModelEvent::InputDelta { index, json } => {
                if let Some(block) = blocks.get_mut(&index) {
                    block.json.push_str(&json);
                }
            }
            ModelEvent::BlockStop { index } => {
                if let Some(block) = blocks.remove(&index) {
                    out.outputs.extend(finish_block(agent, remote, block));
                }
            }
            ModelEvent::Usage(latest) => out.usage = latest,
            ModelEvent::Done { stop_reason } => {
                finished = true;
                for (_, block) in std::mem::take(&mut blocks) {
                    out.outputs.extend(finish_block(agent, remote, block));
                }
                out.refused = stop_reason == "refusal";
            }
        }
    }
}

/// The committed events of a completed block.
fn finish_block(agent: &Value, remote: &Remote, block: OpenBlock) -> Vec<Value> {
    match block.kind {
        BlockKind::Text if block.text.is_empty() => Vec::new(),
        BlockKind::Text => {
            vec![
                json!({ "type": "agent.message", "id": block.event_id, "content": [{ "type": "text", "text": block.text }] }),
            ]
        }
        BlockKind::Thinking => vec![json!({ "type": "agent.thinking", "id": block.event_id })],
        BlockKind::ToolUse { name, .. } => {
            let input: Value = if block.json.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(&block.json).unwrap_or_else(|_| json!({ "_unparsed": block.json }))
            };
            let id = block.event_id;
            match agent_loop::classify(agent, &name) {
                ToolClass::Custom => {
                    vec![json!({ "type": "agent.custom_tool_use", "id": id, "name": name, "input": input })]
                }
                ToolClass::Builtin { policy } | ToolClass::A2a { policy } => {
                    let mut event = agent_loop::builtin_tool_use(&name, input, &policy);
                    event["id"] = json!(id);
                    vec![event]
                }
                ToolClass::Unknown if let Some(tool) = remote.mcp_tool(&name) => {
                    let mut event = agent_loop::mcp_tool_use(&tool.server, &name, input, &tool.policy);
                    event["id"] = json!(id);
                    vec![event]
                }
                ToolClass::Unknown => vec![
                    json!({ "type": "agent.tool_use", "id": id, "name": name, "input": input, "evaluated_permission": "deny" }),
                    json!({
                        "type": "agent.tool_result", "tool_use_id": id, "is_error": true,
                        "content": [{ "type": "text", "text": format!("tool {name} is not available to this agent") }],
                    }),
                ],
            }
        }
    }
}

/// Makes a step's remote tool calls one by one, committing each result as soon as it
/// is known (so a crash repeats nothing already recorded). When a server fails, the
/// remaining calls are recorded as not made and the turn ends; a user interrupt
/// abandons the call in flight (recorded as such) and the rest.
#[allow(clippy::too_many_arguments)]
async fn remote_calls(
    ctx: &RunContext,
    claim: &Claim,
    agent: &Value,
    calls: Vec<agent_loop::RemoteCall>,
    interrupts: &watch::Receiver<i64>,
    cancel: &CancellationToken,
    remote: &mut Remote,
    seen_seq: i64,
) -> Result<(), Stop> {
    let mut skip: Option<&str> = None;
    for call in calls {
        let kind = match call.target {
            agent_loop::RemoteTarget::Mcp { .. } => "agent.mcp_tool_use",
            agent_loop::RemoteTarget::A2a { .. } => "agent.tool_use",
        };
        if let Some(why) = skip {
            commit(ctx, claim, vec![agent_loop::synthetic_result(kind, &call.id, why)]).await?;
            continue;
        }
        // An interrupt committed since the decision was read: the call is not started
        // (the select below could otherwise start it before noticing).
        if *interrupts.borrow() > seen_seq {
            skip = Some(agent_loop::NOT_MADE_INTERRUPTED);
            commit(ctx, claim, vec![agent_loop::synthetic_result(kind, &call.id, agent_loop::NOT_MADE_INTERRUPTED)])
                .await?;
            continue;
        }
        let mut watcher = interrupts.clone();
        let outcome = tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Fenced),
            outcome = remote.run(agent, &call) => Some(outcome),
            () = async {
                loop {
                    if *watcher.borrow_and_update() > seen_seq {
                        return;
                    }
                    if watcher.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            } => None,
        };
        let events = match outcome {
            Some(outcome) => {
                if outcome.failed {
                    skip = Some("not made: an earlier tool call of this step failed and the turn ended");
                }
                outcome.events
            }
            None => {
                skip = Some(agent_loop::NOT_MADE_INTERRUPTED);
                vec![agent_loop::synthetic_result(
                    kind,
                    &call.id,
                    "interrupted by the user while it ran; it may or may not have taken effect",
                )]
            }
        };
        commit(ctx, claim, events).await?;
    }
    Ok(())
}
