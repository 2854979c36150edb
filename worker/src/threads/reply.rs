//! What a child thread owes its parent (ADR 0022 §5): once its turn on a request has
//! ended, a reply — its last message, or why it stopped — that answers the parent's call.

use agentd_schema::events::threads::cut_reply;
use agentd_schema::{EventType, NewEvent, StopReason};
use serde_json::Value;

use super::{CallRole, thread_call};
use crate::event::Event;

/// How a child's turn on a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owed {
    /// The stop reason of its last idle since the request (`None`: one agentd does not know).
    pub stop: Option<StopReason>,
    /// The user interrupted the turn.
    pub interrupted: bool,
    /// The text of its last `agent.message` since the request.
    pub text: String,
}

impl Owed {
    /// Whether the turn ended in a way that answers the call: anything but waiting on the
    /// client, unless the turn was interrupted (an interrupted child replies `interrupted`).
    pub fn replies(&self) -> bool {
        self.interrupted || !matches!(self.stop, Some(StopReason::RequiresAction { .. }))
    }

    /// The event ids the child waits on the client for, when it idled `requires_action`.
    pub fn blocking(&self) -> &[String] {
        match &self.stop {
            Some(StopReason::RequiresAction { event_ids }) => event_ids,
            _ => &[],
        }
    }

    /// The reply succeeded: an uninterrupted `end_turn`.
    pub fn ok(&self) -> bool {
        !self.interrupted && self.stop == Some(StopReason::EndTurn)
    }

    /// The stop reason's wire type.
    fn stop_type(&self) -> &'static str {
        self.stop.as_ref().map_or("unknown", StopReason::as_str)
    }

    /// What the child says back: its last message, or, when it failed, why it stopped
    /// (then its last message, if it had one), cut at `MAX_REPLY_CHARS`.
    pub fn message(&self) -> String {
        let text = cut_reply(self.text.trim());
        if self.ok() {
            return if text.is_empty() {
                "(the thread ended its turn without a message)".to_owned()
            } else {
                text.to_owned()
            };
        }
        let why = if self.interrupted { "interrupted" } else { self.stop_type() };
        if text.is_empty() { format!("thread stopped: {why}") } else { format!("thread stopped: {why}\n\n{text}") }
    }
}

/// The text of the call's result: which thread answered, its agent and stop reason, and
/// what it said; and whether it is an error (anything but an uninterrupted `end_turn`).
pub fn reply_text(thread_id: &str, agent_name: &str, owed: &Owed) -> (String, bool) {
    let text = format!(
        "session_thread_id: {thread_id}\nagent: {agent_name}\nstop_reason: {}\n\n{}",
        owed.stop_type(),
        owed.message()
    );
    (text, !owed.ok())
}

/// How the child's turn on the request of `call_id` ended, read from its history and the
/// events about to be committed with it (`pending`); `None` while that turn has not
/// idled (or the request is not in `history`). An idle from before the request never
/// counts: a reply is only ever for the turn the request started.
pub fn owed_reply(history: &[Event], pending: &[NewEvent], call_id: &str) -> Option<Owed> {
    let requested = history.iter().rposition(|event| {
        event.is(EventType::AgentThreadMessageReceived)
            && thread_call(&event.stored().body) == Some((call_id, CallRole::Request))
    })?;
    let after: Vec<_> = history[requested + 1..].iter().map(Event::stored).collect();
    let after = after.iter().map(|e| (e.kind.as_str(), &e.body));
    let after = after.chain(pending.iter().map(|e| (e.kind.as_str(), &e.body)));
    // The request itself is the client input an interrupt is measured against.
    let (mut input, mut interrupt) = (0usize, None);
    let mut stop = None;
    let mut text = None;
    for (at, (kind, body)) in after.enumerate().map(|(i, e)| (i + 1, e)) {
        let Ok(kind) = kind.parse::<EventType>() else { continue };
        match kind {
            EventType::UserInterrupt => interrupt = Some(at),
            EventType::SessionStatusIdle | EventType::SessionThreadStatusIdle => stop = Some(StopReason::of(body)),
            EventType::AgentMessage => text = Some(text_of(&body["content"])),
            kind if kind.is_client_input() => input = at,
            _ => {}
        }
    }
    let stop = stop?;
    Some(Owed { stop, interrupted: interrupt.is_some_and(|i| i > input), text: text.unwrap_or_default() })
}

/// The text blocks of message content, joined.
fn text_of(content: &Value) -> String {
    let texts: Vec<&str> = content.as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect();
    texts.join("\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Packed, as the history cache keeps events: the reply is read from their text.
    fn stored(events: &[Value]) -> Vec<Event> {
        use agentd_schema::StoredEvent;
        events
            .iter()
            .enumerate()
            .map(|(i, body)| StoredEvent {
                session_id: "sesn_1".into(),
                seq: i as i64 + 1,
                event_id: format!("sevt_{i}"),
                thread_id: "sthr_1".into(),
                kind: body["type"].as_str().unwrap_or_default().to_owned(),
                body: body.clone(),
                processed_at_ms: 0,
            })
            .map(Event::packed)
            .collect()
    }

    fn request(call: &str) -> Value {
        json!({ "type": "agent.thread_message_received", "from_session_thread_id": "sesn_1",
                "content": [{ "type": "text", "text": "go" }],
                "_thread_call": { "tool_use_id": call, "role": "request" } })
    }

    fn said(text: &str) -> Value {
        json!({ "type": "agent.message", "content": [{ "type": "text", "text": text }] })
    }

    fn idle(stop: &str) -> Value {
        json!({ "type": "session.thread_status_idle", "stop_reason": { "type": stop } })
    }

    #[test]
    fn a_finished_turn_owes_its_last_message() {
        let history =
            stored(&[request("sevt_c"), json!({"type":"session.thread_status_running"}), said("one"), said("two")]);
        assert_eq!(owed_reply(&history, &[], "sevt_c"), None, "not idle yet");
        let pending = [NewEvent::new("sthr_1", idle("end_turn"))];
        let owed = owed_reply(&history, &pending, "sevt_c").unwrap();
        assert!(owed.replies() && owed.ok());
        let (text, is_error) = reply_text("sthr_1", "researcher", &owed);
        assert_eq!(text, "session_thread_id: sthr_1\nagent: researcher\nstop_reason: end_turn\n\ntwo");
        assert!(!is_error);
    }

    #[test]
    fn an_idle_before_the_request_is_not_a_reply_to_it() {
        let history = stored(&[request("sevt_a"), said("a"), idle("end_turn"), request("sevt_b")]);
        assert!(owed_reply(&history, &[], "sevt_a").is_some());
        assert_eq!(owed_reply(&history, &[], "sevt_b"), None);
        assert_eq!(owed_reply(&history, &[], "sevt_unknown"), None);
    }

    #[test]
    fn failures_and_interrupts_reply_an_error() {
        let exhausted = stored(&[request("sevt_c"), said("partial"), idle("retries_exhausted")]);
        let owed = owed_reply(&exhausted, &[], "sevt_c").unwrap();
        let (text, is_error) = reply_text("sthr_1", "r", &owed);
        assert!(is_error);
        assert!(
            text.ends_with("stop_reason: retries_exhausted\n\nthread stopped: retries_exhausted\n\npartial"),
            "{text}"
        );

        // Waiting on the client is no reply, unless the turn was interrupted.
        let blocked = json!({ "type": "session.thread_status_idle",
                              "stop_reason": { "type": "requires_action", "event_ids": ["sevt_x"] } });
        let waiting = owed_reply(&stored(&[request("sevt_c"), blocked.clone()]), &[], "sevt_c").unwrap();
        assert!(!waiting.replies());
        assert_eq!(waiting.blocking(), ["sevt_x"]);
        let interrupted =
            owed_reply(&stored(&[request("sevt_c"), json!({ "type": "user.interrupt" }), blocked]), &[], "sevt_c")
                .unwrap();
        assert!(interrupted.replies() && !interrupted.ok());
        assert!(interrupted.message().starts_with("thread stopped: interrupted"));

        // An interrupt before a later client input is over.
        let resumed = stored(&[
            request("sevt_c"),
            json!({ "type": "user.interrupt" }),
            json!({ "type": "user.message", "content": [] }),
            said("done"),
            idle("end_turn"),
        ]);
        assert!(owed_reply(&resumed, &[], "sevt_c").unwrap().ok());
    }
}
