//! The AI SDK UI message stream (`ai` 7.x `DefaultChatTransport`), docs/api/ai-sdk.md.
//!
//! `POST /v1/ai-sdk/chat` takes the body the transport sends (`id` = thread id, the full
//! `messages`, `trigger`), turns what is new in it into session input (a user message,
//! client-side tool outputs, approval responses), commits it like `events.send`, and
//! streams the turn's committed events as UI message chunks until the session idles.
//! Chunks follow the order the client enforces, optional fields are omitted (never
//! `null`), framing is `data: <json>\n\n` with a final `data: [DONE]`.

use agentd_schema::ids::AgentId;
use std::collections::HashSet;
use std::convert::Infallible;
use std::time::Duration;

use agentd_schema::{EventQuery, EventType, NewEvent, RetryStatus, Session, StoredEvent};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::follow::Kind;
use super::{Preview, Shown, Translate, Wake, follow, text_of, thread_messages};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::{input, threads};
use crate::error::{ApiError, ApiResult};
use crate::managed::body;

/// `POST /v1/ai-sdk/chat`: the agent from the body's `agent` or `x-agentd-agent`.
pub async fn chat(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    headers: HeaderMap,
    bytes: Bytes,
) -> ApiResult<Response> {
    let request = body::object(&bytes)?;
    let thread = body::string(request.get("id"), "id", 1, 256)?;
    let agent = agent_of(&request, &headers)?;
    run(&state, &tenant, &thread, agent.as_deref(), &request).await
}

/// `POST /v1/ai-sdk/threads/{thread_id}/runs`: the same body; the thread from the path.
pub async fn thread_run(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> ApiResult<Response> {
    let request = body::object(&bytes)?;
    let agent = agent_of(&request, &headers)?;
    run(&state, &tenant, &thread, agent.as_deref(), &request).await
}

/// `POST /v1/ai-sdk/agents/{agent_id}/runs`: the agent from the path, the thread from `id`.
pub async fn agent_run(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent): Path<AgentId>,
    bytes: Bytes,
) -> ApiResult<Response> {
    let request = body::object(&bytes)?;
    let thread = body::string(request.get("id"), "id", 1, 256)?;
    run(&state, &tenant, &thread, Some(&agent), &request).await
}

fn agent_of(request: &Map<String, Value>, headers: &HeaderMap) -> ApiResult<Option<String>> {
    if let Some(agent) = body::optional_string(request.get("agent"), "agent", 256)? {
        return Ok(Some(agent));
    }
    Ok(headers.get("x-agentd-agent").and_then(|v| v.to_str().ok()).map(str::to_owned))
}

async fn run(
    state: &AppState,
    tenant: &Tenant,
    thread: &str,
    agent: Option<&str>,
    request: &Map<String, Value>,
) -> ApiResult<Response> {
    let messages = body::array(request.get("messages"), "messages", 10_000)?;
    let Some(last) = messages.last() else {
        return Err(ApiError::invalid("messages: at least one message is required"));
    };
    let bound = threads::session(state, tenant, thread, agent).await?;
    let inputs = new_input(state, &bound.session, last).await?;
    if inputs.is_empty() {
        return Err(ApiError::invalid("messages: the last message carries nothing new to send"));
    }
    let continuation = last["role"] == "assistant";
    let wake = Wake::subscribe(state, &bound.session.id).await;
    let accepted = input::submit(state, tenant, &bound.id, inputs).await?;
    let after_seq = accepted.first_seq().map_or(bound.session.next_seq, |seq| seq) - 1;
    Ok(stream(state.clone(), bound.session.id.clone(), after_seq, wake, Leaving::Interrupts { continuation }))
}

/// The session input in the client's last message: a user message's text, or, on an
/// assistant message, outputs of client-side tools and approval responses for calls
/// that are still open.
async fn new_input(state: &AppState, session: &Session, last: &Value) -> ApiResult<Vec<NewEvent>> {
    let event = |body: Value| NewEvent::new(&session.id, body);
    match last["role"].as_str() {
        Some("user") => {
            let text = text_of(&last["parts"]);
            if text.is_empty() {
                return Err(ApiError::invalid("messages[-1].parts: a user message needs a text part"));
            }
            Ok(vec![NewEvent::user_message(&session.id, &text)])
        }
        Some("assistant") => {
            let calls = input::tool_calls(state, &session.id).await?;
            let mut inputs = Vec::new();
            for part in last["parts"].as_array().into_iter().flatten() {
                let Some(id) = part["toolCallId"].as_str() else { continue };
                match part["state"].as_str() {
                    Some("output-available" | "output-error") if calls.is_open(id, EventType::AgentCustomToolUse) => {
                        let failed = part["state"] == "output-error";
                        let text = if failed {
                            part["errorText"].as_str().unwrap_or("the tool failed").to_owned()
                        } else {
                            match &part["output"] {
                                Value::String(text) => text.clone(),
                                other => other.to_string(),
                            }
                        };
                        inputs.push(event(json!({
                            "type": EventType::UserCustomToolResult, "custom_tool_use_id": id, "is_error": failed,
                            "content": [{ "type": "text", "text": text }],
                        })));
                    }
                    Some("approval-responded" | "output-denied") if calls.is_open(id, EventType::AgentToolUse) => {
                        let approved = part["approval"]["approved"].as_bool().unwrap_or(false);
                        let mut confirmation = json!({
                            "type": EventType::UserToolConfirmation, "tool_use_id": id,
                            "result": if approved { "allow" } else { "deny" },
                        });
                        if let Some(reason) = part["approval"]["reason"].as_str().filter(|_| !approved) {
                            confirmation["deny_message"] = json!(reason);
                        }
                        inputs.push(event(confirmation));
                    }
                    _ => {}
                }
            }
            Ok(inputs)
        }
        _ => Err(ApiError::invalid("messages[-1].role: expected user or assistant")),
    }
}

/// What a stream's client leaving mid-turn does.
#[derive(Clone, Copy)]
enum Leaving {
    /// The stream of the request that sent the input (`continuation`: it continues an
    /// assistant message): the client stopped the turn (`stop()` aborts the request) or
    /// lost it, so the turn is interrupted (`user.interrupt`; committed history stays),
    /// as the AI SDK's own servers stop generating when the request's signal aborts.
    Interrupts { continuation: bool },
    /// A resumed stream (`GET …/stream`) only watches a turn that another request or
    /// surface started: leaving it changes nothing.
    Watches,
}

/// Streams committed events after `after_seq` as UI message chunks until the session
/// idles. Reads the store on every bus notification (and every 500 ms), so nothing
/// committed is missed and nothing is sent twice.
fn stream(state: AppState, session_id: String, after_seq: i64, wake: Wake, leaving: Leaving) -> Response {
    let mut start = json!({ "type": "start" });
    if !matches!(leaving, Leaving::Interrupts { continuation: true }) {
        start["messageId"] = json!(agentd_schema::ids::new_id("msg"));
    }
    let rx = follow(state, session_id, after_seq, wake, start, Chunker::default(), move |state, session| async move {
        if let Leaving::Interrupts { .. } = leaving {
            crate::adapters::interrupt_departed(&state, &session, "AI SDK").await;
        }
    });
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|chunk| Ok::<_, Infallible>(Event::default().data(chunk.to_string())))
        .chain(futures::stream::once(async { Ok(Event::default().data("[DONE]")) }));
    let mut response = Sse::new(frames).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response();
    let headers = response.headers_mut();
    headers.insert("x-vercel-ai-ui-message-stream", HeaderValue::from_static("v1"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    response
}

/// Turns committed events and live previews into chunks, keeping the step and usage
/// state of one stream.
///
/// A preview opens its text (or reasoning) part with the committed event's id and
/// streams `text-delta`s into it; the commit completes it with the missing suffix. A
/// preview that the commit contradicts, or that never commits, is taken back with
/// `reset-step` (the client removes the step's parts) and the step's committed parts
/// are sent again: previews live only inside a step, and a step's outputs are committed
/// together at its end, so the replay is exactly the committed step so far.
#[derive(Default)]
struct Chunker {
    in_step: bool,
    usage: Option<Value>,
    /// Previews whose part the client holds open.
    shown: HashSet<String>,
    /// The chunks of the current step's committed events, to send again after a reset.
    step: Vec<Value>,
}

impl Chunker {
    /// The chunks of a committed message or thinking block, whole.
    fn whole(event: &StoredEvent) -> Vec<Value> {
        let id = event.event_id.as_str();
        if event.is(EventType::AgentThinking) {
            return vec![json!({ "type": "reasoning-start", "id": id }), json!({ "type": "reasoning-end", "id": id })];
        }
        vec![
            json!({ "type": "text-start", "id": id }),
            json!({ "type": "text-delta", "id": id, "delta": text_of(&event.body["content"]) }),
            json!({ "type": "text-end", "id": id }),
        ]
    }

    /// Takes back every preview of the step: `reset-step`, then its committed parts again.
    fn reset(&mut self) -> Vec<Value> {
        self.shown.clear();
        let mut out = vec![json!({ "type": "reset-step" })];
        out.extend(self.step.iter().cloned());
        out
    }

    fn chunks(&mut self, event: &StoredEvent) -> (Vec<Value>, bool) {
        let id = event.event_id.as_str();
        let body = &event.body;
        let mut out = Vec::new();
        match event.event_type() {
            Some(EventType::SpanModelRequestStart) => {
                self.in_step = true;
                self.step.clear();
                out.push(json!({ "type": "start-step" }));
            }
            Some(EventType::SpanModelRequestEnd) if std::mem::take(&mut self.in_step) => {
                out.push(json!({ "type": "finish-step" }));
            }
            Some(EventType::AgentMessage | EventType::AgentThinking) => out.extend(Self::whole(event)),
            Some(EventType::AgentCustomToolUse) => out.push(json!({
                "type": "tool-input-available", "toolCallId": id, "toolName": body["name"], "input": body["input"],
            })),
            Some(EventType::AgentToolUse | EventType::AgentMcpToolUse) => {
                out.push(json!({
                    "type": "tool-input-available", "toolCallId": id, "toolName": body["name"],
                    "input": body["input"], "dynamic": true,
                }));
                if body["evaluated_permission"] == "ask" {
                    out.push(json!({ "type": "tool-approval-request", "approvalId": id, "toolCallId": id }));
                }
            }
            Some(EventType::AgentToolResult | EventType::AgentMcpToolResult) => {
                let call = body["tool_use_id"].as_str().or(body["mcp_tool_use_id"].as_str()).unwrap_or_default();
                if body["is_error"] == true {
                    out.push(json!({
                        "type": "tool-output-error", "toolCallId": call, "errorText": text_of(&body["content"]), "dynamic": true,
                    }));
                } else {
                    out.push(json!({
                        "type": "tool-output-available", "toolCallId": call, "output": text_of(&body["content"]), "dynamic": true,
                    }));
                }
            }
            Some(
                EventType::SessionThreadStatusRunning
                | EventType::SessionThreadStatusIdle
                | EventType::SessionThreadStatusRescheduled
                | EventType::SessionThreadStatusTerminated,
            ) => out.push(thread_part(event)),
            Some(EventType::SessionUsage) => self.usage = Some(body["usage"].clone()),
            Some(EventType::SessionError) if RetryStatus::of(body) == Some(RetryStatus::Exhausted) => {
                let message = body["error"]["message"].as_str().unwrap_or("the turn failed");
                out.push(json!({ "type": "error", "errorText": message }));
                return (out, true);
            }
            Some(EventType::SessionStatusIdle | EventType::SessionStatusTerminated) => {
                if std::mem::take(&mut self.in_step) {
                    out.push(json!({ "type": "finish-step" }));
                }
                let reason = match body["stop_reason"]["type"].as_str() {
                    Some("end_turn") => "stop",
                    Some("requires_action") => "tool-calls",
                    Some("budget_reached") => "length",
                    Some("refusal") => "content-filter",
                    Some("retries_exhausted") => "error",
                    _ => "other",
                };
                let mut finish = json!({ "type": "finish", "finishReason": reason });
                if let Some(usage) = &self.usage {
                    finish["messageMetadata"] = json!({ "usage": {
                        "inputTokens": usage["input_tokens"], "outputTokens": usage["output_tokens"],
                    } });
                }
                out.push(finish);
                return (out, true);
            }
            _ => {}
        }
        (out, false)
    }
}

/// A subagent's status as an AI SDK data part (docs/api/multiagent.md): one part per
/// session thread, reconciled by its id, so a UI shows each subagent's latest state.
fn thread_part(event: &StoredEvent) -> Value {
    let status = event.kind.strip_prefix("session.thread_status_").unwrap_or_default();
    json!({
        "type": "data-session-thread",
        "id": event.thread_id,
        "data": {
            "session_thread_id": event.thread_id,
            "agent_name": event.body["agent_name"],
            "status": status,
            "stop_reason": event.body.get("stop_reason").cloned().unwrap_or(Value::Null),
        },
    })
}

impl Translate for Chunker {
    fn failure(&self, message: String) -> Value {
        json!({ "type": "error", "errorText": message })
    }

    fn translate(&mut self, event: &StoredEvent) -> (Vec<Value>, bool) {
        let (out, done) = self.chunks(event);
        if self.in_step && !event.is(EventType::SpanModelRequestStart) {
            self.step.extend(out.iter().cloned());
        }
        (out, done)
    }

    fn preview(&mut self, change: &Preview) -> Vec<Value> {
        match change {
            // Outside a step there is nothing `reset-step` could take back: the commit shows it.
            Preview::Open { id, kind } if self.in_step => {
                self.shown.insert(id.clone());
                let kind = if *kind == Kind::Thinking { "reasoning-start" } else { "text-start" };
                vec![json!({ "type": kind, "id": id })]
            }
            Preview::Delta { id, kind, delta, .. } if self.shown.contains(id) => {
                let kind = if *kind == Kind::Thinking { "reasoning-delta" } else { "text-delta" };
                vec![json!({ "type": kind, "id": id, "delta": delta })]
            }
            Preview::Drop { id, .. } if self.shown.contains(id) => self.reset(),
            _ => Vec::new(),
        }
    }

    fn settle(&mut self, event: &StoredEvent, shown: &Shown) -> (Vec<Value>, bool) {
        if !self.shown.remove(&event.event_id) {
            return self.translate(event);
        }
        let whole = Self::whole(event);
        let out = match shown {
            Shown::Prefix { rest } => {
                let id = event.event_id.as_str();
                let thinking = event.is(EventType::AgentThinking);
                let mut out = Vec::new();
                if !rest.is_empty() {
                    let kind = if thinking { "reasoning-delta" } else { "text-delta" };
                    out.push(json!({ "type": kind, "id": id, "delta": rest }));
                }
                out.push(json!({ "type": if thinking { "reasoning-end" } else { "text-end" }, "id": id }));
                out
            }
            Shown::Diverged { .. } | Shown::Nothing => {
                let mut out = self.reset();
                out.extend(whole.iter().cloned());
                out
            }
        };
        self.step.extend(whole);
        (out, false)
    }
}

/// `GET /v1/ai-sdk/chat/{chat_id}/stream`: 204 when the thread has no turn under way,
/// otherwise the current turn from its start (the client replays it).
pub async fn resume(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread): Path<String>,
) -> ApiResult<Response> {
    let store = state.backends.store.as_ref();
    // The one binding lookup, which also authorizes the session for the credential.
    let Some(session_id) = crate::domain::threads::bound(&state, &tenant, &thread).await? else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let wake = Wake::subscribe(&state, &session_id).await;
    let session = crate::managed::sessions::load(store, &tenant, &session_id).await?;
    if session.status != "running" && session.status != "rescheduling" {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let query = EventQuery {
        types: [EventType::UserMessage, EventType::UserCustomToolResult, EventType::UserToolConfirmation]
            .map(|kind| kind.as_str().to_owned())
            .to_vec(),
        limit: 1,
        descending: true,
        ..EventQuery::default()
    };
    let input = store.query_events(&session.id, &query).await?;
    let after = input.first().map_or(0, |e| e.seq);
    Ok(stream(state.clone(), session.id, after, wake, Leaving::Watches))
}

/// `GET /v1/ai-sdk/threads/{thread_id}/messages`: committed history as UIMessages,
/// oldest first, `limit` (≤ 100) per page with a `page` cursor.
pub async fn messages(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(thread): Path<String>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    Ok(Json(thread_messages(&state, &tenant, &thread, &uri, ui_messages).await?))
}

/// Groups committed events into UIMessages: each user message, then one assistant
/// message per stretch of agent events (tool parts carry their final state).
fn ui_messages(events: &[StoredEvent]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut assistant: Option<Value> = None;
    let flush = |assistant: &mut Option<Value>, out: &mut Vec<Value>| {
        if let Some(message) = assistant.take().filter(|m| m["parts"].as_array().is_some_and(|p| !p.is_empty())) {
            out.push(message);
        }
    };
    for event in events {
        let body = &event.body;
        let kind = event.event_type();
        match kind {
            Some(EventType::UserMessage) => {
                flush(&mut assistant, &mut out);
                out.push(json!({ "id": event.event_id, "role": "user", "parts": [{ "type": "text", "text": text_of(&body["content"]) }] }));
            }
            // Every `agent.*` event (known to this version or not) belongs to the assistant's turn.
            _ if event.is_agent_event() || kind == Some(EventType::SpanModelRequestStart) => {
                let message =
                    assistant.get_or_insert_with(|| json!({ "id": event.event_id, "role": "assistant", "parts": [] }));
                let parts = message["parts"].as_array_mut().expect("parts");
                match kind {
                    Some(EventType::SpanModelRequestStart) => parts.push(json!({ "type": "step-start" })),
                    Some(EventType::AgentMessage) => parts.push(json!({ "type": "text", "text": text_of(&body["content"]), "state": "done" })),
                    Some(EventType::AgentCustomToolUse) => parts.push(json!({
                        "type": format!("tool-{}", body["name"].as_str().unwrap_or("tool")), "toolCallId": event.event_id,
                        "state": "input-available", "input": body["input"],
                    })),
                    Some(EventType::AgentToolUse | EventType::AgentMcpToolUse) => parts.push(json!({
                        "type": "dynamic-tool", "toolName": body["name"], "toolCallId": event.event_id,
                        "state": "input-available", "input": body["input"],
                    })),
                    Some(EventType::AgentToolResult | EventType::AgentMcpToolResult) => {
                        let call = body["tool_use_id"].as_str().or(body["mcp_tool_use_id"].as_str()).unwrap_or_default();
                        if let Some(part) = parts.iter_mut().find(|p| p["toolCallId"] == call) {
                            if body["is_error"] == true {
                                part["state"] = json!("output-error");
                                part["errorText"] = json!(text_of(&body["content"]));
                            } else {
                                part["state"] = json!("output-available");
                                part["output"] = json!(text_of(&body["content"]));
                            }
                        }
                    }
                    _ => {}
                }
            }
            Some(EventType::UserCustomToolResult) => {
                let call = body["custom_tool_use_id"].as_str().unwrap_or_default();
                let part = assistant
                    .as_mut()
                    .and_then(|m| m["parts"].as_array_mut())
                    .and_then(|parts| parts.iter_mut().find(|p| p["toolCallId"] == call));
                if let Some(part) = part {
                    part["state"] = json!("output-available");
                    part["output"] = json!(text_of(&body["content"]));
                }
            }
            _ => {}
        }
    }
    flush(&mut assistant, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, id: &str, text: &str) -> StoredEvent {
        StoredEvent {
            session_id: "sesn_1".into(),
            seq: 1,
            event_id: id.into(),
            thread_id: "sesn_1".into(),
            kind: kind.into(),
            body: json!({ "type": kind, "content": [{ "type": "text", "text": text }] }),
            processed_at_ms: 0,
        }
    }

    fn open(id: &str) -> Preview {
        Preview::Open { id: id.into(), kind: Kind::Message }
    }

    fn delta(id: &str, delta: &str) -> Preview {
        Preview::Delta { id: id.into(), kind: Kind::Message, delta: delta.into(), text: delta.into() }
    }

    #[test]
    fn a_subagents_status_is_a_data_part_reconciled_by_its_thread() {
        let mut chunker = Chunker::default();
        let mut status = |kind: &str, body: Value| {
            let mut event = event(kind, "sevt_t", "");
            event.thread_id = "sthr_a".into();
            event.body = body;
            chunker.translate(&event)
        };
        let (out, done) = status("session.thread_status_running", json!({ "agent_name": "researcher" }));
        assert!(!done, "a subagent's status never ends the primary's stream");
        assert_eq!(
            out,
            [json!({ "type": "data-session-thread", "id": "sthr_a", "data": {
                "session_thread_id": "sthr_a", "agent_name": "researcher", "status": "running", "stop_reason": null,
            } })]
        );
        let (out, done) = status(
            "session.thread_status_idle",
            json!({ "agent_name": "researcher", "stop_reason": { "type": "end_turn" } }),
        );
        assert!(!done);
        assert_eq!(out[0]["id"], "sthr_a");
        assert_eq!(out[0]["data"]["status"], "idle");
        assert_eq!(out[0]["data"]["stop_reason"]["type"], "end_turn");
    }

    #[test]
    fn previews_stream_deltas_the_commit_sends_the_rest_and_a_divergent_one_resets_the_step() {
        let mut chunker = Chunker::default();
        chunker.translate(&event("span.model_request_start", "sevt_s", ""));
        assert_eq!(chunker.preview(&open("x")), [json!({ "type": "text-start", "id": "x" })]);
        assert_eq!(chunker.preview(&delta("x", "Hel")), [json!({ "type": "text-delta", "id": "x", "delta": "Hel" })]);
        let (out, done) = chunker.settle(&event("agent.message", "x", "Hello"), &Shown::Prefix { rest: "lo".into() });
        assert!(!done);
        assert_eq!(
            out,
            [json!({ "type": "text-delta", "id": "x", "delta": "lo" }), json!({ "type": "text-end", "id": "x" })]
        );
        chunker.preview(&open("y"));
        chunker.preview(&delta("y", "Goodbye"));
        let (out, _) =
            chunker.settle(&event("agent.message", "y", "Good day"), &Shown::Diverged { shown: "Goodbye".into() });
        // The step's parts go, and come back as committed: x whole, then y.
        assert_eq!(
            out,
            [
                json!({ "type": "reset-step" }),
                json!({ "type": "text-start", "id": "x" }),
                json!({ "type": "text-delta", "id": "x", "delta": "Hello" }),
                json!({ "type": "text-end", "id": "x" }),
                json!({ "type": "text-start", "id": "y" }),
                json!({ "type": "text-delta", "id": "y", "delta": "Good day" }),
                json!({ "type": "text-end", "id": "y" }),
            ]
        );
    }

    #[test]
    fn a_dropped_preview_is_taken_back_and_one_outside_a_step_waits_for_its_commit() {
        let mut chunker = Chunker::default();
        assert_eq!(chunker.preview(&open("x")), [] as [Value; 0], "no step to reset");
        assert_eq!(chunker.preview(&delta("x", "who")), [] as [Value; 0]);
        let (out, _) = chunker.settle(&event("agent.message", "x", "whole"), &Shown::Prefix { rest: "le".into() });
        assert_eq!(out[1], json!({ "type": "text-delta", "id": "x", "delta": "whole" }), "shown whole: {out:?}");
        chunker.translate(&event("span.model_request_start", "sevt_s", ""));
        chunker.preview(&open("y"));
        chunker.preview(&delta("y", "cut"));
        let dropped = Preview::Drop { id: "y".into(), kind: Kind::Message, shown: "cut".into() };
        assert_eq!(chunker.preview(&dropped), [json!({ "type": "reset-step" })]);
        assert_eq!(chunker.preview(&delta("y", " more")), [] as [Value; 0], "its part is gone");
    }

    #[test]
    fn an_agent_event_of_a_type_this_version_does_not_know_still_opens_the_assistant_message() {
        let events = [
            event("user.message", "sevt_u", "hi"),
            event("agent.from_the_future", "sevt_f", ""),
            event("agent.message", "sevt_m", "hello"),
            event("session.from_the_future", "sevt_g", ""),
        ];
        let messages = ui_messages(&events);
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[1]["id"], "sevt_f");
        assert_eq!(messages[1]["parts"], json!([{ "type": "text", "text": "hello", "state": "done" }]));
    }
}
