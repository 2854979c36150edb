//! The agent loop as a state machine: committed history in, the next action out.
//! No IO happens here; `run.rs` performs the actions and feeds the results back as
//! committed history. Because the input is only committed history, a replay after a
//! crash decides the same thing again and never repeats a committed step.

use std::collections::{HashMap, HashSet};

use agentd_schema::StoredEvent;
use serde_json::{Value, json};

use crate::providers::{Block, Message, ModelRequest, Role, ToolSpec};

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Commit `before`, then run a model request.
    CallModel {
        /// Events to commit first (status changes, synthetic tool results).
        before: Vec<Value>,
        /// The request.
        request: ModelRequest,
    },
    /// Commit these events (ending with `session.status_idle`) and park the run.
    Idle {
        /// The events.
        events: Vec<Value>,
    },
    /// Built-in tool calls are out with the environment's hands (our runner on `cloud`,
    /// the customer's worker on `self_hosted`): park without committing; the session
    /// stays `running` and their results make the run runnable again.
    AwaitHands {
        /// Events to commit first (a closed span, synthetic results of denied calls).
        events: Vec<Value>,
    },
    /// Commit `before`, then make these calls to remote tools (MCP servers, A2A agents)
    /// and commit their results (`run.rs` and `remote.rs` do the IO).
    CallRemote {
        /// Events to commit first (a status change, synthetic results of denied calls).
        before: Vec<Value>,
        /// The calls, in the order the model made them.
        calls: Vec<RemoteCall>,
    },
    /// Nothing to do: park the run without committing.
    Park,
}

/// A committed remote tool call that has no result yet and may run.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteCall {
    /// The id of its `agent.mcp_tool_use` / `agent.tool_use` event.
    pub id: String,
    /// Which remote tool.
    pub target: RemoteTarget,
    /// The model's input.
    pub input: Value,
    /// Whether this decision is what releases the call (`before` starts the session
    /// running after a confirmation). A call released earlier may have been started by
    /// an attempt that died: see ADR 0009 for how `run.rs` treats it.
    pub released_now: bool,
}

/// Where a remote call goes.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteTarget {
    /// A tool of the agent's MCP server `server`.
    Mcp {
        /// The `mcp_servers` entry's name.
        server: String,
        /// The MCP tool's name.
        tool: String,
    },
    /// An `a2a_agent` tool of the agent (named `tool`).
    A2a {
        /// The tool's name in the agent's `tools`.
        tool: String,
    },
}

/// How a tool call is handled, from the agent's tool configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolClass {
    /// A custom tool: the client answers with `user.custom_tool_result`.
    Custom,
    /// A built-in toolset tool with its resolved permission policy.
    Builtin {
        /// `always_allow`, `always_ask` or `auto`.
        policy: String,
    },
    /// An `a2a_agent` tool (an agentd extension): another agent called over A2A.
    A2a {
        /// `always_allow` or `always_ask`.
        policy: String,
    },
    /// Not a tool of this agent.
    Unknown,
}

/// The sandbox tools of `agent_toolset_20260401` offered to the model, with schemas.
const BUILTIN_TOOLS: &[(&str, &str, &str)] = &[
    (
        "bash",
        "Run a shell command in the session's sandbox.",
        r#"{"type":"object","properties":{"command":{"type":"string"},"restart":{"type":"boolean"},"timeout_ms":{"type":"integer"}}}"#,
    ),
    (
        "read",
        "Read a file.",
        r#"{"type":"object","properties":{"file_path":{"type":"string"},"view_range":{"type":"array","items":{"type":"integer"}}},"required":["file_path"]}"#,
    ),
    (
        "write",
        "Write a file.",
        r#"{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}"#,
    ),
    (
        "edit",
        "Replace text in a file.",
        r#"{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["file_path","old_string","new_string"]}"#,
    ),
    (
        "glob",
        "Find files by pattern.",
        r#"{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}},"required":["pattern"]}"#,
    ),
    (
        "grep",
        "Search file contents by regex.",
        r#"{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}},"required":["pattern"]}"#,
    ),
];

/// Classifies a tool name against the agent's `tools`.
pub fn classify(agent: &Value, name: &str) -> ToolClass {
    for tool in agent["tools"].as_array().into_iter().flatten() {
        match tool["type"].as_str() {
            Some("custom") if tool["name"] == name => return ToolClass::Custom,
            Some("a2a_agent") if tool["name"] == name => {
                let policy = tool["permission_policy"]["type"].as_str().unwrap_or("always_allow");
                return ToolClass::A2a { policy: policy.to_owned() };
            }
            Some("agent_toolset_20260401") if BUILTIN_TOOLS.iter().any(|(n, _, _)| *n == name) => {
                let config = tool["configs"].as_array().into_iter().flatten().find(|c| c["name"] == name);
                let enabled = config
                    .and_then(|c| c["enabled"].as_bool())
                    .or(tool["default_config"]["enabled"].as_bool())
                    .unwrap_or(true);
                if !enabled {
                    return ToolClass::Unknown;
                }
                let policy = config
                    .and_then(|c| c["permission_policy"]["type"].as_str())
                    .or(tool["default_config"]["permission_policy"]["type"].as_str())
                    .unwrap_or("always_allow");
                return ToolClass::Builtin { policy: policy.to_owned() };
            }
            _ => {}
        }
    }
    ToolClass::Unknown
}

/// The tools offered to the model.
pub fn tool_specs(agent: &Value) -> Vec<ToolSpec> {
    let mut specs = Vec::new();
    for tool in agent["tools"].as_array().into_iter().flatten() {
        match tool["type"].as_str() {
            Some("custom") => specs.push(ToolSpec {
                name: tool["name"].as_str().unwrap_or_default().to_owned(),
                description: tool["description"].as_str().unwrap_or_default().to_owned(),
                input_schema: tool["input_schema"].clone(),
            }),
            Some("agent_toolset_20260401") => {
                for (name, description, schema) in BUILTIN_TOOLS {
                    if classify(agent, name) != ToolClass::Unknown {
                        specs.push(ToolSpec {
                            name: (*name).to_owned(),
                            description: (*description).to_owned(),
                            input_schema: serde_json::from_str(schema).unwrap_or_default(),
                        });
                    }
                }
            }
            Some("a2a_agent") => specs.push(ToolSpec {
                name: tool["name"].as_str().unwrap_or_default().to_owned(),
                description: tool["description"]
                    .as_str()
                    .map_or_else(|| format!("Send a message to the agent at {}.", tool["url"].as_str().unwrap_or_default()), str::to_owned),
                input_schema: json!({
                    "type": "object",
                    "properties": { "message": { "type": "string", "description": "The message to send to the agent." } },
                    "required": ["message"],
                }),
            }),
            // MCP tools are listed from their servers at run time (`mcp.rs`).
            _ => {}
        }
    }
    specs
}

/// The `agent.tool_use` body for a built-in tool call under `policy`.
pub fn builtin_tool_use(name: &str, input: Value, policy: &str) -> Value {
    let (permission, evaluation) = permission(policy);
    json!({ "type": "agent.tool_use", "name": name, "input": input, "evaluated_permission": permission, "evaluation": evaluation })
}

/// The `agent.mcp_tool_use` body for a call of `server`'s tool `name` under `policy`.
pub fn mcp_tool_use(server: &str, name: &str, input: Value, policy: &str) -> Value {
    let (permission, evaluation) = permission(policy);
    json!({
        "type": "agent.mcp_tool_use", "name": name, "mcp_server_name": server, "input": input,
        "evaluated_permission": permission, "evaluation": evaluation,
    })
}

/// The evaluated permission and its evaluation for a resolved policy.
fn permission(policy: &str) -> (&'static str, Value) {
    match policy {
        "always_allow" => ("allow", json!({ "type": "always_allow" })),
        "always_ask" => ("ask", json!({ "type": "always_ask" })),
        // No per-call judge yet: `auto` asks, and says it could not decide.
        _ => (
            "ask",
            json!({ "type": "auto", "evaluated_permission": { "type": "ask", "reason_code": "indeterminate" } }),
        ),
    }
}

fn text_blocks(content: &Value) -> Vec<Block> {
    content
        .as_array()
        .into_iter()
        .flatten()
        .map(|block| match block["type"].as_str() {
            Some("text") => Block::Text(block["text"].as_str().unwrap_or_default().to_owned()),
            _ => Block::Raw(block.clone()),
        })
        .collect()
}

fn result_content(content: &Value) -> Value {
    match content.as_array() {
        Some(blocks) if !blocks.is_empty() => content.clone(),
        _ => json!([{ "type": "text", "text": "(no output)" }]),
    }
}

/// Adds user content delivered after the request was built (the live inbox) to its end.
pub fn append_user_input(request: &mut ModelRequest, content: &Value) {
    let blocks = text_blocks(content);
    match request.messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.extend(blocks),
        _ => request.messages.push(Message { role: Role::User, content: blocks }),
    }
}

/// Builds the model conversation from committed history. Input committed while a
/// model request was running (mid-turn messages, early tool results) is placed after
/// that request's output, where the model will read it.
pub fn conversation(agent: &Value, history: &[StoredEvent]) -> (Option<String>, Vec<Message>) {
    let mut system: Vec<String> =
        agent["system"].as_str().filter(|s| !s.is_empty()).map(str::to_owned).into_iter().collect();
    let mut messages: Vec<Message> = Vec::new();
    let mut deferred: Vec<&StoredEvent> = Vec::new();
    let mut in_request = false;
    for event in history {
        match event.kind.as_str() {
            "span.model_request_start" => in_request = true,
            "span.model_request_end" => {
                in_request = false;
                for held in deferred.drain(..) {
                    add(&mut messages, &mut system, held);
                }
            }
            kind if in_request && (kind.starts_with("user.") || kind == "system.message") => deferred.push(event),
            _ => add(&mut messages, &mut system, event),
        }
    }
    for held in deferred {
        add(&mut messages, &mut system, held);
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    (system, messages)
}

fn add(messages: &mut Vec<Message>, system: &mut Vec<String>, event: &StoredEvent) {
    let mut push = |role: Role, blocks: Vec<Block>| {
        if blocks.is_empty() {
            return;
        }
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(Message { role, content: blocks }),
        }
    };
    let body = &event.body;
    match event.kind.as_str() {
        "user.message" => push(Role::User, text_blocks(&body["content"])),
        "system.message" => system.extend(text_blocks(&body["content"]).into_iter().filter_map(|b| match b {
            Block::Text(t) => Some(t),
            _ => None,
        })),
        "agent.message" => push(Role::Assistant, text_blocks(&body["content"])),
        "agent.tool_use" | "agent.custom_tool_use" | "agent.mcp_tool_use" => push(
            Role::Assistant,
            vec![Block::ToolUse {
                id: event.event_id.clone(),
                name: body["name"].as_str().unwrap_or_default().to_owned(),
                input: if body["input"].is_object() { body["input"].clone() } else { json!({}) },
            }],
        ),
        "user.custom_tool_result" | "user.tool_result" | "agent.tool_result" | "agent.mcp_tool_result" => {
            let id_field = match event.kind.as_str() {
                "user.custom_tool_result" => "custom_tool_use_id",
                "agent.mcp_tool_result" => "mcp_tool_use_id",
                _ => "tool_use_id",
            };
            push(
                Role::User,
                vec![Block::ToolResult {
                    tool_use_id: body[id_field].as_str().unwrap_or_default().to_owned(),
                    content: result_content(&body["content"]),
                    is_error: body["is_error"].as_bool().unwrap_or(false),
                }],
            );
        }
        _ => {}
    }
}

/// The result of a remote call the user interrupted before it was made (the live
/// attempt knows it did not make it).
pub const NOT_MADE_INTERRUPTED: &str = "not made: the user interrupted the turn";

/// The result of a released remote call that history shows interrupted but not
/// answered: the attempt that released it may have died while making it, so the
/// decision cannot say it was not made.
pub const INTERRUPTED_UNANSWERED: &str = "not completed: the user interrupted the turn; if the worker running this call stopped, it may or may not have taken effect";

/// Decides the next step of a thread from its committed history.
pub fn decide(agent: &Value, history: &[StoredEvent]) -> Decision {
    let mut uses: Vec<(usize, &str, &str, Option<&str>, &Value)> = Vec::new();
    let mut answered: HashSet<&str> = HashSet::new();
    let mut confirmations: HashMap<&str, (&str, Option<&str>)> = HashMap::new();
    // Where each call was last released: its use, or the confirmation that allowed it.
    let mut released_at: HashMap<&str, usize> = HashMap::new();
    let mut last_model_start: Option<usize> = None;
    // The start of the last request that also ended: a request cut off by a crash
    // consumed nothing, and its input is still pending.
    let mut last_completed_start: Option<usize> = None;
    let mut last_model_end: Option<usize> = None;
    let mut last_input: Option<usize> = None;
    let mut last_interrupt: Option<usize> = None;
    // The last input from the client: what an interrupt is measured against (results
    // the worker records for its own calls do not resume an interrupted turn).
    let mut last_client_input: Option<usize> = None;
    let mut last_idle: Option<(usize, &Value)> = None;
    // A session.error that gave up (retries or hands exhausted) ends the turn.
    let mut last_given_up: Option<usize> = None;
    let mut running = false;
    for (i, event) in history.iter().enumerate() {
        let body = &event.body;
        match event.kind.as_str() {
            "agent.tool_use" | "agent.custom_tool_use" | "agent.mcp_tool_use" => {
                uses.push((
                    i,
                    event.event_id.as_str(),
                    event.kind.as_str(),
                    body["evaluated_permission"].as_str(),
                    body,
                ));
            }
            "user.custom_tool_result" => {
                answered.insert(body["custom_tool_use_id"].as_str().unwrap_or_default());
                last_input = Some(i);
                last_client_input = Some(i);
            }
            "user.tool_result" | "agent.tool_result" => {
                answered.insert(body["tool_use_id"].as_str().unwrap_or_default());
                last_input = Some(i);
                if event.kind == "user.tool_result" {
                    last_client_input = Some(i);
                }
            }
            "agent.mcp_tool_result" => {
                answered.insert(body["mcp_tool_use_id"].as_str().unwrap_or_default());
                last_input = Some(i);
            }
            "user.tool_confirmation" => {
                let id = body["tool_use_id"].as_str().unwrap_or_default();
                confirmations.insert(id, (body["result"].as_str().unwrap_or("deny"), body["deny_message"].as_str()));
                released_at.insert(id, i);
                last_input = Some(i);
                last_client_input = Some(i);
            }
            "user.message" | "system.message" | "user.define_outcome" => {
                last_input = Some(i);
                last_client_input = Some(i);
            }
            "user.interrupt" => last_interrupt = Some(i),
            "span.model_request_start" => last_model_start = Some(i),
            "span.model_request_end" => {
                last_model_end = Some(i);
                // A request that failed (a provider error, or a cut-off request closed
                // after a crash) consumed nothing: its input is still pending.
                if body["is_error"] != true {
                    last_completed_start = last_model_start;
                }
            }
            "session.status_idle" => {
                last_idle = Some((i, &body["stop_reason"]));
                running = false;
            }
            "session.status_running" => running = true,
            "session.error" if body["error"]["retry_status"]["type"] == "exhausted" => last_given_up = Some(i),
            _ => {}
        }
    }
    let mut before = Vec::new();
    // A request whose start was committed but whose end never was (its worker died):
    // close its span so the history reads cleanly; the input it had is still pending.
    if let Some(start) = last_model_start.filter(|start| last_model_end.is_none_or(|end| end < *start)) {
        before.push(json!({
            "type": "span.model_request_end",
            "model_request_start_id": history[start].event_id,
            "is_error": true,
            "model_usage": { "input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0 },
        }));
    }
    let mut blocking = Vec::new();
    let mut with_hands = Vec::new();
    let mut remote = Vec::new();
    for (at, id, kind, permission, body) in &uses {
        if answered.contains(id) {
            continue;
        }
        if *kind == "agent.custom_tool_use" {
            blocking.push(*id);
            continue;
        }
        if *permission == Some("ask") {
            match confirmations.get(id) {
                None => {
                    blocking.push(*id);
                    continue;
                }
                Some(("deny", message)) => {
                    let text = message.unwrap_or("The user denied this tool call.");
                    before.push(synthetic_result(kind, id, text));
                    continue;
                }
                Some(_) => {}
            }
        }
        let name = body["name"].as_str().unwrap_or_default();
        let input = if body["input"].is_object() { body["input"].clone() } else { json!({}) };
        // A remote call is made by the worker after this decision: a user interrupt
        // committed since it was released (its use, or the confirmation allowing it)
        // means it is not made.
        let is_remote = *kind == "agent.mcp_tool_use" || matches!(classify(agent, name), ToolClass::A2a { .. });
        let released = released_at.get(id).copied().unwrap_or(*at).max(*at);
        if is_remote && last_interrupt.is_some_and(|interrupt| interrupt > released) {
            before.push(synthetic_result(kind, id, INTERRUPTED_UNANSWERED));
            continue;
        }
        match *kind {
            "agent.mcp_tool_use" => {
                let server = body["mcp_server_name"].as_str().unwrap_or_default().to_owned();
                let target = RemoteTarget::Mcp { server, tool: name.to_owned() };
                remote.push(RemoteCall { id: (*id).to_owned(), target, input, released_now: false });
            }
            _ if matches!(classify(agent, name), ToolClass::A2a { .. }) => {
                let target = RemoteTarget::A2a { tool: name.to_owned() };
                remote.push(RemoteCall { id: (*id).to_owned(), target, input, released_now: false });
            }
            // Hands run only the sandbox's tools; an A2A tool removed from the agent since
            // its call was made has no one to run it.
            _ if !BUILTIN_TOOLS.iter().any(|(n, _, _)| *n == name) => {
                before.push(synthetic_result(kind, id, &format!("tool {name} is no longer available to this agent")));
            }
            _ => with_hands.push(*id),
        }
    }
    // The environment's hands gave up on the turn (see `hands::give_up`), or a remote
    // tool's server failed (see `remote.rs`): the turn ends.
    if let Some(error) = last_given_up
        && last_idle.is_none_or(|(i, _)| i < error)
        && last_input.is_none_or(|input| input < error)
    {
        let mut events = before;
        events.push(idle(json!({ "type": "retries_exhausted" })));
        return Decision::Idle { events };
    }
    // Remote calls run here and now, before the turn waits on anything else.
    if !remote.is_empty() {
        // A confirmation that released a call resumes an idle session; that commit is
        // also the durable mark that the call is being started.
        if !running {
            before.insert(0, json!({ "type": "session.status_running" }));
            for call in &mut remote {
                call.released_now = true;
            }
        }
        return Decision::CallRemote { before, calls: remote };
    }
    if !blocking.is_empty() {
        let stop = json!({ "type": "requires_action", "event_ids": blocking });
        let already = last_idle.is_some_and(|(i, reason)| *reason == stop && last_input.is_none_or(|input| input < i));
        if already && before.is_empty() {
            return Decision::Park;
        }
        let mut events = before;
        events.push(idle(stop));
        return Decision::Idle { events };
    }
    if !with_hands.is_empty() {
        // A confirmation that released a call resumes an idle session.
        if !running {
            before.insert(0, json!({ "type": "session.status_running" }));
        }
        return Decision::AwaitHands { events: before };
    }
    // Input is consumed by a model request only if it was committed before that
    // request started; anything later (mid-turn input, tool results) is still pending.
    let synthetic_results =
        before.iter().any(|e| e["type"] == "agent.tool_result" || e["type"] == "agent.mcp_tool_result");
    // A turn that was given up on consumed the input before it too.
    let consumed_up_to = last_completed_start.max(last_given_up);
    let pending_input =
        synthetic_results || last_input.is_some_and(|input| consumed_up_to.is_none_or(|start| input > start));
    let interrupted = last_interrupt.is_some_and(|interrupt| last_client_input.is_none_or(|input| interrupt > input));
    if pending_input && !interrupted {
        if !running {
            before.insert(0, json!({ "type": "session.status_running" }));
        }
        let (system, messages) = conversation(agent, history);
        let mut request = ModelRequest {
            model: agent["model"]["id"].as_str().unwrap_or_default().to_owned(),
            system,
            messages,
            tools: tool_specs(agent),
            max_tokens: 8192,
        };
        // Synthetic results committed with this step are part of the request too.
        for event in &before {
            let id_field = match event["type"].as_str() {
                Some("agent.tool_result") => "tool_use_id",
                Some("agent.mcp_tool_result") => "mcp_tool_use_id",
                _ => continue,
            };
            {
                request.messages.push(Message {
                    role: Role::User,
                    content: vec![Block::ToolResult {
                        tool_use_id: event[id_field].as_str().unwrap_or_default().to_owned(),
                        content: event["content"].clone(),
                        is_error: true,
                    }],
                });
            }
        }
        return Decision::CallModel { before, request };
    }
    let idle_after_last_step = last_idle.is_some_and(|(i, _)| {
        last_model_end.is_none_or(|end| i > end) && last_interrupt.is_none_or(|interrupt| i > interrupt)
    });
    if running || (!idle_after_last_step && (last_model_end.is_some() || interrupted)) {
        let mut events = before;
        events.push(idle(json!({ "type": "end_turn" })));
        return Decision::Idle { events };
    }
    Decision::Park
}

/// The error result of a call that will not run: `agent.mcp_tool_result` for an MCP
/// call, `agent.tool_result` otherwise.
pub fn synthetic_result(kind: &str, id: &str, text: &str) -> Value {
    let content = json!([{ "type": "text", "text": text }]);
    if kind == "agent.mcp_tool_use" {
        json!({ "type": "agent.mcp_tool_result", "mcp_tool_use_id": id, "is_error": true, "content": content })
    } else {
        json!({ "type": "agent.tool_result", "tool_use_id": id, "is_error": true, "content": content })
    }
}

fn idle(stop_reason: Value) -> Value {
    json!({ "type": "session.status_idle", "stop_reason": stop_reason, "stop_details": null })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(before, vec![json!({ "type": "session.status_running" })]);
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
        assert_eq!(decision, Decision::Idle { events: vec![idle(json!({ "type": "end_turn" }))] });
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
        assert_eq!(idle_events[0]["stop_reason"], json!({ "type": "requires_action", "event_ids": ["t1", "t2"] }));
        events.extend(idle_events);
        events.push(json!({"type":"user.custom_tool_result","custom_tool_use_id":"t1","content":[]}));
        let Decision::Idle { events: again } = decide(&agent(), &history(&events)) else { panic!() };
        assert_eq!(again[0]["stop_reason"]["event_ids"], json!(["t2"]), "fewer answers re-idle with the remainder");
        events.extend(again);
        events.push(json!({"type":"user.custom_tool_result","custom_tool_use_id":"t2","content":[]}));
        let decision = decide(&agent(), &history(&events));
        let Decision::CallModel { before, request } = decision else { panic!("{decision:?}") };
        assert_eq!(before, vec![json!({ "type": "session.status_running" })]);
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
        assert_eq!(before[0]["type"], "session.status_running");
        assert_eq!(before[1]["type"], "agent.tool_result");
        assert_eq!(before[1]["is_error"], true);
        assert_eq!(before[1]["content"][0]["text"], "no");
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
        assert_eq!(idle_events, vec![idle(json!({"type":"retries_exhausted"}))]);
        events.extend(idle_events);
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
        let events =
            vec![user("go"), json!({"type":"session.status_running"}), json!({"type":"span.model_request_start"})];
        let Decision::CallModel { before, request } = decide(&agent(), &history(&events)) else { panic!() };
        assert_eq!(before.len(), 1, "the orphaned span is closed: {before:?}");
        assert_eq!(before[0]["type"], "span.model_request_end");
        assert_eq!(before[0]["model_request_start_id"], "sevt_2");
        assert_eq!(before[0]["is_error"], true);
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
        assert_eq!(before[0]["model_request_start_id"], "sevt_4", "the second cut-off request is closed");
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
        assert_eq!(
            decide(&agent(), &history(&events)),
            Decision::Idle { events: vec![idle(json!({"type":"end_turn"}))] }
        );
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
        let events = vec![
            user("go"),
            json!({"type":"session.status_running"}),
            mcp,
            a2a,
            json!({"type":"span.model_request_end"}),
        ];
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
        assert_eq!(idle_events[0]["stop_reason"], json!({ "type": "requires_action", "event_ids": ["t1"] }));
        events.extend(idle_events);

        let mut allowed = events.clone();
        allowed.push(json!({"type":"user.tool_confirmation","tool_use_id":"t1","result":"allow"}));
        let Decision::CallRemote { before, calls } = decide(&remote_agent(), &history(&allowed)) else { panic!() };
        assert_eq!(before, vec![json!({ "type": "session.status_running" })]);
        assert!(calls[0].released_now, "the commit of status_running marks the call as started here");
        // After that commit, a new attempt sees a call someone may have started.
        allowed.push(json!({"type":"session.status_running"}));
        let Decision::CallRemote { calls, .. } = decide(&remote_agent(), &history(&allowed)) else { panic!() };
        assert!(!calls[0].released_now);

        let mut denied = events;
        denied.push(json!({"type":"user.tool_confirmation","tool_use_id":"t1","result":"deny","deny_message":"no"}));
        let Decision::CallModel { before, request } = decide(&remote_agent(), &history(&denied)) else { panic!() };
        assert_eq!(before[1]["type"], "agent.mcp_tool_result");
        assert_eq!(before[1]["mcp_tool_use_id"], "t1");
        assert_eq!(before[1]["is_error"], true);
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
        assert_eq!(end[0]["type"], "agent.mcp_tool_result");
        assert_eq!((end[0]["mcp_tool_use_id"].as_str(), end[0]["is_error"].as_bool()), (Some("t1"), Some(true)));
        assert_eq!(end[0]["content"][0]["text"], INTERRUPTED_UNANSWERED);
        assert_eq!(end[1]["type"], "agent.tool_result");
        assert_eq!((end[1]["tool_use_id"].as_str(), end[1]["is_error"].as_bool()), (Some("t2"), Some(true)));
        assert_eq!(end.last().unwrap()["stop_reason"]["type"], "end_turn", "the interrupted turn ends");
        events.extend(end);
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
        assert_eq!(end[0]["mcp_tool_use_id"], "t3");
        assert_eq!(end[0]["content"][0]["text"], INTERRUPTED_UNANSWERED);
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
        assert_eq!(end, vec![idle(json!({"type":"retries_exhausted"}))]);
        events.extend(end);
        assert_eq!(decide(&remote_agent(), &history(&events)), Decision::Park);
    }
}
