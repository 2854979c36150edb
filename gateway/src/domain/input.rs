//! Turns: input into a session's thread. Every acceptance rule of every surface lives
//! here — archived, deleted and terminated sessions, the budget, the session's agent and
//! environment as they are now, answers to tool calls that are not open, confirmations,
//! the order of a `system.message`, `user.tool_result` from hands, idempotent repeats —
//! then the commit (`submit_and_publish`, life of a turn steps 2–3) and the hands.

use std::collections::HashMap;

use agentd_schema::ids::SessionId;
use agentd_schema::store::{ResourceState, ToolCall, ToolUseKind};
use agentd_schema::{EventQuery, EventType, NewEvent, Session, StoredEvent, live};
use serde_json::{Value, json};

use super::commit::{append_and_publish, queue_hands, submit_to_threads};
use super::error::{DomainError, DomainResult};
use super::session_threads;
use crate::AppState;
use crate::admission::{Access, Tenant};

/// Event types that make the thread's run runnable.
const RUN_INPUTS: &[EventType] = &[
    EventType::UserMessage,
    EventType::UserCustomToolResult,
    EventType::UserToolResult,
    EventType::UserToolConfirmation,
    EventType::UserDefineOutcome,
    EventType::SystemMessage,
    // Our runner's answers on `cloud` environments.
    EventType::AgentToolResult,
];

/// Event types that start a new turn (a new model request the budget and the agent
/// must admit).
const NEW_TURN: &[EventType] = &[EventType::UserMessage, EventType::SystemMessage, EventType::UserDefineOutcome];

/// Whether `event` is of one of `kinds`.
fn one_of(event: &NewEvent, kinds: &[EventType]) -> bool {
    kinds.iter().any(|kind| event.is(*kind))
}

/// What a submission committed.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The session as loaded when the input was admitted.
    pub session: Session,
    /// The events committed now, in order (empty when every event repeated an answer).
    pub committed: Vec<StoredEvent>,
    /// One entry per input event, in request order: the rendered event it committed, or
    /// the earlier answer it repeated.
    pub echoed: Vec<Value>,
}

impl Accepted {
    /// The sequence number of the first event committed now.
    pub fn first_seq(&self) -> Option<i64> {
        self.committed.first().map(|e| e.seq)
    }
}

/// Loads a session that may start a new turn, or says why not. The rules, in order:
/// archived, terminated, budget reached, the session's agent disabled or archived (as
/// the agent resource is now), its environment archived.
pub async fn admit_turn(state: &AppState, tenant: &Tenant, id: &SessionId) -> DomainResult<Session> {
    load_admitted(state, tenant, id, true).await
}

/// Loads a session and applies [`admit`]'s rules, reading the session and the state of
/// its agent and environment in one statement (`SessionStore::get_session_for_turn`).
async fn load_admitted(state: &AppState, tenant: &Tenant, id: &SessionId, new_turn: bool) -> DomainResult<Session> {
    let store = state.backends.store.as_ref();
    let read = store
        .get_session_for_turn(&tenant.workspace_id, id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("session not found: {id}")))?;
    if !session_rules(&read.session, new_turn)? {
        return Ok(read.session);
    }
    let named = Named::of(&read.session);
    // The row's own ids answer when they are the ones the rules ask about: always, for a
    // session created since migration 0030; otherwise one more read.
    let known = |read: &Option<(String, Option<ResourceState>)>, wanted: Option<&str>| match (read, wanted) {
        (_, None) => Some(None),
        (Some((id, state)), Some(wanted)) if id == wanted => Some(state.clone()),
        _ => None,
    };
    match (known(&read.agent, named.agent), known(&read.environment, Some(named.environment))) {
        (Some(agent), Some(environment)) => named.check(&read.session.id, agent.as_ref(), environment.as_ref())?,
        _ => named.read_and_check(state, tenant, &read.session.id).await?,
    }
    Ok(read.session)
}

/// The rules of [`admit_turn`]; the turn rules (budget, agent, environment) only when
/// `new_turn` (an answer to an open tool call finishes a turn that was admitted).
pub async fn admit(state: &AppState, tenant: &Tenant, session: &Session, new_turn: bool) -> DomainResult<()> {
    if session_rules(session, new_turn)? {
        Named::of(session).read_and_check(state, tenant, &session.id).await?;
    }
    Ok(())
}

/// The rules the session row alone decides. `Ok(true)`: the agent's and environment's
/// rules apply too (a new turn).
fn session_rules(session: &Session, new_turn: bool) -> DomainResult<bool> {
    let id = &session.id;
    if session.archived_at_ms.is_some() {
        return Err(DomainError::Archived(format!("session {id} is archived and accepts no events")));
    }
    if session.status == "terminated" {
        return Err(DomainError::Terminated(format!("session {id} is terminated and accepts no events")));
    }
    if !new_turn {
        return Ok(false);
    }
    // A dream's session runs the turn the dream service started, and no other.
    if let Some(dream) = session.body.get("_dream").filter(|d| !d.is_null()) {
        let dream_id = dream["dream_id"].as_str().unwrap_or_default();
        return Err(DomainError::invalid(format!(
            "session {id} runs dream {dream_id} and takes no new turns; cancel the dream to stop it"
        )));
    }
    if agentd_schema::budget::Standing::of(&session.body, &session.usage).reached() {
        return Err(DomainError::BudgetReached(format!(
            "session {id}: the session's budget (max_list_cost) is reached; no further model request is admitted"
        )));
    }
    Ok(true)
}

/// The agent and the environment a session names, whose state admits its turns.
struct Named<'a> {
    agent: Option<&'a str>,
    environment: &'a str,
}

impl<'a> Named<'a> {
    fn of(session: &'a Session) -> Self {
        Named {
            agent: session.agent_id.as_deref().or(session.body["agent"]["id"].as_str()),
            environment: session.body["environment_id"].as_str().unwrap_or_default(),
        }
    }

    /// Reads the agent's and environment's state as they are now, in one read without
    /// their bodies, and checks it.
    async fn read_and_check(&self, state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<()> {
        let mut wanted = vec![("environment", self.environment)];
        wanted.extend(self.agent.map(|agent| ("agent", agent)));
        let states = state.backends.store.resource_states(&tenant.workspace_id, &wanted).await?;
        let of = |kind: &str| states.iter().find(|resource| resource.kind == kind);
        self.check(id, of("agent"), of("environment"))
    }

    /// The agent must exist and be neither archived nor disabled; the environment must
    /// not be archived. `None`: the workspace has no such resource.
    fn check(&self, id: &str, agent: Option<&ResourceState>, environment: Option<&ResourceState>) -> DomainResult<()> {
        if let Some(agent_id) = self.agent {
            match agent {
                None => {
                    return Err(DomainError::AgentArchived(format!(
                        "session {id}: its agent {agent_id} no longer exists; start a session with another agent"
                    )));
                }
                Some(agent) if agent.archived_at_ms.is_some() => {
                    return Err(DomainError::AgentArchived(format!(
                        "session {id}: its agent {agent_id} is archived and takes no new turns"
                    )));
                }
                Some(agent) if agent.disabled => {
                    return Err(DomainError::AgentDisabled(format!(
                        "session {id}: its agent {agent_id} is disabled and takes no new turns"
                    )));
                }
                Some(_) => {}
            }
        }
        if environment.is_some_and(|environment| environment.archived_at_ms.is_some()) {
            let environment_id = self.environment;
            return Err(DomainError::EnvironmentArchived(format!(
                "session {id}: its environment {environment_id} is archived and takes no new turns"
            )));
        }
        Ok(())
    }
}

/// The file a `user.define_outcome`'s rubric names, if it is a file rubric.
pub fn rubric_file(event: &NewEvent) -> Option<&str> {
    if !event.is(EventType::UserDefineOutcome) || event.body["rubric"]["type"] != "file" {
        return None;
    }
    event.body["rubric"]["file_id"].as_str()
}

/// Submits `events` (bodies already validated as client events, each with its id) to
/// the session: admission, tool-call checks, commit, publish, hands. Each answer goes to
/// the thread of the call it answers, and a `user.interrupt` to the thread it names — or,
/// naming none, to every thread that is not archived (ADR 0022 §8); everything else to
/// the primary thread. Input that drives no run (`user.interrupt`) is appended and
/// published only, unless the session has child threads: then the interrupted threads
/// wake (`session_threads::commit`).
pub async fn submit(
    state: &AppState,
    tenant: &Tenant,
    id: &SessionId,
    events: Vec<NewEvent>,
) -> DomainResult<Accepted> {
    if events.is_empty() {
        return Err(DomainError::invalid("events: at least one event is required"));
    }
    let new_turn = events.iter().any(|e| one_of(e, NEW_TURN));
    let session = load_admitted(state, tenant, id, new_turn).await?;
    for (i, event) in events.iter().enumerate() {
        if !event.is(EventType::SystemMessage) {
            continue;
        }
        let accompanies = [EventType::UserMessage, EventType::UserToolResult, EventType::UserCustomToolResult];
        let follows = i.checked_sub(1).map(|p| &events[p]);
        let valid = i == events.len() - 1 && follows.is_some_and(|e| one_of(e, &accompanies));
        if !valid {
            return Err(DomainError::invalid(format!(
                "events[{i}]: a system.message must be the final event and immediately follow the user.message, \
                 user.tool_result or user.custom_tool_result it accompanies"
            )));
        }
    }
    let store = state.backends.store.as_ref();
    for (i, event) in events.iter().enumerate() {
        if event.is(EventType::UserMessage) {
            let path = format!("events[{i}].content");
            super::files::require_readable(store, &tenant.workspace_id, &path, &event.body["content"]).await?;
        }
        if let Some(file_id) = rubric_file(event) {
            let path = format!("events[{i}].rubric.file_id");
            super::files::require_live(store, &tenant.workspace_id, file_id, &path).await?;
        }
    }
    let mut events = events;
    agentd_schema::events::define_outcomes(&mut events);
    let answers = events.iter().any(|e| {
        one_of(e, &[EventType::UserCustomToolResult, EventType::UserToolResult, EventType::UserToolConfirmation])
    });
    let ledger = if answers {
        let ids: Vec<String> = events.iter().filter_map(|e| answered_call(e).map(str::to_owned)).collect();
        ToolLedger::of(store.tool_calls(&session.id, &ids).await?)
    } else {
        ToolLedger::default()
    };
    // `user.tool_result` comes from hands: the customer's worker on `self_hosted`
    // environments; on `cloud` ones only our runner (with the item's sessions token or
    // a runner key), and its answers are committed as `agent.tool_result`.
    let hands = if events.iter().any(|e| e.is(EventType::UserToolResult)) {
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
    let mut slots: Vec<Slot> = Vec::with_capacity(events.len());
    let mut answered_now: HashMap<(String, String), String> = HashMap::new();
    for (i, mut event) in events.into_iter().enumerate() {
        let answer_key = match event.event_type() {
            Some(EventType::UserCustomToolResult) => Some(("custom_tool_use_id", &[EventType::AgentCustomToolUse][..])),
            Some(EventType::UserToolResult) => Some(("tool_use_id", &[EventType::AgentToolUse][..])),
            Some(EventType::UserToolConfirmation) => {
                Some(("tool_use_id", &[EventType::AgentToolUse, EventType::AgentMcpToolUse][..]))
            }
            _ => None,
        };
        let Some((field, kinds)) = answer_key else {
            if event.is(EventType::UserInterrupt)
                && let Some(thread) = event.body["session_thread_id"].as_str()
            {
                let field = format!("events[{i}].session_thread_id");
                session_threads::require_open(state, &session, thread, &field).await?;
                event.thread_id = thread.to_owned();
            }
            // A system message goes with the input it follows in the request: to the
            // thread of the call that input answered (the primary when it is first).
            if event.is(EventType::SystemMessage)
                && let Some(Slot::New(previous)) = slots.last()
            {
                event.thread_id = previous.thread_id.clone();
            }
            slots.push(Slot::New(event));
            continue;
        };
        let kind = event.kind.clone();
        let use_id = event.body[field].as_str().unwrap_or_default().to_owned();
        let Some(call) = ledger.calls.get(&use_id) else {
            return Err(DomainError::invalid(format!(
                "events[{i}].{field}: no open tool call {use_id} in this session"
            )));
        };
        let use_kind = use_type(call.use_kind);
        if !kinds.contains(&use_kind) {
            return Err(DomainError::invalid(format!(
                "events[{i}].{field}: {use_id} is an {use_kind}, which {kind} cannot answer"
            )));
        }
        if event.is(EventType::UserToolConfirmation) && call.evaluated_permission.as_deref() != Some("ask") {
            return Err(DomainError::invalid(format!(
                "events[{i}].tool_use_id: {use_id} does not await a confirmation"
            )));
        }
        if event.is(EventType::UserToolResult) && !self_hosted && !runner_answer {
            return Err(DomainError::invalid(format!(
                "events[{i}]: user.tool_result is only valid on self_hosted environments"
            )));
        }
        // Hands answer the tools that run in the sandbox; the worker makes every other
        // built-in call (web tools, thread tools, the advisor) and answers it itself.
        if event.is(EventType::UserToolResult) && !agentd_schema::hands::SANDBOX_TOOLS.contains(&call.name.as_str()) {
            return Err(DomainError::invalid(format!(
                "events[{i}].tool_use_id: {use_id} is a {} call, which agentd makes itself; only sandbox tool \
                 calls ({}) take a user.tool_result",
                call.name,
                agentd_schema::hands::SANDBOX_TOOLS.join(", ")
            )));
        }
        // A repeated answer is idempotent: echo the first, commit nothing.
        if let Some(seq) = ledger.earlier_answer(&use_id, &kind) {
            let query = EventQuery { after_seq: Some(seq - 1), limit: 1, ..EventQuery::default() };
            let earlier = store.query_events(&session.id, &query).await?.into_iter().next().ok_or_else(|| {
                DomainError::Internal(format!("the answer to {use_id} at seq {seq} is missing from the history"))
            })?;
            slots.push(Slot::Earlier(earlier));
            continue;
        }
        let key = (kind, use_id);
        if let Some(first) = answered_now.get(&key) {
            slots.push(Slot::SameAs(first.clone()));
            continue;
        }
        // The answer goes to the thread of its call, which must still take input.
        if call.thread_id != session.id {
            let field = format!("events[{i}].{field}");
            session_threads::require_open(state, &session, &call.thread_id, &field).await?;
            event.thread_id = call.thread_id.clone();
        }
        if event.is(EventType::UserToolResult) && runner_answer {
            event.kind = EventType::AgentToolResult.as_str().to_owned();
            event.body["type"] = json!(EventType::AgentToolResult);
        }
        answered_now.insert(key, event.event_id.clone());
        slots.push(Slot::New(event));
    }
    let mut fresh: Vec<NewEvent> = Vec::with_capacity(slots.len());
    for slot in &slots {
        let Slot::New(new) = slot else { continue };
        // An interrupt naming no thread reaches every thread that is not archived.
        let everywhere = new.is(EventType::UserInterrupt) && new.body["session_thread_id"].is_null();
        if everywhere && session.child_threads > 0 {
            let threads = session_threads::interruptible(state, &session).await?;
            fresh.extend(session_threads::fan_out(new.clone(), &threads));
        } else {
            fresh.push(new.clone());
        }
    }
    // The threads whose runs the input makes runnable, the primary first.
    let mut woken: Vec<String> = Vec::new();
    for event in fresh.iter().filter(|e| one_of(e, RUN_INPUTS)) {
        if !woken.contains(&event.thread_id) {
            woken.push(event.thread_id.clone());
        }
    }
    woken.sort_by_key(|thread| *thread != session.id);
    let interrupts = fresh.iter().any(|e| e.is(EventType::UserInterrupt));
    let committed = if fresh.is_empty() {
        Vec::new()
    } else if interrupts && session.child_threads > 0 {
        session_threads::commit(state, &session, fresh, woken.clone()).await?
    } else if let Some((thread, also_wake)) = woken.split_first() {
        submit_to_threads(state, &session.id, thread, also_wake.to_vec(), fresh).await?
    } else {
        append_and_publish(state, &session.id, fresh).await?
    };
    // New input after the previous work item stopped needs hands again.
    if !woken.is_empty() && agentd_schema::hands::needs_hands(&session.body["agent"]) {
        queue_hands(state, tenant, &session).await?;
    }
    let by_id: HashMap<&str, &StoredEvent> = committed.iter().map(|e| (e.event_id.as_str(), e)).collect();
    let echoed = slots
        .iter()
        .map(|slot| match slot {
            Slot::New(NewEvent { event_id, .. }) | Slot::SameAs(event_id) => {
                by_id.get(event_id.as_str()).map_or(Value::Null, |e| live::render(e))
            }
            Slot::Earlier(earlier) => live::render(earlier),
        })
        .collect();
    Ok(Accepted { session, committed, echoed })
}

/// One event of a submission, as it will be echoed.
enum Slot {
    /// To commit now.
    New(NewEvent),
    /// An answer committed by an earlier request.
    Earlier(StoredEvent),
    /// A repeat of the answer with this event id earlier in the same request.
    SameAs(String),
}

/// The session's tool calls that await a confirmation (`evaluated_permission: ask`,
/// neither confirmed nor answered), oldest first.
pub async fn awaiting_confirmation(state: &AppState, session_id: &str) -> DomainResult<Vec<String>> {
    let open = state.backends.store.open_tool_calls(session_id).await?;
    Ok(open.into_iter().filter(ToolCall::awaits_confirmation).map(|call| call.tool_use_id).collect())
}

/// The `tool_use_id` (or `custom_tool_use_id`) an answer names.
fn answered_call(event: &NewEvent) -> Option<&str> {
    let field = match event.event_type()? {
        EventType::UserCustomToolResult => "custom_tool_use_id",
        EventType::UserToolResult | EventType::UserToolConfirmation => "tool_use_id",
        _ => return None,
    };
    event.body[field].as_str()
}

/// The event type of a use of this kind.
fn use_type(kind: ToolUseKind) -> EventType {
    match kind {
        ToolUseKind::Builtin => EventType::AgentToolUse,
        ToolUseKind::Custom => EventType::AgentCustomToolUse,
        ToolUseKind::Mcp => EventType::AgentMcpToolUse,
    }
}

/// Tool calls of a session, read from the store's tool-call ledger (one indexed read,
/// never the event history), with what has answered them so far.
#[derive(Debug, Default)]
pub struct ToolLedger {
    /// tool use id → the call
    calls: HashMap<String, ToolCall>,
}

impl ToolLedger {
    fn of(calls: Vec<ToolCall>) -> Self {
        Self { calls: calls.into_iter().map(|call| (call.tool_use_id.clone(), call)).collect() }
    }

    /// Whether anything has answered the call (a result, a confirmation, the runner).
    pub fn is_answered(&self, use_id: &str) -> bool {
        self.calls.get(use_id).is_some_and(|call| call.confirmation_seq.is_some() || call.result_seq.is_some())
    }

    /// Whether `use_id` is a call of type `kind` that nothing has answered yet.
    pub fn is_open(&self, use_id: &str, kind: EventType) -> bool {
        self.calls.get(use_id).is_some_and(|call| use_type(call.use_kind) == kind) && !self.is_answered(use_id)
    }

    /// The sequence number of an earlier answer of type `answer` to `use_id`, if one was
    /// committed. A result the runner (or a denial) committed as `agent.tool_result`
    /// counts as the `user.tool_result`: a call takes no second result.
    fn earlier_answer(&self, use_id: &str, answer: &str) -> Option<i64> {
        let call = self.calls.get(use_id)?;
        if answer == EventType::UserToolConfirmation.as_str() {
            return call.confirmation_seq;
        }
        let committed = match call.result_kind.as_deref()? {
            kind if kind == EventType::AgentToolResult.as_str() => EventType::UserToolResult.as_str(),
            kind => kind,
        };
        (committed == answer).then_some(call.result_seq).flatten()
    }
}

/// The one place that computes which tool calls of a session are open: the calls
/// without a result, from the store's tool-call ledger.
pub async fn tool_calls(state: &AppState, session_id: &str) -> DomainResult<ToolLedger> {
    Ok(ToolLedger::of(state.backends.store.open_tool_calls(session_id).await?))
}
