//! Event types, constructors and the open-call fold.

use serde_json::{Value, json};

use super::*;
use crate::store::{NewEvent, StoredEvent};

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
        stored(3, "t2", json!({ "type": "agent.mcp_tool_use", "name": "add", "mcp_server_name": "calc", "input": 1 })),
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
