//! `tools/call`: one turn of an agent's session. The prompt is committed as a
//! `user.message` on the thread's session, the committed events are followed until the
//! session idles, and the result is the turn's final agent message — or, when the turn
//! could not finish on its own, an `isError` result that says why.

use agentd_schema::{EventType, NewEvent, StoredEvent};
use rmcp::model::{CallToolResult, ContentBlock, LoggingLevel, MetaObject, ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use std::sync::Arc;

use super::elicit::{self, Awaited};
use super::logging::{self, Log};
use super::sessions::SharedSessions;
use super::tools::{AgentTool, Arguments};
use crate::AppState;
use crate::adapters::follow::Kind;
use crate::adapters::{Preview, Translate, Wake, follow, text_of};
use crate::admission::Tenant;
use crate::domain::exposure::Protocol;
use crate::domain::{DomainError, input, threads};

/// What the caller learns about a turn that could not run or finish.
struct Failed(String);

/// Runs one turn of `tool`'s agent and waits for it to settle.
pub(super) async fn run(
    state: &AppState,
    sessions: &Arc<SharedSessions>,
    tenant: &Tenant,
    tool: &AgentTool,
    arguments: Arguments,
    level: Option<LoggingLevel>,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let thread = arguments.thread_id.unwrap_or_else(|| agentd_schema::ids::new_id("mcpthread"));
    let refusal = |error: DomainError, session_id: Option<&str>| {
        refused(error).map(|result| result.with_meta(Some(result_meta(&thread, session_id.unwrap_or_default()))))
    };
    let gated = Some(Protocol::Mcp);
    let bound = match threads::session_through(state, tenant, &thread, Some(&tool.agent_id), gated).await {
        Ok(bound) => bound,
        Err(error) => return refusal(error, None),
    };
    let session = &bound.session;
    let bound_agent = session.body["agent"]["id"].as_str().unwrap_or_default();
    if bound_agent != tool.agent_id {
        return Err(ErrorData::invalid_params(
            format!(
                "arguments.thread_id: thread {thread:?} belongs to agent {bound_agent}, not to {} (tool {})",
                tool.agent_id, tool.name
            ),
            None,
        ));
    }
    let meta = result_meta(&thread, &session.id);
    let prompt = NewEvent::user_message(&session.id, &arguments.prompt);
    let prompt_id = prompt.event_id.clone();
    let wake = Wake::subscribe(state, &session.id).await;
    let accepted = match input::submit(state, tenant, &bound.id, vec![prompt]).await {
        Ok(accepted) => accepted,
        Err(error) => return refusal(error, Some(&session.id)),
    };
    // Follow from just before the prompt as committed: an idle that settled the previous
    // turn after the session was loaded is not this turn's answer.
    let after_seq = accepted
        .committed
        .iter()
        .find(|e| e.event_id == prompt_id)
        .map(|e| e.seq - 1)
        .ok_or_else(|| ErrorData::internal_error("the prompt was not committed", None))?;

    let progress = Progress { token: context.meta.get_progress_token(), sent: 0 };
    let log = Log { level };
    let watcher = Watcher { elicit: elicit::possible(context), ..Watcher::default() };
    let answering = Answering { state, sessions, tenant, id: &bound.id };
    let first = json!({ "progress": format!("prompt committed to session {}", session.id), "level": "info" });
    let rx = follow(state.clone(), session.id.clone(), after_seq, wake, first, watcher, |state, session| async move {
        crate::adapters::interrupt_departed(&state, &session, "MCP").await;
    });
    let outcome = watch(rx, progress, log, &answering, context).await;
    let result = match outcome {
        Some(Ok(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Some(Err(Failed(message))) => CallToolResult::error(vec![ContentBlock::text(message)]),
        None => {
            // Dropping the receiver made the follower commit a `user.interrupt`.
            return Err(ErrorData::internal_error(
                format!("the call was cancelled; the turn on session {} was interrupted", session.id),
                None,
            ));
        }
    };
    Ok(result.with_meta(Some(meta)))
}

/// MCP's answer to input the session refuses: a session that takes no input is an
/// agent failure, so a result with `isError: true` saying why; a bad request is
/// -32602, a conflict -32600, a failure -32603 (internal causes are logged, not sent).
fn refused(error: DomainError) -> Result<CallToolResult, ErrorData> {
    match error {
        DomainError::Archived(message)
        | DomainError::Deleted(message)
        | DomainError::Terminated(message)
        | DomainError::BudgetReached(message)
        | DomainError::AgentDisabled(message)
        | DomainError::AgentArchived(message)
        | DomainError::EnvironmentArchived(message) => Ok(CallToolResult::error(vec![ContentBlock::text(message)])),
        DomainError::NotFound(message)
        | DomainError::Invalid { message, .. }
        | DomainError::Expired(message)
        | DomainError::TooLarge(message) => Err(ErrorData::invalid_params(message, None)),
        DomainError::Conflict(message)
        | DomainError::Gone(message)
        | DomainError::NameTaken(message)
        | DomainError::MemoryPreconditionFailed(message)
        | DomainError::MemoryPathConflict(message) => Err(ErrorData::invalid_request(message, None)),
        DomainError::Unavailable(message) => Err(ErrorData::internal_error(message, None)),
        DomainError::Internal(cause) => {
            tracing::error!(%cause, "internal error in an MCP call");
            Err(ErrorData::internal_error("internal error", None))
        }
    }
}

/// `_meta` of every result: the thread to pass as `thread_id` to continue, and its session.
fn result_meta(thread: &str, session_id: &str) -> MetaObject {
    let mut meta = rmcp::model::JsonObject::new();
    meta.insert("agentd/thread_id".into(), json!(thread));
    meta.insert("agentd/session_id".into(), json!(session_id));
    MetaObject(meta)
}

/// Progress notifications, when the request asked for them with a `progressToken`.
struct Progress {
    token: Option<ProgressToken>,
    sent: u32,
}

impl Progress {
    async fn report(&mut self, context: &RequestContext<RoleServer>, message: &str) {
        let Some(token) = &self.token else { return };
        self.sent += 1;
        let notification = ProgressNotificationParam::new(token.clone(), f64::from(self.sent)).with_message(message);
        if let Err(error) = context.peer.notify_progress(notification).await {
            tracing::debug!(%error, "an MCP progress notification could not be sent");
        }
    }
}

/// Where the answers to what a turn waits for go.
struct Answering<'a> {
    state: &'a AppState,
    sessions: &'a Arc<SharedSessions>,
    tenant: &'a Tenant,
    /// The session (thread binding) the call runs on.
    id: &'a agentd_schema::ids::SessionId,
}

impl Answering<'_> {
    /// Asks the client about `awaited` and commits its answers; the turn goes on.
    async fn answer(&self, context: &RequestContext<RoleServer>, awaited: &Value) -> Result<(), Failed> {
        let calls: Vec<Awaited> = serde_json::from_value(awaited.clone())
            .map_err(|error| Failed(format!("the awaited calls could not be read: {error}")))?;
        // The client's replies may land on another gateway: relay them here meanwhile.
        let _relay = match super::mcp_session(context) {
            Some(mcp_session) => self.sessions.relay(&mcp_session).await,
            None => None,
        };
        let answers = elicit::ask(context, self.id.as_str(), &calls).await.map_err(Failed)?;
        match input::submit(self.state, self.tenant, self.id, answers).await {
            Ok(_) => Ok(()),
            Err(DomainError::Internal(cause)) => {
                tracing::error!(%cause, "the answers of an MCP elicitation were not committed");
                Err(Failed("the answers could not be committed (internal error)".to_owned()))
            }
            Err(error) => Err(Failed(format!("the answers could not be committed: {error}"))),
        }
    }
}

/// Reads the follower until the turn settles: `None` when the caller cancelled first.
async fn watch(
    mut rx: tokio::sync::mpsc::Receiver<Value>,
    mut progress: Progress,
    log: Log,
    answering: &Answering<'_>,
    context: &RequestContext<RoleServer>,
) -> Option<Result<String, Failed>> {
    let session_id = answering.id.as_str();
    // An item read ahead while coalescing partial texts.
    let mut next: Option<Value> = None;
    loop {
        let item = match next.take() {
            Some(item) => item,
            None => tokio::select! {
                () = context.ct.cancelled() => return None,
                item = rx.recv() => match item {
                    Some(item) => item,
                    None => {
                        return Some(Err(Failed("the turn's event stream ended before the session settled".to_owned())));
                    }
                },
            },
        };
        if let Some(partial) = item["partial"].as_str() {
            // Partial texts are cumulative: when they queue up, only the latest is sent.
            let mut latest = partial.to_owned();
            while let Ok(queued) = rx.try_recv() {
                match queued["partial"].as_str() {
                    Some(partial) => latest = partial.to_owned(),
                    None => {
                        next = Some(queued);
                        break;
                    }
                }
            }
            progress.report(context, &latest).await;
            continue;
        }
        if let Some(awaited) = item.get("awaiting") {
            let answered = tokio::select! {
                () = context.ct.cancelled() => return None,
                answered = answering.answer(context, awaited) => answered,
            };
            if let Err(failed) = answered {
                return Some(Err(failed));
            }
            continue;
        }
        if let Some(message) = item["progress"].as_str() {
            progress.report(context, message).await;
            let level = item["level"].as_str().and_then(logging::parse).unwrap_or(LoggingLevel::Info);
            log.report(context, level, message, session_id).await;
            continue;
        }
        let text = item["text"].as_str().unwrap_or_default().to_owned();
        return Some(if item["failed"] == true { Err(Failed(text)) } else { Ok(text) });
    }
}

/// Committed events → progress messages, then the turn's outcome.
#[derive(Default)]
struct Watcher {
    /// The text of the turn's latest agent message.
    reply: Option<String>,
    /// The latest error the session reported.
    error: Option<String>,
    /// Whether the client is asked for what the turn waits for ([`elicit`]).
    elicit: bool,
    /// The turn's tool calls by event id, for the questions.
    calls: std::collections::HashMap<String, Awaited>,
}

impl Watcher {
    /// The calls a `requires_action` idle waits for, if this turn made them all.
    fn awaited(&self, ids: &Value) -> Option<Vec<Awaited>> {
        let ids: Vec<&str> = ids.as_array()?.iter().filter_map(Value::as_str).collect();
        (!ids.is_empty()).then_some(())?;
        ids.iter().map(|id| self.calls.get(*id).cloned()).collect()
    }

    /// A turn waiting for input this call cannot ask for: an error result that says how
    /// to answer.
    fn waiting(&self, status: &str, stop: &Value, session_id: &str) -> (Vec<Value>, bool) {
        self.settled(
            status,
            "notice",
            true,
            format!(
                "the agent is waiting for input an MCP call cannot give (a tool confirmation or a custom tool \
                 result for event(s) {}); answer it through the managed API (POST /v1/sessions/{session_id}/events), \
                 then call the tool again with the same thread_id",
                ids(&stop["event_ids"]),
            ),
        )
    }

    /// The turn's outcome, after the status change that settled it (`status`, at `level`).
    fn settled(&self, status: &str, level: &str, failed: bool, text: String) -> (Vec<Value>, bool) {
        (vec![json!({ "progress": status, "level": level }), json!({ "failed": failed, "text": text })], true)
    }
}

impl Translate for Watcher {
    fn failure(&self, message: String) -> Value {
        json!({ "failed": true, "text": message })
    }

    /// The text of the message the model is writing, so far, as a progress message.
    fn preview(&mut self, change: &Preview) -> Vec<Value> {
        match change {
            Preview::Delta { kind: Kind::Message, text, .. } => vec![json!({ "partial": text })],
            _ => Vec::new(),
        }
    }

    fn translate(&mut self, event: &StoredEvent) -> (Vec<Value>, bool) {
        let body = &event.body;
        let progress = |message: String, level: &str| (vec![json!({ "progress": message, "level": level })], false);
        match event.event_type() {
            Some(EventType::SessionStatusRunning) => progress("session running".to_owned(), "info"),
            Some(EventType::SpanModelRequestStart) => progress("model request started".to_owned(), "debug"),
            Some(EventType::SpanModelRequestEnd) => progress("model request finished".to_owned(), "debug"),
            Some(EventType::AgentThinking) => progress("thinking".to_owned(), "debug"),
            Some(EventType::AgentMessage) => {
                self.reply = Some(text_of(&body["content"]));
                progress("agent message".to_owned(), "info")
            }
            Some(kind @ (EventType::AgentToolUse | EventType::AgentMcpToolUse | EventType::AgentCustomToolUse)) => {
                let name = body["name"].as_str().unwrap_or("tool").to_owned();
                let custom = kind == EventType::AgentCustomToolUse;
                let call =
                    Awaited { id: event.event_id.clone(), custom, name: name.clone(), input: body["input"].clone() };
                self.calls.insert(event.event_id.clone(), call);
                progress(format!("tool use: {name}"), "info")
            }
            Some(EventType::AgentToolResult | EventType::AgentMcpToolResult) => match body["is_error"] == true {
                true => progress("tool result (error)".to_owned(), "warning"),
                false => progress("tool result".to_owned(), "info"),
            },
            Some(EventType::SessionError) => {
                let message = body["error"]["message"].as_str().unwrap_or("the turn failed").to_owned();
                self.error = Some(message.clone());
                progress(format!("error: {message}"), "error")
            }
            Some(EventType::SessionStatusRescheduled) => progress("retrying the model request".to_owned(), "warning"),
            Some(EventType::SessionBudgetReached) => progress("budget reached".to_owned(), "warning"),
            Some(EventType::SessionStatusIdle) => {
                let stop = &body["stop_reason"];
                let reason = stop["type"].as_str().unwrap_or("unknown");
                let status = format!("session idle: {reason}");
                match reason {
                    "end_turn" => self.settled(&status, "info", false, self.reply.clone().unwrap_or_default()),
                    "requires_action" if self.elicit => match self.awaited(&stop["event_ids"]) {
                        Some(calls) => (
                            vec![json!({ "progress": status, "level": "notice" }), json!({ "awaiting": calls })],
                            false,
                        ),
                        None => self.waiting(&status, stop, &event.session_id),
                    },
                    "requires_action" => self.waiting(&status, stop, &event.session_id),
                    "retries_exhausted" => self.settled(
                        &status,
                        "error",
                        true,
                        format!(
                            "the turn failed: {}",
                            self.error.as_deref().unwrap_or("the model request failed after every retry")
                        ),
                    ),
                    "budget_reached" => self.settled(
                        &status,
                        "warning",
                        true,
                        "the session's budget (max_list_cost) is reached; no further model request is admitted"
                            .to_owned(),
                    ),
                    "refusal" => self.settled(
                        &status,
                        "warning",
                        true,
                        format!(
                            "the model refused to answer{}",
                            self.reply.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
                        ),
                    ),
                    other => self.settled(&status, "error", true, format!("the turn stopped: {other}")),
                }
            }
            Some(EventType::SessionStatusTerminated) => {
                self.settled("session terminated", "error", true, "the session was terminated".to_owned())
            }
            _ => (Vec::new(), false),
        }
    }
}

fn ids(value: &Value) -> String {
    let ids: Vec<&str> = value.as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if ids.is_empty() { "unknown".to_owned() } else { ids.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, body: Value) -> StoredEvent {
        let mut body = body;
        body["type"] = json!(kind);
        StoredEvent {
            session_id: "sesn_1".into(),
            seq: 1,
            event_id: "sevt_1".into(),
            thread_id: "sesn_1".into(),
            kind: kind.into(),
            body,
            processed_at_ms: 0,
        }
    }

    /// Feeds events until the watcher settles; returns the progress messages and the outcome.
    fn run(events: &[StoredEvent]) -> (Vec<String>, Option<Value>) {
        let mut watcher = Watcher::default();
        let mut progress = Vec::new();
        for event in events {
            let (out, done) = watcher.translate(event);
            for item in out {
                match item["progress"].as_str() {
                    Some(message) => progress.push(message.to_owned()),
                    None => return (progress, Some(item)),
                }
            }
            assert!(!done, "settled without an outcome");
        }
        (progress, None)
    }

    #[test]
    fn an_ended_turn_answers_with_its_last_message() {
        let (progress, outcome) = run(&[
            event("span.model_request_start", json!({})),
            event("agent.message", json!({ "content": [{ "type": "text", "text": "let me check" }] })),
            event("agent.tool_use", json!({ "name": "bash" })),
            event("agent.tool_result", json!({ "is_error": true })),
            event("agent.message", json!({ "content": [{ "type": "text", "text": "done" }] })),
            event("session.status_idle", json!({ "stop_reason": { "type": "end_turn" } })),
        ]);
        assert_eq!(outcome, Some(json!({ "failed": false, "text": "done" })));
        assert_eq!(
            progress,
            [
                "model request started",
                "agent message",
                "tool use: bash",
                "tool result (error)",
                "agent message",
                "session idle: end_turn"
            ]
        );
    }

    #[test]
    fn failures_settle_as_errors_that_say_why() {
        let failed = |events: &[StoredEvent]| {
            let outcome = run(events).1.expect("settled");
            assert_eq!(outcome["failed"], true, "{outcome}");
            outcome["text"].as_str().unwrap_or_default().to_owned()
        };
        let exhausted = failed(&[
            event("session.error", json!({ "error": { "message": "model overloaded" } })),
            event("session.status_idle", json!({ "stop_reason": { "type": "retries_exhausted" } })),
        ]);
        assert_eq!(exhausted, "the turn failed: model overloaded");
        let action = failed(&[event(
            "session.status_idle",
            json!({ "stop_reason": { "type": "requires_action", "event_ids": ["sevt_a", "sevt_b"] } }),
        )]);
        assert!(action.contains("sevt_a, sevt_b") && action.contains("/v1/sessions/sesn_1/events"), "{action}");
        let budget = failed(&[event("session.status_idle", json!({ "stop_reason": { "type": "budget_reached" } }))]);
        assert!(budget.contains("budget"), "{budget}");
        assert_eq!(failed(&[event("session.status_terminated", json!({}))]), "the session was terminated");
    }

    #[test]
    fn retries_do_not_settle_the_turn() {
        let (progress, outcome) = run(&[
            event("session.error", json!({ "error": { "message": "overloaded" } })),
            event("session.status_rescheduled", json!({})),
        ]);
        assert_eq!(outcome, None);
        assert_eq!(progress, ["error: overloaded", "retrying the model request"]);
    }
}
