//! The fold kept with a thread's history: extended step by step, it decides and builds
//! the conversation as a fold of the whole history does.

use super::*;
use crate::agent_loop;

/// A long thread with tool calls, confirmations, an interrupt and a few turns.
fn long_thread() -> Vec<Value> {
    let mut events = Vec::new();
    for turn in 0..4 {
        events.extend([
            user(&format!("turn {turn}")),
            json!({"type":"session.status_running"}),
            json!({"type":"span.model_request_start"}),
            json!({"type":"agent.custom_tool_use","id":format!("c{turn}"),"name":"lookup","input":{}}),
            builtin_tool_use("bash", json!({"command": "ls"}), "always_ask"),
            json!({"type":"span.model_request_end"}),
            idle(json!({"type":"requires_action","event_ids":[format!("c{turn}")]})),
            json!({"type":"user.custom_tool_result","custom_tool_use_id":format!("c{turn}"),"content":[]}),
        ]);
        if turn == 2 {
            events.push(json!({"type":"user.interrupt"}));
        }
    }
    events
}

/// A decision without the fresh ids of the events it would commit.
pub(super) fn shape(decision: Decision) -> String {
    let text = format!("{decision:?}");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("event_id: \"") {
        let (head, tail) = rest.split_at(at + "event_id: \"".len());
        out.push_str(head);
        rest = tail.split_once('"').map_or("", |(_, after)| after);
        out.push_str("…\"");
    }
    out + rest
}

#[test]
fn a_fold_extended_step_by_step_decides_as_a_whole_fold() {
    let mut events = events(history(&long_thread()));
    let mut folded = Folded::default();
    // Grown a few events at a time, as a worker's history grows between decisions; what
    // was folded is packed, as the history cache keeps it between attempts.
    for end in (0..=events.len()).step_by(3).chain([events.len()]) {
        let prefix = &events[..end];
        let (step, whole) = (decide_folded(&agent(), prefix, &mut folded), agent_loop::decide(&agent(), prefix));
        assert_eq!(shape(step), shape(whole), "after {end} events");
        assert_eq!(folded.folded_events(), end);
        events[..end].iter_mut().for_each(Event::pack);
    }
}

#[test]
fn a_history_the_fold_does_not_extend_is_folded_again() {
    let events = events(history(&long_thread()));
    let mut folded = Folded::default();
    decide_folded(&agent(), &events[..10], &mut folded);
    // Shorter than the fold (the caller truncated what it looked ahead at).
    assert_eq!(
        shape(decide_folded(&agent(), &events[..6], &mut folded)),
        shape(agent_loop::decide(&agent(), &events[..6]))
    );
    // The same length but another event where the fold's last one was: something else was
    // committed in between.
    decide_folded(&agent(), &events[..12], &mut folded);
    let mut other = events[..14].to_vec();
    other.remove(9);
    assert_eq!(shape(decide_folded(&agent(), &other, &mut folded)), shape(agent_loop::decide(&agent(), &other)));
    assert_eq!(folded.folded_events(), other.len());
}

/// A thread whose input arrives while requests run, with a system message, tool calls
/// and their results, and a last request cut off with input held for it.
fn thread_with_held_input() -> Vec<Value> {
    vec![
        user("one"),
        json!({"type":"session.status_running"}),
        json!({"type":"span.model_request_start"}),
        user("two"),
        json!({"type":"system.message","content":[{"type":"text","text":"mind the time"}]}),
        json!({"type":"agent.message","content":[{"type":"text","text":"re: one"}]}),
        json!({"type":"agent.custom_tool_use","id":"c1","name":"lookup","input":{"q":1}}),
        json!({"type":"span.model_request_end"}),
        json!({"type":"user.custom_tool_result","custom_tool_use_id":"c1","content":[{"type":"text","text":"42"}]}),
        json!({"type":"span.model_request_start"}),
        json!({"type":"agent.message","content":[{"type":"text","text":"re: two"}]}),
        json!({"type":"span.model_request_end"}),
        idle(json!({"type":"end_turn"})),
        user("three"),
        json!({"type":"session.status_running"}),
        json!({"type":"span.model_request_start"}),
        user("four"),
    ]
}

#[test]
fn the_conversation_of_a_fold_grown_step_by_step_is_the_whole_folds() {
    let events = events(history(&thread_with_held_input()));
    for step in 1..=4 {
        let mut folded = Folded::default();
        // The request built before, still held while the fold grows (its messages are
        // shared with the fold): growing copies them instead of changing the request's.
        let mut before: Option<(usize, Arc<Vec<Message>>)> = None;
        for end in (0..=events.len()).step_by(step).chain([events.len()]) {
            let prefix = &events[..end];
            folded.update(prefix);
            let (system, grown) = folded.conversation().build(&agent(), prefix);
            assert_eq!(
                (system, (*grown).clone()),
                conversation(&agent(), prefix),
                "after {end} events, {step} at a time"
            );
            if let Some((at, messages)) = before.replace((end, grown)) {
                assert_eq!(*messages, conversation(&agent(), &events[..at]).1, "the request built at {at} events");
            }
        }
    }
    // What it is, whole: held input follows the output of the request it arrived during,
    // and the cut-off request's held input ends the conversation.
    let (system, messages) = Folded::of(&events).conversation().build(&agent(), &events);
    assert_eq!(system.as_deref(), Some("be brief\n\nmind the time"));
    let texts: Vec<(Role, Vec<&Block>)> = messages.iter().map(|m| (m.role, m.content.iter().collect())).collect();
    let text = |t: &str| Block::Text(t.to_owned());
    let lookup = Block::ToolUse { id: "c1".into(), name: "lookup".into(), input: json!({"q": 1}) };
    let answer =
        Block::ToolResult { tool_use_id: "c1".into(), content: json!([{"type":"text","text":"42"}]), is_error: false };
    assert_eq!(
        texts,
        vec![
            (Role::User, vec![&text("one")]),
            (Role::Assistant, vec![&text("re: one"), &lookup]),
            (Role::User, vec![&text("two"), &answer]),
            (Role::Assistant, vec![&text("re: two")]),
            (Role::User, vec![&text("three"), &text("four")]),
        ]
    );
}

#[test]
fn a_fold_weighs_its_conversation() {
    let events = events(history(&thread_with_held_input()));
    let (small, whole) = (Folded::of(&events[..1]), Folded::of(&events));
    assert!(small.heap_bytes() >= "one".len() && small.heap_bytes() < whole.heap_bytes());
    // Folded again from the start when the history is another: it weighs only that one.
    let mut again = whole.clone();
    again.update(&events[..1]);
    assert_eq!(again.heap_bytes(), small.heap_bytes());
}
