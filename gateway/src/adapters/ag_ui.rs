//! AG-UI (`@ag-ui/client` 1.0, protocol "1.0"), docs/api/ag-ui.md.
//!
//! `POST /v1/ag-ui` takes a `RunAgentInput`: `threadId` is bound to a session, frontend
//! `tools` become custom tools of the session's agent, the last message becomes input (a
//! user message, or a `tool` message answering a frontend tool call), and the turn's
//! committed events stream back as AG-UI events: `RUN_STARTED` first, every message,
//! reasoning span, tool call and step closed before `RUN_FINISHED`, failures as
//! `RUN_ERROR`, integer millisecond timestamps, no `null` optionals, `data: <json>\n\n`
//! framing without `[DONE]`. A client that disconnects mid-run interrupts it.

use agentd_schema::ids::AgentId;
use std::convert::Infallible;
use std::time::Duration;

use agentd_schema::{EventType, NewEvent, RetryStatus, Session, StoredEvent};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::follow::Kind;
use super::{Preview, Shown, Translate, Wake, follow, text_of, thread_messages};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::{DomainError, input as turns, threads};
use crate::error::{ApiError, ApiResult};
use crate::managed::{body, limits};

/// `POST /v1/ag-ui`: the agent from `forwardedProps.agent`, the body's `agent`, or the
/// `x-agentd-agent` header.
pub async fn run(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    headers: HeaderMap,
    bytes: Bytes,
) -> ApiResult<Response> {
    let input = body::object(&bytes)?;
    let agent = input
        .get("forwardedProps")
        .and_then(|props| props.get("agent"))
        .and_then(Value::as_str)
        .or(input.get("agent").and_then(Value::as_str))
        .or(headers.get("x-agentd-agent").and_then(|v| v.to_str().ok()))
        .map(str::to_owned);
    start(&state, &tenant, agent.as_deref(), &input).await
}

/// `POST /v1/ag-ui/agents/{agent_id}`.
pub async fn agent_run(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent): Path<AgentId>,
    bytes: Bytes,
) -> ApiResult<Response> {
    let input = body::object(&bytes)?;
    start(&state, &tenant, Some(&agent), &input).await
}

async fn start(
    state: &AppState,
    tenant: &Tenant,
    agent: Option<&str>,
    input: &Map<String, Value>,
) -> ApiResult<Response> {
    let thread = body::string(input.get("threadId"), "threadId", 1, 256)?;
    let run_id = body::string(input.get("runId"), "runId", 1, 256)?;
    let messages = body::array(input.get("messages"), "messages", 10_000)?;
    let Some(last) = messages.last() else {
        return Err(ApiError::invalid("messages: at least one message is required"));
    };
    let bound = match threads::session(state, tenant, &thread, agent).await {
        Ok(bound) => bound,
        Err(error) => return refused(error),
    };
    // Frontend tools change the session's agent for every later turn: that takes an API
    // key, never a browser's application access token (docs/api/app-tokens.md).
    let sends_tools = input.get("tools").and_then(Value::as_array).is_some_and(|tools| !tools.is_empty());
    if matches!(tenant.access, crate::admission::Access::App(_)) && sends_tools {
        return Err(ApiError::PermissionDenied(
            "tools: an application access token cannot change the agent's tools; send frontend tools with an API key"
                .to_owned(),
        ));
    }
    // Admitted before the run's frontend tools change the session's agent.
    if let Err(error) = turns::admit(state, tenant, &bound.session, last["role"] == "user").await {
        return refused(error);
    }
    let session = with_frontend_tools(state, tenant, bound.session, input.get("tools")).await?;
    let inputs = new_input(state, &session, last).await?;
    if inputs.is_empty() {
        return Err(ApiError::invalid("messages: the last message carries nothing new to send"));
    }
    let wake = Wake::subscribe(state, &session.id).await;
    let accepted = match turns::submit(state, tenant, &bound.id, inputs).await {
        Ok(accepted) => accepted,
        Err(error) => return refused(error),
    };
    let after_seq = accepted.first_seq().map_or(session.next_seq, |seq| seq) - 1;
    Ok(stream(state.clone(), session.id.clone(), Run { thread, run_id, after_seq, wake, input: messages.to_vec() }))
}

/// AG-UI's answer to a refused run. A session that takes no input (archived, deleted,
/// terminated, over budget, its agent or environment refusing new turns) answers the
/// way AG-UI reports a run that could not run: a stream of one `RUN_ERROR` whose `code`
/// names the reason (`runAgent` resolves and `onRunErrorEvent` fires). A malformed
/// request or a failure is the managed JSON error with its status, before any stream.
fn refused(error: DomainError) -> ApiResult<Response> {
    match error {
        DomainError::Archived(_)
        | DomainError::Deleted(_)
        | DomainError::Terminated(_)
        | DomainError::BudgetReached(_)
        | DomainError::AgentDisabled(_)
        | DomainError::AgentArchived(_)
        | DomainError::EnvironmentArchived(_) => {
            let now = crate::managed::query::now_ms();
            let event =
                json!({ "type": "RUN_ERROR", "message": error.to_string(), "code": error.code(), "timestamp": now });
            let frames =
                futures::stream::once(async move { Ok::<_, Infallible>(Event::default().data(event.to_string())) });
            let mut response = Sse::new(frames).into_response();
            response.headers_mut().insert("cache-control", HeaderValue::from_static("no-cache"));
            Ok(response)
        }
        DomainError::NotFound(_)
        | DomainError::Invalid { .. }
        | DomainError::Conflict(_)
        | DomainError::Gone(_)
        | DomainError::Expired(_)
        | DomainError::TooLarge(_)
        | DomainError::NameTaken(_)
        | DomainError::MemoryPreconditionFailed(_)
        | DomainError::MemoryPathConflict(_)
        | DomainError::Unavailable(_)
        | DomainError::Internal(_) => Err(ApiError::from(error)),
    }
}

/// Frontend tools declared by the run become custom tools of the session's agent.
async fn with_frontend_tools(
    state: &AppState,
    tenant: &Tenant,
    session: Session,
    tools: Option<&Value>,
) -> ApiResult<Session> {
    let declared = body::array(tools, "tools", 128)?;
    if declared.is_empty() {
        return Ok(session);
    }
    let mut body = session.body.clone();
    let mut tools: Vec<Value> = body["agent"]["tools"].as_array().cloned().unwrap_or_default();
    let mut changed = false;
    for (i, tool) in declared.iter().enumerate() {
        let name = body::string(tool.get("name"), &format!("tools[{i}].name"), 1, limits::MAX_TOOL_NAME_CHARS)?;
        let description = body::optional_string(
            tool.get("description"),
            &format!("tools[{i}].description"),
            limits::MAX_TOOL_DESCRIPTION_CHARS,
        )?;
        let parameters =
            body::bounded_json(&tool["parameters"], &format!("tools[{i}].parameters"), limits::MAX_INPUT_SCHEMA_BYTES)?;
        let custom = json!({
            "type": "custom",
            "name": name,
            "description": description.unwrap_or_default(),
            "input_schema": if parameters.is_object() { parameters.clone() } else { json!({ "type": "object" }) },
        });
        match tools.iter_mut().find(|t| t["type"] == "custom" && t["name"] == name.as_str()) {
            Some(existing) if *existing == custom => {}
            Some(existing) => {
                *existing = custom;
                changed = true;
            }
            None => {
                tools.push(custom);
                changed = true;
            }
        }
    }
    if !changed {
        return Ok(session);
    }
    body["agent"]["tools"] = Value::Array(tools);
    // The session's agent stays within the bound every agent has.
    let size = limits::json_bytes(&body["agent"]);
    if size > limits::MAX_AGENT_BYTES {
        return Err(ApiError::invalid(format!(
            "tools: the session's agent with these tools would be {size} bytes of JSON, at most {}",
            limits::MAX_AGENT_BYTES
        )));
    }
    let (session, _) = state.backends.store.update_session(&tenant.workspace_id, &session.id, body, Vec::new()).await?;
    Ok(session)
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The input in the last message: a user message, or a `tool` message answering an open
/// frontend (custom) tool call.
async fn new_input(state: &AppState, session: &Session, last: &Value) -> ApiResult<Vec<NewEvent>> {
    let event = |body: Value| NewEvent::new(&session.id, body);
    match last["role"].as_str() {
        Some("user") => {
            let text = content_text(&last["content"]);
            if text.is_empty() {
                return Err(ApiError::invalid("messages[-1].content: a user message needs text"));
            }
            Ok(vec![NewEvent::user_message(&session.id, &text)])
        }
        Some("tool") => {
            let call = body::string(last.get("toolCallId"), "messages[-1].toolCallId", 1, 256)?;
            let calls = turns::tool_calls(state, &session.id).await?;
            if calls.is_answered(&call) {
                return Ok(Vec::new());
            }
            if !calls.is_open(&call, EventType::AgentCustomToolUse) {
                return Err(ApiError::invalid(format!("messages[-1].toolCallId: no open frontend tool call {call}")));
            }
            let failed = last["error"].as_str().is_some_and(|e| !e.is_empty());
            let text = if failed {
                last["error"].as_str().unwrap_or_default().to_owned()
            } else {
                content_text(&last["content"])
            };
            Ok(vec![event(json!({
                "type": EventType::UserCustomToolResult, "custom_tool_use_id": call, "is_error": failed,
                "content": [{ "type": "text", "text": if text.is_empty() { "(no output)".to_owned() } else { text } }],
            }))])
        }
        _ => Err(ApiError::invalid("messages[-1].role: expected user or tool")),
    }
}

/// What a run's stream follows: the thread and run ids to echo, where its input landed,
/// the subscription taken before the input was committed, and the input messages.
struct Run {
    thread: String,
    run_id: String,
    after_seq: i64,
    wake: Wake,
    input: Vec<Value>,
}

fn stream(state: AppState, session_id: String, run: Run) -> Response {
    let Run { thread, run_id, after_seq, wake, input } = run;
    let now = crate::managed::query::now_ms();
    let started = json!({ "type": "RUN_STARTED", "threadId": thread, "runId": run_id, "timestamp": now });
    let translator =
        Translator { thread, run_id, usage: None, open_steps: Vec::new(), input, run: Vec::new(), shown: Vec::new() };
    let rx = follow(state, session_id, after_seq, wake, started, translator, |state, session| async move {
        crate::adapters::interrupt_departed(&state, &session, "AG-UI").await;
    });
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|event| Ok::<_, Infallible>(Event::default().data(event.to_string())));
    let mut response = Sse::new(frames).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response();
    response.headers_mut().insert("cache-control", HeaderValue::from_static("no-cache"));
    response
}

/// Turns committed events and live previews into AG-UI events.
///
/// A preview is a text message (or reasoning message) under the committed event's id,
/// streamed with `TEXT_MESSAGE_CONTENT`; the commit sends the missing suffix and ends
/// it. A preview the commit contradicts, or that never commits, is ended and taken
/// back with a `MESSAGES_SNAPSHOT`: the run's input messages, the messages committed
/// in this run, and the previews still open — which the client reconciles its list to.
struct Translator {
    thread: String,
    run_id: String,
    usage: Option<Value>,
    open_steps: Vec<String>,
    /// The messages of the request, as the client sent them.
    input: Vec<Value>,
    /// The agent's committed events of this run that render as messages.
    run: Vec<StoredEvent>,
    /// Previews the client holds open: id, kind and text so far.
    shown: Vec<(String, Kind, String)>,
}

impl Translate for Translator {
    fn failure(&self, message: String) -> Value {
        json!({ "type": "RUN_ERROR", "message": message, "code": "unavailable" })
    }

    fn translate(&mut self, event: &StoredEvent) -> (Vec<Value>, bool) {
        if event.is_agent_event() {
            self.run.push(event.clone());
        }
        self.events(event)
    }

    fn preview(&mut self, change: &Preview) -> Vec<Value> {
        let at = |mut value: Value| {
            value["timestamp"] = json!(crate::managed::query::now_ms());
            value
        };
        match change {
            Preview::Open { id, kind } => {
                self.shown.push((id.clone(), *kind, String::new()));
                match kind {
                    Kind::Message => {
                        vec![at(json!({ "type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant" }))]
                    }
                    Kind::Thinking => vec![
                        at(json!({ "type": "REASONING_START", "messageId": id })),
                        at(json!({ "type": "REASONING_MESSAGE_START", "messageId": id, "role": "reasoning" })),
                    ],
                }
            }
            Preview::Delta { id, kind, delta, text } => {
                let Some(open) = self.shown.iter_mut().find(|(open, ..)| open == id) else { return Vec::new() };
                open.2.clone_from(text);
                let kind = if *kind == Kind::Thinking { "REASONING_MESSAGE_CONTENT" } else { "TEXT_MESSAGE_CONTENT" };
                vec![at(json!({ "type": kind, "messageId": id, "delta": delta }))]
            }
            Preview::Drop { id, kind, .. } => {
                let Some(i) = self.shown.iter().position(|(open, ..)| open == id) else { return Vec::new() };
                self.shown.remove(i);
                let mut out = end(id, *kind);
                if *kind == Kind::Message {
                    out.push(self.snapshot());
                }
                out.into_iter().map(at).collect()
            }
        }
    }

    fn settle(&mut self, event: &StoredEvent, shown: &Shown) -> (Vec<Value>, bool) {
        let Some(i) = self.shown.iter().position(|(open, ..)| *open == event.event_id) else {
            return self.translate(event);
        };
        let (id, kind, _) = self.shown.remove(i);
        self.run.push(event.clone());
        let at = |mut value: Value| {
            value["timestamp"] = json!(event.processed_at_ms);
            value
        };
        let mut out = Vec::new();
        match shown {
            Shown::Prefix { rest } if !rest.is_empty() => {
                let content = if kind == Kind::Thinking { "REASONING_MESSAGE_CONTENT" } else { "TEXT_MESSAGE_CONTENT" };
                out.push(json!({ "type": content, "messageId": id, "delta": rest }));
                out.extend(end(&id, kind));
            }
            Shown::Prefix { .. } | Shown::Nothing => out.extend(end(&id, kind)),
            Shown::Diverged { .. } => {
                out.extend(end(&id, kind));
                if kind == Kind::Message {
                    out.push(self.snapshot());
                }
            }
        }
        (out.into_iter().map(at).collect(), false)
    }
}

/// The events that close a preview on the client.
fn end(id: &str, kind: Kind) -> Vec<Value> {
    match kind {
        Kind::Message => vec![json!({ "type": "TEXT_MESSAGE_END", "messageId": id })],
        Kind::Thinking => vec![
            json!({ "type": "REASONING_MESSAGE_END", "messageId": id }),
            json!({ "type": "REASONING_END", "messageId": id }),
        ],
    }
}

impl Translator {
    /// The client's whole message list as committed history has it: the request's
    /// messages, this run's committed messages, then the previews still open.
    fn snapshot(&self) -> Value {
        let mut messages = self.input.clone();
        messages.extend(agui_messages(&self.run));
        for (id, kind, text) in &self.shown {
            if *kind == Kind::Message {
                messages.push(json!({ "id": id, "role": "assistant", "content": text }));
            }
        }
        json!({ "type": "MESSAGES_SNAPSHOT", "messages": messages })
    }

    fn events(&mut self, event: &StoredEvent) -> (Vec<Value>, bool) {
        let id = event.event_id.as_str();
        let body = &event.body;
        let at = |mut value: Value| {
            value["timestamp"] = json!(event.processed_at_ms);
            value
        };
        let mut out = Vec::new();
        match event.event_type() {
            Some(EventType::SpanModelRequestStart) => {
                self.open_steps.push(id.to_owned());
                out.push(at(json!({ "type": "STEP_STARTED", "stepName": id })));
            }
            Some(EventType::SpanModelRequestEnd) => {
                let start = body["model_request_start_id"].as_str().unwrap_or_default();
                if let Some(i) = self.open_steps.iter().position(|s| s == start) {
                    self.open_steps.remove(i);
                    out.push(at(json!({ "type": "STEP_FINISHED", "stepName": start })));
                }
            }
            Some(EventType::AgentMessage) => {
                out.push(at(json!({ "type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant" })));
                out.push(at(
                    json!({ "type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": text_of(&body["content"]) }),
                ));
                out.push(at(json!({ "type": "TEXT_MESSAGE_END", "messageId": id })));
            }
            Some(EventType::AgentThinking) => {
                out.push(at(json!({ "type": "REASONING_START", "messageId": id })));
                out.push(at(json!({ "type": "REASONING_MESSAGE_START", "messageId": id, "role": "reasoning" })));
                out.push(at(json!({ "type": "REASONING_MESSAGE_END", "messageId": id })));
                out.push(at(json!({ "type": "REASONING_END", "messageId": id })));
            }
            Some(EventType::AgentCustomToolUse | EventType::AgentToolUse | EventType::AgentMcpToolUse) => {
                out.push(at(json!({ "type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": body["name"] })));
                out.push(at(json!({ "type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": body["input"].to_string() })));
                out.push(at(json!({ "type": "TOOL_CALL_END", "toolCallId": id })));
            }
            Some(EventType::AgentToolResult | EventType::AgentMcpToolResult) => {
                let call = body["tool_use_id"].as_str().or(body["mcp_tool_use_id"].as_str()).unwrap_or_default();
                out.push(at(json!({
                    "type": "TOOL_CALL_RESULT", "messageId": id, "toolCallId": call,
                    "content": text_of(&body["content"]), "role": "tool",
                })));
            }
            // A subagent's turn is a step named after its agent and thread.
            Some(EventType::SessionThreadStatusRunning) => {
                let step = thread_step(event);
                if !self.open_steps.contains(&step) {
                    self.open_steps.push(step.clone());
                    out.push(at(json!({ "type": "STEP_STARTED", "stepName": step })));
                }
            }
            Some(EventType::SessionThreadStatusIdle | EventType::SessionThreadStatusTerminated) => {
                let step = thread_step(event);
                if let Some(i) = self.open_steps.iter().position(|s| *s == step) {
                    self.open_steps.remove(i);
                    out.push(at(json!({ "type": "STEP_FINISHED", "stepName": step })));
                }
            }
            Some(EventType::SessionUsage) => self.usage = Some(body["usage"].clone()),
            Some(EventType::SessionError) if RetryStatus::of(body) == Some(RetryStatus::Exhausted) => {
                out.extend(self.close_steps(event.processed_at_ms));
                let message = body["error"]["message"].as_str().unwrap_or("the run failed");
                out.push(at(json!({ "type": "RUN_ERROR", "message": message, "code": body["error"]["type"] })));
                return (out, true);
            }
            Some(EventType::SessionStatusIdle | EventType::SessionStatusTerminated) => {
                out.extend(self.close_steps(event.processed_at_ms));
                let mut finished = json!({ "type": "RUN_FINISHED", "threadId": self.thread, "runId": self.run_id });
                if let Some(pending) = body["stop_reason"]["event_ids"].as_array().filter(|ids| !ids.is_empty()) {
                    finished["outcome"] = json!({ "type": "success", "pendingToolCallIds": pending });
                }
                if let Some(usage) = &self.usage {
                    finished["usage"] = json!([{
                        "inputTokens": usage["input_tokens"], "outputTokens": usage["output_tokens"],
                    }]);
                }
                out.push(at(finished));
                return (out, true);
            }
            _ => {}
        }
        (out, false)
    }
}

/// The AG-UI step of a subagent's turn: `<agent name> (<sthr_…>)`, unique while two
/// threads run the same agent.
fn thread_step(event: &StoredEvent) -> String {
    format!("{} ({})", event.body["agent_name"].as_str().unwrap_or("subagent"), event.thread_id)
}

impl Translator {
    /// Closes every step still open (before the run ends).
    fn close_steps(&mut self, at: i64) -> Vec<Value> {
        self.open_steps
            .drain(..)
            .map(|step| json!({ "type": "STEP_FINISHED", "stepName": step, "timestamp": at }))
            .collect()
    }
}

/// `GET /v1/ag-ui/threads/{thread_id}/messages`: committed history as AG-UI messages
/// (oldest first, ≤ 100 per page, `page` cursor).
pub async fn messages(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread): Path<String>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    Ok(Json(thread_messages(&state, &tenant, &thread, &uri, agui_messages).await?))
}

fn agui_messages(events: &[StoredEvent]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for event in events {
        let body = &event.body;
        match event.event_type() {
            Some(EventType::UserMessage) => out.push(json!({ "id": event.event_id, "role": "user", "content": text_of(&body["content"]) })),
            Some(EventType::AgentMessage) => {
                out.push(json!({ "id": event.event_id, "role": "assistant", "content": text_of(&body["content"]) }))
            }
            Some(EventType::AgentCustomToolUse | EventType::AgentToolUse | EventType::AgentMcpToolUse) => out.push(json!({
                "id": format!("{}-call", event.event_id), "role": "assistant",
                "toolCalls": [{ "id": event.event_id, "type": "function", "function": { "name": body["name"], "arguments": body["input"].to_string() } }],
            })),
            Some(EventType::AgentToolResult | EventType::AgentMcpToolResult | EventType::UserCustomToolResult) => {
                let call = body["tool_use_id"].as_str().or(body["mcp_tool_use_id"].as_str()).or(body["custom_tool_use_id"].as_str()).unwrap_or_default();
                let mut message = json!({ "id": event.event_id, "role": "tool", "toolCallId": call, "content": text_of(&body["content"]) });
                if body["is_error"] == true {
                    message["error"] = json!(text_of(&body["content"]));
                }
                out.push(message);
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translator() -> Translator {
        Translator {
            thread: "t".into(),
            run_id: "r".into(),
            usage: None,
            open_steps: Vec::new(),
            input: vec![json!({ "id": "u1", "role": "user", "content": "hi" })],
            run: Vec::new(),
            shown: Vec::new(),
        }
    }

    fn message(id: &str, text: &str) -> StoredEvent {
        StoredEvent {
            session_id: "sesn_1".into(),
            seq: 1,
            event_id: id.into(),
            thread_id: "sesn_1".into(),
            kind: "agent.message".into(),
            body: json!({ "type": "agent.message", "content": [{ "type": "text", "text": text }] }),
            processed_at_ms: 5,
        }
    }

    fn preview(translator: &mut Translator, id: &str, text: &str) {
        translator.preview(&Preview::Open { id: id.into(), kind: Kind::Message });
        let delta = Preview::Delta { id: id.into(), kind: Kind::Message, delta: text.into(), text: text.into() };
        assert_eq!(translator.preview(&delta)[0]["type"], "TEXT_MESSAGE_CONTENT");
    }

    fn types(events: &[Value]) -> Vec<&str> {
        events.iter().map(|e| e["type"].as_str().unwrap_or_default()).collect()
    }

    #[test]
    fn a_subagents_turn_is_a_step_named_after_its_agent_and_thread() {
        let mut translator = translator();
        let status = |kind: &str, thread: &str| StoredEvent {
            thread_id: thread.into(),
            kind: kind.into(),
            body: json!({ "type": kind, "agent_name": "researcher" }),
            ..message("sevt_t", "")
        };
        let (out, done) = translator.events(&status("session.thread_status_running", "sthr_a"));
        assert!(!done);
        assert_eq!(out[0]["type"], "STEP_STARTED");
        assert_eq!(out[0]["stepName"], "researcher (sthr_a)");
        let (out, _) = translator.events(&status("session.thread_status_running", "sthr_b"));
        assert_eq!(out[0]["stepName"], "researcher (sthr_b)", "two threads of one agent are two steps");
        let (out, done) = translator.events(&status("session.thread_status_idle", "sthr_a"));
        assert!(!done, "a subagent's idle never ends the run");
        assert_eq!(types(&out), ["STEP_FINISHED"]);
        assert_eq!(out[0]["stepName"], "researcher (sthr_a)");
        // The run's end closes the step still open.
        assert_eq!(translator.close_steps(9)[0]["stepName"], "researcher (sthr_b)");
    }

    #[test]
    fn a_commit_sends_the_rest_of_its_preview() {
        let mut translator = translator();
        preview(&mut translator, "x", "Hel");
        let (out, _) = translator.settle(&message("x", "Hello"), &Shown::Prefix { rest: "lo".into() });
        assert_eq!(types(&out), ["TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]);
        assert_eq!(out[0]["delta"], "lo");
    }

    #[test]
    fn a_divergent_or_dropped_preview_is_corrected_by_a_snapshot_of_committed_messages() {
        let mut translator = translator();
        preview(&mut translator, "x", "Goodbye");
        preview(&mut translator, "y", "Still going");
        let (out, _) = translator.settle(&message("x", "Good day"), &Shown::Diverged { shown: "Goodbye".into() });
        assert_eq!(types(&out), ["TEXT_MESSAGE_END", "MESSAGES_SNAPSHOT"]);
        assert_eq!(
            out[1]["messages"],
            json!([
                { "id": "u1", "role": "user", "content": "hi" },
                { "id": "x", "role": "assistant", "content": "Good day" },
                { "id": "y", "role": "assistant", "content": "Still going" },
            ])
        );
        let out =
            translator.preview(&Preview::Drop { id: "y".into(), kind: Kind::Message, shown: "Still going".into() });
        assert_eq!(types(&out), ["TEXT_MESSAGE_END", "MESSAGES_SNAPSHOT"]);
        assert_eq!(
            out[1]["messages"],
            json!([{ "id": "u1", "role": "user", "content": "hi" }, { "id": "x", "role": "assistant", "content": "Good day" }])
        );
    }
}
