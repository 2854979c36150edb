//! The workspace's MCP server registry and the registered servers each agent uses
//! (docs/api/config.md "MCP and A2A configuration").
//!
//! A registered server is a name and a URL the workspace keeps under an id it chose; its
//! URL passes the egress guard when it is written (`agentd_schema::egress`: public
//! addresses only unless remote tools may reach private ones). An agent's MCP
//! configuration names registered servers by id, each with an optional allow-list of
//! its tools and a permission policy; writing it makes the agent's `mcp_servers` and
//! `mcp_toolset` tools those servers' — a new version of the managed agent written by
//! [`super::agents::update`], the managed update's code, after the managed API's checks
//! (`managed::agent_config::check_in`). The worker reads agents as ever.
//!
//! What is written is a copy: changing or deleting a registered server later does not
//! rewrite the agents that use it. `resolve` says whether an agent still matches what
//! its configuration resolves to now; writing the configuration again applies it.

use std::collections::HashSet;

use agentd_schema::catalog::Catalog;
use agentd_schema::egress;
use agentd_schema::{AgentMcpConfigRow, McpServerRow, Resource, Store, StoreError};
use serde_json::{Map, Value, json};

use super::agents;
use super::error::{DomainError, DomainResult};
use crate::managed::agent_config::{CONFIG_FIELDS, check_in};
use crate::managed::limits::{
    MAX_DESCRIPTION_CHARS, MAX_MCP_SERVER_NAME_CHARS, MAX_MCP_SERVERS, MAX_TOOL_NAME_CHARS, MAX_TOOLS, MAX_URL_CHARS,
};

/// The permission policies a server's tools may get (as `mcp_toolset` takes them).
const POLICIES: &[&str] = &["always_allow", "always_ask", "auto"];

/// Whether `value` can be a registered server's id: 1 to 64 ASCII letters, digits, `.`,
/// `_` and `-`, starting with a letter or digit.
pub fn is_server_id(value: &str) -> bool {
    (1..=64).contains(&value.len())
        && value.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// A registered server as a `PUT` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutServer {
    /// The name agents get (`mcp_servers[].name`); unique in the workspace.
    pub name: String,
    /// The server's URL.
    pub url: String,
    /// What it is for.
    pub description: Option<String>,
}

fn server_not_found(id: &str) -> DomainError {
    DomainError::NotFound(format!("mcp server not found: {id}"))
}

/// Creates or replaces the workspace's server `id` (`revision` 1 means created). The
/// URL must pass the egress guard (`allow_private`: private addresses and plain `http`
/// to them allowed, as for the worker's remote tools); the name must be free in the
/// workspace (`NameTaken` otherwise).
pub async fn put_server(
    store: &dyn Store,
    workspace_id: &str,
    id: &str,
    put: PutServer,
    allow_private: bool,
) -> DomainResult<McpServerRow> {
    if !is_server_id(id) {
        return Err(server_not_found(id));
    }
    let chars = |value: &str| value.chars().count();
    // No store keeps NUL in text, and no name, URL or description needs control characters.
    for (field, value) in
        [("name", Some(&put.name)), ("url", Some(&put.url)), ("description", put.description.as_ref())]
    {
        if value.is_some_and(|value| value.contains(char::is_control)) {
            return Err(DomainError::invalid(format!("{field}: control characters are not allowed")));
        }
    }
    if !(1..=MAX_MCP_SERVER_NAME_CHARS).contains(&chars(&put.name)) {
        return Err(DomainError::invalid(format!(
            "name: must be 1 to {MAX_MCP_SERVER_NAME_CHARS} characters, got {}",
            chars(&put.name)
        )));
    }
    if !(1..=MAX_URL_CHARS).contains(&chars(&put.url)) {
        return Err(DomainError::invalid(format!("url: must be 1 to {MAX_URL_CHARS} characters")));
    }
    if !(put.url.starts_with("https://") || put.url.starts_with("http://")) {
        return Err(DomainError::invalid("url: must be an http(s) URL"));
    }
    if let Some(description) = &put.description
        && chars(description) > MAX_DESCRIPTION_CHARS
    {
        return Err(DomainError::invalid(format!("description: at most {MAX_DESCRIPTION_CHARS} characters")));
    }
    let rules = egress::Rules { allow_private, https_only: false };
    // A server behind an MCP tunnel is reached through the tunnel, never resolved: its
    // URL only has to be https (docs/api/tunnels.md).
    let tunnelled = reqwest::Url::parse(&put.url).ok().and_then(|url| {
        url.host_str().and_then(agentd_schema::tunnels::tunnel_of_host).map(|_| url.scheme() == "https")
    });
    if tunnelled == Some(false) {
        return Err(DomainError::invalid("url: an MCP server behind a tunnel is reached over https"));
    }
    if tunnelled.is_none()
        && let Err(refused) = egress::check(&put.url, rules).await
    {
        tracing::info!(url = %egress::redacted(&put.url), %refused, "mcp server url refused");
        return Err(DomainError::invalid(refused.to_string()));
    }
    let row = McpServerRow {
        workspace_id: workspace_id.to_owned(),
        id: id.to_owned(),
        name: put.name,
        url: put.url,
        description: put.description,
        revision: 0,
        created_at_ms: 0,
        updated_at_ms: 0,
    };
    store.put_mcp_server(row).await.map_err(|error| match error {
        StoreError::Conflict(message) => DomainError::NameTaken(format!("name: {message}")),
        other => other.into(),
    })
}

/// The workspace's server `id`.
pub async fn get_server(store: &dyn Store, workspace_id: &str, id: &str) -> DomainResult<McpServerRow> {
    store.get_mcp_server(workspace_id, id).await?.ok_or_else(|| server_not_found(id))
}

/// A page of the workspace's servers by id, after `after_id`.
pub async fn list_servers(
    store: &dyn Store,
    workspace_id: &str,
    after_id: Option<&str>,
    limit: i64,
) -> DomainResult<Vec<McpServerRow>> {
    Ok(store.list_mcp_servers(workspace_id, after_id, limit).await?)
}

/// Removes the workspace's server `id`. A server an agent's MCP configuration names is
/// a `Conflict` naming those agents: take it out of their configuration first (the
/// agents themselves keep what was written to them either way).
pub async fn delete_server(store: &dyn Store, workspace_id: &str, id: &str) -> DomainResult<()> {
    get_server(store, workspace_id, id).await?;
    let users: Vec<String> = store
        .list_agent_mcp_configs(workspace_id)
        .await?
        .into_iter()
        .filter(|config| uses_of(&config.servers).iter().any(|used| used.server_id == id))
        .map(|config| config.agent_id)
        .collect();
    if !users.is_empty() {
        return Err(DomainError::Conflict(format!(
            "mcp server {id} is used by the MCP configuration of {}; remove it there first",
            users.join(", ")
        )));
    }
    if store.delete_mcp_server(workspace_id, id).await? { Ok(()) } else { Err(server_not_found(id)) }
}

/// One registered server an agent uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUse {
    /// The registered server's id.
    pub server_id: String,
    /// The tools offered (an allow-list); `None`: every tool the server has.
    pub tools: Option<Vec<String>>,
    /// The permission policy of its tools (`always_ask` when `None`, as `mcp_toolset`).
    pub permission_policy: Option<String>,
}

impl ServerUse {
    fn to_json(&self) -> Value {
        let mut out = json!({ "server_id": self.server_id, "tools": self.tools });
        out["permission_policy"] = match &self.permission_policy {
            Some(policy) => json!({ "type": policy }),
            None => Value::Null,
        };
        out
    }
}

/// The stored uses (written by [`parse_uses`], so well formed).
fn uses_of(servers: &Value) -> Vec<ServerUse> {
    parse_uses(servers).unwrap_or_default()
}

/// `[{"server_id", "tools"?: [names], "permission_policy"?: {"type"}}]`, each server
/// once, at most [`MAX_MCP_SERVERS`]; a broken rule is `Invalid` naming the field
/// (`servers[i].…`).
pub fn parse_uses(value: &Value) -> DomainResult<Vec<ServerUse>> {
    let invalid = |message: String| Err(DomainError::invalid(message));
    let Value::Array(items) = value else { return invalid("servers: an array is required".into()) };
    if items.len() > MAX_MCP_SERVERS {
        return invalid(format!("servers: at most {MAX_MCP_SERVERS} servers, got {}", items.len()));
    }
    let mut seen = HashSet::new();
    let mut uses = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("servers[{i}]");
        let Value::Object(map) = item else { return invalid(format!("{path}: an object is required")) };
        if let Some(unknown) = map.keys().find(|k| !["server_id", "tools", "permission_policy"].contains(&k.as_str())) {
            return invalid(format!("{path}.{unknown}: unknown field"));
        }
        let Some(server_id) = map.get("server_id").and_then(Value::as_str) else {
            return invalid(format!("{path}.server_id: a string is required"));
        };
        if !seen.insert(server_id.to_owned()) {
            return invalid(format!("{path}.server_id: server {server_id:?} is named twice"));
        }
        let tools = match map.get("tools") {
            None | Some(Value::Null) => None,
            Some(Value::Array(names)) => {
                if names.len() > MAX_TOOLS {
                    return invalid(format!("{path}.tools: at most {MAX_TOOLS} tools"));
                }
                let mut out: Vec<String> = Vec::with_capacity(names.len());
                for (j, name) in names.iter().enumerate() {
                    match name.as_str() {
                        Some(name) if (1..=MAX_TOOL_NAME_CHARS).contains(&name.chars().count()) => {
                            if out.iter().any(|n| n == name) {
                                return invalid(format!("{path}.tools[{j}]: tool {name:?} is listed twice"));
                            }
                            out.push(name.to_owned());
                        }
                        _ => {
                            return invalid(format!(
                                "{path}.tools[{j}]: a tool name of 1 to {MAX_TOOL_NAME_CHARS} characters is required"
                            ));
                        }
                    }
                }
                Some(out)
            }
            Some(_) => return invalid(format!("{path}.tools: an array of tool names or null is required")),
        };
        let permission_policy = match map.get("permission_policy") {
            None | Some(Value::Null) => None,
            Some(Value::Object(policy)) => match policy.get("type").and_then(Value::as_str) {
                Some(kind) if POLICIES.contains(&kind) && policy.len() == 1 => Some(kind.to_owned()),
                _ => {
                    return invalid(format!("{path}.permission_policy: expected {{\"type\": one of {POLICIES:?}}}"));
                }
            },
            Some(_) => return invalid(format!("{path}.permission_policy: an object is required")),
        };
        uses.push(ServerUse { server_id: server_id.to_owned(), tools, permission_policy });
    }
    Ok(uses)
}

/// The `mcp_servers` entries and `mcp_toolset` tools `uses` stand for, from the
/// registry as it is now (a server the workspace lacks is `Invalid` naming it).
async fn expand(store: &dyn Store, workspace_id: &str, uses: &[ServerUse]) -> DomainResult<(Vec<Value>, Vec<Value>)> {
    let mut servers = Vec::with_capacity(uses.len());
    let mut toolsets = Vec::with_capacity(uses.len());
    for (i, used) in uses.iter().enumerate() {
        let found = if is_server_id(&used.server_id) {
            store.get_mcp_server(workspace_id, &used.server_id).await?
        } else {
            None
        };
        let Some(server) = found else {
            return Err(DomainError::invalid(format!(
                "servers[{i}].server_id: no MCP server {:?} in this workspace",
                used.server_id
            )));
        };
        servers.push(json!({ "type": "url", "name": server.name, "url": server.url }));
        let policy = json!({ "type": used.permission_policy.as_deref().unwrap_or("always_ask") });
        toolsets.push(match &used.tools {
            None => json!({
                "type": "mcp_toolset", "mcp_server_name": server.name,
                "default_config": { "enabled": true, "permission_policy": policy },
            }),
            Some(names) => json!({
                "type": "mcp_toolset", "mcp_server_name": server.name,
                "default_config": { "enabled": false, "permission_policy": policy },
                "configs": names.iter().map(|name| json!({ "name": name, "enabled": true })).collect::<Vec<_>>(),
            }),
        });
    }
    Ok((servers, toolsets))
}

/// The agent's configuration with `uses` as its MCP servers: its other fields as they
/// are, `mcp_servers` replaced, its `mcp_toolset` tools replaced (other tools kept, in
/// order, the toolsets after them), normalized by the managed API's checks.
async fn configured(
    store: &dyn Store,
    catalog: &Catalog,
    workspace_id: &str,
    agent: &Resource,
    uses: &[ServerUse],
) -> DomainResult<Map<String, Value>> {
    let (servers, toolsets) = expand(store, workspace_id, uses).await?;
    let mut config: Map<String, Value> =
        CONFIG_FIELDS.iter().filter_map(|f| agent.body.get(*f).map(|v| ((*f).to_owned(), v.clone()))).collect();
    let mut tools: Vec<Value> = agent.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|tool| tool["type"] != "mcp_toolset")
        .cloned()
        .collect();
    tools.extend(toolsets);
    config.insert("mcp_servers".into(), Value::Array(servers));
    config.insert("tools".into(), Value::Array(tools));
    check_in(&config, catalog).map_err(|problems| {
        let messages: Vec<String> = problems.into_iter().map(|p| p.message).collect();
        DomainError::invalid(format!("the agent's configuration would not be valid: {}", messages.join("; ")))
    })
}

fn agent_not_found(agent_id: &str) -> DomainError {
    DomainError::NotFound(format!("agent not found: {agent_id}"))
}

async fn load_agent(store: &dyn Store, workspace_id: &str, agent_id: &str) -> DomainResult<Resource> {
    store.get_resource(workspace_id, agents::KIND, agent_id).await?.ok_or_else(|| agent_not_found(agent_id))
}

/// An agent's MCP configuration as the control plane shows it.
#[derive(Debug, Clone)]
pub struct AgentMcp {
    /// The agent as it is now.
    pub agent: Resource,
    /// What was last written (`None`: never).
    pub config: Option<AgentMcpConfigRow>,
}

impl AgentMcp {
    /// The uses last written, as JSON (`[]` when never written).
    pub fn servers(&self) -> Value {
        Value::Array(
            self.config
                .as_ref()
                .map(|c| uses_of(&c.servers))
                .unwrap_or_default()
                .iter()
                .map(ServerUse::to_json)
                .collect(),
        )
    }
}

/// The workspace's agent `agent_id` with the MCP configuration last written for it.
pub async fn get_agent(store: &dyn Store, workspace_id: &str, agent_id: &str) -> DomainResult<AgentMcp> {
    let agent = load_agent(store, workspace_id, agent_id).await?;
    let config = store.get_agent_mcp_config(workspace_id, agent_id).await?;
    Ok(AgentMcp { agent, config })
}

/// Makes `servers` ([`parse_uses`]) the MCP configuration of the workspace's agent
/// `agent_id` (a missing agent is `NotFound` before the body is looked at): the agent's
/// next version with those servers and toolsets (none written when it has them
/// already), through [`agents::update`]; then the configuration is recorded. An
/// archived agent is `AgentArchived`; a concurrent write of the agent a `Conflict`.
pub async fn put_agent(
    store: &dyn Store,
    catalog: &Catalog,
    workspace_id: &str,
    agent_id: &str,
    servers: &Value,
) -> DomainResult<AgentMcp> {
    let current = load_agent(store, workspace_id, agent_id).await?;
    let uses = parse_uses(servers)?;
    agents::check_updatable(&current, None)?;
    let config = configured(store, catalog, workspace_id, &current, &uses).await?;
    let agent = agents::update(store, workspace_id, &current, config, false).await?;
    let row = AgentMcpConfigRow {
        workspace_id: workspace_id.to_owned(),
        agent_id: agent_id.to_owned(),
        servers: Value::Array(uses.iter().map(ServerUse::to_json).collect()),
        agent_version: agent.version,
        revision: 0,
        created_at_ms: 0,
        updated_at_ms: 0,
    };
    let config = store.put_agent_mcp_config(row).await?;
    Ok(AgentMcp { agent, config: Some(config) })
}

/// What an agent's MCP configuration resolves to now.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// The `mcp_servers` the agent's configuration would have.
    pub mcp_servers: Value,
    /// Its `mcp_toolset` tools.
    pub tools: Value,
    /// The agent's current version.
    pub agent_version: i64,
    /// Whether the current version has exactly these (`false`: a registered server
    /// changed since, or the agent was changed through the managed API).
    pub current: bool,
}

/// The effective `mcp_servers` and `mcp_toolset` tools of the workspace's agent
/// `agent_id` with `servers` ([`parse_uses`]; `None`: the configuration last written, or
/// none), from the
/// registry as it is now. Writes nothing.
pub async fn resolve(
    store: &dyn Store,
    catalog: &Catalog,
    workspace_id: &str,
    agent_id: &str,
    servers: Option<&Value>,
) -> DomainResult<Resolution> {
    let agent = load_agent(store, workspace_id, agent_id).await?;
    let uses = match servers {
        Some(servers) => parse_uses(servers)?,
        None => {
            store.get_agent_mcp_config(workspace_id, agent_id).await?.map(|c| uses_of(&c.servers)).unwrap_or_default()
        }
    };
    let config = configured(store, catalog, workspace_id, &agent, &uses).await?;
    let toolsets = |body: &Value| -> Vec<Value> {
        body["tools"].as_array().into_iter().flatten().filter(|t| t["type"] == "mcp_toolset").cloned().collect()
    };
    let effective = Value::Object(config);
    let tools = toolsets(&effective);
    let current = agent.body["mcp_servers"] == effective["mcp_servers"] && toolsets(&agent.body) == tools;
    Ok(Resolution {
        mcp_servers: effective["mcp_servers"].clone(),
        tools: Value::Array(tools),
        agent_version: agent.version,
        current,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_ids_are_names() {
        for ok in ["docs", "a", "Docs-2.prod_x", &"x".repeat(64)] {
            assert!(is_server_id(ok), "{ok}");
        }
        for bad in ["", "-x", ".x", "a/b", "a b", &"x".repeat(65), "é"] {
            assert!(!is_server_id(bad), "{bad}");
        }
    }

    #[test]
    fn uses_name_their_field_at_fault() {
        let parsed = parse_uses(&json!([
            {"server_id": "a"},
            {"server_id": "b", "tools": ["x", "y"], "permission_policy": {"type": "always_allow"}}
        ]))
        .unwrap();
        assert_eq!(parsed[1].tools.as_deref(), Some(&["x".to_owned(), "y".to_owned()][..]));
        assert_eq!(parsed[1].permission_policy.as_deref(), Some("always_allow"));
        assert_eq!(parse_uses(&json!([parsed[1].to_json()])).unwrap(), vec![parsed[1].clone()], "round trip");
        for (bad, field) in [
            (json!({}), "servers:"),
            (json!([{"server_id": "a"}, {"server_id": "a"}]), "servers[1].server_id"),
            (json!([{"server_id": "a", "tools": [""]}]), "servers[0].tools[0]"),
            (json!([{"server_id": "a", "tools": ["x", "x"]}]), "servers[0].tools[1]"),
            (json!([{"server_id": "a", "permission_policy": {"type": "never"}}]), "servers[0].permission_policy"),
            (json!([{"server_id": "a", "extra": 1}]), "servers[0].extra"),
            (json!([{"tools": []}]), "servers[0].server_id"),
        ] {
            let error = parse_uses(&bad).unwrap_err().to_string();
            assert!(error.contains(field), "{bad}: {error}");
        }
    }
}
