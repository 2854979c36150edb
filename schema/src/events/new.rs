//! A `NewEvent` constructor for every event agentd commits itself.

use serde_json::{Map, Value, json};

use super::body::{ModelUsage, Permission, SessionError, StopReason};
use super::kind::EventType;
use crate::store::NewEvent;

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

    /// `agent.tool_result` of a `web_fetch` / `web_search` call that went out to the
    /// network: marked so the store counts it in the session's `server_tool_use`.
    pub fn web_tool_result(
        thread_id: &str,
        tool_use_id: &str,
        tool: crate::web::WebTool,
        content: Value,
        is_error: bool,
    ) -> Self {
        let mut result = Self::tool_result(thread_id, tool_use_id, content, is_error);
        result.body[crate::web::SERVER_TOOL_KEY] = json!(tool.name());
        result
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

    /// `session.updated` with the session fields that changed (`title`, `metadata`,
    /// `budget`, … as the session update API renders them).
    pub fn session_updated(thread_id: &str, changed: Map<String, Value>) -> Self {
        event(thread_id, EventType::SessionUpdated, Value::Object(changed))
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
