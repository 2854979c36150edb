//! The handoffs of thread calls (ADR 0022 §5), built here and committed by the caller
//! with `RunStore::handoff`: a dispatch (parent → children), a reply (child → parent),
//! and the waits a parent closes when its turn ends without them. Every event of a call's
//! exchange has an id derived from the call (`events::call_event_id`), so committing the
//! same exchange twice is refused as a whole.

use agentd_schema::events::call_event_id;
use agentd_schema::{EventType, Handoff, NewEvent, NewThread};
use serde_json::{Value, json};

use super::{Owed, Planned, THREAD_CALL_KEY, Waiting, reply_text};

/// One text block.
fn text(text: &str) -> Value {
    json!([{ "type": "text", "text": text }])
}

/// The private marker of the call `call_id`'s `role` message.
fn marker(call_id: &str, role: &str) -> Value {
    json!({ "tool_use_id": call_id, "role": role })
}

/// `agent.thread_message_sent` on `on`, to the thread `to` (`to_agent_name` absent
/// when it goes to the primary).
fn message_sent(on: &str, to: &str, to_agent_name: Option<&str>, content: &str, call: Value) -> NewEvent {
    let mut body =
        json!({ "type": EventType::AgentThreadMessageSent, "to_session_thread_id": to, "content": text(content) });
    if let Some(name) = to_agent_name {
        body["to_agent_name"] = json!(name);
    }
    body[THREAD_CALL_KEY] = call;
    NewEvent::new(on, body)
}

/// `agent.thread_message_received` on `on`, from the thread `from` (`from_agent_name`
/// absent when it comes from the primary).
fn message_received(on: &str, from: &str, from_agent_name: Option<&str>, content: &str, call: Value) -> NewEvent {
    let mut body = json!({ "type": EventType::AgentThreadMessageReceived, "from_session_thread_id": from, "content": text(content) });
    if let Some(name) = from_agent_name {
        body["from_agent_name"] = json!(name);
    }
    body[THREAD_CALL_KEY] = call;
    NewEvent::new(on, body)
}

/// The dispatch of a primary's thread calls as one handoff under its claim: on the
/// primary `before`, each refused call's error result, and per spawn
/// `session.thread_created`, per call `agent.thread_message_sent`; on each child
/// `session.thread_status_running` and the request's `agent.thread_message_received`;
/// the new threads, the awaits, and the children woken.
pub fn dispatch_handoff(session_id: &str, primary: &str, before: Vec<NewEvent>, planned: &[Planned]) -> Handoff {
    let mut handoff = Handoff { session_id: session_id.to_owned(), ..Handoff::default() };
    let mut parent: Vec<NewEvent> = before.into_iter().map(|event| event.on(primary)).collect();
    let mut children: Vec<NewEvent> = Vec::new();
    for step in planned {
        let (call_id, thread_id, agent_name, message) = match step {
            Planned::Refused { call_id, why } => {
                parent.push(NewEvent::synthetic_result(primary, EventType::AgentToolUse, call_id, why));
                continue;
            }
            Planned::Spawn { call_id, thread_id, agent_name, snapshot, message } => {
                parent.push(
                    NewEvent::thread_created(primary, thread_id, agent_name).with_id(call_event_id(call_id, "created")),
                );
                handoff.new_threads.push(NewThread {
                    id: thread_id.clone(),
                    parent_id: primary.to_owned(),
                    agent: snapshot.clone(),
                    agent_name: agent_name.clone(),
                });
                (call_id, thread_id, agent_name, message)
            }
            Planned::Message { call_id, thread_id, agent_name, message } => (call_id, thread_id, agent_name, message),
        };
        let request = || marker(call_id, "request");
        parent.push(
            message_sent(primary, thread_id, Some(agent_name), message, request())
                .with_id(call_event_id(call_id, "sent")),
        );
        children.push(
            NewEvent::thread_status_running(thread_id, thread_id, agent_name)
                .with_id(call_event_id(call_id, "running")),
        );
        children.push(
            message_received(thread_id, primary, None, message, request()).with_id(call_event_id(call_id, "received")),
        );
        handoff.awaits.push((thread_id.clone(), call_id.clone()));
        handoff.wake.push(thread_id.clone());
    }
    handoff.events = parent;
    handoff.events.extend(children);
    handoff
}

/// Who replies to whom: the child thread and its agent, the call, the primary.
#[derive(Debug, Clone, Copy)]
pub struct Replying<'a> {
    /// The session.
    pub session_id: &'a str,
    /// The primary thread (the parent).
    pub primary: &'a str,
    /// The child thread.
    pub thread_id: &'a str,
    /// The agent it runs.
    pub agent_name: &'a str,
    /// The parent's call it answers.
    pub call_id: &'a str,
}

/// The reply of a child whose turn ended (`events`: the child's own, ending with its
/// idle, committed with it): the child's `agent.thread_message_sent`, the parent's
/// `agent.thread_message_received` and the call's `agent.tool_result`, the release of
/// the wait, and the parent woken. The caller sets the settlement.
pub fn reply_handoff(to: Replying<'_>, owed: &Owed, events: Vec<NewEvent>) -> Handoff {
    let Replying { session_id, primary, thread_id, agent_name, call_id } = to;
    let message = owed.message();
    let (result, is_error) = reply_text(thread_id, agent_name, owed);
    let reply = || marker(call_id, "reply");
    let mut all = events;
    all.push(message_sent(thread_id, primary, None, &message, reply()).with_id(call_event_id(call_id, "replysent")));
    all.push(
        message_received(primary, thread_id, Some(agent_name), &message, reply())
            .with_id(call_event_id(call_id, "replyreceived")),
    );
    all.push(
        NewEvent::tool_result(primary, call_id, text(&result), is_error).with_id(call_event_id(call_id, "result")),
    );
    Handoff {
        session_id: session_id.to_owned(),
        events: all,
        releases: vec![(thread_id.to_owned(), call_id.to_owned())],
        wake: vec![primary.to_owned()],
        ..Handoff::default()
    }
}

/// The primary's waits closed when its turn ends without their replies (an interrupt,
/// a turn given up on, the budget): an error result per call, before the idle that ends
/// `events`, and the release of each wait. The children run on; their later idle owes
/// nothing.
pub fn close_awaiting(session_id: &str, primary: &str, mut events: Vec<NewEvent>, waiting: &[Waiting]) -> Handoff {
    let idle_at = events.iter().rposition(|e| e.is(EventType::SessionStatusIdle)).unwrap_or(events.len());
    let results = waiting.iter().map(|wait| {
        let why = format!("the turn ended before thread {} replied", wait.thread_id);
        NewEvent::synthetic_result(primary, EventType::AgentToolUse, &wait.call_id, &why)
    });
    events.splice(idle_at..idle_at, results);
    Handoff {
        session_id: session_id.to_owned(),
        events: events.into_iter().map(|event| event.on(primary)).collect(),
        releases: waiting.iter().map(|wait| (wait.thread_id.clone(), wait.call_id.clone())).collect(),
        ..Handoff::default()
    }
}

#[cfg(test)]
mod tests {
    use agentd_schema::StopReason;

    use super::*;

    fn kinds(handoff: &Handoff) -> Vec<(&str, &str)> {
        handoff.events.iter().map(|e| (e.thread_id.as_str(), e.kind.as_str())).collect()
    }

    #[test]
    fn a_dispatch_writes_both_sides_with_ids_from_the_call() {
        let planned = [
            Planned::Spawn {
                call_id: "sevt_a".into(),
                thread_id: "sthr_a".into(),
                agent_name: "researcher".into(),
                snapshot: json!({ "type": "agent", "id": "agent_r" }),
                message: "find".into(),
            },
            Planned::Message {
                call_id: "sevt_b".into(),
                thread_id: "sthr_old".into(),
                agent_name: "writer".into(),
                message: "more".into(),
            },
            Planned::Refused { call_id: "sevt_c".into(), why: "no agent".into() },
        ];
        let before = vec![NewEvent::status_running("sesn_1")];
        let handoff = dispatch_handoff("sesn_1", "sesn_1", before, &planned);
        assert_eq!(
            kinds(&handoff),
            [
                ("sesn_1", "session.status_running"),
                ("sesn_1", "session.thread_created"),
                ("sesn_1", "agent.thread_message_sent"),
                ("sesn_1", "agent.thread_message_sent"),
                ("sesn_1", "agent.tool_result"),
                ("sthr_a", "session.thread_status_running"),
                ("sthr_a", "agent.thread_message_received"),
                ("sthr_old", "session.thread_status_running"),
                ("sthr_old", "agent.thread_message_received"),
            ]
        );
        let sent = &handoff.events[2];
        assert_eq!(sent.event_id, call_event_id("sevt_a", "sent"));
        assert_eq!(sent.body["to_session_thread_id"], "sthr_a");
        assert_eq!(sent.body["to_agent_name"], "researcher");
        assert_eq!(sent.body[THREAD_CALL_KEY], json!({ "tool_use_id": "sevt_a", "role": "request" }));
        let received = &handoff.events[6];
        assert_eq!(received.body["from_session_thread_id"], "sesn_1");
        assert!(received.body.get("from_agent_name").is_none(), "from the primary");
        assert_eq!(received.body["content"][0]["text"], "find");
        assert_eq!(handoff.events[5].body["agent_name"], "researcher");
        assert_eq!(handoff.new_threads.len(), 1);
        assert_eq!(handoff.new_threads[0].agent["id"], "agent_r");
        assert_eq!(handoff.awaits, [("sthr_a".into(), "sevt_a".into()), ("sthr_old".into(), "sevt_b".into())]);
        assert_eq!(handoff.wake, ["sthr_a", "sthr_old"]);
        assert!(handoff.settlement.is_none() && handoff.releases.is_empty());
    }

    #[test]
    fn a_reply_answers_the_call_and_wakes_the_parent() {
        let owed = Owed { stop: Some(StopReason::EndTurn), interrupted: false, text: "found it".into() };
        let to = Replying {
            session_id: "sesn_1",
            primary: "sesn_1",
            thread_id: "sthr_a",
            agent_name: "researcher",
            call_id: "sevt_a",
        };
        let idle = NewEvent::status_idle("sthr_a", StopReason::EndTurn).for_thread("researcher");
        let handoff = reply_handoff(to, &owed, vec![idle]);
        assert_eq!(
            kinds(&handoff),
            [
                ("sthr_a", "session.thread_status_idle"),
                ("sthr_a", "agent.thread_message_sent"),
                ("sesn_1", "agent.thread_message_received"),
                ("sesn_1", "agent.tool_result"),
            ]
        );
        let received = &handoff.events[2].body;
        assert_eq!(
            (received["from_agent_name"].as_str(), received["content"][0]["text"].as_str()),
            (Some("researcher"), Some("found it"))
        );
        assert_eq!(received[THREAD_CALL_KEY]["role"], "reply");
        let result = &handoff.events[3];
        assert_eq!(result.event_id, call_event_id("sevt_a", "result"));
        assert_eq!(
            (result.body["tool_use_id"].as_str(), result.body["is_error"].as_bool()),
            (Some("sevt_a"), Some(false))
        );
        assert_eq!(handoff.releases, [("sthr_a".into(), "sevt_a".into())]);
        assert_eq!(handoff.wake, ["sesn_1"]);
    }

    #[test]
    fn closing_waits_answers_each_call_before_the_idle() {
        let waiting = [Waiting { call_id: "sevt_a".into(), thread_id: "sthr_a".into() }];
        let events = vec![NewEvent::status_idle("sesn_1", StopReason::EndTurn)];
        let handoff = close_awaiting("sesn_1", "sesn_1", events, &waiting);
        assert_eq!(kinds(&handoff), [("sesn_1", "agent.tool_result"), ("sesn_1", "session.status_idle")]);
        assert_eq!(handoff.events[0].body["is_error"], true);
        assert_eq!(handoff.events[0].body["content"][0]["text"], "the turn ended before thread sthr_a replied");
        assert_eq!(handoff.releases, [("sthr_a".into(), "sevt_a".into())]);
        assert!(handoff.wake.is_empty());
    }
}
