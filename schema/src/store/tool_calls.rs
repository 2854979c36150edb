//! The tool-call ledger: a projection of a session's tool uses and their answers
//! (table `tool_calls`, migration 0013), so "which calls are still open" is one indexed
//! query instead of a scan of the history.

use async_trait::async_trait;

use crate::error::{StoreError, StoreResult};

/// Which kind of tool use a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolUseKind {
    /// `agent.tool_use`: a built-in tool, run by the environment's hands.
    Builtin,
    /// `agent.custom_tool_use`: a custom tool, answered by the client.
    Custom,
    /// `agent.mcp_tool_use`: a tool of an MCP server, run by the worker.
    Mcp,
}

impl ToolUseKind {
    /// Every kind.
    pub const ALL: [ToolUseKind; 3] = [ToolUseKind::Builtin, ToolUseKind::Custom, ToolUseKind::Mcp];

    /// The event type of the use (also the stored `use_kind`).
    pub fn event_type(self) -> &'static str {
        match self {
            ToolUseKind::Builtin => "agent.tool_use",
            ToolUseKind::Custom => "agent.custom_tool_use",
            ToolUseKind::Mcp => "agent.mcp_tool_use",
        }
    }

    /// The kind of a use event type; `None` for any other type.
    pub fn of_event_type(kind: &str) -> Option<Self> {
        ToolUseKind::ALL.into_iter().find(|k| k.event_type() == kind)
    }
}

impl TryFrom<String> for ToolUseKind {
    type Error = StoreError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        ToolUseKind::of_event_type(&text).ok_or_else(|| StoreError::Backend(format!("unknown tool use kind {text:?}")))
    }
}

/// The answer of a `user.tool_confirmation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Confirmation {
    /// `result: "allow"`: the call may run.
    Allow,
    /// Anything else (`"deny"`): the call does not run.
    Deny,
}

impl Confirmation {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Confirmation::Allow => "allow",
            Confirmation::Deny => "deny",
        }
    }

    /// The confirmation a `user.tool_confirmation`'s `result` field gives: only an
    /// explicit `"allow"` allows (the worker reads it the same way).
    pub fn of_result(result: Option<&str>) -> Self {
        if result == Some("allow") { Confirmation::Allow } else { Confirmation::Deny }
    }
}

impl TryFrom<String> for Confirmation {
    type Error = StoreError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        match text.as_str() {
            "allow" => Ok(Confirmation::Allow),
            "deny" => Ok(Confirmation::Deny),
            other => Err(StoreError::Backend(format!("unknown confirmation {other:?}"))),
        }
    }
}

/// One tool call of a session and what has answered it so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The session.
    pub session_id: String,
    /// The thread the use was committed on.
    pub thread_id: String,
    /// The use's event id (`sevt_…`): what answers name as `tool_use_id`
    /// (`custom_tool_use_id`, `mcp_tool_use_id`).
    pub tool_use_id: String,
    /// Which kind of use.
    pub use_kind: ToolUseKind,
    /// The tool's name (`name` of the use; empty when the use had none).
    pub name: String,
    /// The use's `evaluated_permission` (`allow`, `ask`, …), if it had one.
    pub evaluated_permission: Option<String>,
    /// The use's sequence number in the session.
    pub use_seq: i64,
    /// The first `user.tool_confirmation` answering it, if any.
    pub confirmation: Option<Confirmation>,
    /// That confirmation's event id.
    pub confirmation_event_id: Option<String>,
    /// That confirmation's sequence number (to read it back with an `EventQuery`).
    pub confirmation_seq: Option<i64>,
    /// The first result answering it (`user.tool_result`, `agent.tool_result`,
    /// `agent.mcp_tool_result`, `user.custom_tool_result`), if any: its event id.
    pub result_event_id: Option<String>,
    /// That result's event type.
    pub result_kind: Option<String>,
    /// That result's sequence number.
    pub result_seq: Option<i64>,
}

impl ToolCall {
    /// Whether the call still waits for a result.
    pub fn is_open(&self) -> bool {
        self.result_event_id.is_none()
    }

    /// Whether the call waits for a confirmation: its permission was `ask` and neither
    /// a confirmation nor a result has answered it.
    pub fn awaits_confirmation(&self) -> bool {
        self.evaluated_permission.as_deref() == Some("ask")
            && self.confirmation_event_id.is_none()
            && self.result_event_id.is_none()
    }
}

/// The tool-call ledger. Maintained by every transaction that appends events (appends,
/// submissions, fenced commits and settlements, commits with the live inbox), so it is
/// exactly as current as the committed history: a use inserts its row; the first
/// confirmation and the first result that name it (in the same session) fill their
/// columns; later answers and answers naming no known use change nothing.
#[async_trait]
pub trait ToolCallStore: Send + Sync {
    /// The session's calls without a result, oldest (lowest `use_seq`) first. One
    /// indexed read.
    async fn open_tool_calls(&self, session_id: &str) -> StoreResult<Vec<ToolCall>>;

    /// The session's calls with these use ids, in any state, oldest first; ids that
    /// name no call of the session are left out.
    async fn tool_calls(&self, session_id: &str, ids: &[String]) -> StoreResult<Vec<ToolCall>>;
}
