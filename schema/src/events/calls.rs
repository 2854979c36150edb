//! Which tool calls of a thread are open: the one fold that says so.

use serde_json::{Value, json};

use super::kind::{EventType, MissingField};
use crate::store::StoredEvent;

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
