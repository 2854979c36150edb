//! Tasks over sessions: sending messages (new tasks, follow-ups of input-required ones),
//! the Task view derived from committed events, streams, listing and cancelling.
//!
//! A task's events are the session's committed events from its first input on, until
//! the first `session.status_idle` / `session.status_terminated` after its latest input
//! (`input_seq`); a canceled task ends at the idle its cancel settles the run with. Its
//! state maps from that ending (docs/api/a2a.md).

use std::collections::HashMap;
use std::time::Duration;

use agentd_schema::ids::SessionId;
use agentd_schema::{A2aTask, RunStatus, StoredEvent, live::rfc3339};
use agentd_schema::{EventType, NewEvent};
use axum::http::HeaderMap;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::bounds::{self, Cursor, ListTasks, PageTokens};
use super::live::LiveArtifact;
use super::view::TOOL_INPUTS;
pub use super::view::{TERMINAL, View, is_final, is_terminal, load, view};
use super::{A2aError, A2aResult, Endpoint};
use crate::AppState;
use crate::adapters::{Preview, Shown, Translate, Wake, follow, text_of};
use crate::admission::Tenant;
use crate::domain::exposure::{self, Protocol};
use crate::domain::{input, runs, threads};
use crate::managed::content;

/// How long a context's start lease lasts if its holder never releases it.
const START_LEASE_MS: i64 = 30_000;
/// Tasks a listing considers.
const LIST_SCAN: i64 = 10_000;

fn string_param<'a>(params: &'a Value, field: &str) -> A2aResult<&'a str> {
    params[field]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| A2aError::params(format!("{field}: a non-empty string is required")))
}

/// A message's parts as session input: tool answers from data parts, then one
/// `user.message` with the text parts (other data parts as JSON text).
fn inputs(message: &Value) -> A2aResult<Vec<Value>> {
    let parts = message["parts"]
        .as_array()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| A2aError::params("message.parts: at least one part is required"))?;
    let mut answers = Vec::new();
    let mut texts = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if let Some(text) = part["text"].as_str() {
            texts.push(json!({ "type": "text", "text": text }));
        } else if let Some(data) = part.get("data") {
            if data["type"].as_str().and_then(|t| t.parse().ok()).is_some_and(|t| TOOL_INPUTS.contains(&t)) {
                answers.push(data.clone());
            } else {
                texts.push(json!({ "type": "text", "text": data.to_string() }));
            }
        } else if part.get("url").is_some() || part.get("raw").is_some() {
            return Err(A2aError::content_type(format!(
                "message.parts[{i}]: file parts are not supported; send text or data parts"
            )));
        } else {
            return Err(A2aError::params(format!("message.parts[{i}]: expected a text, data, url or raw part")));
        }
    }
    if !texts.is_empty() {
        answers.push(json!({ "type": EventType::UserMessage, "content": texts }));
    }
    Ok(answers)
}

/// The agent a new context starts with.
fn agent_for(endpoint: &Endpoint, headers: &HeaderMap, params: &Value) -> Option<String> {
    endpoint
        .agent
        .clone()
        .or_else(|| params["message"]["metadata"]["agent"].as_str().map(str::to_owned))
        .or_else(|| params["metadata"]["agent"].as_str().map(str::to_owned))
        .or_else(|| headers.get("x-agentd-agent").and_then(|v| v.to_str().ok()).map(str::to_owned))
}

/// Sends a message: a follow-up of `message.taskId`, or a new task on `message.contextId`
/// (a new context when omitted). Returns the task, the sequence its stream follows and
/// the subscription its stream reads (taken before the input was committed).
pub(crate) async fn send(
    state: &AppState,
    tenant: &Tenant,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    params: &Value,
) -> A2aResult<(A2aTask, i64, Wake)> {
    let message = &params["message"];
    if !message.is_object() {
        return Err(A2aError::params("message: an object is required"));
    }
    match message["role"].as_str() {
        Some("ROLE_USER") => {}
        other => {
            return Err(A2aError::params(format!(
                "message.role: expected ROLE_USER, got {}",
                other.unwrap_or("nothing")
            )));
        }
    }
    let bodies = inputs(message)?;
    let store = state.backends.store.as_ref();
    let context = message["contextId"].as_str().filter(|s| !s.is_empty());
    if let Some(task_id) = message["taskId"].as_str().filter(|s| !s.is_empty()) {
        let row = load(state, tenant, task_id).await?;
        if context.is_some_and(|c| c != row.context_id) {
            return Err(A2aError::params(format!(
                "message.contextId {} does not match task {task_id}'s context {}",
                context.unwrap_or_default(),
                row.context_id
            )));
        }
        let current = view(state, &row).await?;
        if is_terminal(current.state) {
            return Err(A2aError::unsupported(format!(
                "task {task_id} is {} and takes no further input",
                current.state
            )));
        }
        let session = SessionId::parse(&row.session_id)
            .map_err(|_| A2aError::internal(format!("task {task_id}: its session id does not parse")))?;
        let (seq, wake) = commit(state, tenant, &session, bodies).await?;
        store.a2a_task_input(&row.id, seq).await?;
        let row = A2aTask { input_seq: seq, ..row };
        return Ok((row, seq - 1, wake));
    }
    let context = context.map(str::to_owned).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    // Checking for a task in progress and starting one happen under the context's
    // start lease, so two messages racing onto one context cannot both start a task.
    let holder = uuid::Uuid::new_v4().to_string();
    if !store.a2a_lock_context(&tenant.workspace_id, &context, &holder, START_LEASE_MS).await? {
        return Err(A2aError::params(format!(
            "another message is starting a task on context {context}; retry once it has"
        )));
    }
    let started = start(state, tenant, endpoint, headers, params, context.clone(), bodies).await;
    if let Err(error) = store.a2a_unlock_context(&tenant.workspace_id, &context, &holder).await {
        tracing::warn!(%error, %context, "a2a context start lease not released; it expires by itself");
    }
    started
}

/// Starts a new task on `context` (under its start lease).
async fn start(
    state: &AppState,
    tenant: &Tenant,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    params: &Value,
    context: String,
    bodies: Vec<Value>,
) -> A2aResult<(A2aTask, i64, Wake)> {
    let store = state.backends.store.as_ref();
    // The exposure gate first: a context of a hidden agent says nothing about its tasks.
    let agent = agent_for(endpoint, headers, params);
    let bound = threads::session_through(state, tenant, &context, agent.as_deref(), Some(Protocol::A2a)).await?;
    if let Some(latest) = store.a2a_list_tasks(&tenant.workspace_id, Some(&context), 1).await?.first() {
        let current = view(state, latest).await?;
        if !is_terminal(current.state) {
            return Err(A2aError::params(format!(
                "context {context} has task {} in state {}; continue it with message.taskId or wait until it ends",
                latest.id, current.state
            )));
        }
    }
    let session = &bound.session;
    if let Some(endpoint_agent) = &endpoint.agent
        && session.agent_id.as_deref() != Some(endpoint_agent.as_str())
    {
        return Err(A2aError::params(format!(
            "context {context} belongs to another agent ({}); use that agent's endpoint or a new context",
            session.agent_id.as_deref().unwrap_or("none")
        )));
    }
    let (seq, wake) = commit(state, tenant, &bound.id, bodies).await?;
    let runs = store.thread_runs(&session.id).await?;
    let run = runs
        .iter()
        .rev()
        .find(|r| matches!(r.status, RunStatus::Pending | RunStatus::Leased | RunStatus::Awaiting))
        .or(runs.last())
        .map(|r| r.id.clone())
        .unwrap_or_default();
    let row = A2aTask {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: tenant.workspace_id.clone(),
        context_id: context,
        session_id: session.id.clone(),
        run_id: run,
        first_seq: seq,
        input_seq: seq,
        canceled: false,
        notified_state: None,
        created_at_ms: crate::managed::query::now_ms(),
    };
    store.a2a_create_task(&row).await?;
    Ok((row, seq - 1, wake))
}

/// Submits the message's input through the turn service (every acceptance rule,
/// the budget and the hands) and returns the sequence of the first committed event, with
/// a subscription to the session taken before it.
async fn commit(state: &AppState, tenant: &Tenant, session: &SessionId, bodies: Vec<Value>) -> A2aResult<(i64, Wake)> {
    let mut events = Vec::with_capacity(bodies.len());
    for (i, body) in bodies.iter().enumerate() {
        let body = content::client_event(body, &format!("message.parts[{i}]"))?;
        events.push(NewEvent::new(session, Value::Object(body)));
    }
    let wake = Wake::subscribe(state, session).await;
    let accepted = input::submit(state, tenant, session, events).await?;
    accepted
        .first_seq()
        .map(|seq| (seq, wake))
        .ok_or_else(|| A2aError::params("message: nothing new to send (every tool answer was given before)"))
}

/// One item of a task stream.
#[derive(Debug)]
pub enum Item {
    /// A `StreamResponse`.
    Event(Value),
    /// A failure mid-stream.
    Error(A2aError),
}

/// Follows committed events: `statusUpdate` WORKING once the turn runs, and for each
/// agent message that is not the answer (the model went on to call a tool or make
/// another request); at the end the answer artifact and the final status come from
/// the task view.
struct Tracker {
    task_id: String,
    context_id: String,
    input_seq: i64,
    working: bool,
    /// The latest agent message, held until something shows it was not the answer.
    held: Option<StoredEvent>,
    /// The answer artifact as previews write it.
    live: LiveArtifact,
}

impl Tracker {
    fn working(&self, at_ms: i64, message: Option<Value>) -> Value {
        let mut status = json!({ "state": "TASK_STATE_WORKING", "timestamp": rfc3339(at_ms) });
        if let Some(message) = message {
            status["message"] = message;
        }
        json!({ "statusUpdate": { "taskId": self.task_id, "contextId": self.context_id, "status": status } })
    }

    /// The held message was not the answer: a WORKING status carries it, and the answer
    /// artifact gives it back.
    fn flush(&mut self) -> Vec<Value> {
        let Some(held) = self.held.take() else { return Vec::new() };
        let message = json!({
            "messageId": held.event_id, "contextId": self.context_id, "taskId": self.task_id,
            "role": "ROLE_AGENT", "parts": [{ "text": text_of(&held.body["content"]) }],
        });
        let mut out = self.live.not_the_answer(&held.event_id);
        out.push(self.working(held.processed_at_ms, Some(message)));
        out
    }
}

impl Translate for Tracker {
    fn translate(&mut self, event: &StoredEvent) -> (Vec<Value>, bool) {
        let mut out = Vec::new();
        match event.event_type() {
            Some(EventType::SessionStatusRunning) if !self.working => {
                self.working = true;
                out.push(self.working(event.processed_at_ms, None));
            }
            Some(EventType::AgentMessage) => {
                out.extend(self.flush());
                self.held = Some(event.clone());
            }
            Some(
                EventType::AgentToolUse
                | EventType::AgentCustomToolUse
                | EventType::AgentMcpToolUse
                | EventType::SpanModelRequestStart,
            ) => {
                out.extend(self.flush());
            }
            Some(EventType::SessionStatusIdle | EventType::SessionStatusTerminated) if event.seq > self.input_seq => {
                // A held message is the answer: the view reports it as the artifact.
                out.push(json!({ "__end": true, "__clear": self.live.holds_text() }));
                return (out, true);
            }
            _ => {}
        }
        (out, false)
    }

    fn failure(&self, message: String) -> Value {
        json!({ "__failure": message })
    }

    fn preview(&mut self, change: &Preview) -> Vec<Value> {
        self.live.preview(change)
    }

    fn settle(&mut self, event: &StoredEvent, shown: &Shown) -> (Vec<Value>, bool) {
        let mut out = self.live.settle(&event.event_id, &text_of(&event.body["content"]), shown);
        let (rest, done) = self.translate(event);
        out.extend(rest);
        (out, done)
    }
}

/// A stream of the task from `after_seq` on, `first` going out first.
pub(crate) fn stream(
    state: &AppState,
    row: A2aTask,
    (after_seq, wake): (i64, Wake),
    first: Value,
    working: bool,
) -> mpsc::Receiver<Item> {
    let tracker = Tracker {
        task_id: row.id.clone(),
        context_id: row.context_id.clone(),
        input_seq: row.input_seq,
        working,
        held: None,
        live: LiveArtifact::new(&row.id, &row.context_id),
    };
    let mut events = follow(state.clone(), row.session_id.clone(), after_seq, wake, first, tracker, |_, _| async {});
    let (tx, rx) = mpsc::channel(64);
    let state = state.clone();
    tokio::spawn(async move {
        while let Some(value) = events.recv().await {
            if let Some(message) = value["__failure"].as_str() {
                let _ = tx.send(Item::Error(A2aError::internal(message))).await;
                return;
            }
            if value.get("__end").is_none() {
                if tx.send(Item::Event(value)).await.is_err() {
                    return;
                }
                continue;
            }
            let row = match state.backends.store.a2a_get_task(&row.workspace_id, &row.id).await {
                Ok(Some(row)) => row,
                Ok(None) => return,
                Err(error) => {
                    let _ = tx.send(Item::Error(error.into())).await;
                    return;
                }
            };
            match view(&state, &row).await {
                Ok(view) => {
                    // Committed history has no answer: take back what previews showed.
                    if view.artifacts.is_empty() && value["__clear"] == true {
                        let _ = tx.send(Item::Event(super::live::emptied(&row.id, &row.context_id))).await;
                    }
                    for artifact in &view.artifacts {
                        let update = json!({ "artifactUpdate": {
                            "taskId": row.id, "contextId": row.context_id, "artifact": artifact, "lastChunk": true,
                        } });
                        let _ = tx.send(Item::Event(update)).await;
                    }
                    let update = json!({ "statusUpdate": { "taskId": row.id, "contextId": row.context_id, "status": view.status } });
                    let _ = tx.send(Item::Event(update)).await;
                }
                Err(error) => {
                    let _ = tx.send(Item::Error(error)).await;
                }
            }
            return;
        }
    });
    rx
}

fn configuration(params: &Value) -> &Value {
    &params["configuration"]
}

/// `SendMessage`: the task once it is terminal or interrupted (at once with
/// `configuration.returnImmediately`), as `{"task": …}`.
pub async fn send_message(
    state: &AppState,
    tenant: &Tenant,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    params: &Value,
) -> A2aResult<Value> {
    let history = bounds::history_length(&configuration(params)["historyLength"], "configuration.historyLength")?;
    let (row, after, wake) = send(state, tenant, endpoint, headers, params).await?;
    super::push::configure_from_send(state, tenant, &row, params).await?;
    if configuration(params)["returnImmediately"] != true {
        let mut rx = stream(state, row.clone(), (after, wake), json!({}), false);
        while let Some(item) = rx.recv().await {
            if let Item::Error(error) = item {
                return Err(error);
            }
        }
    }
    let row = load(state, tenant, &row.id).await?;
    Ok(json!({ "task": view(state, &row).await?.render(history, true) }))
}

/// `SendStreamingMessage`: the Task (SUBMITTED) first, then updates.
pub async fn send_streaming(
    state: &AppState,
    tenant: &Tenant,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    params: &Value,
) -> A2aResult<mpsc::Receiver<Item>> {
    let history = bounds::history_length(&configuration(params)["historyLength"], "configuration.historyLength")?;
    let (row, after, wake) = send(state, tenant, endpoint, headers, params).await?;
    super::push::configure_from_send(state, tenant, &row, params).await?;
    let mut current = view(state, &row).await?;
    if !is_final(current.state) {
        // The stream reports its own progress from the input on.
        current.state = "TASK_STATE_SUBMITTED";
        current.status = json!({ "state": "TASK_STATE_SUBMITTED", "timestamp": rfc3339(row.created_at_ms) });
    }
    let first = json!({ "task": current.render(history, false) });
    Ok(stream(state, row, (after, wake), first, false))
}

/// `GetTask`.
pub async fn get_task(state: &AppState, tenant: &Tenant, params: &Value) -> A2aResult<Value> {
    let id = string_param(params, "id")?;
    let history = bounds::history_length(&params["historyLength"], "historyLength")?;
    let row = load(state, tenant, id).await?;
    Ok(view(state, &row).await?.render(history, true))
}

/// `SubscribeToTask`: the current Task, then updates; -32004 when terminal.
pub async fn subscribe(state: &AppState, tenant: &Tenant, params: &Value) -> A2aResult<mpsc::Receiver<Item>> {
    let id = string_param(params, "id")?;
    let row = load(state, tenant, id).await?;
    let wake = Wake::subscribe(state, &row.session_id).await;
    let current = view(state, &row).await?;
    if is_terminal(current.state) {
        return Err(A2aError::unsupported(format!("task {id} is {}; there is nothing to subscribe to", current.state)));
    }
    let working = current.state == "TASK_STATE_WORKING";
    let first = json!({ "task": current.render(None, true) });
    Ok(stream(state, row, (current.last_seq, wake), first, working))
}

/// `CancelTask`: a durable cancel of the task's run; -32002 when terminal. Waits a
/// little for the run to settle so the answer is the canceled task.
pub async fn cancel_task(state: &AppState, tenant: &Tenant, params: &Value) -> A2aResult<Value> {
    let id = string_param(params, "id")?;
    let row = load(state, tenant, id).await?;
    let current = view(state, &row).await?;
    if is_terminal(current.state) {
        return Err(A2aError::not_cancelable(format!("task {id} is {} and cannot be canceled", current.state)));
    }
    let store = state.backends.store.as_ref();
    store.a2a_cancel_task(&row.id).await?;
    runs::cancel_open(state, &row.session_id).await?;
    let row = load(state, tenant, id).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let current = view(state, &row).await?;
        if is_terminal(current.state) || tokio::time::Instant::now() >= deadline {
            return Ok(current.render(None, true));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `ListTasks`: newest first, filtered by `contextId`, `status` and
/// `statusTimestampAfter` (inclusive, as the A2A SDKs' own task stores filter), paged by `pageSize` and `pageToken` (a token of this listing:
/// `bounds::PageTokens`); the parameters are read within their bounds by
/// `bounds::ListTasks`.
pub async fn list_tasks(state: &AppState, tenant: &Tenant, query: &ListTasks) -> A2aResult<Value> {
    let tokens = PageTokens::new(&state.secrets, &tenant.workspace_id, query);
    // A token that is not this listing's is refused before anything is read.
    let after = query.page_token.as_deref().map(|token| tokens.open(token)).transpose()?;
    let store = state.backends.store.as_ref();
    let rows = store.a2a_list_tasks(&tenant.workspace_id, query.context.as_deref(), LIST_SCAN).await?;
    // Tasks of agents A2A does not expose are not listed (their sessions' agents read
    // once per session, and only when not every agent is exposed).
    let exposure = exposure::of(store, &tenant.workspace_id, Protocol::A2a).await?;
    let mut shown: HashMap<String, bool> = HashMap::new();
    let mut views = Vec::with_capacity(rows.len());
    for row in &rows {
        let visible = match shown.get(&row.session_id) {
            Some(visible) => *visible,
            None => {
                let visible = super::view::exposed(state, row, &exposure).await?;
                shown.insert(row.session_id.clone(), visible);
                visible
            }
        };
        if !visible {
            continue;
        }
        let view = view(state, row).await?;
        if query.status.is_none_or(|s| s == view.state) && query.after_ms.is_none_or(|after| view.status_ms >= after) {
            views.push(view);
        }
    }
    // The page after the cursor's task; if that task is no longer listed, after where it
    // stood in the listing's order (creation time, then id, both descending).
    let start = match &after {
        None => 0,
        Some(cursor) => match views.iter().position(|v| v.row.id == cursor.id) {
            Some(at) => at + 1,
            None => views
                .iter()
                .position(|v| (v.row.created_at_ms, v.row.id.as_str()) < (cursor.created_at_ms, cursor.id.as_str()))
                .unwrap_or(views.len()),
        },
    };
    let page: Vec<&View> = views.iter().skip(start).take(query.page_size).collect();
    let next = match page.last() {
        Some(last) if start + page.len() < views.len() => {
            tokens.issue(&Cursor { created_at_ms: last.row.created_at_ms, id: last.row.id.clone() })
        }
        _ => String::new(),
    };
    Ok(json!({
        "tasks": page.iter().map(|v| v.render(query.history, query.artifacts)).collect::<Vec<_>>(),
        "nextPageToken": next,
        "pageSize": query.page_size,
        "totalSize": views.len(),
    }))
}

/// Parameters as an object (`{}` when absent), or -32602.
pub fn params_object(params: Option<&Value>) -> A2aResult<Value> {
    match params {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(value @ Value::Object(_)) => Ok(value.clone()),
        Some(_) => Err(A2aError::params("params: an object is required")),
    }
}
