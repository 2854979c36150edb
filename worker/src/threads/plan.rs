//! The plan of a dispatch (ADR 0022 §5): for each undispatched thread call of the
//! primary, the child thread it spawns or messages, or why it is refused. Pure: the
//! caller reads the session's thread rows first and commits the plan in one handoff.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::ThreadCall;
use super::tools::{Roster, ThreadTool};

/// The most child threads a session may have (archived ones included).
pub const MAX_CHILD_THREADS: usize = 32;

/// A child thread of the session as a dispatch sees it (from its row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// `sthr_…`
    pub id: String,
    /// The agent it runs.
    pub agent_name: String,
    /// `running`, `idle`, `rescheduling` or `terminated`.
    pub status: String,
    /// The stop reason `type` of its last idle, if any.
    pub stop_reason: Option<String>,
    /// A parent call waits for its reply.
    pub awaited: bool,
    /// Archived.
    pub archived: bool,
}

/// What a dispatch works from.
#[derive(Debug, Clone, Copy)]
pub struct Dispatch<'a> {
    /// The session's multiagent configuration.
    pub roster: &'a Roster,
    /// The session's agent snapshot: what inline agents inherit.
    pub primary: &'a Value,
    /// `_price_snapshot.models` of a multiagent session: the models a thread may run (each
    /// with its prices, or `null` without a list price).
    pub priced_models: Option<&'a Value>,
    /// The session's child threads.
    pub children: &'a [Child],
}

/// What one thread call does.
#[derive(Debug, Clone, PartialEq)]
pub enum Planned {
    /// Creates the thread `thread_id` running `snapshot` and sends it `message`.
    Spawn {
        /// The call.
        call_id: String,
        /// The new thread (derived from the call).
        thread_id: String,
        /// The name of the agent it runs.
        agent_name: String,
        /// The agent definition it runs (`agent` or `inline`).
        snapshot: Value,
        /// The request.
        message: String,
    },
    /// Sends `message` to the idle child `thread_id`.
    Message {
        /// The call.
        call_id: String,
        /// The child.
        thread_id: String,
        /// The name of the agent it runs.
        agent_name: String,
        /// The request.
        message: String,
    },
    /// Creates nothing; the call gets an error result saying why.
    Refused {
        /// The call.
        call_id: String,
        /// Why, for the model.
        why: String,
    },
}

impl Planned {
    /// The call it plans.
    pub fn call_id(&self) -> &str {
        match self {
            Planned::Spawn { call_id, .. } | Planned::Message { call_id, .. } | Planned::Refused { call_id, .. } => {
                call_id
            }
        }
    }
}

/// Plans `calls` in order; `thread_id_for` derives a spawned thread's id from its call's.
pub fn plan(dispatch: &Dispatch<'_>, calls: &[ThreadCall], thread_id_for: impl Fn(&str) -> String) -> Vec<Planned> {
    let mut spawned = 0;
    let mut targeted: HashSet<String> = HashSet::new();
    calls
        .iter()
        .map(|call| {
            let refused = |why: String| Planned::Refused { call_id: call.id.clone(), why };
            let Some(message) = call.input["message"].as_str().map(str::trim).filter(|m| !m.is_empty()) else {
                return refused("`message` must be a non-empty string".to_owned());
            };
            let message = message.to_owned();
            match call.tool {
                ThreadTool::Spawn => {
                    if dispatch.children.len() + spawned >= MAX_CHILD_THREADS {
                        return refused(format!(
                            "this session already has the most threads it may have ({MAX_CHILD_THREADS}); use \
                             message_thread with one of them"
                        ));
                    }
                    match spawn(dispatch, &call.input) {
                        Ok((agent_name, snapshot)) => {
                            spawned += 1;
                            let thread_id = thread_id_for(&call.id);
                            Planned::Spawn { call_id: call.id.clone(), thread_id, agent_name, snapshot, message }
                        }
                        Err(why) => refused(why),
                    }
                }
                ThreadTool::Message => {
                    let wanted = call.input["session_thread_id"].as_str().unwrap_or_default().trim();
                    match target(dispatch, wanted, &targeted) {
                        Ok(child) => {
                            targeted.insert(child.id.clone());
                            Planned::Message {
                                call_id: call.id.clone(),
                                thread_id: child.id.clone(),
                                agent_name: child.agent_name.clone(),
                                message,
                            }
                        }
                        Err(why) => refused(why),
                    }
                }
            }
        })
        .collect()
}

/// The agent a `spawn_thread` input names, and its snapshot; or why it cannot run.
fn spawn(dispatch: &Dispatch<'_>, input: &Value) -> Result<(String, Value), String> {
    let roster = dispatch.roster;
    let named = input.get("agent").filter(|v| !v.is_null());
    let inline = input.get("inline_agent").filter(|v| !v.is_null());
    match (named, inline) {
        (Some(_), Some(_)) => Err("give either `agent` or `inline_agent`, not both".to_owned()),
        (None, None) if roster.inline_agents => Err("name an `agent` or define an `inline_agent`".to_owned()),
        (None, None) => Err("name an `agent`".to_owned()),
        (Some(named), None) => {
            let wanted = named.as_str().unwrap_or_default();
            match roster.find(wanted) {
                Some(agent) => Ok((agent.name.clone(), agent.definition.clone())),
                None => Err(format!("no agent {wanted:?} to spawn; the agents are: {}", roster.names().join(", "))),
            }
        }
        (None, Some(_)) if !roster.inline_agents => {
            Err("inline agents are not enabled for this session; name an `agent`".to_owned())
        }
        (None, Some(inline)) => inline_agent(dispatch, inline),
    }
}

/// An inline agent: its own name, system prompt and model (the primary's unless given),
/// the primary's tools, MCP servers, skills and execution identity (a model cannot grant
/// itself tools).
fn inline_agent(dispatch: &Dispatch<'_>, inline: &Value) -> Result<(String, Value), String> {
    let text = |key: &str| inline[key].as_str().map(str::trim).filter(|s| !s.is_empty());
    let name = text("name").ok_or("`inline_agent.name` must be a non-empty string")?;
    let system = inline["system"].as_str().ok_or("`inline_agent.system` must be a string")?;
    let primary = dispatch.primary;
    let model = match inline.get("model").filter(|m| !m.is_null()) {
        None => primary["model"].clone(),
        Some(model) => {
            let model = model.as_str().map(str::trim).filter(|m| !m.is_empty());
            let model = model.ok_or("`inline_agent.model` must be a model id")?;
            if let Some(priced) = dispatch.priced_models.and_then(Value::as_object)
                && !priced.contains_key(model)
            {
                let mut allowed: Vec<&str> = priced.keys().map(String::as_str).collect();
                allowed.sort_unstable();
                return Err(format!(
                    "`inline_agent.model`: {model} is not a model this session may run; use one of: {}",
                    allowed.join(", ")
                ));
            }
            json!({ "id": model })
        }
    };
    let snapshot = json!({
        "type": "inline",
        "name": name,
        "description": null,
        "system": system,
        "model": model,
        "tools": primary["tools"],
        "mcp_servers": primary["mcp_servers"],
        "skills": primary["skills"],
        "execution_identity": primary["execution_identity"],
    });
    Ok((name.to_owned(), snapshot))
}

/// The child a `message_thread` may go to: of this session, not archived, idle and not
/// waiting on anyone (nor already messaged by this dispatch).
fn target<'a>(dispatch: &Dispatch<'a>, wanted: &str, targeted: &HashSet<String>) -> Result<&'a Child, String> {
    if wanted.is_empty() {
        return Err("`session_thread_id` must name a thread (sthr_…)".to_owned());
    }
    let Some(child) = dispatch.children.iter().find(|child| child.id == wanted) else {
        return Err(format!("no thread {wanted} among the threads you started in this session"));
    };
    if child.archived {
        return Err(format!("thread {wanted} is archived"));
    }
    if child.awaited || targeted.contains(wanted) {
        return Err(format!("thread {wanted} is still working on an earlier message; wait for its reply"));
    }
    if child.status != "idle" {
        return Err(format!("thread {wanted} is {} and takes a message only when idle", child.status));
    }
    if child.stop_reason.as_deref() == Some("requires_action") {
        return Err(format!("thread {wanted} waits on the client (requires_action) and takes no message until then"));
    }
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::SELF;

    fn primary() -> Value {
        json!({
            "id": "agent_lead", "name": "lead", "model": { "id": "claude-sonnet-4-5" },
            "tools": [{ "type": "agent_toolset_20260401" }], "mcp_servers": [], "skills": [],
            "execution_identity": { "type": "service_account" },
            "multiagent": { "type": "multiagent_20261001", "advisor": { "type": "disabled" },
                "workflows": { "type": "disabled" },
                "subagents": { "type": "enabled", "inline_agents": { "type": "enabled" }, "predefined_agents": [
                    { "type": "agent", "id": "agent_r", "version": 2, "name": "researcher", "system": "dig",
                      "model": { "id": "claude-haiku-4-5" }, "tools": [] },
                    { "type": "agent", "id": "agent_lead", "version": 1, "name": "lead", "system": "lead",
                      "model": { "id": "claude-sonnet-4-5" }, "tools": [] },
                ] } },
        })
    }

    fn call(id: &str, tool: ThreadTool, input: Value) -> ThreadCall {
        ThreadCall { id: id.into(), tool, input }
    }

    fn child(id: &str, status: &str, stop: Option<&str>, awaited: bool, archived: bool) -> Child {
        Child {
            id: id.into(),
            agent_name: "researcher".into(),
            status: status.into(),
            stop_reason: stop.map(str::to_owned),
            awaited,
            archived,
        }
    }

    fn planned(children: &[Child], priced: Option<&Value>, calls: &[ThreadCall]) -> Vec<Planned> {
        let primary = primary();
        let roster = Roster::of(&primary).unwrap();
        let dispatch = Dispatch { roster: &roster, primary: &primary, priced_models: priced, children };
        plan(&dispatch, calls, |id| agentd_schema::ids::derived_id(id, "sthr"))
    }

    fn why(planned: &Planned) -> &str {
        match planned {
            Planned::Refused { why, .. } => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn spawns_run_roster_self_and_inline_agents() {
        let calls = [
            call("sevt_a", ThreadTool::Spawn, json!({ "agent": "researcher", "message": "find" })),
            call("sevt_b", ThreadTool::Spawn, json!({ "agent": SELF, "message": "help" })),
            call(
                "sevt_c",
                ThreadTool::Spawn,
                json!({ "inline_agent": { "name": "poet", "system": "rhyme" }, "message": "a poem" }),
            ),
        ];
        let out = planned(&[], None, &calls);
        let Planned::Spawn { thread_id, agent_name, snapshot, message, .. } = &out[0] else { panic!("{out:?}") };
        assert_eq!((thread_id.as_str(), agent_name.as_str(), message.as_str()), ("sthr_a", "researcher", "find"));
        assert_eq!(snapshot["id"], "agent_r");
        let Planned::Spawn { agent_name, snapshot, .. } = &out[1] else { panic!() };
        assert_eq!((agent_name.as_str(), snapshot["id"].as_str()), ("lead", Some("agent_lead")));
        let Planned::Spawn { agent_name, snapshot, .. } = &out[2] else { panic!() };
        assert_eq!(agent_name, "poet");
        assert_eq!(snapshot["type"], "inline");
        assert_eq!(snapshot["model"], json!({ "id": "claude-sonnet-4-5" }), "the primary's model by default");
        assert_eq!(snapshot["tools"], primary()["tools"], "the primary's tools");
    }

    #[test]
    fn bad_spawns_are_refused_and_create_nothing() {
        let priced = json!({ "claude-sonnet-4-5": {}, "claude-haiku-4-5": {} });
        let calls = [
            call("sevt_a", ThreadTool::Spawn, json!({ "agent": "writer", "message": "x" })),
            call("sevt_b", ThreadTool::Spawn, json!({ "agent": "researcher", "message": "  " })),
            call("sevt_c", ThreadTool::Spawn, json!({ "message": "x" })),
            call("sevt_d", ThreadTool::Spawn, json!({ "agent": "researcher", "inline_agent": {}, "message": "x" })),
            call(
                "sevt_e",
                ThreadTool::Spawn,
                json!({ "inline_agent": { "name": "p", "system": "s", "model": "gpt-x" }, "message": "x" }),
            ),
            call(
                "sevt_f",
                ThreadTool::Spawn,
                json!({ "inline_agent": { "name": "p", "system": "s", "model": "claude-haiku-4-5" }, "message": "x" }),
            ),
        ];
        let out = planned(&[], Some(&priced), &calls);
        assert!(why(&out[0]).contains("no agent \"writer\"") && why(&out[0]).contains("researcher, self"));
        assert!(why(&out[1]).contains("`message`"));
        assert!(why(&out[2]).contains("`agent`"));
        assert!(why(&out[3]).contains("not both"));
        assert!(why(&out[4]).contains("gpt-x is not a model this session may run"), "{}", why(&out[4]));
        assert!(matches!(&out[5], Planned::Spawn { snapshot, .. } if snapshot["model"]["id"] == "claude-haiku-4-5"));
    }

    #[test]
    fn spawns_stop_at_the_thread_limit() {
        let children: Vec<Child> =
            (0..MAX_CHILD_THREADS - 1).map(|i| child(&format!("sthr_{i}"), "idle", None, false, i == 0)).collect();
        let calls = [
            call("sevt_a", ThreadTool::Spawn, json!({ "agent": "researcher", "message": "x" })),
            call("sevt_b", ThreadTool::Spawn, json!({ "agent": "researcher", "message": "y" })),
        ];
        let out = planned(&children, None, &calls);
        assert!(matches!(out[0], Planned::Spawn { .. }));
        assert!(why(&out[1]).contains("most threads"));
    }

    #[test]
    fn messages_go_only_to_idle_unawaited_children() {
        let children = [
            child("sthr_idle", "idle", Some("end_turn"), false, false),
            child("sthr_busy", "running", None, true, false),
            child("sthr_gone", "terminated", Some("end_turn"), false, true),
            child("sthr_blocked", "idle", Some("requires_action"), false, false),
            child("sthr_free", "running", None, false, false),
        ];
        let message =
            |id: &str, to: &str| call(id, ThreadTool::Message, json!({ "session_thread_id": to, "message": "more" }));
        let calls = [
            message("sevt_1", "sthr_idle"),
            message("sevt_2", "sthr_idle"),
            message("sevt_3", "sthr_busy"),
            message("sevt_4", "sthr_gone"),
            message("sevt_5", "sthr_blocked"),
            message("sevt_6", "sthr_free"),
            message("sevt_7", "sthr_nope"),
        ];
        let out = planned(&children, None, &calls);
        assert_eq!(
            out[0],
            Planned::Message {
                call_id: "sevt_1".into(),
                thread_id: "sthr_idle".into(),
                agent_name: "researcher".into(),
                message: "more".into()
            }
        );
        assert!(why(&out[1]).contains("earlier message"), "one message at a time");
        assert!(why(&out[2]).contains("earlier message"));
        assert!(why(&out[3]).contains("archived"));
        assert!(why(&out[4]).contains("requires_action"));
        assert!(why(&out[5]).contains("is running"));
        assert!(why(&out[6]).contains("no thread sthr_nope"));
    }
}
