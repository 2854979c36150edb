//! Session events as types: every event type on the wire (`EventType`), the closed sets
//! their bodies use (stop reasons, retry statuses, error types), and one constructor per
//! event agentd itself commits. Bodies stay JSON (they are stored and served as they
//! are); what is typed is which event it is and the fields agentd fills in, so no
//! caller builds an event from a string literal.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Value, json};

use crate::store::{NewEvent, StoredEvent};

macro_rules! event_types {
    ($($variant:ident = $wire:literal,)*) => {
        /// Every event type of a session's history and stream, as the wire spells it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EventType {
            $(
                #[doc = concat!("`", $wire, "`")]
                $variant,
            )*
        }

        impl EventType {
            /// Every event type, in wire-reference order.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant,)*];

            /// The wire string.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventType::$variant => $wire,)*
                }
            }
        }

        impl FromStr for EventType {
            type Err = UnknownEventType;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($wire => Ok(EventType::$variant),)*
                    other => Err(UnknownEventType(other.to_owned())),
                }
            }
        }
    };
}

event_types! {
    UserMessage = "user.message",
    UserInterrupt = "user.interrupt",
    UserToolConfirmation = "user.tool_confirmation",
    UserCustomToolResult = "user.custom_tool_result",
    UserToolResult = "user.tool_result",
    UserDefineOutcome = "user.define_outcome",
    SystemMessage = "system.message",
    AgentMessage = "agent.message",
    AgentThinking = "agent.thinking",
    AgentToolUse = "agent.tool_use",
    AgentToolResult = "agent.tool_result",
    AgentMcpToolUse = "agent.mcp_tool_use",
    AgentMcpToolResult = "agent.mcp_tool_result",
    AgentCustomToolUse = "agent.custom_tool_use",
    AgentThreadMessageReceived = "agent.thread_message_received",
    AgentThreadMessageSent = "agent.thread_message_sent",
    AgentThreadContextCompacted = "agent.thread_context_compacted",
    SessionError = "session.error",
    SessionStatusRescheduled = "session.status_rescheduled",
    SessionStatusRunning = "session.status_running",
    SessionStatusIdle = "session.status_idle",
    SessionStatusTerminated = "session.status_terminated",
    SessionThreadCreated = "session.thread_created",
    SessionThreadStatusRunning = "session.thread_status_running",
    SessionThreadStatusIdle = "session.thread_status_idle",
    SessionThreadStatusTerminated = "session.thread_status_terminated",
    SessionThreadStatusRescheduled = "session.thread_status_rescheduled",
    SessionUpdated = "session.updated",
    SessionUsage = "session.usage",
    SessionDeleted = "session.deleted",
    // agentd's own: committed once when the session's budget is reached.
    SessionBudgetReached = "session.budget_reached",
    SpanModelRequestStart = "span.model_request_start",
    SpanModelRequestEnd = "span.model_request_end",
    SpanOutcomeEvaluationStart = "span.outcome_evaluation_start",
    SpanOutcomeEvaluationOngoing = "span.outcome_evaluation_ongoing",
    SpanOutcomeEvaluationEnd = "span.outcome_evaluation_end",
    WorkflowRunCreated = "workflow_run.created",
    WorkflowRunStatusRunning = "workflow_run.status_running",
    WorkflowRunStatusIdle = "workflow_run.status_idle",
    WorkflowRunStatusEnded = "workflow_run.status_ended",
    WorkflowRunError = "workflow_run.error",
    WorkflowRunPhaseStarted = "workflow_run.phase_started",
    WorkflowRunPhaseEnded = "workflow_run.phase_ended",
    // Stream-only previews: never in history.
    EventStart = "event_start",
    EventDelta = "event_delta",
}

/// A `type` that is not an event type agentd knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown event type {0:?}")]
pub struct UnknownEventType(pub String);

impl EventType {
    /// A tool call the model made: `agent.tool_use`, `agent.custom_tool_use`, `agent.mcp_tool_use`.
    pub const fn is_tool_use(self) -> bool {
        matches!(self, EventType::AgentToolUse | EventType::AgentCustomToolUse | EventType::AgentMcpToolUse)
    }

    /// A result answering a tool call (from the client, the hands or agentd).
    pub const fn is_tool_answer(self) -> bool {
        self.answers_key().is_some()
    }

    /// The body field of a tool result that names the call it answers.
    pub const fn answers_key(self) -> Option<&'static str> {
        match self {
            EventType::UserCustomToolResult => Some("custom_tool_use_id"),
            EventType::UserToolResult | EventType::AgentToolResult => Some("tool_use_id"),
            EventType::AgentMcpToolResult => Some("mcp_tool_use_id"),
            _ => None,
        }
    }

    /// The result type agentd writes itself for a call of this type that will not run:
    /// `agent.mcp_tool_result` for an MCP call, `agent.tool_result` otherwise.
    pub const fn synthetic_result(self) -> EventType {
        match self {
            EventType::AgentMcpToolUse => EventType::AgentMcpToolResult,
            _ => EventType::AgentToolResult,
        }
    }

    /// Input from the client (`user.*`, `system.message`), echoed into history.
    pub const fn is_client_input(self) -> bool {
        matches!(
            self,
            EventType::UserMessage
                | EventType::UserInterrupt
                | EventType::UserToolConfirmation
                | EventType::UserCustomToolResult
                | EventType::UserToolResult
                | EventType::UserDefineOutcome
                | EventType::SystemMessage
        )
    }

    /// A `session.status_*` event.
    pub const fn is_session_status(self) -> bool {
        matches!(
            self,
            EventType::SessionStatusRescheduled
                | EventType::SessionStatusRunning
                | EventType::SessionStatusIdle
                | EventType::SessionStatusTerminated
        )
    }

    /// The session status a `session.status_*` event moves the session to.
    pub const fn session_status(self) -> Option<&'static str> {
        match self {
            EventType::SessionStatusRunning => Some("running"),
            EventType::SessionStatusIdle => Some("idle"),
            EventType::SessionStatusRescheduled => Some("rescheduling"),
            EventType::SessionStatusTerminated => Some("terminated"),
            _ => None,
        }
    }

    /// A stream-only preview frame (`event_start`, `event_delta`).
    pub const fn is_preview(self) -> bool {
        matches!(self, EventType::EventStart | EventType::EventDelta)
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for EventType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for EventType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl PartialEq<EventType> for str {
    fn eq(&self, other: &EventType) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<EventType> for String {
    fn eq(&self, other: &EventType) -> bool {
        self == other.as_str()
    }
}

impl StoredEvent {
    /// The event's type, `None` for a type agentd does not know (history written by a
    /// newer version).
    pub fn event_type(&self) -> Option<EventType> {
        self.kind.parse().ok()
    }

    /// Whether the event is of type `kind`.
    pub fn is(&self, kind: EventType) -> bool {
        self.kind == kind.as_str()
    }

    /// The tool call this result answers (`answers_key`), if it is a tool result.
    pub fn answered_call(&self) -> Result<Option<&str>, MissingField> {
        let Some(key) = self.event_type().and_then(EventType::answers_key) else { return Ok(None) };
        self.str_field(key).map(Some)
    }

    /// A string field the event's type requires; an error naming it when absent.
    pub fn str_field(&self, key: &'static str) -> Result<&str, MissingField> {
        self.body[key].as_str().ok_or_else(|| MissingField { event_id: self.event_id.clone(), key })
    }
}

impl NewEvent {
    /// The event's type, `None` for a type agentd does not know.
    pub fn event_type(&self) -> Option<EventType> {
        self.kind.parse().ok()
    }

    /// Whether the event is of type `kind`.
    pub fn is(&self, kind: EventType) -> bool {
        self.kind == kind.as_str()
    }

    /// `thread_id` set; the constructors below make events for a thread given later.
    pub fn on(mut self, thread_id: &str) -> Self {
        thread_id.clone_into(&mut self.thread_id);
        self
    }

    /// The event id set (previews promise the id of the event they preview).
    pub fn with_id(mut self, event_id: impl Into<String>) -> Self {
        self.event_id = event_id.into();
        self
    }
}

/// A field an event's type requires is missing or not a string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event {event_id} has no string field {key:?}")]
pub struct MissingField {
    /// The event.
    pub event_id: String,
    /// The field.
    pub key: &'static str,
}

/// Why a session went idle (`session.status_idle.stop_reason`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StopReason {
    /// The turn completed.
    EndTurn,
    /// Blocked on these tool calls (custom tools, confirmations).
    RequiresAction {
        /// The blocking tool-use event ids.
        event_ids: Vec<String>,
    },
    /// Retries (or the hands, or a remote server) gave up on the turn.
    RetriesExhausted,
    /// The session's budget is reached.
    BudgetReached,
    /// The model refused.
    Refusal,
}

impl StopReason {
    /// The wire `type`.
    pub fn as_str(&self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::RequiresAction { .. } => "requires_action",
            StopReason::RetriesExhausted => "retries_exhausted",
            StopReason::BudgetReached => "budget_reached",
            StopReason::Refusal => "refusal",
        }
    }

    /// The stop reason of a `session.status_idle` body; `None` when it has none agentd knows.
    pub fn of(body: &Value) -> Option<StopReason> {
        serde_json::from_value(body.get("stop_reason")?.clone()).ok()
    }

    fn wire(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    fn details(&self) -> Value {
        match self {
            StopReason::Refusal => json!({ "type": "refusal", "category": null, "explanation": null }),
            _ => Value::Null,
        }
    }
}

/// Whether the server retries after a `session.error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryStatus {
    /// The server is retrying.
    Retrying,
    /// The turn is dead; the session returns to idle.
    Exhausted,
    /// The session will terminate.
    Terminal,
}

impl RetryStatus {
    /// The wire `type`.
    pub const fn as_str(self) -> &'static str {
        match self {
            RetryStatus::Retrying => "retrying",
            RetryStatus::Exhausted => "exhausted",
            RetryStatus::Terminal => "terminal",
        }
    }

    /// The retry status of a `session.error` body.
    pub fn of(body: &Value) -> Option<RetryStatus> {
        serde_json::from_value(body["error"]["retry_status"]["type"].clone()).ok()
    }
}

/// The `error.type` of a `session.error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorType {
    /// `unknown_error`
    UnknownError,
    /// `model_overloaded_error`
    ModelOverloadedError,
    /// `model_rate_limited_error`
    ModelRateLimitedError,
    /// `model_request_failed_error`
    ModelRequestFailedError,
    /// `mcp_connection_failed_error` (with `mcp_server_name`)
    McpConnectionFailedError,
    /// `mcp_authentication_failed_error` (with `mcp_server_name`)
    McpAuthenticationFailedError,
    /// `billing_error`
    BillingError,
    /// `credential_host_unreachable_error`
    CredentialHostUnreachableError,
    /// `tool_use_limit_reached_error`
    ToolUseLimitReachedError,
    /// `compaction_limit_reached_error`
    CompactionLimitReachedError,
}

/// A `session.error`'s `error` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionError {
    /// Its type.
    pub kind: ErrorType,
    /// What happened (never a secret).
    pub message: String,
    /// Whether the server retries.
    pub retry: RetryStatus,
    /// The MCP server at fault, for the `mcp_*` errors.
    pub mcp_server_name: Option<String>,
}

impl SessionError {
    /// An error of `kind`.
    pub fn new(kind: ErrorType, message: impl Into<String>, retry: RetryStatus) -> Self {
        Self { kind, message: message.into(), retry, mcp_server_name: None }
    }

    fn wire(&self) -> Value {
        let mut error = json!({
            "type": self.kind,
            "message": self.message,
            "retry_status": { "type": self.retry.as_str() },
        });
        if let Some(server) = &self.mcp_server_name {
            error["mcp_server_name"] = json!(server);
        }
        error
    }
}

/// `agent.tool_use` / `agent.mcp_tool_use` permission fields for a resolved policy:
/// `evaluated_permission` and `evaluation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// `always_allow`: runs.
    AlwaysAllow,
    /// `always_ask`: waits for a `user.tool_confirmation`.
    AlwaysAsk,
    /// `auto` with no per-call judge: asks, reason `indeterminate`.
    Auto,
    /// Refused before any policy applied (the tool is not the agent's).
    Deny,
}

impl Permission {
    /// The permission of a configured policy name (`always_allow`, `always_ask`, `auto`).
    pub fn of_policy(policy: &str) -> Self {
        match policy {
            "always_allow" => Permission::AlwaysAllow,
            "always_ask" => Permission::AlwaysAsk,
            _ => Permission::Auto,
        }
    }

    fn apply(self, body: &mut Value) {
        let (permission, evaluation) = match self {
            Permission::AlwaysAllow => ("allow", json!({ "type": "always_allow" })),
            Permission::AlwaysAsk => ("ask", json!({ "type": "always_ask" })),
            Permission::Auto => (
                "ask",
                json!({ "type": "auto", "evaluated_permission": { "type": "ask", "reason_code": "indeterminate" } }),
            ),
            Permission::Deny => {
                body["evaluated_permission"] = json!("deny");
                return;
            }
        };
        body["evaluated_permission"] = json!(permission);
        body["evaluation"] = evaluation;
    }
}

/// Token usage of one model request (`span.model_request_end.model_usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelUsage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_input_tokens: u64,
}

fn event(thread_id: &str, kind: EventType, mut body: Value) -> NewEvent {
    body["type"] = json!(kind.as_str());
    NewEvent { event_id: crate::ids::new_id("sevt"), thread_id: thread_id.to_owned(), kind: kind.to_string(), body }
}

fn text(text: &str) -> Value {
    json!([{ "type": "text", "text": text }])
}

/// One constructor per event agentd commits itself. Each makes an event with a fresh
/// id on `thread_id`; `NewEvent::with_id` sets an id promised in advance.
impl NewEvent {
    /// `session.status_running`
    pub fn status_running(thread_id: &str) -> Self {
        event(thread_id, EventType::SessionStatusRunning, json!({}))
    }

    /// `session.status_idle` with its stop reason (and `stop_details` for a refusal).
    pub fn status_idle(thread_id: &str, stop: StopReason) -> Self {
        let body = json!({ "stop_reason": stop.wire(), "stop_details": stop.details() });
        event(thread_id, EventType::SessionStatusIdle, body)
    }

    /// `session.status_rescheduled`: a retryable failure is being retried.
    pub fn status_rescheduled(thread_id: &str) -> Self {
        event(thread_id, EventType::SessionStatusRescheduled, json!({}))
    }

    /// `session.status_terminated`
    pub fn status_terminated(thread_id: &str) -> Self {
        event(thread_id, EventType::SessionStatusTerminated, json!({}))
    }

    /// `session.error`
    pub fn session_error(thread_id: &str, error: &SessionError) -> Self {
        event(thread_id, EventType::SessionError, json!({ "error": error.wire() }))
    }

    /// `span.model_request_start`
    pub fn model_request_start(thread_id: &str) -> Self {
        event(thread_id, EventType::SpanModelRequestStart, json!({}))
    }

    /// `span.model_request_end` closing the request `start_id`.
    pub fn model_request_end(thread_id: &str, start_id: &str, is_error: bool, usage: ModelUsage) -> Self {
        let body = json!({
            "model_request_start_id": start_id,
            "is_error": is_error,
            "model_usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_read_input_tokens": usage.cache_read_input_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            },
        });
        event(thread_id, EventType::SpanModelRequestEnd, body)
    }

    /// `span.model_request_end` closing a request cut off by a lost worker: an error
    /// that used nothing.
    pub fn model_request_abandoned(thread_id: &str, start_id: &str) -> Self {
        Self::model_request_end(thread_id, start_id, true, ModelUsage::default())
    }

    /// `session.usage`: the session's cumulative usage and its budget.
    pub fn session_usage(thread_id: &str, usage: Value, budget: Value) -> Self {
        event(thread_id, EventType::SessionUsage, json!({ "usage": usage, "budget": budget }))
    }

    /// `session.budget_reached` (agentd's own): the budget and the usage that reached it.
    pub fn budget_reached(thread_id: &str, budget: Value, usage: Value) -> Self {
        event(thread_id, EventType::SessionBudgetReached, json!({ "budget": budget, "usage": usage }))
    }

    /// `agent.message` with one text block.
    pub fn agent_message(thread_id: &str, message: &str) -> Self {
        event(thread_id, EventType::AgentMessage, json!({ "content": text(message) }))
    }

    /// `agent.thinking`
    pub fn agent_thinking(thread_id: &str) -> Self {
        event(thread_id, EventType::AgentThinking, json!({}))
    }

    /// `agent.custom_tool_use`: the client runs it.
    pub fn custom_tool_use(thread_id: &str, name: &str, input: Value) -> Self {
        event(thread_id, EventType::AgentCustomToolUse, json!({ "name": name, "input": input }))
    }

    /// `agent.tool_use` (built-in and `a2a_agent` tools) under `permission`.
    pub fn tool_use(thread_id: &str, name: &str, input: Value, permission: Permission) -> Self {
        let mut body = json!({ "name": name, "input": input });
        permission.apply(&mut body);
        event(thread_id, EventType::AgentToolUse, body)
    }

    /// `agent.mcp_tool_use` of `server`'s tool `name` under `permission`.
    pub fn mcp_tool_use(thread_id: &str, server: &str, name: &str, input: Value, permission: Permission) -> Self {
        let mut body = json!({ "name": name, "mcp_server_name": server, "input": input });
        permission.apply(&mut body);
        event(thread_id, EventType::AgentMcpToolUse, body)
    }

    /// `agent.tool_result` answering `tool_use_id` with `content` blocks.
    pub fn tool_result(thread_id: &str, tool_use_id: &str, content: Value, is_error: bool) -> Self {
        let body = json!({ "tool_use_id": tool_use_id, "is_error": is_error, "content": content });
        event(thread_id, EventType::AgentToolResult, body)
    }

    /// `agent.mcp_tool_result` answering `mcp_tool_use_id` with `content` blocks.
    pub fn mcp_tool_result(thread_id: &str, mcp_tool_use_id: &str, content: Value, is_error: bool) -> Self {
        let body = json!({ "mcp_tool_use_id": mcp_tool_use_id, "is_error": is_error, "content": content });
        event(thread_id, EventType::AgentMcpToolResult, body)
    }

    /// The error result agentd writes for the call `call_id` of type `call` that will
    /// not run (or whose outcome is unknown), saying why in `why`.
    pub fn synthetic_result(thread_id: &str, call: EventType, call_id: &str, why: &str) -> Self {
        match call.synthetic_result() {
            EventType::AgentMcpToolResult => Self::mcp_tool_result(thread_id, call_id, text(why), true),
            _ => Self::tool_result(thread_id, call_id, text(why), true),
        }
    }

    /// `user.message` with `content` blocks (live-inbox deliveries).
    pub fn user_message_content(thread_id: &str, content: Value) -> Self {
        event(thread_id, EventType::UserMessage, json!({ "content": content }))
    }

    /// `user.interrupt` (adapters that stop a turn on the client's behalf).
    pub fn user_interrupt(thread_id: &str) -> Self {
        event(thread_id, EventType::UserInterrupt, json!({}))
    }

    /// `session.thread_status_running` of the thread `thread_id` (on the primary stream).
    pub fn thread_status_running(on: &str, thread_id: &str, agent_name: &str) -> Self {
        let body = json!({ "session_thread_id": thread_id, "agent_name": agent_name });
        event(on, EventType::SessionThreadStatusRunning, body)
    }

    /// `session.thread_status_idle` of the thread `thread_id`, with its stop reason.
    pub fn thread_status_idle(on: &str, thread_id: &str, agent_name: &str, stop: StopReason) -> Self {
        let body = json!({
            "session_thread_id": thread_id, "agent_name": agent_name,
            "stop_reason": stop.wire(), "stop_details": stop.details(),
        });
        event(on, EventType::SessionThreadStatusIdle, body)
    }

    /// `session.thread_status_rescheduled` of the thread `thread_id`.
    pub fn thread_status_rescheduled(on: &str, thread_id: &str, agent_name: &str) -> Self {
        let body = json!({ "session_thread_id": thread_id, "agent_name": agent_name });
        event(on, EventType::SessionThreadStatusRescheduled, body)
    }

    /// `session.thread_status_terminated` of the thread `thread_id`.
    pub fn thread_status_terminated(on: &str, thread_id: &str, agent_name: &str) -> Self {
        let body = json!({ "session_thread_id": thread_id, "agent_name": agent_name });
        event(on, EventType::SessionThreadStatusTerminated, body)
    }

    /// `session.thread_created` for the new thread `thread_id` running `agent_name`.
    pub fn thread_created(on: &str, thread_id: &str, agent_name: &str) -> Self {
        let body = json!({ "session_thread_id": thread_id, "agent_name": agent_name, "workflow_run_id": null });
        event(on, EventType::SessionThreadCreated, body)
    }
}

/// How the client answered a tool call's permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    /// `result: allow`.
    pub allowed: bool,
    /// The `deny_message`, with a denial.
    pub deny_message: Option<String>,
    /// Where in the folded history it was committed.
    pub at: usize,
}

/// A tool call the model made that has no result yet.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenCall {
    /// The id of its tool-use event.
    pub id: String,
    /// `agent.tool_use`, `agent.custom_tool_use` or `agent.mcp_tool_use`.
    pub kind: EventType,
    /// The tool's name.
    pub name: String,
    /// The model's input (an object).
    pub input: Value,
    /// `evaluated_permission` (`allow`, `ask`, `deny`), when set.
    pub permission: Option<String>,
    /// The MCP server, for `agent.mcp_tool_use`.
    pub mcp_server_name: Option<String>,
    /// Where in the folded history it was committed.
    pub at: usize,
}

/// The one derivation of which tool calls of a thread are open: a fold over its
/// committed events, in order. Results and confirmations may arrive before the call
/// they name is folded (the client answers as soon as it sees the call), so both are
/// remembered by id.
#[derive(Debug, Clone, Default)]
pub struct ToolCalls {
    open: Vec<OpenCall>,
    answered: std::collections::HashSet<String>,
    confirmations: std::collections::HashMap<String, Confirmation>,
}

impl ToolCalls {
    /// Folds `events` (positions counted from 0).
    pub fn of<'a>(events: impl IntoIterator<Item = &'a StoredEvent>) -> Self {
        let mut calls = ToolCalls::default();
        for (at, event) in events.into_iter().enumerate() {
            calls.fold(at, event);
        }
        calls
    }

    /// Folds one event at position `at`. An event missing a field its type requires is
    /// logged and skipped: it cannot open, answer or confirm anything.
    pub fn fold(&mut self, at: usize, event: &StoredEvent) {
        if let Err(error) = self.try_fold(at, event) {
            tracing::warn!(%error, kind = %event.kind, "tool-call bookkeeping skipped a malformed event");
        }
    }

    fn try_fold(&mut self, at: usize, event: &StoredEvent) -> Result<(), MissingField> {
        let Some(kind) = event.event_type() else { return Ok(()) };
        if kind.is_tool_use() {
            if !self.answered.contains(&event.event_id) {
                let body = &event.body;
                self.open.push(OpenCall {
                    id: event.event_id.clone(),
                    kind,
                    name: event.str_field("name")?.to_owned(),
                    input: if body["input"].is_object() { body["input"].clone() } else { json!({}) },
                    permission: body["evaluated_permission"].as_str().map(str::to_owned),
                    mcp_server_name: body["mcp_server_name"].as_str().map(str::to_owned),
                    at,
                });
            }
        } else if let Some(id) = event.answered_call()? {
            self.open.retain(|call| call.id != id);
            self.answered.insert(id.to_owned());
        } else if kind == EventType::UserToolConfirmation {
            let id = event.str_field("tool_use_id")?;
            let confirmation = Confirmation {
                allowed: event.body["result"] == "allow",
                deny_message: event.body["deny_message"].as_str().map(str::to_owned),
                at,
            };
            self.confirmations.insert(id.to_owned(), confirmation);
        }
        Ok(())
    }

    /// The open calls, in the order the model made them.
    pub fn open(&self) -> &[OpenCall] {
        &self.open
    }

    /// Whether `id` is an open call.
    pub fn is_open(&self, id: &str) -> bool {
        self.open.iter().any(|call| call.id == id)
    }

    /// The last confirmation of the call `id`.
    pub fn confirmation(&self, id: &str) -> Option<&Confirmation> {
        self.confirmations.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_through_its_wire_string() {
        for kind in EventType::ALL {
            assert_eq!(kind.as_str().parse::<EventType>(), Ok(*kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(kind.as_str()));
            assert_eq!(serde_json::from_value::<EventType>(json!(kind.as_str())).unwrap(), *kind);
            assert_eq!(kind.to_string(), kind.as_str());
        }
        assert_eq!(EventType::ALL.len(), 45, "44 stream types plus session.budget_reached");
        assert!("user.nope".parse::<EventType>().is_err());
    }

    #[test]
    fn tool_results_name_the_call_they_answer() {
        let uses: Vec<_> = EventType::ALL.iter().filter(|k| k.is_tool_use()).collect();
        assert_eq!(uses.len(), 3);
        let answers: Vec<_> = EventType::ALL.iter().filter_map(|k| k.answers_key()).collect();
        assert_eq!(answers, ["custom_tool_use_id", "tool_use_id", "tool_use_id", "mcp_tool_use_id"]);
        let result = NewEvent::synthetic_result("sesn_1", EventType::AgentMcpToolUse, "sevt_1", "no");
        assert_eq!(result.kind, "agent.mcp_tool_result");
        assert_eq!(result.body["mcp_tool_use_id"], "sevt_1");
        assert_eq!(result.body["is_error"], true);
    }

    #[test]
    fn idle_events_carry_typed_stop_reasons() {
        let idle = NewEvent::status_idle("sesn_1", StopReason::RequiresAction { event_ids: vec!["sevt_1".into()] });
        assert_eq!(
            idle.body,
            json!({
                "type": "session.status_idle",
                "stop_reason": { "type": "requires_action", "event_ids": ["sevt_1"] },
                "stop_details": null,
            })
        );
        assert_eq!(StopReason::of(&idle.body), Some(StopReason::RequiresAction { event_ids: vec!["sevt_1".into()] }));
        let refusal = NewEvent::status_idle("sesn_1", StopReason::Refusal);
        assert_eq!(refusal.body["stop_details"]["type"], "refusal");
        let error = SessionError::new(ErrorType::ModelOverloadedError, "busy", RetryStatus::Retrying);
        let event = NewEvent::session_error("sesn_1", &error);
        assert_eq!(event.body["error"]["type"], "model_overloaded_error");
        assert_eq!(RetryStatus::of(&event.body), Some(RetryStatus::Retrying));
    }

    fn stored(seq: i64, id: &str, body: Value) -> StoredEvent {
        StoredEvent {
            session_id: "sesn_1".into(),
            seq,
            event_id: id.into(),
            thread_id: "sesn_1".into(),
            kind: body["type"].as_str().unwrap().to_owned(),
            body,
            processed_at_ms: 0,
        }
    }

    #[test]
    fn open_calls_are_the_uses_without_an_answer_whatever_the_order() {
        let history = [
            stored(1, "e1", json!({ "type": "user.custom_tool_result", "custom_tool_use_id": "t3", "content": [] })),
            stored(
                2,
                "t1",
                json!({ "type": "agent.tool_use", "name": "bash", "input": {}, "evaluated_permission": "ask" }),
            ),
            stored(
                3,
                "t2",
                json!({ "type": "agent.mcp_tool_use", "name": "add", "mcp_server_name": "calc", "input": 1 }),
            ),
            stored(4, "t3", json!({ "type": "agent.custom_tool_use", "name": "lookup", "input": {} })),
            stored(5, "e5", json!({ "type": "user.tool_confirmation", "tool_use_id": "t1", "result": "allow" })),
            stored(6, "e6", json!({ "type": "agent.mcp_tool_result", "mcp_tool_use_id": "t2", "content": [] })),
            // Malformed: names no call, so it answers nothing.
            stored(7, "e7", json!({ "type": "agent.tool_result", "content": [] })),
        ];
        let calls = ToolCalls::of(&history);
        let open: Vec<&str> = calls.open().iter().map(|c| c.id.as_str()).collect();
        assert_eq!(open, ["t1"]);
        assert!(calls.is_open("t1") && !calls.is_open("t2") && !calls.is_open("t3"));
        assert_eq!(calls.confirmation("t1").map(|c| (c.allowed, c.at)), Some((true, 4)));
        assert_eq!(calls.open()[0].permission.as_deref(), Some("ask"));
    }
}
