//! Validation and normalization of an agent's configuration: request shapes in,
//! resolved response shapes out (model config object, toolsets with their resolved
//! defaults, skills pinned to a version, default execution identity).

use std::collections::HashSet;

use agentd_schema::catalog::Catalog;
use serde_json::{Map, Value, json};

use super::body::{self, FieldError, as_object, join, kind, tag};
use super::limits::{
    MAX_AGENT_BYTES, MAX_DESCRIPTION_CHARS, MAX_ID_CHARS, MAX_INPUT_SCHEMA_BYTES, MAX_MCP_SERVER_NAME_CHARS,
    MAX_MCP_SERVERS, MAX_MULTIAGENT_BYTES, MAX_NAME_CHARS, MAX_ROLE_ARN_CHARS, MAX_ROSTER_AGENTS, MAX_SKILLS,
    MAX_SYSTEM_CHARS, MAX_TOOL_CONFIG_BYTES, MAX_TOOL_DESCRIPTION_CHARS, MAX_TOOL_NAME_CHARS, MAX_TOOLS, MAX_URL_CHARS,
    json_bytes,
};
use super::web_tool_config;
use crate::error::{ApiError, ApiResult};

/// The configuration fields of an agent (create and update bodies).
pub const CONFIG_FIELDS: &[&str] = &[
    "name",
    "description",
    "system",
    "model",
    "tools",
    "mcp_servers",
    "skills",
    "metadata",
    "multiagent",
    "execution_identity",
];

const EFFORTS: &[&str] = &["low", "medium", "high", "xhigh", "max"];
const POLICIES: &[&str] = &["always_allow", "always_ask", "auto"];
const AGENT_TOOLS: &[&str] = &["bash", "edit", "read", "write", "glob", "grep", "web_fetch", "web_search"];

/// Normalizes a complete configuration (create body, or stored config with an update
/// applied) into its stored and returned form, the model checked against `catalog` (the
/// workspace's effective catalog: a model its configuration offers is known); a 400
/// naming the first problem [`check_in`] finds.
pub fn normalize_in(config: &Map<String, Value>, catalog: &Catalog) -> ApiResult<Map<String, Value>> {
    check_in(config, catalog).map_err(|problems| {
        let first = problems.into_iter().next().map(|p| p.message);
        ApiError::invalid(first.unwrap_or_else(|| "agent: invalid configuration".to_owned()))
    })
}

/// Every problem of a configuration, in the order the checks run (what [`normalize_in`]
/// answers with is the first), each with the JSON pointer of its field.
#[derive(Debug, Default)]
struct Problems(Vec<FieldError>);

impl Problems {
    /// The value, or `None` with its problem recorded.
    fn take<T>(&mut self, result: ApiResult<T>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                let mut problem = FieldError::from_message(error.to_string());
                // A message about the whole configuration (`agent: …`) points at the body.
                let top = problem.path.trim_start_matches('/').split('/').next().unwrap_or_default();
                if !CONFIG_FIELDS.contains(&top) {
                    problem.path.clear();
                }
                self.0.push(problem);
                None
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Checks a complete configuration and normalizes it, the model against `catalog` (the
/// workspace's effective one). Each field is checked on its own, and each item of
/// `mcp_servers`, `tools` and `skills`, so the answer lists every problem found rather
/// than the first; checks that need other fields to be valid (the total size, the tools
/// the built-in toolset leaves to the client) run once those are.
pub fn check_in(config: &Map<String, Value>, catalog: &Catalog) -> Result<Map<String, Value>, Vec<FieldError>> {
    let mut problems = Problems::default();
    let mut out = Map::new();
    let name = problems.take(body::string(config.get("name"), "name", 1, MAX_NAME_CHARS));
    out.insert("name".into(), json!(name));
    let description =
        problems.take(body::optional_string(config.get("description"), "description", MAX_DESCRIPTION_CHARS));
    out.insert("description".into(), json!(description.flatten()));
    let system = problems.take(body::optional_string(config.get("system"), "system", MAX_SYSTEM_CHARS));
    out.insert("system".into(), json!(system.flatten()));
    out.insert("model".into(), problems.take(model(config.get("model"), catalog)).unwrap_or(Value::Null));
    let servers = mcp_servers(config.get("mcp_servers"), &mut problems);
    // Tools name servers as written: a server refused above is not a second problem of
    // every toolset that names it.
    let server_names: Vec<String> = body::array(config.get("mcp_servers"), "mcp_servers", usize::MAX)
        .unwrap_or_default()
        .iter()
        .filter_map(|s| s.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let tools = tools(config.get("tools"), &server_names, &mut problems);
    let referenced: HashSet<&str> = body::array(config.get("tools"), "tools", usize::MAX)
        .unwrap_or_default()
        .iter()
        .filter(|t| t.get("type").and_then(Value::as_str) == Some("mcp_toolset"))
        .filter_map(|t| t.get("mcp_server_name").and_then(Value::as_str))
        .collect();
    if let Some(unreferenced) = servers.iter().filter_map(|s| s["name"].as_str()).find(|n| !referenced.contains(n)) {
        problems.take::<()>(Err(ApiError::invalid(format!(
            "mcp_servers: server {unreferenced:?} is not referenced by any mcp_toolset in tools"
        ))));
    }
    out.insert("mcp_servers".into(), Value::Array(servers));
    out.insert("tools".into(), Value::Array(tools));
    out.insert("skills".into(), skills(config.get("skills"), &mut problems));
    let metadata = problems.take(body::optional_metadata(config.get("metadata"))).unwrap_or_default();
    out.insert("metadata".into(), Value::Object(metadata));
    let multiagent = problems.take(multiagent(config.get("multiagent"), catalog)).unwrap_or(Value::Null);
    if problems.is_empty() {
        // A custom tool named like an enabled thread tool (ADR 0022 §4).
        let tools = out.get("tools").unwrap_or(&Value::Null);
        problems.take(crate::domain::multiagent::check_tool_names(tools, &multiagent).map_err(ApiError::invalid));
    }
    out.insert("multiagent".into(), multiagent);
    let identity = problems.take(execution_identity(config.get("execution_identity")));
    out.insert("execution_identity".into(), identity.unwrap_or(Value::Null));
    if !problems.is_empty() {
        return Err(problems.0);
    }
    // Every session of the agent embeds it: one bound for the whole, whatever its parts.
    let size = json_bytes(&Value::Object(out.clone()));
    if size > MAX_AGENT_BYTES {
        problems.take::<()>(Err(ApiError::invalid(format!(
            "agent: the configuration is at most {MAX_AGENT_BYTES} bytes of JSON, got {size}"
        ))));
        return Err(problems.0);
    }
    Ok(out)
}

fn model(value: Option<&Value>, catalog: &Catalog) -> ApiResult<Value> {
    let (id, effort, speed, geo) = match value {
        Some(Value::String(id)) => (id.clone(), None, None, None),
        Some(Value::Object(map)) => {
            body::only_known(map, &["id", "effort", "speed", "inference_geo"], "model")?;
            let id = body::string(map.get("id"), "model.id", 1, MAX_ID_CHARS)?;
            let effort = match map.get("effort") {
                None | Some(Value::Null) => None,
                Some(Value::String(level)) => Some(level.clone()),
                Some(Value::Object(level)) => Some(body::string(level.get("type"), "model.effort.type", 1, 16)?),
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "model.effort: expected a string or object, got {}",
                        kind(other)
                    )));
                }
            };
            let speed = body::optional_string(map.get("speed"), "model.speed", 16)?;
            let geo = body::optional_string(map.get("inference_geo"), "model.inference_geo", 64)?;
            (id, effort, speed, geo)
        }
        None | Some(Value::Null) => return Err(ApiError::invalid("model: required")),
        Some(other) => {
            return Err(ApiError::invalid(format!("model: expected a string or object, got {}", kind(other))));
        }
    };
    if catalog.provider_of(&id).is_none() {
        return Err(ApiError::invalid(format!(
            "model.id: unknown model {id:?}; see GET /v1/models (claude-* and openai/<model> ids also route)"
        )));
    }
    let default_effort = catalog.find(&id).map_or("high", |m| m.default_effort.as_str());
    let effort = effort.unwrap_or_else(|| default_effort.to_owned());
    if !EFFORTS.contains(&effort.as_str()) {
        return Err(ApiError::invalid(format!("model.effort: must be one of {EFFORTS:?}, got {effort:?}")));
    }
    let speed = speed.unwrap_or_else(|| "standard".to_owned());
    match speed.as_str() {
        "standard" => {}
        "fast" => return Err(ApiError::invalid(format!("model.speed: {id} does not support fast"))),
        other => return Err(ApiError::invalid(format!("model.speed: must be standard or fast, got {other:?}"))),
    }
    Ok(json!({ "id": id, "effort": { "type": effort }, "speed": speed, "inference_geo": geo }))
}

/// The valid servers; each item's problem is recorded on its own.
fn mcp_servers(value: Option<&Value>, problems: &mut Problems) -> Vec<Value> {
    let mut seen = HashSet::new();
    let mut servers = Vec::new();
    let Some(items) = problems.take(body::array(value, "mcp_servers", MAX_MCP_SERVERS)) else { return servers };
    for (i, server) in items.iter().enumerate() {
        let path = format!("mcp_servers[{i}]");
        let one = || -> ApiResult<Value> {
            let map = as_object(server, &path)?;
            body::only_known(map, &["type", "name", "url"], &path)?;
            if tag(map, &path)? != "url" {
                return Err(ApiError::invalid(format!("{path}.type: must be \"url\"")));
            }
            let name = body::string(map.get("name"), &join(&path, "name"), 1, MAX_MCP_SERVER_NAME_CHARS)?;
            let url = body::string(map.get("url"), &join(&path, "url"), 1, MAX_URL_CHARS)?;
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(ApiError::invalid(format!("{path}.url: must be an http(s) URL")));
            }
            Ok(json!({ "type": "url", "name": name, "url": url }))
        };
        let Some(server) = problems.take(one()) else { continue };
        let name = server["name"].as_str().unwrap_or_default().to_owned();
        if !seen.insert(name.clone()) {
            problems.take::<()>(Err(ApiError::invalid(format!("{path}.name: duplicate server name {name:?}"))));
            continue;
        }
        servers.push(server);
    }
    servers
}

fn policy(value: Option<&Value>, path: &str, default: &str) -> ApiResult<Value> {
    let policy = match value {
        None | Some(Value::Null) => default.to_owned(),
        Some(value) => tag(as_object(value, path)?, path)?.to_owned(),
    };
    if !POLICIES.contains(&policy.as_str()) {
        return Err(ApiError::invalid(format!("{path}.type: must be one of {POLICIES:?}, got {policy:?}")));
    }
    Ok(json!({ "type": policy }))
}

fn default_config(value: Option<&Value>, path: &str, default_policy: &str) -> ApiResult<(bool, Value)> {
    let map = match value {
        None | Some(Value::Null) => Map::new(),
        Some(value) => as_object(value, path)?.clone(),
    };
    body::only_known(&map, &["enabled", "permission_policy"], path)?;
    let enabled = body::optional_bool(map.get("enabled"), &join(path, "enabled"))?.unwrap_or(true);
    let policy = policy(map.get("permission_policy"), &join(path, "permission_policy"), default_policy)?;
    Ok((enabled, policy))
}

/// The valid tools; each item's problem is recorded on its own.
fn tools(value: Option<&Value>, servers: &[String], problems: &mut Problems) -> Vec<Value> {
    let mut resolved = Vec::new();
    let Some(items) = problems.take(body::array(value, "tools", MAX_TOOLS)) else { return resolved };
    let before = problems.0.len();
    let mut tool_count = 0;
    let mut custom_names = HashSet::new();
    // Where each toolset is (its path, its index in `resolved`), for checks that need
    // every tool of the agent.
    let mut toolsets = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("tools[{i}]");
        let Some((tool, count, toolset)) = problems.take(tool(item, &path, servers, &mut custom_names)) else {
            continue;
        };
        tool_count += count;
        if toolset {
            toolsets.push((path, resolved.len()));
        }
        resolved.push(tool);
    }
    if tool_count > MAX_TOOLS {
        problems.take::<()>(Err(ApiError::invalid(format!(
            "tools: at most {MAX_TOOLS} tools across all toolsets, got {tool_count}"
        ))));
    }
    if problems.0.len() > before {
        return resolved;
    }
    // `custom_names` also holds `a2a_agent` names: only custom tools answer with
    // `user.custom_tool_result`, the source `client_tool_results` narrows.
    let custom: HashSet<String> = resolved
        .iter()
        .filter(|t| t["type"] == "custom")
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    for (path, index) in &toolsets {
        problems.take(web_tool_config::check_client_tools(&resolved[*index], path, &custom));
    }
    resolved
}

/// One tool, resolved: its wire form, how many tools it counts for, and whether it is
/// the built-in toolset.
fn tool(
    tool: &Value,
    path: &str,
    servers: &[String],
    custom_names: &mut HashSet<String>,
) -> ApiResult<(Value, usize, bool)> {
    let path = path.to_owned();
    let map = as_object(tool, &path)?;
    match tag(map, &path)? {
        "agent_toolset_20260401" => {
            body::only_known(map, &["type", "configs", "default_config"], &path)?;
            let mut configured = HashSet::new();
            let (enabled, policy) =
                default_config(map.get("default_config"), &join(&path, "default_config"), "always_allow")?;
            let mut configs = Vec::new();
            for (j, config) in
                body::array(map.get("configs"), &join(&path, "configs"), AGENT_TOOLS.len())?.iter().enumerate()
            {
                let cpath = format!("{path}.configs[{j}]");
                let cmap = as_object(body::bounded_json(config, &cpath, MAX_TOOL_CONFIG_BYTES)?, &cpath)?;
                let name = body::string(cmap.get("name"), &join(&cpath, "name"), 1, 32)?;
                if !AGENT_TOOLS.contains(&name.as_str()) {
                    return Err(ApiError::invalid(format!(
                        "{cpath}.name: must be one of {AGENT_TOOLS:?}, got {name:?}"
                    )));
                }
                if !configured.insert(name.clone()) {
                    return Err(ApiError::invalid(format!("{cpath}.name: {name:?} is configured twice")));
                }
                body::only_known(cmap, web_tool_config::config_keys(&name), &cpath)?;
                if let Some(kind) = cmap.get("type").and_then(Value::as_str).filter(|kind| *kind != name) {
                    return Err(ApiError::invalid(format!("{cpath}.type: {kind:?} does not match name {name:?}")));
                }
                let mut out = cmap.clone();
                out.insert("type".into(), json!(name));
                let tool_enabled =
                    body::optional_bool(cmap.get("enabled"), &join(&cpath, "enabled"))?.unwrap_or(enabled);
                out.insert("enabled".into(), json!(tool_enabled));
                let fallback = policy["type"].as_str().unwrap_or("always_allow");
                out.insert(
                    "permission_policy".into(),
                    self::policy(cmap.get("permission_policy"), &join(&cpath, "permission_policy"), fallback)?,
                );
                web_tool_config::resolve(cmap, tool_enabled, &cpath, &mut out)?;
                configs.push(Value::Object(out));
            }
            let mut toolset = json!({
                "type": "agent_toolset_20260401",
                "default_config": { "enabled": enabled, "permission_policy": policy },
                "configs": configs,
            });
            // Without a search backend, web_search is not among the default's tools.
            agentd_schema::web::disable_implicit_search(&mut toolset, agentd_schema::web::search_backend().is_some());
            Ok((toolset, AGENT_TOOLS.len(), true))
        }
        "mcp_toolset" => {
            body::only_known(map, &["type", "mcp_server_name", "configs", "default_config"], &path)?;
            let server = body::string(
                map.get("mcp_server_name"),
                &join(&path, "mcp_server_name"),
                1,
                MAX_MCP_SERVER_NAME_CHARS,
            )?;
            if !servers.contains(&server) {
                return Err(ApiError::invalid(format!(
                    "{path}.mcp_server_name: no mcp_servers entry named {server:?}"
                )));
            }
            let (enabled, policy) =
                default_config(map.get("default_config"), &join(&path, "default_config"), "always_ask")?;
            let mut configs = Vec::new();
            for (j, config) in body::array(map.get("configs"), &join(&path, "configs"), MAX_TOOLS)?.iter().enumerate() {
                let cpath = format!("{path}.configs[{j}]");
                let cmap = as_object(config, &cpath)?;
                body::only_known(cmap, &["name", "enabled", "permission_policy"], &cpath)?;
                let name = body::string(cmap.get("name"), &join(&cpath, "name"), 1, MAX_TOOL_NAME_CHARS)?;
                let tool_enabled =
                    body::optional_bool(cmap.get("enabled"), &join(&cpath, "enabled"))?.unwrap_or(enabled);
                let fallback = policy["type"].as_str().unwrap_or("always_ask");
                let tool_policy =
                    self::policy(cmap.get("permission_policy"), &join(&cpath, "permission_policy"), fallback)?;
                configs.push(json!({ "name": name, "enabled": tool_enabled, "permission_policy": tool_policy }));
            }
            let count = configs.len().max(1);
            let toolset = json!({
                "type": "mcp_toolset",
                "mcp_server_name": server,
                "default_config": { "enabled": enabled, "permission_policy": policy },
                "configs": configs,
            });
            Ok((toolset, count, false))
        }
        "custom" => {
            body::only_known(map, &["type", "name", "description", "input_schema"], &path)?;
            let name = body::string(map.get("name"), &join(&path, "name"), 1, MAX_TOOL_NAME_CHARS)?;
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(ApiError::invalid(format!("{path}.name: only letters, digits, '_' and '-' are allowed")));
            }
            if !custom_names.insert(name.clone()) {
                return Err(ApiError::invalid(format!("{path}.name: duplicate tool name {name:?}")));
            }
            let description =
                body::string(map.get("description"), &join(&path, "description"), 1, MAX_TOOL_DESCRIPTION_CHARS)?;
            let schema_path = join(&path, "input_schema");
            let schema = as_object(
                body::bounded_json(
                    map.get("input_schema").unwrap_or(&Value::Null),
                    &schema_path,
                    MAX_INPUT_SCHEMA_BYTES,
                )?,
                &schema_path,
            )?;
            if tag(schema, &schema_path)? != "object" {
                return Err(ApiError::invalid(format!("{schema_path}.type: must be \"object\"")));
            }
            let custom = json!({ "type": "custom", "name": name, "description": description, "input_schema": schema });
            Ok((custom, 1, false))
        }
        // An agentd extension: another agent, called over A2A (docs/api/a2a-tools.md).
        "a2a_agent" => {
            body::only_known(map, &["type", "name", "url", "description", "permission_policy"], &path)?;
            let name = body::string(map.get("name"), &join(&path, "name"), 1, MAX_TOOL_NAME_CHARS)?;
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(ApiError::invalid(format!("{path}.name: only letters, digits, '_' and '-' are allowed")));
            }
            // The model calls it by name: a built-in tool's name would make calls ambiguous.
            if AGENT_TOOLS.contains(&name.as_str()) {
                return Err(ApiError::invalid(format!(
                    "{path}.name: {name:?} is the name of a built-in tool of agent_toolset_20260401; pick another name"
                )));
            }
            if !custom_names.insert(name.clone()) {
                return Err(ApiError::invalid(format!("{path}.name: duplicate tool name {name:?}")));
            }
            let url = body::string(map.get("url"), &join(&path, "url"), 1, MAX_URL_CHARS)?;
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(ApiError::invalid(format!("{path}.url: must be an http(s) URL")));
            }
            // The agent card is found under the URL's path; a fragment has no place there.
            if url.contains('#') {
                return Err(ApiError::invalid(format!("{path}.url: must not carry a fragment")));
            }
            let mut out = json!({
                "type": "a2a_agent",
                "name": name,
                "url": url,
                "permission_policy": policy(map.get("permission_policy"), &join(&path, "permission_policy"), "always_allow")?,
            });
            if let Some(description) =
                body::optional_string(map.get("description"), &join(&path, "description"), MAX_TOOL_DESCRIPTION_CHARS)?
            {
                out["description"] = json!(description);
            }
            Ok((out, 1, false))
        }
        other => Err(ApiError::invalid(format!(
            "{path}.type: unknown tool type {other:?} (expected agent_toolset_20260401, mcp_toolset, custom or a2a_agent)"
        ))),
    }
}

/// The valid skills; each item's problem is recorded on its own.
fn skills(value: Option<&Value>, problems: &mut Problems) -> Value {
    let mut out = Vec::new();
    let Some(items) = problems.take(body::array(value, "skills", MAX_SKILLS)) else { return Value::Array(out) };
    for (i, skill) in items.iter().enumerate() {
        let path = format!("skills[{i}]");
        let one = || -> ApiResult<Value> {
            let map = as_object(skill, &path)?;
            body::only_known(map, &["type", "skill_id", "version"], &path)?;
            let kind = tag(map, &path)?;
            if kind != "anthropic" && kind != "custom" {
                return Err(ApiError::invalid(format!("{path}.type: must be anthropic or custom, got {kind:?}")));
            }
            let skill_id = body::string(map.get("skill_id"), &join(&path, "skill_id"), 1, MAX_ID_CHARS)?;
            let version = body::optional_string(map.get("version"), &join(&path, "version"), 64)?
                .unwrap_or_else(|| "latest".into());
            Ok(json!({ "type": kind, "skill_id": skill_id, "version": version }))
        };
        if let Some(skill) = problems.take(one()) {
            out.push(skill);
        }
    }
    Value::Array(out)
}

/// `multiagent` (ADR 0022 §1): either type's shape, normalized with its defaults. A roster
/// entry's string id becomes `{"type":"agent","id"}` and `self` stays the sentinel;
/// `domain::multiagent::resolve` (which reads the store) pins the versions and checks
/// the agents. `workflows` enabled — by default too — is refused: no workflow run
/// exists in this agentd.
fn multiagent(value: Option<&Value>, catalog: &Catalog) -> ApiResult<Value> {
    let value = match value {
        None | Some(Value::Null) => return Ok(Value::Null),
        Some(value) => body::bounded_json(value, "multiagent", MAX_MULTIAGENT_BYTES)?,
    };
    let map = as_object(value, "multiagent")?;
    match tag(map, "multiagent")? {
        "coordinator" => {
            body::only_known(map, &["type", "agents"], "multiagent")?;
            let agents = roster(map.get("agents"), "multiagent.agents", true, catalog)?;
            if agents.is_empty() {
                return Err(ApiError::invalid(format!(
                    "multiagent.agents: a coordinator's roster has 1 to {MAX_ROSTER_AGENTS} entries, got none"
                )));
            }
            Ok(json!({ "type": "coordinator", "agents": agents }))
        }
        "multiagent_20261001" => {
            body::only_known(map, &["type", "advisor", "subagents", "workflows"], "multiagent")?;
            let advisor = advisor(map.get("advisor"), catalog)?;
            let subagents = subagents(map.get("subagents"), catalog)?;
            workflows(map.get("workflows"))?;
            Ok(json!({
                "type": "multiagent_20261001",
                "advisor": advisor,
                "subagents": subagents,
                "workflows": { "type": "disabled" },
            }))
        }
        other => Err(ApiError::invalid(format!(
            "multiagent.type: must be coordinator or multiagent_20261001, got {other:?}"
        ))),
    }
}

/// A roster: agent ids, `{"type":"agent","id","version"?}`, at most one `{"type":"self"}`
/// and, where `advisors`, one `{"type":"advisor","model"}`; each agent named once.
fn roster(value: Option<&Value>, path: &str, advisors: bool, catalog: &Catalog) -> ApiResult<Vec<Value>> {
    let mut ids = HashSet::new();
    let (mut has_self, mut has_advisor) = (false, false);
    let mut out = Vec::new();
    for (i, item) in body::array(value, path, MAX_ROSTER_AGENTS)?.iter().enumerate() {
        let path = format!("{path}[{i}]");
        let entry = match item {
            Value::String(id) => json!({ "type": "agent", "id": agent_id(id, &path)? }),
            Value::Object(map) => match tag(map, &path)? {
                "agent" => {
                    body::only_known(map, &["type", "id", "version"], &path)?;
                    let id = body::string(map.get("id"), &join(&path, "id"), 1, MAX_ID_CHARS)?;
                    let mut entry = json!({ "type": "agent", "id": agent_id(&id, &join(&path, "id"))? });
                    match map.get("version") {
                        None | Some(Value::Null) => {}
                        Some(Value::Number(n)) if n.as_i64().is_some_and(|v| v >= 1) => entry["version"] = json!(n),
                        Some(other) => {
                            return Err(ApiError::invalid(format!(
                                "{path}.version: expected an integer ≥ 1, got {other}"
                            )));
                        }
                    }
                    entry
                }
                "self" => {
                    body::only_known(map, &["type"], &path)?;
                    if std::mem::replace(&mut has_self, true) {
                        return Err(ApiError::invalid(format!("{path}: at most one `self` entry")));
                    }
                    json!({ "type": "self" })
                }
                "advisor" if advisors => {
                    body::only_known(map, &["type", "model"], &path)?;
                    if std::mem::replace(&mut has_advisor, true) {
                        return Err(ApiError::invalid(format!("{path}: at most one advisor entry")));
                    }
                    json!({ "type": "advisor", "model": advisor_model(map.get("model"), &join(&path, "model"), catalog)? })
                }
                other => {
                    let expected = if advisors { "agent, self or advisor" } else { "agent or self" };
                    return Err(ApiError::invalid(format!("{path}.type: must be {expected}, got {other:?}")));
                }
            },
            other => {
                return Err(ApiError::invalid(format!(
                    "{path}: expected an agent id or an object, got {}",
                    kind(other)
                )));
            }
        };
        if let Some(id) = entry["id"].as_str()
            && !ids.insert(id.to_owned())
        {
            return Err(ApiError::invalid(format!(
                "{path}: agent {id} is named twice; entries must be distinct agents"
            )));
        }
        out.push(entry);
    }
    Ok(out)
}

fn agent_id(id: &str, path: &str) -> ApiResult<String> {
    agentd_schema::ids::AgentId::parse(id)
        .map(|id| id.to_string())
        .map_err(|_| ApiError::invalid(format!("{path}: {id:?} is not an agent id")))
}

/// An advisor's model: one of the workspace's effective catalog (GET /v1/models).
fn advisor_model(value: Option<&Value>, path: &str, catalog: &Catalog) -> ApiResult<String> {
    let model = body::string(value, path, 1, MAX_ID_CHARS)?;
    if catalog.find(&model).is_none() {
        return Err(ApiError::invalid(format!(
            "{path}: model {model:?} is not in this workspace's model catalog, so it cannot be an advisor; see GET /v1/models"
        )));
    }
    Ok(model)
}

/// `multiagent_20261001.advisor` (default disabled).
fn advisor(value: Option<&Value>, catalog: &Catalog) -> ApiResult<Value> {
    const PATH: &str = "multiagent.advisor";
    let Some(value) = value.filter(|v| !v.is_null()) else { return Ok(json!({ "type": "disabled" })) };
    let map = as_object(value, PATH)?;
    match tag(map, PATH)? {
        "disabled" => {
            body::only_known(map, &["type"], PATH)?;
            Ok(json!({ "type": "disabled" }))
        }
        "enabled" => {
            body::only_known(map, &["type", "model"], PATH)?;
            Ok(
                json!({ "type": "enabled", "model": advisor_model(map.get("model"), "multiagent.advisor.model", catalog)? }),
            )
        }
        other => Err(ApiError::invalid(format!("{PATH}.type: must be enabled or disabled, got {other:?}"))),
    }
}

/// `multiagent_20261001.subagents` (default enabled, inline agents enabled, no predefined
/// agents).
fn subagents(value: Option<&Value>, catalog: &Catalog) -> ApiResult<Value> {
    const PATH: &str = "multiagent.subagents";
    let enabled = Map::from_iter([("type".to_owned(), json!("enabled"))]);
    let map = match value {
        None | Some(Value::Null) => &enabled,
        Some(value) => as_object(value, PATH)?,
    };
    match tag(map, PATH)? {
        "disabled" => {
            body::only_known(map, &["type"], PATH)?;
            Ok(json!({ "type": "disabled" }))
        }
        "enabled" => {
            body::only_known(map, &["type", "inline_agents", "predefined_agents"], PATH)?;
            let inline = match map.get("inline_agents") {
                None | Some(Value::Null) => "enabled",
                Some(value) => {
                    let path = "multiagent.subagents.inline_agents";
                    let inline = as_object(value, path)?;
                    body::only_known(inline, &["type"], path)?;
                    match tag(inline, path)? {
                        "enabled" => "enabled",
                        "disabled" => "disabled",
                        other => {
                            return Err(ApiError::invalid(format!(
                                "{path}.type: must be enabled or disabled, got {other:?}"
                            )));
                        }
                    }
                }
            };
            let path = "multiagent.subagents.predefined_agents";
            let predefined = roster(map.get("predefined_agents"), path, false, catalog)?;
            if inline == "disabled" && predefined.is_empty() {
                return Err(ApiError::invalid(format!(
                    "{path}: with inline_agents disabled, name at least one predefined agent (or enable inline_agents)"
                )));
            }
            Ok(json!({ "type": "enabled", "inline_agents": { "type": inline }, "predefined_agents": predefined }))
        }
        other => Err(ApiError::invalid(format!("{PATH}.type: must be enabled or disabled, got {other:?}"))),
    }
}

/// `multiagent_20261001.workflows`: only `{"type":"disabled"}`; omitted or `null` it
/// defaults to enabled, which is refused as well (ADR 0022 item 3).
fn workflows(value: Option<&Value>) -> ApiResult<()> {
    const PATH: &str = "multiagent.workflows";
    let unavailable = |how: &str| {
        ApiError::invalid(format!(
            "{PATH}: workflow runs are not available in this agentd{how}; send {{\"type\":\"disabled\"}}"
        ))
    };
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Err(unavailable(" (omitted or null, workflows defaults to enabled)"));
    };
    let map = as_object(value, PATH)?;
    match tag(map, PATH)? {
        "disabled" => body::only_known(map, &["type"], PATH),
        "enabled" => Err(unavailable("")),
        other => Err(ApiError::invalid(format!("{PATH}.type: must be enabled or disabled, got {other:?}"))),
    }
}

fn execution_identity(value: Option<&Value>) -> ApiResult<Value> {
    match value {
        None | Some(Value::Null) => Ok(json!({ "type": "service_account" })),
        Some(value) => {
            let map = as_object(value, "execution_identity")?;
            match tag(map, "execution_identity")? {
                "service_account" => Ok(json!({ "type": "service_account" })),
                "aws_role" => {
                    let arn = body::string(map.get("role_arn"), "execution_identity.role_arn", 1, MAX_ROLE_ARN_CHARS)?;
                    Ok(json!({ "type": "aws_role", "role_arn": arn }))
                }
                other => Err(ApiError::invalid(format!(
                    "execution_identity.type: must be service_account or aws_role, got {other:?}"
                ))),
            }
        }
    }
}
