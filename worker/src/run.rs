//! Driving one claimed run: decide from committed history, act, commit under the
//! claim, repeat until the thread parks. Every write is fenced by the claim's epoch; a
//! fenced write means another worker owns the run, and this attempt stops at once
//! without writing anything else.
//!
//! An `Attempt` is one claim being driven: `claim` takes it up (session, agent, bus
//! watchers, cached history), `steps` loops decide → act, `model.rs` streams a model
//! request (previews on the bus, provider retries), `judge.rs` judges the `auto` tool
//! uses of its response, `calls.rs` makes remote tool calls (`advisor.rs` the advisor's),
//! `threads.rs` dispatches thread calls to child threads, waits for and sends their
//! replies, `outcome.rs` grades an outcome when a turn ends, and `commit` / `settle` /
//! the handoffs of `threads.rs` are the only writes.
//!
//! A run is a thread's: the session's primary thread (the session's id) or a child
//! thread a primary spawned (ADR 0022). A child runs its own agent snapshot without
//! thread tools, and its `session.status_*` are committed as `session.thread_status_*`.

mod advisor;
mod calls;
mod forced;
mod judge;
mod model;
mod outcome;
mod threads;

pub use outcome::HEARTBEAT as OUTCOME_HEARTBEAT;

use std::sync::Arc;

use agentd_proto::{Bus, Queue};
use agentd_schema::budget::Standing;
use agentd_schema::secrets::SecretBox;
use agentd_schema::{
    Claim, EventQuery, EventType, NewEvent, RunStatus, Session, Settlement, StopReason, Store, StoreError, StoredEvent,
    live,
};
use serde_json::Value;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::agent_loop::{self, Decision};
use crate::budget::{Reconcile, within_budget};
use crate::event::Event;
pub use crate::history::HistoryCache;
use crate::providers::Registry;
use crate::remote::Remote;
use crate::signals::{self, Control, Interrupts};

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
    /// The effective model catalog of each workspace, kept current by the process.
    pub catalogs: Arc<agentd_schema::catalogs::Catalogs>,
    /// Opens vault credentials for remote tools (the gateway's `AGENTD_SECRET_KEY`);
    /// without it, remote tools run without credentials.
    pub secrets: Option<Arc<SecretBox>>,
    /// The bytes of files that `user.message` blocks name (`attachments`).
    pub blobs: agentd_schema::blobs::Blobs,
    /// Remote tools may reach private and loopback addresses
    /// (`AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`); otherwise the egress guard refuses them.
    pub remote_allow_private: bool,
    /// How often a `span.outcome_evaluation_ongoing` heartbeat is committed while an
    /// outcome's grader is asked (`AGENTD_OUTCOME_HEARTBEAT`; `outcome::HEARTBEAT`).
    pub outcome_heartbeat: std::time::Duration,
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

/// Why an attempt stopped before settling.
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
/// when the lease is lost. `queue` takes the submissions of the threads a step wakes
/// (without it, or when it fails, the outbox relay publishes them). `session` is the
/// run's session as the claim read it (`RunStore::claim_run_with_session`), if it did.
pub async fn drive(
    ctx: &RunContext,
    queue: Option<&dyn Queue>,
    claim: &mut Claim,
    session: Option<Session>,
    cancel: CancellationToken,
) -> AttemptEnd {
    let result = match Attempt::claim(ctx, queue, claim, session, cancel).await {
        Ok(Some(attempt)) => attempt.run().await,
        // The session was deleted: nothing to do, and nothing to write.
        Ok(None) => Ok(RunStatus::Done),
        Err(stop) => Err(stop),
    };
    match result {
        Ok(status) => AttemptEnd::Settled(status),
        Err(Stop::Fenced) => AttemptEnd::Fenced,
        Err(Stop::Abandoned(why)) => AttemptEnd::Abandoned(why),
    }
}

/// One claim of a run, being driven.
struct Attempt<'a> {
    ctx: &'a RunContext,
    /// Where the submissions of threads a handoff wakes are published.
    queue: Option<&'a dyn Queue>,
    claim: &'a Claim,
    /// The thread's agent: the session's snapshot on the primary thread (armed with its
    /// thread tools), the thread's own on a child.
    agent: Value,
    /// The claim's thread is the session's primary thread.
    primary: bool,
    /// The name of the agent a child thread runs (its status events carry it).
    agent_name: String,
    /// The primary's model: a child's requests to another model are marked with theirs
    /// (`events::MODEL_KEY`), priced by the session's `_price_snapshot.models`.
    primary_model: String,
    /// The lease is lost.
    cancel: CancellationToken,
    interrupts: Interrupts,
    control: Control,
    /// The thread's committed history, extended before every step.
    history: Vec<Event>,
    /// Its fold, extended by each decision with what was appended since the last.
    folded: agent_loop::Folded,
    /// The estimated size of the history as it came from the cache.
    weight: crate::history::Weight,
    /// Whether the store may hold events of the thread that `history` lacks. Cleared by
    /// a read; set again when one of our commits does not directly follow `history`
    /// (something else was committed in between).
    unread: bool,
    /// The session as read at the claim, for the first step (later steps re-read it).
    claimed_session: Option<Session>,
    /// The session's live-inbox version as the current step read it.
    inbox_version: i64,
    /// Remote tools connect on the first step that needs them and close with the attempt.
    remote: Remote,
    /// The session's workspace (files named in its messages are read from it).
    workspace_id: String,
    /// Files named in the conversation, resolved once per attempt.
    attachments: tokio::sync::Mutex<crate::attachments::Resolved>,
    /// Whether the session keeps its content after a turn (content capture `full`):
    /// otherwise its history is never cached, and the next turn reads what the store
    /// kept of it.
    cacheable: bool,
    /// The bus watchers live exactly as long as the attempt.
    _watching: DropGuard,
}

impl<'a> Attempt<'a> {
    /// The model providers as the session's workspace has them configured now (a
    /// change reaches the next model request). A workspace whose configuration this
    /// worker could not read routes nothing (a retryable error each model call reports).
    fn providers(&self) -> Registry {
        self.ctx.providers.bound(self.ctx.catalogs.of(&self.workspace_id))
    }

    /// Takes up a claimed run: its session (as the claim read it, or read now), its bus
    /// watchers and its cached history. `None` when the session was deleted.
    async fn claim(
        ctx: &'a RunContext,
        queue: Option<&'a dyn Queue>,
        claim: &'a Claim,
        session: Option<Session>,
        cancel: CancellationToken,
    ) -> Result<Option<Self>, Stop> {
        let session = match session {
            Some(session) => session,
            None => match ctx.store.load_session(&claim.session_id).await? {
                Some(session) => session,
                None => return Ok(None),
            },
        };
        let primary = claim.thread_id == claim.session_id;
        let primary_model = session.body["agent"]["model"]["id"].as_str().unwrap_or_default().to_owned();
        let (mut agent, agent_name) = if primary {
            let mut agent = session.body["agent"].clone();
            crate::dream_memory::arm(&session, &mut agent);
            crate::threads::arm(&session, &mut agent);
            let name = agent["name"].as_str().unwrap_or_default().to_owned();
            (agent, name)
        } else {
            // A child thread runs the agent it was spawned with; it has no thread tools.
            let Some(thread) = ctx.store.get_thread(&claim.session_id, &claim.thread_id).await? else {
                return Ok(None);
            };
            // An archived thread runs nothing more: input that reached its run before the
            // archive is settled unanswered, so the run is not claimed again.
            if thread.archived_at_ms.is_some() {
                let archived = Settlement::Done { outcome: "archived".to_owned() };
                ctx.store.settle(claim, Vec::new(), archived).await?;
                return Ok(None);
            }
            let agent = thread.agent.unwrap_or_default();
            let name = thread.agent_name.unwrap_or_else(|| agent["name"].as_str().unwrap_or_default().to_owned());
            (agent, name)
        };
        let watching = cancel.child_token();
        let (interrupts, control) = signals::watch(ctx.bus.as_ref(), &claim.thread_id, &claim.run_id, &watching).await;
        crate::web::arm(&mut agent);
        let skills = crate::attachments::skills_prompt(ctx.store.as_ref(), &session, &agent).await;
        for section in [skills, crate::attachments::memory_prompt(&session.body)].into_iter().flatten() {
            let system = agent["system"].as_str().filter(|s| !s.is_empty());
            agent["system"] = Value::String(match system {
                Some(system) => format!("{system}\n\n{section}"),
                None => section,
            });
        }
        let cached = ctx.histories.take(&claim.thread_id);
        Ok(Some(Self {
            ctx,
            queue,
            claim,
            agent,
            primary,
            agent_name,
            primary_model,
            cancel,
            interrupts,
            control,
            // History comes from the cache (or is read once), then is extended with what
            // was committed since (our own commits and any input that arrived): each step
            // costs one small read, whatever the length of the conversation.
            history: cached.history,
            folded: cached.folded,
            weight: cached.weight,
            unread: true,
            remote: Remote::new(ctx.store.clone(), ctx.secrets.clone(), &session, ctx.remote_allow_private),
            workspace_id: session.workspace_id.clone(),
            attachments: Default::default(),
            cacheable: agentd_schema::capture::Decision::from_json(&session.body["content_capture"])
                .is_none_or(|decision| decision.effective == agentd_schema::capture::Level::Full),
            inbox_version: session.inbox_version,
            claimed_session: Some(session),
            _watching: watching.drop_guard(),
        }))
    }

    /// Steps until the run parks, then closes remote connections and caches history.
    async fn run(mut self) -> Result<RunStatus, Stop> {
        let result = self.steps().await;
        let Attempt { ctx, claim, history, folded, weight, remote, cacheable, .. } = self;
        remote.close().await;
        if result.is_ok() && cacheable {
            ctx.histories.put(&claim.thread_id, crate::history::Cached { history, folded, weight });
        }
        result
    }

    async fn steps(&mut self) -> Result<RunStatus, Stop> {
        let store = self.ctx.store.as_ref();
        loop {
            if self.cancel.is_cancelled() {
                return Err(Stop::Fenced);
            }
            // `claim.generation` is the generation the claim saw; input committed since
            // has a higher one, so settling leaves the run runnable and it is claimed
            // again. That costs a spare cycle when such input was already read here, and
            // saves a read on every step. Our own commits are in `history` already; the
            // store is read when something else may have been committed (a gap before
            // one of our commits, or an interrupt seen on the bus).
            if self.unread || self.interrupts.since(self.last_seq()) {
                let query = EventQuery {
                    thread_id: Some(self.claim.thread_id.clone()),
                    after_seq: Some(self.last_seq()),
                    limit: i64::MAX / 2,
                    ..EventQuery::default()
                };
                let read = store.query_events(&self.claim.session_id, &query).await?;
                self.history.extend(read.into_iter().map(Event::from));
                self.unread = false;
            }
            if self.claim.pause_requested || self.control.paused() {
                return self.pause().await;
            }
            // The session row carries the budget and the usage projection; reconciling
            // against it before every step keeps a reached budget from admitting a request.
            let session = match self.claimed_session.take().filter(|session| self.nothing_appended_since(session)) {
                Some(session) => session,
                None => match store.load_session(&self.claim.session_id).await? {
                    Some(session) => session,
                    None => return Ok(RunStatus::Done),
                },
            };
            self.inbox_version = session.inbox_version;
            let standing = Standing::of(&session.body, &session.usage);
            let mut decision = agent_loop::decide_folded(&self.agent, &self.history, &mut self.folded);
            if standing.reached() {
                decision = within_budget(decision, &self.history, &session, &standing);
            }
            let ends_turn = decision.ends_turn();
            match decision {
                Decision::Park => return self.settle(Vec::new()).await,
                Decision::AwaitHands { events } => return self.await_hands(&session, events).await,
                Decision::AwaitThreads { events, waiting } => return self.await_threads(events, waiting).await,
                // Messages queued in the live inbox after the last request keep the turn going.
                Decision::Idle { .. }
                    if self.takes_inbox(&session) && ends_turn && store.inbox_pending(&session.id).await? =>
                {
                    self.commit_with_inbox(Vec::new()).await?;
                }
                // A turn that ends with an outcome not yet done is graded first (`outcome.rs`);
                // the next decision goes on from the verdict.
                Decision::Idle { mut events } if ends_turn && let Some(outcome) = self.outcome_pending() => {
                    events.pop();
                    self.evaluate_outcome(outcome, events, standing.reached()).await?;
                }
                Decision::Idle { events } => return self.settle(events).await,
                Decision::CallModel { before, mut request } => {
                    let offered = tokio::select! {
                        () = self.cancel.cancelled() => return Err(Stop::Fenced),
                        offered = self.remote.offer(&self.agent, &mut request) => offered,
                    };
                    if let Err(failure) = offered {
                        // The agent's tools are not all available: the turn ends, and says why.
                        tracing::warn!(run = %self.claim.run_id, server = %failure.server, "MCP server unavailable; ending the turn");
                        let thread = &self.claim.thread_id;
                        let mut events = before;
                        events.push(NewEvent::session_error(thread, &failure.session_error()));
                        events.push(NewEvent::status_idle(thread, StopReason::RetriesExhausted));
                        self.commit(events).await?;
                        continue;
                    }
                    let reconcile = Reconcile {
                        before: session.usage.clone(),
                        body: session.body.clone(),
                        model: self.span_model().map(str::to_owned),
                    };
                    let take_inbox = self.takes_inbox(&session);
                    if let Some(settled) = self.model_request(before, request, reconcile, take_inbox).await? {
                        return Ok(settled);
                    }
                }
                Decision::CallRemote { before, calls } => {
                    self.commit(before).await?;
                    self.remote_calls(calls).await?;
                }
                Decision::CallThreads { before, calls } => self.call_threads(&session, before, calls).await?,
            }
        }
    }

    /// Whether the history holds every event appended to `session` since it was read:
    /// then the session row (its usage and status) is still as read. A claim's read may
    /// be older than the history read after it (`claim_run.*.sql`). A session with child
    /// threads has events the thread's history does not hold; it is read again.
    fn nothing_appended_since(&self, session: &Session) -> bool {
        session.child_threads == 0 && session.next_seq == self.last_seq() + 1
    }

    /// Whether this attempt delivers the session's live-inbox messages: they are the
    /// primary thread's input.
    fn takes_inbox(&self, session: &Session) -> bool {
        self.primary && session.inbox_version > 0
    }

    /// The model a child thread's requests go to when it is not the primary's (its spans
    /// say so, for pricing); `None` on the primary or on the primary's model.
    fn span_model(&self) -> Option<&str> {
        let model = self.agent["model"]["id"].as_str().filter(|model| !model.is_empty())?;
        (!self.primary && model != self.primary_model).then_some(model)
    }

    /// The outcome the thread is working on, if one is defined and not done.
    fn outcome_pending(&mut self) -> Option<agentd_schema::events::ActiveOutcome> {
        self.folded.active_outcome(&self.history)
    }

    /// Look-ahead at the end of a model request: the idle that the next step would
    /// commit alone, when `outputs` (the response, its closed span and usage) end the
    /// turn — no tool use among them, and the decision over history and `outputs` as
    /// they will be committed is a plain `end_turn` idle. Committing it with them saves
    /// the step's session read and a transaction. `None` whenever the next step could
    /// decide anything else: history may lack events (something else was committed, an
    /// interrupt was seen), a pause was asked, or an outcome is pending grading; on a
    /// child thread; and the caller has ruled out a live inbox, a reached budget and a
    /// cut response. Input that arrives after this look is caught by the store
    /// (`settle_if_current`).
    fn turn_ends_with(&mut self, outputs: &[NewEvent]) -> Option<NewEvent> {
        let uses_tools = outputs.iter().any(|e| e.event_type().is_some_and(EventType::is_tool_use));
        // A child's idle is its reply to its parent: a handoff (`threads.rs`), not folded.
        if uses_tools
            || !self.primary
            || self.unread
            || self.interrupts.since(self.last_seq())
            || self.claim.pause_requested
            || self.control.paused()
            || self.outcome_pending().is_some()
        {
            return None;
        }
        let (read, last) = (self.history.len(), self.last_seq());
        let now = agentd_schema::Clock::now_ms(&agentd_schema::SystemClock);
        self.history.extend(self.on_thread(outputs.to_vec()).into_iter().zip(1..).map(|(event, i)| {
            Event::from(StoredEvent {
                session_id: self.claim.session_id.clone(),
                seq: last + i,
                event_id: event.event_id,
                thread_id: event.thread_id,
                kind: event.kind,
                body: event.body,
                processed_at_ms: now,
            })
        }));
        // The outputs are folded on top of the fold so far (`Folded::update` folds again
        // whatever the committed history turns out not to match).
        let decision = agent_loop::decide_folded(&self.agent, &self.history, &mut self.folded);
        self.history.truncate(read);
        let ends_turn = decision.ends_turn();
        match decision {
            Decision::Idle { mut events } if ends_turn && events.len() == 1 => events.pop(),
            _ => None,
        }
    }

    /// The sequence number of the last event read.
    fn last_seq(&self) -> i64 {
        self.history.last().map_or(0, Event::seq)
    }

    /// A pause parks the run here, between steps, as an awaiting ticket that only
    /// `resume` (or new input) releases. The session goes idle if it was running.
    async fn pause(&self) -> Result<RunStatus, Stop> {
        let running = self
            .history
            .iter()
            .rev()
            .find_map(|e| e.event_type().filter(|kind| kind.is_session_status() || is_thread_status(*kind)))
            .is_some_and(|kind| {
                matches!(kind, EventType::SessionStatusRunning | EventType::SessionThreadStatusRunning)
            });
        let events =
            if running { vec![NewEvent::status_idle(&self.claim.thread_id, StopReason::EndTurn)] } else { Vec::new() };
        tracing::info!(run = %self.claim.run_id, "paused at a step boundary");
        // A pause ends no turn: a child owes no reply yet, and a parent keeps its waits
        // (the replies wait for `resume`).
        self.settle_alone(self.on_thread(events)).await
    }

    /// Parks while built-in calls are out with the hands. The hands may have stopped
    /// their work item (idle timeout, lost lease): make sure one is queued first.
    async fn await_hands(&self, session: &Session, events: Vec<NewEvent>) -> Result<RunStatus, Stop> {
        let store = self.ctx.store.as_ref();
        if let Some(environment_id) = session.body["environment_id"].as_str()
            && let Some(environment) = store.get_resource(&session.workspace_id, "environment", environment_id).await?
        {
            agentd_schema::hands::ensure(
                store,
                self.ctx.bus.as_ref(),
                &session.workspace_id,
                environment_id,
                &session.id,
                agentd_schema::hands::hands_of(&environment.body),
            )
            .await?;
        }
        self.settle(events).await
    }

    /// Commits `events` under the claim and announces them.
    async fn commit(&mut self, events: Vec<NewEvent>) -> Result<Vec<StoredEvent>, Stop> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let stored = self.ctx.store.commit(self.claim, self.on_thread(events)).await?;
        live::publish_committed(self.ctx.bus.as_ref(), &stored).await;
        self.absorb(&stored);
        Ok(stored)
    }

    /// Commits `events` (live-inbox messages are taken ahead of them) and announces them.
    async fn commit_with_inbox(&mut self, events: Vec<NewEvent>) -> Result<Vec<StoredEvent>, Stop> {
        let stored = self.ctx.store.commit_with_inbox(self.claim, self.on_thread(events)).await?;
        live::publish_committed(self.ctx.bus.as_ref(), &stored).await;
        self.absorb(&stored);
        Ok(stored)
    }

    /// Adds our own committed events to `history` when they directly follow it;
    /// otherwise the next step reads the store.
    fn absorb(&mut self, stored: &[StoredEvent]) {
        match stored.first() {
            Some(first) if !self.unread && first.seq == self.last_seq() + 1 => {
                self.history.extend(stored.iter().cloned().map(Event::from));
            }
            Some(_) => self.unread = true,
            None => {}
        }
    }

    /// Settles the run awaiting input, committing `events` with it — through a handoff
    /// when the settlement reaches another thread (a child's reply, a primary closing
    /// its waits: `threads.rs`).
    async fn settle(&self, events: Vec<NewEvent>) -> Result<RunStatus, Stop> {
        let events = self.on_thread(events);
        if let Some(status) = self.settle_threads(events.clone()).await? {
            return Ok(status);
        }
        self.settle_alone(events).await
    }

    /// Settles the primary thread's run awaiting input with `events` unless input arrived
    /// since the claim or the live inbox changed since this step read the session:
    /// `None`, and nothing committed, when either did.
    async fn settle_if_current(&mut self, events: Vec<NewEvent>) -> Result<Option<RunStatus>, Stop> {
        let store = self.ctx.store.as_ref();
        let events = self.on_thread(events);
        let settled = store.settle_if_current(self.claim, events, Settlement::Awaiting, self.inbox_version).await?;
        let Some(settled) = settled else { return Ok(None) };
        live::publish_committed(self.ctx.bus.as_ref(), &settled.events).await;
        // Into the history the next attempt starts from (with its fold, cached).
        self.absorb(&settled.events);
        self.folded.update(&self.history);
        Ok(Some(settled.status))
    }

    /// Settles the run awaiting input with `events` (on its thread), touching no other thread.
    async fn settle_alone(&self, events: Vec<NewEvent>) -> Result<RunStatus, Stop> {
        let settled = self.ctx.store.settle(self.claim, events, Settlement::Awaiting).await?;
        live::publish_committed(self.ctx.bus.as_ref(), &settled.events).await;
        Ok(settled.status)
    }

    /// Everything an attempt writes is on its claim's thread; a child's statuses are
    /// its thread's (`session.thread_status_*`), never the session's.
    fn on_thread(&self, events: Vec<NewEvent>) -> Vec<NewEvent> {
        let thread = &self.claim.thread_id;
        let on = |event: NewEvent| event.on(thread);
        if self.primary {
            events.into_iter().map(on).collect()
        } else {
            events.into_iter().map(|event| on(event).for_thread(&self.agent_name)).collect()
        }
    }
}

/// A `session.thread_status_*` event.
fn is_thread_status(kind: EventType) -> bool {
    matches!(
        kind,
        EventType::SessionThreadStatusRunning
            | EventType::SessionThreadStatusIdle
            | EventType::SessionThreadStatusRescheduled
            | EventType::SessionThreadStatusTerminated
    )
}
