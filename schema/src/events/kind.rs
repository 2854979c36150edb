//! `EventType`: every event type on the wire, and typed access to stored events.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

    /// Whether the event is the agent's (`agent.*`), including `agent.*` types this
    /// version does not know.
    pub fn is_agent_event(&self) -> bool {
        self.kind.starts_with("agent.")
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
