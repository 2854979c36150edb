//! Session threads (ADR 0022): what a child thread's events look like, which of them the
//! session-level view shows, and the ids derived from the tool call that made a thread
//! or a message to one, so a repeated dispatch or reply is the same transaction.

use serde_json::Value;

use super::EventType;
use crate::store::NewEvent;

/// The private key on an `agent.thread_message_received` (and the events around it)
/// naming the call it carries: `{"tool_use_id": …, "role": "request" | "reply"}`.
/// Stored, never rendered (`live::render` strips it).
pub const THREAD_CALL_KEY: &str = "_thread_call";

/// The private key on a `span.model_request_end` naming the model the request went to
/// when it is not the session's (a child thread's agent, ADR 0022 §7): the append adds
/// its usage also under `usage._models[<model>]`. Stored, never rendered.
pub const MODEL_KEY: &str = "_model";

/// The private key on an `agent.tool_result` carrying usage spent to produce it (the
/// advisor's call, ADR 0022 §11): `{"model": …, "usage": <model usage>}`, added to the
/// session's usage and to `_models` like a span's. Stored, never rendered.
pub const MODEL_USAGE_KEY: &str = "_model_usage";

/// The private key in a session's (and a thread's) `usage` holding the part of it spent
/// on each model other than the session's: `{<model>: <usage>}`. Renderers strip it.
pub const MODELS_KEY: &str = "_models";

/// The primary thread's tool that starts a child thread running a roster or inline agent
/// and sends it a message (docs/api/multiagent.md); the gateway refuses a tool of the
/// agent's own named like an enabled thread tool, the worker offers and makes them.
pub const SPAWN_THREAD: &str = "spawn_thread";

/// The thread tool that sends an idle child thread another message.
pub const MESSAGE_THREAD: &str = "message_thread";

/// The thread tool that asks the advisor model.
pub const CONSULT_ADVISOR: &str = "consult_advisor";

/// A child's reply is its last `agent.message` text, cut at this many characters.
pub const MAX_REPLY_CHARS: usize = 100_000;

/// The child-thread events the session-level view shows besides the primary's own
/// (`EventQuery::primary_view`, the session stream, the adapters' follower): a child's
/// status changes, the tool calls it makes (a client may have to confirm or answer them
/// on the session's stream, which is what the reference cross-posts them for) and their
/// answers — the ones agentd writes, so a client sees each call close, and the client's
/// and hands' echoes routed to the child — and interrupts committed on it. Everything
/// else a child commits (its messages, thinking, spans) reaches only its thread's view.
/// Cross-posting is a view, not a copy: each event is stored once, on its thread.
pub const CROSS_POSTED: &[EventType] = &[
    EventType::SessionThreadStatusRunning,
    EventType::SessionThreadStatusIdle,
    EventType::SessionThreadStatusRescheduled,
    EventType::SessionThreadStatusTerminated,
    EventType::AgentToolUse,
    EventType::AgentMcpToolUse,
    EventType::AgentCustomToolUse,
    EventType::AgentToolResult,
    EventType::AgentMcpToolResult,
    EventType::UserToolConfirmation,
    EventType::UserCustomToolResult,
    EventType::UserToolResult,
    EventType::UserInterrupt,
];

/// Whether a child thread's event of type `kind` shows in the session-level view.
pub fn cross_posted(kind: &str) -> bool {
    CROSS_POSTED.iter().any(|cross| cross.as_str() == kind)
}

/// The type a child thread commits for `kind`: `session.status_*` becomes
/// `session.thread_status_*` (a child's status is never the session's); any other type
/// is unchanged.
pub fn thread_kind(kind: EventType) -> EventType {
    match kind {
        EventType::SessionStatusRunning => EventType::SessionThreadStatusRunning,
        EventType::SessionStatusIdle => EventType::SessionThreadStatusIdle,
        EventType::SessionStatusRescheduled => EventType::SessionThreadStatusRescheduled,
        EventType::SessionStatusTerminated => EventType::SessionThreadStatusTerminated,
        other => other,
    }
}

/// A body written for the primary thread, as a child thread commits it: its
/// `session.status_*` type becomes `session.thread_status_*` (the rest of the body,
/// `stop_reason` and `stop_details` included, is kept). The caller adds `agent_name`
/// (`live::render` stamps `session_thread_id` on every child event).
pub fn for_thread(mut body: Value) -> Value {
    let kind = body["type"].as_str().and_then(|kind| kind.parse::<EventType>().ok());
    if let Some(kind) = kind {
        let rewritten = thread_kind(kind);
        if rewritten != kind {
            body["type"] = Value::from(rewritten.as_str());
        }
    }
    body
}

impl NewEvent {
    /// This event as a child thread commits it ([`for_thread`] on its body and type);
    /// a status event gets `agent_name`.
    pub fn for_thread(mut self, agent_name: &str) -> Self {
        self.body = for_thread(self.body);
        if let Some(kind) = self.body["type"].as_str() {
            self.kind = kind.to_owned();
        }
        if self.kind.starts_with("session.thread_status_") && self.body.is_object() {
            self.body["agent_name"] = Value::from(agent_name);
        }
        self
    }
}

/// The id of the thread spawned by the `agent.tool_use` `tool_use_id` (`sthr_…` with
/// the call's suffix): a repeated dispatch of the call names the same thread.
pub fn thread_id_for(tool_use_id: &str) -> String {
    crate::ids::derived_id(tool_use_id, "sthr")
}

/// The id of the event playing `part` (a short lowercase word: `created`, `sent`,
/// `received`, `running`, `result`, …) in the exchange of the thread call `tool_use_id`:
/// `sevt_thr<part>_<the call's suffix>`, so a repeated dispatch or reply writes the same
/// ids and is refused as a whole instead of committed twice.
pub fn call_event_id(tool_use_id: &str, part: &str) -> String {
    let suffix = tool_use_id.split_once('_').map_or(tool_use_id, |(_, suffix)| suffix);
    format!("sevt_thr{part}_{suffix}")
}

/// `text` cut at [`MAX_REPLY_CHARS`] characters (on a character boundary).
pub fn cut_reply(text: &str) -> &str {
    match text.char_indices().nth(MAX_REPLY_CHARS) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn session_statuses_become_thread_statuses() {
        let idle = json!({ "type": "session.status_idle", "stop_reason": { "type": "end_turn" } });
        assert_eq!(
            for_thread(idle),
            json!({ "type": "session.thread_status_idle", "stop_reason": { "type": "end_turn" } })
        );
        assert_eq!(
            for_thread(json!({ "type": "session.status_rescheduled" }))["type"],
            "session.thread_status_rescheduled"
        );
        assert_eq!(for_thread(json!({ "type": "session.status_running" }))["type"], "session.thread_status_running");
        assert_eq!(
            for_thread(json!({ "type": "session.status_terminated" }))["type"],
            "session.thread_status_terminated"
        );
        let message = json!({ "type": "agent.message", "content": [] });
        assert_eq!(for_thread(message.clone()), message);
        assert_eq!(for_thread(json!({ "type": 3 })), json!({ "type": 3 }));
    }

    #[test]
    fn a_rewritten_event_keeps_kind_and_type_together_and_names_its_agent() {
        let idle =
            NewEvent::new("sthr_x", json!({ "type": "session.status_idle", "stop_reason": { "type": "end_turn" } }))
                .for_thread("researcher");
        assert_eq!(idle.kind, "session.thread_status_idle");
        assert_eq!(idle.body["type"], "session.thread_status_idle");
        assert_eq!(idle.body["agent_name"], "researcher");
        let message = NewEvent::user_message("sthr_x", "hi").for_thread("researcher");
        assert_eq!(message.kind, "user.message");
        assert!(message.body.get("agent_name").is_none());
    }

    #[test]
    fn the_session_view_shows_child_statuses_calls_and_answers_only() {
        for kind in CROSS_POSTED {
            assert!(cross_posted(kind.as_str()), "{kind}");
        }
        for kind in ["agent.message", "agent.thinking", "span.model_request_end", "user.message", "session.status_idle"]
        {
            assert!(!cross_posted(kind), "{kind}");
        }
        // Every tool use and every answer type is in the view.
        for kind in EventType::ALL.iter().filter(|kind| kind.is_tool_use() || kind.is_tool_answer()) {
            assert!(cross_posted(kind.as_str()), "{kind}");
        }
    }

    #[test]
    fn ids_derive_from_the_call() {
        let call = "sevt_01jd0000000000000000000000";
        assert_eq!(thread_id_for(call), "sthr_01jd0000000000000000000000");
        assert!(crate::ids::is_id("sthr", &thread_id_for(call)));
        assert_eq!(call_event_id(call, "sent"), "sevt_thrsent_01jd0000000000000000000000");
        assert_eq!(call_event_id(call, "sent"), call_event_id(call, "sent"));
        assert_ne!(call_event_id(call, "sent"), call_event_id(call, "received"));
        assert_ne!(call_event_id(call, "sent"), call_event_id("sevt_01jd0000000000000000000001", "sent"));
    }

    #[test]
    fn replies_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_REPLY_CHARS + 5);
        assert_eq!(cut_reply(&long).chars().count(), MAX_REPLY_CHARS);
        assert_eq!(cut_reply("short"), "short");
    }
}
