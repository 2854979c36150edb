//! An agent's `multiagent` configuration (ADR 0022 §1): what the store must say about it.
//! `managed::agent_config` checks its shape (both types, defaults, the roster bounds, the
//! advisor model, `workflows`); here the roster is resolved against the workspace —
//! string ids pinned to the latest version, every agent live, distinct, `self` kept as
//! the sentinel — when [`super::agents`] writes a version and when a draft is validated;
//! an update of a `multiagent_20261001` is [`merge`]d level by level; the stored sentinel
//! is [`render`]ed as the owning agent; and a session snapshots the [`session_shape`]:
//! every roster agent's full definition at its pinned version, so the worker never reads
//! agents.

use std::collections::HashSet;

use agentd_schema::Store;
use agentd_schema::catalog::Catalog;
use agentd_schema::events::threads::{CONSULT_ADVISOR, MESSAGE_THREAD, SPAWN_THREAD};
use serde_json::{Map, Value, json};

use super::error::{DomainError, DomainResult};

/// The stored kind of agents (`agents::KIND`, which writes through this module).
const AGENT_KIND: &str = "agent";

/// The type whose update merges into a stored one of the same type.
use agentd_schema::multiagent::{MERGED_TYPE, roster, roster_pointer};

/// The fields of a thread's agent definition (`BetaManagedAgentsSessionThreadAgent`).
const THREAD_AGENT_FIELDS: &[&str] = &[
    "type",
    "id",
    "version",
    "name",
    "description",
    "system",
    "model",
    "tools",
    "mcp_servers",
    "skills",
    "execution_identity",
];

/// The thread tools a configuration offers the primary thread (ADR 0022 §4), in any of
/// its shapes (as stored, rendered, or a session's): `spawn_thread` and `message_thread`
/// when it may spawn threads, `consult_advisor` when it has an advisor.
pub fn thread_tools(multiagent: &Value) -> Vec<&'static str> {
    let mut tools = Vec::new();
    let (spawns, advises) = match multiagent["type"].as_str() {
        Some("coordinator") => {
            let agents = multiagent["agents"].as_array().map(Vec::as_slice).unwrap_or_default();
            (agents.iter().any(|a| a["type"] != "advisor"), agents.iter().any(|a| a["type"] == "advisor"))
        }
        Some(MERGED_TYPE) => (multiagent["subagents"]["type"] == "enabled", multiagent["advisor"]["type"] == "enabled"),
        _ => (false, false),
    };
    if spawns {
        tools.extend([SPAWN_THREAD, MESSAGE_THREAD]);
    }
    if advises {
        tools.push(CONSULT_ADVISOR);
    }
    tools
}

/// A `custom` (or `a2a_agent`) tool named like a thread tool the configuration enables
/// would make the model's calls ambiguous: the message naming `tools[i].name`.
pub fn check_tool_names(tools: &Value, multiagent: &Value) -> Result<(), String> {
    let reserved = thread_tools(multiagent);
    for (i, tool) in tools.as_array().map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
        let named = matches!(tool["type"].as_str(), Some("custom" | "a2a_agent"));
        if let Some(name) = tool["name"].as_str().filter(|name| named && reserved.contains(name)) {
            return Err(format!(
                "tools[{i}].name: {name:?} is the name of a thread tool this agent's multiagent configuration \
                 enables; rename the tool"
            ));
        }
    }
    Ok(())
}

/// `update` applied to the stored `multiagent` (wire §2.1): a `multiagent_20261001` onto
/// a stored `multiagent_20261001` merges level by level — a key omitted keeps its stored
/// value, a key sent as `null` takes its default (it is left out, and the shape check
/// fills the default in), a member whose `type` changes is replaced whole, a list is
/// replaced — anything else replaces the stored value (`null` clears it).
pub fn merge(stored: Option<&Value>, update: &Value) -> Value {
    match (stored.and_then(Value::as_object), update.as_object()) {
        (Some(kept), Some(next)) if kept.get("type") == next.get("type") && next["type"] == MERGED_TYPE => {
            Value::Object(merge_level(kept, next))
        }
        _ => update.clone(),
    }
}

fn merge_level(kept: &Map<String, Value>, next: &Map<String, Value>) -> Map<String, Value> {
    let mut out = kept.clone();
    for (key, value) in next {
        match value {
            Value::Null => {
                out.remove(key);
            }
            Value::Object(member) => {
                let merged = match out.get(key) {
                    Some(Value::Object(stored)) if stored.get("type") == member.get("type") => {
                        Value::Object(merge_level(stored, member))
                    }
                    _ => value.clone(),
                };
                out.insert(key.clone(), merged);
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

/// The roster lists of a configuration with the field path of each: a coordinator's
/// `agents`, an enabled `subagents.predefined_agents`.
fn rosters_mut(multiagent: &mut Value) -> Vec<(&'static str, &mut Vec<Value>)> {
    let Some(pointer) = roster_pointer(multiagent) else { return Vec::new() };
    let path = if pointer == "/agents" { "multiagent.agents" } else { "multiagent.subagents.predefined_agents" };
    multiagent.pointer_mut(pointer).and_then(Value::as_array_mut).map(|agents| (path, agents)).into_iter().collect()
}

/// Resolves the roster of `config`'s `multiagent` (shape-checked) for agent `owner` of
/// the workspace: each `{"type":"agent","id"}` pinned to the agent's latest version, a
/// pinned version checked to exist; every agent a live, non-archived agent of the
/// workspace; `self` kept as the sentinel but counted as `owner`, so naming `owner` too
/// is a duplicate. A 400 naming the entry otherwise.
pub async fn resolve(
    store: &dyn Store,
    workspace_id: &str,
    owner: &str,
    config: &mut Map<String, Value>,
) -> DomainResult<()> {
    let Some(multiagent) = config.get_mut("multiagent").filter(|m| !m.is_null()) else { return Ok(()) };
    for (path, roster) in rosters_mut(multiagent) {
        let has_self = roster.iter().any(|entry| entry["type"] == "self");
        for (i, entry) in roster.iter_mut().enumerate() {
            if entry["type"] != "agent" {
                continue;
            }
            let id = entry["id"].as_str().unwrap_or_default().to_owned();
            if has_self && id == owner {
                return Err(DomainError::invalid(format!(
                    "{path}[{i}].id: names agent {id}, which is this agent: the roster's `self` entry already does"
                )));
            }
            let agent = store
                .get_resource(workspace_id, AGENT_KIND, &id)
                .await?
                .ok_or_else(|| DomainError::invalid(format!("{path}[{i}].id: no agent {id} in this workspace")))?;
            if agent.archived_at_ms.is_some() {
                return Err(DomainError::invalid(format!(
                    "{path}[{i}].id: agent {id} is archived and cannot be a subagent"
                )));
            }
            match entry["version"].as_i64() {
                None => entry["version"] = json!(agent.version),
                Some(version) if version > agent.version => {
                    return Err(DomainError::invalid(format!(
                        "{path}[{i}].version: agent {id} has no version {version} (latest: {})",
                        agent.version
                    )));
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// The wire agent from its stored body: each `self` sentinel of its `multiagent` rendered
/// as the owning agent at this version (`{"type":"agent","id","version"}`), so `self`
/// follows the agent's updates instead of pinning one version.
pub fn render(agent: &mut Value) {
    let owner = json!({ "type": "agent", "id": agent["id"], "version": agent["version"] });
    let Some(multiagent) = agent.get_mut("multiagent") else { return };
    for (_, roster) in rosters_mut(multiagent) {
        for entry in roster.iter_mut().filter(|entry| entry["type"] == "self") {
            *entry = owner.clone();
        }
    }
}

/// The `multiagent` a session snapshots from its agent (`primary`: the session's agent
/// snapshot, skills pinned; wire §3.2 `BetaManagedAgentsSessionMultiagent*`): each roster
/// entry the full definition of its agent at the pinned version (skills pinned as the
/// session's own), `self` the primary's own definition, advisors as they are. `Null`
/// for a single-agent session. An agent archived since the roster named it is a 400.
pub async fn session_shape(store: &dyn Store, workspace_id: &str, primary: &Map<String, Value>) -> DomainResult<Value> {
    let mut multiagent = primary.get("multiagent").cloned().unwrap_or(Value::Null);
    let own: Map<String, Value> = THREAD_AGENT_FIELDS
        .iter()
        .map(|f| ((*f).to_owned(), primary.get(*f).cloned().unwrap_or(Value::Null)))
        .collect();
    for (path, roster) in rosters_mut(&mut multiagent) {
        for (i, entry) in roster.iter_mut().enumerate() {
            match entry["type"].as_str() {
                Some("self") => *entry = Value::Object(own.clone()),
                Some("agent") => *entry = thread_agent(store, workspace_id, entry, &format!("{path}[{i}]")).await?,
                _ => {}
            }
        }
    }
    Ok(multiagent)
}

/// The definition of roster entry `entry` (`{"type":"agent","id","version"}`) at `path`.
async fn thread_agent(store: &dyn Store, workspace_id: &str, entry: &Value, path: &str) -> DomainResult<Value> {
    let id = entry["id"].as_str().unwrap_or_default();
    let version = entry["version"].as_i64().unwrap_or(1);
    let unusable = |why: &str| {
        DomainError::invalid(format!(
            "agent: the agent's {path} names agent {id}, which {why}; update the agent's multiagent roster"
        ))
    };
    let agent = store.get_resource(workspace_id, AGENT_KIND, id).await?.ok_or_else(|| unusable("is gone"))?;
    if agent.archived_at_ms.is_some() {
        return Err(unusable("has been archived since"));
    }
    let body = store.get_resource_version(id, version).await?.ok_or_else(|| unusable("has no such version"))?;
    let mut definition: Map<String, Value> =
        THREAD_AGENT_FIELDS.iter().map(|f| ((*f).to_owned(), body.get(*f).cloned().unwrap_or(Value::Null))).collect();
    let skills = definition.get("skills").cloned().unwrap_or(Value::Null);
    let field = format!("agent.{path}.skills");
    definition.insert("skills".into(), super::skills::resolve(store, workspace_id, &skills, &field).await?);
    Ok(Value::Object(definition))
}

/// Every model a thread of a session may run, from its agent snapshot: the primary's,
/// each roster agent's, the advisor's; each once, the primary's first.
pub fn models(agent: &Value) -> Vec<String> {
    let mut models = vec![agent["model"]["id"].as_str().unwrap_or_default().to_owned()];
    let multiagent = &agent["multiagent"];
    for entry in roster(multiagent) {
        let model = match entry["type"].as_str() {
            Some("advisor") => entry["model"].as_str(),
            _ => entry["model"]["id"].as_str(),
        };
        models.extend(model.map(str::to_owned));
    }
    if multiagent["advisor"]["type"] == "enabled" {
        models.extend(multiagent["advisor"]["model"].as_str().map(str::to_owned));
    }
    let mut seen = HashSet::new();
    models.retain(|model| seen.insert(model.clone()));
    models
}

/// A budget needs a list price in `catalog` (the workspace's effective one) for every
/// model a thread of the session may run ([`models`]): `model_not_budgetable` otherwise.
pub fn check_budgetable(catalog: &Catalog, agent: &Value) -> DomainResult<()> {
    let primary = agent["model"]["id"].as_str().unwrap_or_default();
    for model in models(agent) {
        if catalog.find(&model).and_then(|m| m.prices).is_some() {
            continue;
        }
        let whose = if model == primary { "" } else { ", which a thread of this session may run," };
        return Err(DomainError::invalid_with_code(
            "model_not_budgetable",
            format!("budget: model {model}{whose} has no list price"),
        ));
    }
    Ok(())
}

/// The session's `_price_snapshot`: the primary model's prices (`Null` when it has none)
/// and, for a multiagent session, `models`: every model a thread may run ([`models`]),
/// each with its prices or `null` when it has no list price. It is also the set an inline
/// agent's `model` must come from (the worker refuses any other).
pub fn price_snapshot(catalog: &Catalog, agent: &Value) -> Value {
    let primary = agent["model"]["id"].as_str().unwrap_or_default();
    let snapshot = agentd_schema::budget::snapshot(catalog, primary);
    if agent["multiagent"].is_null() {
        return snapshot;
    }
    let mut snapshot = if snapshot.is_null() { json!({ "model": primary, "prices": null }) } else { snapshot };
    let prices: Map<String, Value> = models(agent)
        .into_iter()
        .map(|model| {
            let prices = agentd_schema::budget::snapshot(catalog, &model)["prices"].clone();
            (model, prices)
        })
        .collect();
    snapshot["models"] = Value::Object(prices);
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_merges_level_by_level() {
        let stored = json!({
            "type": "multiagent_20261001",
            "advisor": {"type": "enabled", "model": "m1"},
            "subagents": {"type": "enabled", "inline_agents": {"type": "disabled"}, "predefined_agents": [{"type": "self"}]},
            "workflows": {"type": "disabled"},
        });
        // Omitted keeps; a member of the same type merges its keys.
        let merged = merge(
            Some(&stored),
            &json!({"type": "multiagent_20261001", "subagents": {"type": "enabled", "predefined_agents": []}}),
        );
        assert_eq!(merged["advisor"], stored["advisor"]);
        assert_eq!(merged["subagents"]["inline_agents"], json!({"type": "disabled"}));
        assert_eq!(merged["subagents"]["predefined_agents"], json!([]));
        // Null takes the default: left out for the shape check to fill in.
        let merged = merge(
            Some(&stored),
            &json!({"type": "multiagent_20261001", "advisor": null, "subagents": {"type": "enabled", "inline_agents": null}}),
        );
        assert!(merged.get("advisor").is_none());
        assert!(merged["subagents"].get("inline_agents").is_none());
        assert_eq!(merged["subagents"]["predefined_agents"], json!([{"type": "self"}]));
        // A member whose type changes is replaced whole.
        let merged = merge(Some(&stored), &json!({"type": "multiagent_20261001", "subagents": {"type": "disabled"}}));
        assert_eq!(merged["subagents"], json!({"type": "disabled"}));
        // Another type, or none stored: replaced.
        let coordinator = json!({"type": "coordinator", "agents": [{"type": "self"}]});
        assert_eq!(merge(Some(&stored), &coordinator), coordinator);
        assert_eq!(merge(Some(&coordinator), &stored), stored);
        assert_eq!(merge(None, &stored), stored);
    }

    #[test]
    fn self_renders_as_the_owner_and_thread_tools_follow_the_configuration() {
        let mut agent = json!({
            "id": "agent_a", "version": 3, "model": {"id": "m0"},
            "multiagent": {"type": "coordinator", "agents": [{"type": "self"}, {"type": "advisor", "model": "m2"}]},
        });
        assert_eq!(thread_tools(&agent["multiagent"]), ["spawn_thread", "message_thread", "consult_advisor"]);
        render(&mut agent);
        assert_eq!(agent["multiagent"]["agents"][0], json!({"type": "agent", "id": "agent_a", "version": 3}));
        assert_eq!(models(&agent), ["m0", "m2"]);
        let disabled = json!({"type": MERGED_TYPE, "advisor": {"type": "disabled"}, "subagents": {"type": "disabled"}});
        assert!(thread_tools(&disabled).is_empty());
        let tools = json!([{"type": "custom", "name": "spawn_thread"}]);
        assert!(check_tool_names(&tools, &disabled).is_ok());
        let err = check_tool_names(&tools, &agent["multiagent"]).unwrap_err();
        assert!(err.starts_with("tools[0].name:"), "{err}");
    }
}
