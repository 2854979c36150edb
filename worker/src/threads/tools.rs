//! The thread tools of the primary thread (ADR 0022 §4): the session's multiagent
//! configuration as a roster, the in-memory tool entry [`arm`] gives the primary's agent,
//! and the specs and classes of the tools that entry enables.

use agentd_schema::Session;
use serde_json::{Value, json};

use crate::providers::ToolSpec;

/// The tool type the worker gives the primary's agent for its thread tools ([`arm`]). It
/// never appears on the wire or in a stored agent.
pub const TOOL_TYPE: &str = "agentd_threads";

pub use agentd_schema::events::threads::{CONSULT_ADVISOR, MESSAGE_THREAD, SPAWN_THREAD};

/// What `agent` names to spawn the primary's own agent (when the roster has it).
pub const SELF: &str = "self";

/// Which thread tool a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadTool {
    /// `spawn_thread`
    Spawn,
    /// `message_thread`
    Message,
}

/// A tool of an armed [`TOOL_TYPE`] entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Armed {
    /// `spawn_thread` or `message_thread`: dispatched to a child thread.
    Thread(ThreadTool),
    /// `consult_advisor`: asked of the advisor model.
    Advisor,
}

/// An agent a child thread may run: a definition from the session's snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct RosterAgent {
    /// Its name.
    pub name: String,
    /// Its description, if it has one.
    pub description: Option<String>,
    /// Its `agent_…` id.
    pub id: String,
    /// The primary's own agent (`self`).
    pub is_self: bool,
    /// The full definition (`BetaManagedAgentsSessionThreadAgent`), the new thread's snapshot.
    pub definition: Value,
}

/// A session's multiagent configuration, from its agent snapshot (§3.2 of the wire
/// reference: full definitions of the roster's agents).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Roster {
    /// Whether the primary may spawn threads at all.
    pub subagents: bool,
    /// The predefined agents (a coordinator's roster, or `subagents.predefined_agents`).
    pub agents: Vec<RosterAgent>,
    /// Whether the primary may define inline agents.
    pub inline_agents: bool,
    /// The advisor model, when the advisor is enabled.
    pub advisor: Option<String>,
}

impl Roster {
    /// The configuration of the session agent `agent`; `None` for a single-agent one.
    pub fn of(agent: &Value) -> Option<Roster> {
        let multiagent = &agent["multiagent"];
        let own_id = agent["id"].as_str().unwrap_or_default();
        let definitions = agentd_schema::multiagent::roster(multiagent);
        let mut roster = Roster::default();
        match multiagent["type"].as_str()? {
            "coordinator" => {
                roster.advisor = definitions
                    .iter()
                    .find(|entry| entry["type"] == "advisor")
                    .and_then(|entry| entry["model"].as_str())
                    .map(str::to_owned);
                roster.subagents = definitions.iter().any(|entry| entry["type"] != "advisor");
            }
            agentd_schema::multiagent::MERGED_TYPE => {
                let subagents = &multiagent["subagents"];
                roster.subagents = subagents["type"] == "enabled";
                roster.inline_agents = roster.subagents && subagents["inline_agents"]["type"] == "enabled";
                if multiagent["advisor"]["type"] == "enabled" {
                    roster.advisor = multiagent["advisor"]["model"].as_str().map(str::to_owned);
                }
            }
            _ => return None,
        }
        roster.agents = definitions
            .iter()
            .filter(|entry| entry["type"] != "advisor")
            .map(|entry| {
                let id = entry["id"].as_str().unwrap_or_default().to_owned();
                RosterAgent {
                    name: entry["name"].as_str().unwrap_or(&id).to_owned(),
                    description: entry["description"].as_str().filter(|d| !d.trim().is_empty()).map(str::to_owned),
                    is_self: !own_id.is_empty() && id == own_id,
                    id,
                    definition: entry.clone(),
                }
            })
            .collect();
        Some(roster)
    }

    /// The roster agent `wanted` names: `self`, a name, or an agent id.
    pub fn find(&self, wanted: &str) -> Option<&RosterAgent> {
        let wanted = wanted.trim();
        if wanted == SELF {
            return self.agents.iter().find(|agent| agent.is_self);
        }
        self.agents.iter().find(|agent| agent.name == wanted).or_else(|| self.agents.iter().find(|a| a.id == wanted))
    }

    /// The names `spawn_thread`'s `agent` offers: each roster agent's but `self`'s, then
    /// `self` when the roster has it.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for agent in self.agents.iter().filter(|agent| !agent.is_self) {
            if !names.contains(&agent.name) {
                names.push(agent.name.clone());
            }
        }
        if self.agents.iter().any(|agent| agent.is_self) {
            names.push(SELF.to_owned());
        }
        names
    }

    /// Whether `spawn_thread` (and with it `message_thread`) is offered.
    pub fn spawns(&self) -> bool {
        self.subagents && (!self.agents.is_empty() || self.inline_agents)
    }
}

/// In a multiagent session, gives the primary thread's agent its thread tools for this
/// attempt: one [`TOOL_TYPE`] entry in its `tools`, from the session's snapshot. Only
/// the primary is armed (children get no thread tools: depth 1).
pub fn arm(session: &Session, agent: &mut Value) {
    let Some(roster) = Roster::of(&session.body["agent"]) else { return };
    if !roster.spawns() && roster.advisor.is_none() {
        return;
    }
    let agents: Vec<Value> = roster
        .agents
        .iter()
        .map(|agent| {
            let name = if agent.is_self { SELF } else { agent.name.as_str() };
            json!({ "name": name, "description": agent.description, "self": agent.is_self })
        })
        .collect();
    let entry = json!({
        "type": TOOL_TYPE,
        "spawn": roster.spawns(),
        "names": roster.names(),
        "agents": agents,
        "inline_agents": roster.inline_agents,
        "advisor": roster.advisor,
    });
    match agent["tools"].as_array_mut() {
        Some(tools) => tools.push(entry),
        None => agent["tools"] = json!([entry]),
    }
}

/// The tool `name` of an armed [`TOOL_TYPE`] entry, if it is one of its tools.
pub fn class(entry: &Value, name: &str) -> Option<Armed> {
    let spawns = entry["spawn"] == true;
    match name {
        SPAWN_THREAD if spawns => Some(Armed::Thread(ThreadTool::Spawn)),
        MESSAGE_THREAD if spawns => Some(Armed::Thread(ThreadTool::Message)),
        CONSULT_ADVISOR if entry["advisor"].is_string() => Some(Armed::Advisor),
        _ => None,
    }
}

/// The advisor model of the armed agent `agent`, if it has one.
pub fn advisor_model(agent: &Value) -> Option<&str> {
    agent["tools"].as_array()?.iter().find(|tool| tool["type"] == TOOL_TYPE)?["advisor"].as_str()
}

/// The specs of the tools an armed [`TOOL_TYPE`] entry enables.
pub fn specs(entry: &Value) -> Vec<ToolSpec> {
    let mut specs = Vec::new();
    if entry["spawn"] == true {
        specs.push(spawn_spec(entry));
        specs.push(ToolSpec {
            name: MESSAGE_THREAD.to_owned(),
            description: "Send another message to a subagent thread you started with spawn_thread (its \
                          `session_thread_id` is in that call's result). The thread must be idle: not still \
                          working on an earlier message. Its reply is this tool's result; several calls in one \
                          response run in parallel."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "session_thread_id": { "type": "string", "description": "The thread's sthr_… id." },
                    "message": { "type": "string", "description": "The message to send." },
                },
                "required": ["session_thread_id", "message"],
            }),
        });
    }
    if entry["advisor"].is_string() {
        specs.push(ToolSpec {
            name: CONSULT_ADVISOR.to_owned(),
            description: "Ask an advisor, a stronger model, for advice on how to proceed. The advisor reads this \
                          conversation and your question, and answers in text; it cannot use tools or act. Use it \
                          for hard decisions, plans and reviews."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": { "question": { "type": "string", "description": "What you want advice on." } },
                "required": ["question"],
            }),
        });
    }
    specs
}

fn spawn_spec(entry: &Value) -> ToolSpec {
    let mut description = "Start a subagent in a new session thread and send it a message. The subagent works on \
                           its own, in the same sandbox, and its final message is this tool's result, headed by \
                           its `session_thread_id` (to send it more with message_thread). Several calls in one \
                           response run in parallel. Name the agent with `agent`"
        .to_owned();
    let inline = entry["inline_agents"] == true;
    description.push_str(if inline { ", or define one with `inline_agent`." } else { "." });
    let agents = entry["agents"].as_array().map(Vec::as_slice).unwrap_or_default();
    if !agents.is_empty() {
        description.push_str("\n\nAgents:");
        for agent in agents {
            let name = agent["name"].as_str().unwrap_or_default();
            let about = match (agent["self"] == true, agent["description"].as_str()) {
                (true, Some(about)) => format!("a copy of yourself ({about})"),
                (true, None) => "a copy of yourself".to_owned(),
                (false, Some(about)) => about.to_owned(),
                (false, None) => "(no description)".to_owned(),
            };
            description.push_str(&format!("\n- {name}: {about}"));
        }
    }
    if inline {
        description.push_str(
            "\n\nAn inline agent has your tools, with its own `name` and `system` prompt (and optionally another \
             `model`).",
        );
    }
    let mut properties = serde_json::Map::new();
    let names = entry["names"].as_array().cloned().unwrap_or_default();
    if !names.is_empty() {
        properties.insert(
            "agent".into(),
            json!({ "type": "string", "enum": names, "description": "The agent to run (not with inline_agent)." }),
        );
    }
    if inline {
        properties.insert(
            "inline_agent".into(),
            json!({
                "type": "object",
                "description": "An agent defined here (not with agent).",
                "properties": {
                    "name": { "type": "string" },
                    "system": { "type": "string" },
                    "model": { "type": "string" },
                },
                "required": ["name", "system"],
            }),
        );
    }
    properties.insert("message".into(), json!({ "type": "string", "description": "The task for the subagent." }));
    ToolSpec {
        name: SPAWN_THREAD.to_owned(),
        description,
        input_schema: json!({ "type": "object", "properties": properties, "required": ["message"] }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(agent: Value) -> Session {
        Session {
            id: "sesn_x".into(),
            workspace_id: "ws".into(),
            status: "idle".into(),
            body: json!({ "agent": agent }),
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
        }
    }

    fn definition(id: &str, name: &str, description: Option<&str>) -> Value {
        json!({ "type": "agent", "id": id, "version": 1, "name": name, "description": description,
                "system": format!("you are {name}"), "model": { "id": "claude-haiku-4-5" }, "tools": [],
                "mcp_servers": [], "skills": [], "execution_identity": { "type": "service_account" } })
    }

    fn coordinator() -> Value {
        json!({
            "id": "agent_lead", "name": "lead", "model": { "id": "claude-sonnet-4-5" }, "tools": [],
            "multiagent": { "type": "coordinator", "agents": [
                definition("agent_r", "researcher", Some("Finds sources.")),
                definition("agent_lead", "lead", None),
                { "type": "advisor", "model": "claude-opus-4-1" },
            ] },
        })
    }

    fn names(specs: &[ToolSpec]) -> Vec<&str> {
        specs.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn a_coordinator_arms_the_spawn_message_and_advisor_tools() {
        let mut agent = json!({ "model": { "id": "claude-sonnet-4-5" }, "tools": [{ "type": "custom", "name": "x" }] });
        arm(&session(coordinator()), &mut agent);
        let entry = &agent["tools"][1];
        assert_eq!(entry["type"], TOOL_TYPE);
        assert_eq!(class(entry, SPAWN_THREAD), Some(Armed::Thread(ThreadTool::Spawn)));
        assert_eq!(class(entry, MESSAGE_THREAD), Some(Armed::Thread(ThreadTool::Message)));
        assert_eq!(class(entry, CONSULT_ADVISOR), Some(Armed::Advisor));
        assert_eq!(advisor_model(&agent), Some("claude-opus-4-1"));
        let offered = specs(entry);
        assert_eq!(names(&offered), [SPAWN_THREAD, MESSAGE_THREAD, CONSULT_ADVISOR]);
        let spawn = &offered[0];
        assert_eq!(spawn.input_schema["properties"]["agent"]["enum"], json!(["researcher", "self"]));
        assert!(spawn.input_schema["properties"].get("inline_agent").is_none(), "a coordinator has no inline agents");
        assert_eq!(spawn.input_schema["required"], json!(["message"]));
        for part in ["- researcher: Finds sources.", "- self: a copy of yourself"] {
            assert!(spawn.description.contains(part), "{part:?} in {}", spawn.description);
        }
    }

    #[test]
    fn the_roster_finds_agents_by_name_self_or_id() {
        let roster = Roster::of(&coordinator()).unwrap();
        assert_eq!(roster.find("researcher").unwrap().id, "agent_r");
        assert_eq!(roster.find("agent_r").unwrap().name, "researcher");
        let own = roster.find(SELF).unwrap();
        assert!(own.is_self && own.id == "agent_lead");
        assert_eq!(own.definition["system"], "you are lead");
        assert!(roster.find("writer").is_none());
        assert!(!roster.inline_agents);
    }

    #[test]
    fn multiagent_20261001_follows_its_members() {
        let agent = |subagents: Value, advisor: Value| {
            json!({ "id": "agent_a", "model": { "id": "m" }, "multiagent": {
                "type": "multiagent_20261001", "subagents": subagents, "advisor": advisor,
                "workflows": { "type": "disabled" } } })
        };
        let inline_only = agent(
            json!({ "type": "enabled", "inline_agents": { "type": "enabled" }, "predefined_agents": [] }),
            json!({ "type": "disabled" }),
        );
        let mut armed = json!({ "tools": [] });
        arm(&session(inline_only), &mut armed);
        let offered = specs(&armed["tools"][0]);
        assert_eq!(names(&offered), [SPAWN_THREAD, MESSAGE_THREAD]);
        let properties = &offered[0].input_schema["properties"];
        assert!(properties.get("agent").is_none(), "no roster: only inline agents");
        assert_eq!(properties["inline_agent"]["required"], json!(["name", "system"]));

        let advisor_only =
            agent(json!({ "type": "disabled" }), json!({ "type": "enabled", "model": "claude-opus-4-1" }));
        let mut armed = json!({ "tools": [] });
        arm(&session(advisor_only), &mut armed);
        assert_eq!(names(&specs(&armed["tools"][0])), [CONSULT_ADVISOR]);
        assert_eq!(class(&armed["tools"][0], SPAWN_THREAD), None);

        let nothing = agent(json!({ "type": "disabled" }), json!({ "type": "disabled" }));
        let mut armed = json!({ "tools": [] });
        arm(&session(nothing), &mut armed);
        assert_eq!(armed["tools"], json!([]), "nothing enabled: nothing armed");
    }

    #[test]
    fn a_single_agent_session_is_not_armed() {
        let mut agent = json!({ "tools": [] });
        arm(&session(json!({ "id": "agent_a", "multiagent": null })), &mut agent);
        assert_eq!(agent["tools"], json!([]));
        assert_eq!(Roster::of(&json!({})), None);
    }
}
