//! A task as committed history shows it (ADR 0010): its events are the session's
//! committed events from its first input on, until the first idle or terminated status
//! after its latest input; its state, history and artifacts derive from them. Read by
//! the task operations (`tasks`) and the push watcher (`push`).

use agentd_schema::{A2aTask, EventQuery, EventType, StoredEvent, live::rfc3339};
use serde_json::{Value, json};

use super::{A2aError, A2aResult};
use crate::AppState;
use crate::adapters::text_of;
use crate::admission::Tenant;
use crate::domain::exposure::{self, Exposure, Protocol};

/// Terminal states.
pub const TERMINAL: &[&str] =
    &["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"];

/// Whether a state is terminal.
pub fn is_terminal(state: &str) -> bool {
    TERMINAL.contains(&state)
}

/// Whether a state is terminal or interrupted (a stream ends there).
pub fn is_final(state: &str) -> bool {
    is_terminal(state) || state == "TASK_STATE_INPUT_REQUIRED" || state == "TASK_STATE_AUTH_REQUIRED"
}

/// Input event types a message may carry in a data part.
pub(super) const TOOL_INPUTS: &[EventType] = &[EventType::UserToolConfirmation, EventType::UserCustomToolResult];
/// Events read per store query.
const PAGE: i64 = 500;

/// A task as committed history shows it.
#[derive(Debug, Clone)]
pub struct View {
    /// The task row.
    pub row: A2aTask,
    /// `TASK_STATE_…`.
    pub state: &'static str,
    /// `TaskStatus`.
    pub status: Value,
    /// History messages, oldest first.
    pub history: Vec<Value>,
    /// Artifacts (the answer once completed).
    pub artifacts: Vec<Value>,
    /// The last committed sequence the view covers.
    pub last_seq: i64,
    /// When the status was reached, epoch ms.
    pub status_ms: i64,
}

impl View {
    /// The ProtoJSON `Task`, with the last `history_length` messages (all when `None`).
    pub fn render(&self, history_length: Option<usize>, artifacts: bool) -> Value {
        let mut task = json!({ "id": self.row.id, "contextId": self.row.context_id, "status": self.status });
        let keep = history_length.unwrap_or(self.history.len()).min(self.history.len());
        if keep > 0 {
            task["history"] = json!(self.history[self.history.len() - keep..]);
        }
        if artifacts && !self.artifacts.is_empty() {
            task["artifacts"] = json!(self.artifacts);
        }
        task
    }
}

fn message(row: &A2aTask, id: &str, role: &str, parts: Value) -> Value {
    json!({ "messageId": id, "contextId": row.context_id, "taskId": row.id, "role": role, "parts": parts })
}

/// The task's view from committed history.
pub async fn view(state: &AppState, row: &A2aTask) -> A2aResult<View> {
    let store = state.backends.store.as_ref();
    // Read pages until the task's ending: later tasks of the context are not read.
    let mut events: Vec<StoredEvent> = Vec::new();
    loop {
        let after = events.last().map_or(row.first_seq - 1, |e| e.seq);
        // A task is the primary thread's exchange: a subagent's work is not its answer.
        let query = EventQuery {
            thread_id: Some(row.session_id.clone()),
            after_seq: Some(after),
            limit: PAGE,
            ..EventQuery::default()
        };
        let page = store.query_events(&row.session_id, &query).await?;
        let done = (page.len() as i64) < PAGE || page.iter().any(|e| ends(row, e));
        events.extend(page);
        if done {
            return Ok(derive(row, &events));
        }
    }
}

/// Whether `event` ends the task: an idle or terminated status after its latest input.
/// A cancel settles the run with one more idle, so a canceled task waiting for input
/// ends there, not at its requires_action stop.
fn ends(row: &A2aTask, event: &StoredEvent) -> bool {
    matches!(event.event_type(), Some(EventType::SessionStatusIdle | EventType::SessionStatusTerminated))
        && event.seq > row.input_seq
        && !(row.canceled && event.body["stop_reason"]["type"] == "requires_action")
}

fn derive(row: &A2aTask, events: &[StoredEvent]) -> View {
    let mut history = Vec::new();
    let mut answer: Option<&StoredEvent> = None;
    let mut running = false;
    let mut error: Option<String> = None;
    let mut end: Option<&StoredEvent> = None;
    let mut last_seq = row.first_seq - 1;
    let mut last_ms = row.created_at_ms;
    for event in events {
        if end.is_some() {
            break;
        }
        last_seq = event.seq;
        last_ms = event.processed_at_ms;
        match event.event_type() {
            Some(EventType::UserMessage) => {
                history.push(message(
                    row,
                    &event.event_id,
                    "ROLE_USER",
                    json!([{ "text": text_of(&event.body["content"]) }]),
                ));
            }
            Some(kind) if TOOL_INPUTS.contains(&kind) => {
                history.push(message(row, &event.event_id, "ROLE_USER", json!([{ "data": event.body }])));
            }
            Some(EventType::AgentMessage) => {
                history.push(message(
                    row,
                    &event.event_id,
                    "ROLE_AGENT",
                    json!([{ "text": text_of(&event.body["content"]) }]),
                ));
                answer = Some(event);
            }
            Some(EventType::SessionStatusRunning) if event.seq > row.input_seq => running = true,
            Some(EventType::SessionError) => {
                error = event.body["error"]["message"].as_str().map(str::to_owned);
            }
            _ if ends(row, event) => end = Some(event),
            _ => {}
        }
    }
    let status_ms = end.map_or(last_ms, |e| e.processed_at_ms);
    let timestamp = rfc3339(status_ms);
    let agent_note = |text: String, data: Option<Value>| {
        let mut parts = vec![json!({ "text": text })];
        if let Some(data) = data {
            parts.push(json!({ "data": data }));
        }
        message(row, &format!("{}-status-{last_seq}", row.id), "ROLE_AGENT", json!(parts))
    };
    let mut note = None;
    let state = match end {
        None if running || row.canceled => "TASK_STATE_WORKING",
        None => "TASK_STATE_SUBMITTED",
        Some(end) if end.is(EventType::SessionStatusTerminated) => {
            note = Some(agent_note(error.clone().unwrap_or_else(|| "the session was terminated".into()), None));
            "TASK_STATE_FAILED"
        }
        Some(end) => match end.body["stop_reason"]["type"].as_str() {
            Some("requires_action") => {
                let awaited = awaiting(events, &end.body["stop_reason"]["event_ids"]);
                let names: Vec<String> = awaited
                    .iter()
                    .map(|a| {
                        format!(
                            "{} of `{}` ({})",
                            a["awaiting"].as_str().unwrap_or(""),
                            a["name"].as_str().unwrap_or(""),
                            a["id"].as_str().unwrap_or("")
                        )
                    })
                    .collect();
                note = Some(agent_note(
                    format!(
                        "Input required: {}. Reply on this task with data parts carrying user.tool_confirmation or user.custom_tool_result bodies.",
                        names.join("; ")
                    ),
                    Some(json!({ "awaiting": awaited })),
                ));
                "TASK_STATE_INPUT_REQUIRED"
            }
            _ if row.canceled => "TASK_STATE_CANCELED",
            Some("end_turn") => "TASK_STATE_COMPLETED",
            Some("refusal") => {
                note = Some(agent_note("the model refused to answer".into(), None));
                "TASK_STATE_REJECTED"
            }
            Some("budget_reached") => {
                note = Some(agent_note("the session's budget is reached".into(), None));
                "TASK_STATE_FAILED"
            }
            _ => {
                note = Some(agent_note(error.clone().unwrap_or_else(|| "the turn failed".into()), None));
                "TASK_STATE_FAILED"
            }
        },
    };
    let mut status = json!({ "state": state, "timestamp": timestamp });
    if let Some(note) = note {
        status["message"] = note;
    }
    let artifacts = match (state, answer) {
        ("TASK_STATE_COMPLETED", Some(answer)) => vec![json!({
            "artifactId": super::live::artifact_id(&row.id),
            "name": "answer",
            "parts": [{ "text": text_of(&answer.body["content"]) }],
        })],
        _ => Vec::new(),
    };
    View { row: row.clone(), state, status, history, artifacts, last_seq, status_ms }
}

/// What a requires_action stop waits for: each blocking call with its kind.
fn awaiting(events: &[StoredEvent], ids: &Value) -> Vec<Value> {
    ids.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(|id| events.iter().find(|e| e.event_id == id))
        .map(|e| {
            let (awaiting, field) = if e.is(EventType::AgentCustomToolUse) {
                (EventType::UserCustomToolResult, "custom_tool_use_id")
            } else {
                (EventType::UserToolConfirmation, "tool_use_id")
            };
            json!({ "id": e.event_id, "awaiting": awaiting, "answer_field": field, "name": e.body["name"], "input": e.body["input"] })
        })
        .collect()
}

/// A task of the caller's workspace whose agent A2A exposes, or -32001: a task of an
/// agent the workspace does not expose on A2A (`domain::exposure`) is missing here.
pub async fn load(state: &AppState, tenant: &Tenant, id: &str) -> A2aResult<A2aTask> {
    let store = state.backends.store.as_ref();
    let row = store.a2a_get_task(&tenant.workspace_id, id).await?.ok_or_else(|| A2aError::task_not_found(id))?;
    let exposure = exposure::of(store, &tenant.workspace_id, Protocol::A2a).await?;
    if exposed(state, &row, &exposure).await? { Ok(row) } else { Err(A2aError::task_not_found(id)) }
}

/// Whether `exposure` (A2A's, of the task's workspace) exposes the agent of the task's
/// session. Reads the session only when not every agent is exposed.
pub async fn exposed(state: &AppState, row: &A2aTask, exposure: &Exposure) -> A2aResult<bool> {
    if exposure.is_all() {
        return Ok(true);
    }
    let session = state.backends.store.get_session(&row.workspace_id, &row.session_id).await?;
    Ok(session.and_then(|s| s.agent_id).is_some_and(|agent| exposure.exposes(&agent)))
}
