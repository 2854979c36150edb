//! The workspace's agents as MCP tools: one tool per live agent (not archived, not
//! disabled), named from the agent's name, with `{prompt, thread_id?}` arguments.
//!
//! Names keep to `[a-z0-9_-]{1,64}`, which every MCP client and every model provider's
//! tool-name rule accepts. When two agents' names map to the same tool name, the oldest
//! agent keeps it and the others get a suffix from their own id, so a name never moves
//! to another agent while both exist.

use std::collections::HashSet;
use std::sync::Arc;

use agentd_schema::{ListQuery, Resource};
use rmcp::ErrorData;
use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};

use crate::AppState;
use crate::admission::Tenant;
use crate::domain::exposure::{self, Mode, Protocol};
use crate::error::ApiResult;

/// At most this many agents become tools (the rest are not listed).
const MAX_AGENTS: i64 = 10_000;
/// The longest tool name.
const MAX_NAME: usize = 64;
/// The longest thread id (as every adapter).
const MAX_THREAD: usize = 256;

/// One agent as a tool.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct AgentTool {
    /// The tool name.
    pub name: String,
    /// The agent's id.
    pub agent_id: String,
    /// The agent's name (the tool's title).
    pub title: String,
    /// The agent's description, if it has one.
    pub description: Option<String>,
}

impl AgentTool {
    /// The MCP tool definition (no `outputSchema`: results are text).
    pub fn definition(&self) -> Tool {
        let description = self
            .description
            .clone()
            .unwrap_or_else(|| format!("Ask the agentd agent \"{}\" and get its reply.", self.title));
        let mut meta = JsonObject::new();
        meta.insert("agentd/agent_id".into(), json!(self.agent_id));
        Tool::new(self.name.clone(), description, input_schema())
            .with_title(self.title.clone())
            .with_meta(rmcp::model::MetaObject(meta))
    }
}

/// `{prompt: string, thread_id?: string}`.
fn input_schema() -> Arc<JsonObject> {
    let schema = json!({
        "type": "object",
        "properties": {
            "prompt": { "type": "string", "minLength": 1, "description": "The message to send to the agent." },
            "thread_id": {
                "type": "string", "minLength": 1, "maxLength": MAX_THREAD,
                "description": "Continue this conversation thread (returned in the result's _meta as agentd/thread_id). \
                                Omit it to start a new one.",
            },
        },
        "required": ["prompt"],
        "additionalProperties": false,
    });
    match schema {
        Value::Object(object) => Arc::new(object),
        _ => unreachable!("a JSON object literal"),
    }
}

/// The workspace's live agents that MCP exposes (`domain::exposure`) as tools, oldest
/// agent first. Agents not exposed are left out before naming, so no tool's name
/// betrays them: to MCP they do not exist (`tools/call` finds its tool here too).
pub(super) async fn agent_tools(state: &AppState, tenant: &Tenant) -> ApiResult<Vec<AgentTool>> {
    let store = state.backends.store.as_ref();
    let exposure = exposure::of(store, &tenant.workspace_id, Protocol::Mcp).await?;
    if exposure.mode() == Mode::None {
        return Ok(Vec::new());
    }
    let query = ListQuery { limit: MAX_AGENTS, ..ListQuery::default() };
    let agents = store.list_resources(&tenant.workspace_id, "agent", &query).await?;
    Ok(name_tools(agents.iter().filter(|agent| live(agent) && exposure.exposes(&agent.id))))
}

fn live(agent: &Resource) -> bool {
    agent.archived_at_ms.is_none() && agent.body.get("disabled_at").is_none_or(Value::is_null)
}

/// Names tools for `agents` (oldest first, as ids sort by creation time).
fn name_tools<'a>(agents: impl Iterator<Item = &'a Resource>) -> Vec<AgentTool> {
    let mut agents: Vec<&Resource> = agents.collect();
    agents.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
    let mut taken: HashSet<String> = HashSet::new();
    let mut tools = Vec::with_capacity(agents.len());
    for agent in agents {
        let title = agent.body["name"].as_str().unwrap_or(&agent.id).to_owned();
        let name = unique_name(&base_name(&title), &agent.id, &taken);
        taken.insert(name.clone());
        let description = agent.body["description"].as_str().filter(|d| !d.trim().is_empty()).map(str::to_owned);
        tools.push(AgentTool { name, agent_id: agent.id.clone(), title, description });
    }
    tools
}

/// `Research Bot (v2)` → `research_bot_v2`: lowercase ASCII letters, digits, `_` and
/// `-`; anything else becomes one `_`; at most 64 characters; `agent` if nothing is left.
pub(super) fn base_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' { c } else { '_' };
        if c == '_' && (out.is_empty() || out.ends_with('_')) {
            continue;
        }
        out.push(c);
    }
    let trimmed: String = out.trim_end_matches('_').chars().take(MAX_NAME).collect();
    let trimmed = trimmed.trim_end_matches('_');
    if trimmed.is_empty() { "agent".to_owned() } else { trimmed.to_owned() }
}

/// `base` if free, else `base_<last 8 of the id>`, else `base_<whole id>`, else a
/// numbered variant; each cut to fit 64 characters.
fn unique_name(base: &str, agent_id: &str, taken: &HashSet<String>) -> String {
    let id = base_name(agent_id);
    let tail: String = id.chars().rev().take(8).collect::<Vec<_>>().into_iter().rev().collect();
    let with = |suffix: &str| {
        let room = MAX_NAME.saturating_sub(suffix.len() + 1);
        let head: String = base.chars().take(room).collect();
        format!("{}_{suffix}", head.trim_end_matches('_'))
    };
    let mut candidates = vec![base.to_owned(), with(&tail), with(&id)];
    candidates.extend((2..).take(1000).map(|n| with(&format!("{tail}_{n}"))));
    candidates.into_iter().find(|name| !taken.contains(name)).unwrap_or_else(|| with(&id))
}

/// The arguments of one call.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Arguments {
    /// The user message.
    pub prompt: String,
    /// The thread to continue, if any.
    pub thread_id: Option<String>,
}

/// Checks `arguments` against the input schema; a mismatch is -32602 naming the field.
pub(super) fn arguments(arguments: Option<&JsonObject>) -> Result<Arguments, ErrorData> {
    let invalid = |message: String| ErrorData::invalid_params(message, None);
    let empty = JsonObject::new();
    let arguments = arguments.unwrap_or(&empty);
    if let Some(unknown) = arguments.keys().find(|k| *k != "prompt" && *k != "thread_id") {
        return Err(invalid(format!(
            "arguments.{unknown}: unknown argument (expected prompt and optionally thread_id)"
        )));
    }
    let prompt = match arguments.get("prompt") {
        Some(Value::String(prompt)) if !prompt.trim().is_empty() => prompt.clone(),
        Some(Value::String(_)) => return Err(invalid("arguments.prompt: must not be empty".to_owned())),
        Some(other) => return Err(invalid(format!("arguments.prompt: expected a string, got {}", kind(other)))),
        None => return Err(invalid("arguments.prompt: required".to_owned())),
    };
    let thread_id = match arguments.get("thread_id") {
        None => None,
        Some(Value::String(thread)) if !thread.is_empty() && thread.len() <= MAX_THREAD && !thread.contains('\0') => {
            Some(thread.clone())
        }
        Some(Value::String(_)) => {
            return Err(invalid(format!("arguments.thread_id: 1 to {MAX_THREAD} characters, no NUL")));
        }
        Some(other) => return Err(invalid(format!("arguments.thread_id: expected a string, got {}", kind(other)))),
    };
    Ok(Arguments { prompt, thread_id })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: &str, name: &str, created: i64) -> Resource {
        Resource {
            id: id.to_owned(),
            workspace_id: "ws".to_owned(),
            kind: "agent".to_owned(),
            parent_id: None,
            version: 1,
            body: json!({ "name": name }),
            created_at_ms: created,
            updated_at_ms: created,
            archived_at_ms: None,
        }
    }

    #[test]
    fn names_are_valid_tool_names() {
        assert_eq!(base_name("Research Bot (v2)"), "research_bot_v2");
        assert_eq!(base_name("  --ok--  "), "--ok--");
        assert_eq!(base_name("Ünïcödé"), "n_c_d");
        assert_eq!(base_name("日本"), "agent");
        assert_eq!(base_name(&"x".repeat(100)).len(), 64);
        let valid = |n: &str| {
            !n.is_empty()
                && n.len() <= 64
                && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-".contains(c))
        };
        for name in ["a.b/c", "Émile's agent!", "___", "A_B"] {
            assert!(valid(&base_name(name)), "{name:?} → {:?}", base_name(name));
        }
    }

    #[test]
    fn collisions_keep_the_oldest_agent_on_the_plain_name() {
        let agents = [
            agent("agent_01bbbbbbbbbb", "Helper", 2),
            agent("agent_01aaaaaaaaaa", "helper", 1),
            agent("agent_01cccc", "Other", 3),
        ];
        let tools = name_tools(agents.iter());
        let names: Vec<(&str, &str)> = tools.iter().map(|t| (t.agent_id.as_str(), t.name.as_str())).collect();
        assert_eq!(
            names,
            [("agent_01aaaaaaaaaa", "helper"), ("agent_01bbbbbbbbbb", "helper_bbbbbbbb"), ("agent_01cccc", "other")]
        );
        // The same agents in another order name the same tools.
        let reversed: Vec<Resource> = agents.iter().rev().cloned().collect();
        assert_eq!(name_tools(reversed.iter()), tools);
    }

    #[test]
    fn arguments_follow_the_schema() {
        let args = |v: Value| arguments(v.as_object());
        assert_eq!(args(json!({ "prompt": "hi" })).unwrap(), Arguments { prompt: "hi".into(), thread_id: None });
        assert_eq!(args(json!({ "prompt": "hi", "thread_id": "t" })).unwrap().thread_id.as_deref(), Some("t"));
        for bad in [
            json!({}),
            json!({ "prompt": 3 }),
            json!({ "prompt": " " }),
            json!({ "prompt": "x", "extra": 1 }),
            json!({ "prompt": "x", "thread_id": "" }),
        ] {
            let error = args(bad.clone()).unwrap_err();
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{bad}");
            assert!(error.message.contains("arguments."), "{bad}: {}", error.message);
        }
        assert!(arguments(None).is_err(), "prompt is required");
    }
}
