//! When a session needs hands: a work item on its environment's queue, announced on
//! the bus so long-polls wake at once. Sessions whose agent, and every agent of its
//! multiagent roster, has no sandbox tool of the built-in toolset never need hands and
//! never queue work.

use agentd_proto::Bus;
use bytes::Bytes;
use serde_json::Value;

use crate::error::StoreResult;
use crate::events::{ErrorType, EventType, RetryStatus, SessionError};
#[cfg(doc)]
use crate::store::WorkStore;
use crate::store::{NewEvent, OutboxMessage, Store, Submission, ToolCall, ToolUseKind, WorkItem};

/// The bus channel that wakes pollers of one environment.
pub fn environment_channel(environment_id: &str) -> String {
    format!("work.env.{environment_id}")
}

/// The bus channel that wakes runners of a workspace's `cloud` environments.
pub fn cloud_channel(workspace_id: &str) -> String {
    format!("work.cloud.{workspace_id}")
}

/// The tools of `agent_toolset_20260401` that run in the environment's sandbox (its
/// `web_fetch` and `web_search` run in the worker).
pub const SANDBOX_TOOLS: [&str; 6] = ["bash", "read", "write", "edit", "glob", "grep"];

/// Whether a session of `agent` (its snapshot) needs hands: the agent or an agent of its
/// multiagent roster ([`roster_agents`]) has tools that run in the environment (a
/// thread's agent shares the session's sandbox).
pub fn needs_hands(agent: &Value) -> bool {
    has_sandbox_tool(agent) || roster_agents(agent).into_iter().any(has_sandbox_tool)
}

/// The agents of `agent`'s multiagent roster that may run threads of its sessions (ADR
/// 0022 §1): a `coordinator`'s `agents` but its advisors, and an enabled
/// `subagents.predefined_agents` of a `multiagent_20261001`. In a session's snapshot
/// (what every caller of [`needs_hands`] passes) each is the agent's full definition at
/// its pinned version, `self` included; the `{"type":"self"}` sentinel of a stored
/// agent is the agent itself, and is left out. A stored reference
/// (`{"type":"agent","id","version"}`) carries no tools and adds nothing.
pub fn roster_agents(agent: &Value) -> Vec<&Value> {
    crate::multiagent::roster(&agent["multiagent"])
        .iter()
        .filter(|entry| entry["type"] != "advisor" && entry["type"] != "self")
        .collect()
}

/// Whether one agent definition has a built-in toolset that leaves one of its sandbox
/// tools enabled.
fn has_sandbox_tool(agent: &Value) -> bool {
    agent["tools"].as_array().into_iter().flatten().filter(|tool| tool["type"] == "agent_toolset_20260401").any(
        |toolset| {
            let default = toolset["default_config"]["enabled"].as_bool().unwrap_or(true);
            let configs = toolset["configs"].as_array().map(Vec::as_slice).unwrap_or_default();
            SANDBOX_TOOLS.iter().any(|name| {
                let config = configs.iter().find(|c| c["name"] == *name);
                config.and_then(|c| c["enabled"].as_bool()).unwrap_or(default)
            })
        },
    )
}

/// `cloud` or `self_hosted`, from an environment body.
pub fn hands_of(environment: &Value) -> &'static str {
    if environment["config"]["type"] == "self_hosted" { "self_hosted" } else { "cloud" }
}

/// Queues a work item for the session unless one is open, and wakes pollers.
pub async fn ensure(
    store: &dyn Store,
    bus: &dyn Bus,
    workspace_id: &str,
    environment_id: &str,
    session_id: &str,
    hands: &str,
) -> StoreResult<Option<WorkItem>> {
    let created = store.ensure_work_item(workspace_id, environment_id, session_id, hands).await?;
    if let Some(item) = &created {
        announce(bus, item).await;
    }
    Ok(created)
}

/// Wakes the pollers that may take `item` (best effort: polls also re-check on a timer).
pub async fn announce(bus: &dyn Bus, item: &WorkItem) {
    let payload = Bytes::from(item.id.clone());
    let mut channels = vec![environment_channel(&item.environment_id)];
    if item.hands == "cloud" {
        channels.push(cloud_channel(&item.workspace_id));
    }
    for channel in channels {
        if let Err(error) = bus.publish(&channel, payload.clone()).await {
            tracing::debug!(%error, %channel, "could not announce work; pollers find it on their next check");
        }
    }
}

/// Lost leases a work item may have before its hands are given up on.
pub const MAX_LOST_LEASES: i64 = 3;

/// Expires work leases (see [`WorkStore::expire_work_leases`]) and gives up on the hands
/// of items that lost too many: each unanswered sandbox call of the session gets an
/// error result on its thread, and each thread that had one a `session.error` (retries
/// exhausted) that ends its turn ([`give_up`]). These are input to the threads'
/// runs, committed with one submission that wakes each of them, so the worker idles
/// each exactly once. Returns the submissions' queue messages (every woken run's), for
/// the caller to publish (the outbox relay does; a row it cannot publish stays for the
/// next pass).
pub async fn expire(store: &dyn Store) -> StoreResult<Vec<OutboxMessage>> {
    let lost = store.expire_work_leases(MAX_LOST_LEASES).await?;
    let mut messages = Vec::with_capacity(lost.len());
    for hands in &lost {
        tracing::warn!(work = %hands.work_id, session = %hands.session_id, lost_leases = hands.lost_leases,
            "hands lost too many leases; failing the session's open tool calls");
        let open = store.open_tool_calls(&hands.session_id).await?;
        let message =
            format!("the environment's hands were lost {} times; the tool call was abandoned", hands.lost_leases);
        let GiveUp { events, thread_id, also_wake } = give_up(&hands.session_id, &open, &message);
        let submitted = store
            .submit(Submission {
                session_id: hands.session_id.clone(),
                thread_id,
                events,
                max_attempts: 5,
                trace_context: Vec::new(),
                also_wake,
            })
            .await?;
        messages.push(submitted.outbox);
        messages.extend(submitted.also);
        metrics::counter!("agentd_hands_given_up_total").increment(1);
    }
    Ok(messages)
}

/// What giving up on a session's hands commits, and the threads it wakes: one
/// [`Submission`] of `events` to `thread_id`, waking `also_wake` too.
#[derive(Debug)]
pub struct GiveUp {
    /// The synthetic results and the `session.error`s.
    pub events: Vec<NewEvent>,
    /// The first thread that gets a `session.error`: the primary (the session id) when
    /// it had a call given up or when no call was.
    pub thread_id: String,
    /// The other threads that get one, in the order of their first given-up call.
    pub also_wake: Vec<String>,
}

/// An error result for each open sandbox call of the session (`open`: its calls without
/// a result, from the tool-call ledger), on the call's thread, and a `session.error` on
/// each of those threads that ends its turn (on the primary thread when there was none).
/// Only built-in uses of a [`SANDBOX_TOOLS`] tool ran in the hands: the other built-in
/// uses (`web_fetch`, `spawn_thread`, `consult_advisor`, …) are the worker's and
/// stay open. `message` says why, in each result and each error. Hands that were lost
/// ([`expire`]) and hands that refuse the session (a sandbox execution policy they
/// cannot meet, `domain::hands::refuse` in the gateway) both end this way.
pub fn give_up(session_id: &str, open: &[ToolCall], message: &str) -> GiveUp {
    let sandbox_calls = open.iter().filter(|call| runs_in_hands(call));
    let mut events = Vec::new();
    let mut threads: Vec<String> = Vec::new();
    for call in sandbox_calls {
        events.push(NewEvent::synthetic_result(&call.thread_id, EventType::AgentToolUse, &call.tool_use_id, message));
        if !threads.contains(&call.thread_id) {
            threads.push(call.thread_id.clone());
        }
    }
    // The primary first (the session id alone when no call was given up).
    threads.sort_by_key(|thread| thread != session_id);
    let mut threads = threads.into_iter();
    let thread_id = threads.next().unwrap_or_else(|| session_id.to_owned());
    let also_wake: Vec<String> = threads.collect();
    let error = SessionError::new(ErrorType::UnknownError, message, RetryStatus::Exhausted);
    for thread in std::iter::once(&thread_id).chain(&also_wake) {
        events.push(NewEvent::session_error(thread, &error));
    }
    GiveUp { events, thread_id, also_wake }
}

/// Whether an open call is one the hands run: a built-in use of a [`SANDBOX_TOOLS`] tool.
pub fn runs_in_hands(call: &ToolCall) -> bool {
    call.use_kind == ToolUseKind::Builtin && SANDBOX_TOOLS.contains(&call.name.as_str())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_an_enabled_sandbox_tool_needs_hands() {
        let toolset = |default: bool, configs: Value| json!({ "tools": [{ "type": "agent_toolset_20260401", "default_config": { "enabled": default }, "configs": configs }] });
        assert!(needs_hands(&toolset(true, json!([]))));
        assert!(needs_hands(&json!({ "tools": [{ "type": "agent_toolset_20260401" }] })));
        assert!(needs_hands(&toolset(false, json!([{ "name": "bash", "enabled": true }]))));
        assert!(!needs_hands(&toolset(false, json!([{ "name": "web_fetch", "enabled": true }]))));
        let all_off: Vec<Value> = SANDBOX_TOOLS.iter().map(|name| json!({ "name": name, "enabled": false })).collect();
        assert!(!needs_hands(&toolset(true, Value::Array(all_off))));
        assert!(!needs_hands(&json!({ "tools": [{ "type": "custom", "name": "x" }] })));
    }

    /// A toolset with only `bash` enabled, and one with no sandbox tool.
    fn hands() -> Value {
        json!([{ "type": "agent_toolset_20260401", "default_config": { "enabled": false }, "configs": [{ "name": "bash", "enabled": true }] }])
    }

    fn no_hands() -> Value {
        json!([{ "type": "agent_toolset_20260401", "default_config": { "enabled": false }, "configs": [{ "name": "web_fetch", "enabled": true }] }])
    }

    /// A session's agent snapshot (`session_shape`): roster entries are full definitions.
    fn primary(multiagent: Value) -> Value {
        json!({ "type": "agent", "id": "agent_p", "tools": no_hands(), "multiagent": multiagent })
    }

    fn definition(id: &str, tools: Value) -> Value {
        json!({ "type": "agent", "id": id, "version": 1, "name": id, "tools": tools, "skills": [] })
    }

    #[test]
    fn a_roster_agent_with_a_sandbox_tool_needs_hands() {
        let coordinator = |agents: Value| primary(json!({ "type": "coordinator", "agents": agents }));
        assert!(!needs_hands(&coordinator(json!([definition("agent_a", no_hands())]))));
        assert!(needs_hands(&coordinator(json!([definition("agent_a", no_hands()), definition("agent_b", hands())]))));
        // An advisor runs no tools, whatever it carries.
        assert!(!needs_hands(&coordinator(json!([{ "type": "advisor", "model": "m", "tools": hands() }]))));
        // `self` (the sentinel, as stored) is the agent itself; a reference carries no tools.
        assert!(!needs_hands(&coordinator(
            json!([{ "type": "self" }, { "type": "agent", "id": "agent_b", "version": 2 }])
        )));
        let mut own = coordinator(json!([{ "type": "self" }]));
        own["tools"] = hands();
        assert!(needs_hands(&own));

        let merged = |subagents: &str, agents: Value| {
            primary(json!({ "type": "multiagent_20261001", "advisor": { "type": "disabled" },
                "subagents": { "type": subagents, "predefined_agents": agents } }))
        };
        assert!(needs_hands(&merged("enabled", json!([definition("agent_b", hands())]))));
        assert!(!needs_hands(&merged("enabled", json!([definition("agent_b", no_hands())]))));
        assert!(!needs_hands(&merged("disabled", json!([definition("agent_b", hands())]))), "no threads are spawned");
        assert!(!needs_hands(&primary(Value::Null)));
        assert_eq!(
            roster_agents(&merged("enabled", json!([{ "type": "self" }, definition("agent_b", hands())]))).len(),
            1
        );
    }

    const LOST: &str = "the environment's hands were lost 3 times; the tool call was abandoned";

    fn open_call(thread: &str, tool_use_id: &str, use_kind: ToolUseKind, name: &str) -> ToolCall {
        ToolCall {
            session_id: "sesn_1".into(),
            thread_id: thread.into(),
            tool_use_id: tool_use_id.into(),
            use_kind,
            name: name.into(),
            evaluated_permission: Some("allow".into()),
            use_seq: 1,
            confirmation: None,
            confirmation_event_id: None,
            confirmation_seq: None,
            result_event_id: None,
            result_kind: None,
            result_seq: None,
        }
    }

    /// `(type, thread, answered use)` of each event.
    fn shapes(events: &[NewEvent]) -> Vec<(&str, &str, Option<&str>)> {
        events.iter().map(|e| (e.kind.as_str(), e.thread_id.as_str(), e.body["tool_use_id"].as_str())).collect()
    }

    #[test]
    fn only_sandbox_calls_are_given_up_each_on_its_thread() {
        let open = [
            open_call("sesn_1", "sevt_spawn", ToolUseKind::Builtin, "spawn_thread"),
            open_call("sthr_b", "sevt_bash_b", ToolUseKind::Builtin, "bash"),
            open_call("sthr_c", "sevt_fetch_c", ToolUseKind::Builtin, "web_fetch"),
            open_call("sthr_a", "sevt_read_a", ToolUseKind::Builtin, "read"),
            open_call("sthr_b", "sevt_grep_b", ToolUseKind::Builtin, "grep"),
            open_call("sesn_1", "sevt_advisor", ToolUseKind::Builtin, "consult_advisor"),
            open_call("sthr_a", "sevt_custom", ToolUseKind::Custom, "bash"),
            open_call("sthr_a", "sevt_mcp", ToolUseKind::Mcp, "read"),
        ];
        let given_up = give_up("sesn_1", &open, LOST);
        assert_eq!(
            shapes(&given_up.events),
            [
                ("agent.tool_result", "sthr_b", Some("sevt_bash_b")),
                ("agent.tool_result", "sthr_a", Some("sevt_read_a")),
                ("agent.tool_result", "sthr_b", Some("sevt_grep_b")),
                ("session.error", "sthr_b", None),
                ("session.error", "sthr_a", None),
            ]
        );
        assert_eq!(
            (given_up.thread_id.as_str(), given_up.also_wake.as_slice()),
            ("sthr_b", ["sthr_a".to_owned()].as_slice())
        );
        assert_eq!(given_up.events[0].body["is_error"], true);
        assert!(given_up.events[0].body.to_string().contains("lost 3 times"));

        // The primary's own sandbox call: the primary is woken first.
        let open = [
            open_call("sthr_a", "sevt_bash_a", ToolUseKind::Builtin, "bash"),
            open_call("sesn_1", "sevt_bash", ToolUseKind::Builtin, "bash"),
        ];
        let given_up = give_up("sesn_1", &open, LOST);
        assert_eq!(
            (given_up.thread_id.as_str(), given_up.also_wake.as_slice()),
            ("sesn_1", ["sthr_a".to_owned()].as_slice())
        );
        assert_eq!(
            shapes(&given_up.events)[2..],
            [("session.error", "sesn_1", None), ("session.error", "sthr_a", None)]
        );
    }

    #[test]
    fn with_no_sandbox_call_open_only_the_primary_turn_ends() {
        let open = [open_call("sesn_1", "sevt_spawn", ToolUseKind::Builtin, "spawn_thread")];
        let given_up = give_up("sesn_1", &open, LOST);
        assert_eq!(shapes(&given_up.events), [("session.error", "sesn_1", None)]);
        assert_eq!((given_up.thread_id.as_str(), given_up.also_wake.len()), ("sesn_1", 0));
        assert_eq!(given_up.events[0].body["error"]["retry_status"]["type"], "exhausted");
    }
}
