//! Agents: a new agent, and a new immutable version of one — the rules once. The managed
//! `POST /v1/agents` and `POST /v1/agents/{agent_id}` and the control plane's publish
//! (`POST /v1/config/agents/{agent_id}/publish`, [`super::agent_drafts`]) write agents
//! here. The configuration arrives complete and normalized (`managed::agent_config`); its
//! `multiagent` roster is resolved against the workspace here ([`super::multiagent`]).

use agentd_schema::{NewResource, Resource, ResourceUpdate, Store};
use serde_json::{Map, Value, json};

use super::error::{DomainError, DomainResult};
use super::{multiagent, skills};
use crate::managed::query::{now_ms, rfc3339};

/// The stored kind of agents.
pub const KIND: &str = "agent";

/// Creates agent `id` of the workspace at version 1. The skills it names must be usable
/// in the workspace, the agents of its `multiagent` roster live agents of it. A taken id
/// is a `Conflict`.
pub async fn create(
    store: &dyn Store,
    workspace_id: &str,
    id: String,
    mut config: Map<String, Value>,
) -> DomainResult<Resource> {
    skills::require_usable(store, workspace_id, config.get("skills").unwrap_or(&Value::Null)).await?;
    multiagent::resolve(store, workspace_id, &id, &mut config).await?;
    let now = rfc3339(now_ms());
    let mut agent = Map::new();
    agent.insert("type".into(), json!("agent"));
    agent.insert("id".into(), json!(id));
    agent.extend(config);
    agent.insert("version".into(), json!(1));
    agent.insert("created_at".into(), json!(now));
    agent.insert("updated_at".into(), json!(now));
    agent.insert("archived_at".into(), Value::Null);
    let new = NewResource {
        id,
        workspace_id: workspace_id.to_owned(),
        kind: KIND.into(),
        parent_id: None,
        body: Value::Object(agent),
        versioned: true,
    };
    Ok(store.create_resource(new).await?)
}

/// Whether `current` takes a new version: not archived, and at version `expected` when
/// the caller names one (an optimistic precondition: a `Conflict` otherwise).
pub fn check_updatable(current: &Resource, expected: Option<i64>) -> DomainResult<()> {
    let id = &current.id;
    if current.archived_at_ms.is_some() {
        return Err(DomainError::AgentArchived(format!("agent {id} is archived and cannot be updated")));
    }
    if let Some(expected) = expected.filter(|v| *v != current.version) {
        return Err(DomainError::Conflict(format!(
            "version: agent {id} is at version {}, not {expected}; retrieve it and retry",
            current.version
        )));
    }
    Ok(())
}

/// Makes `config` (complete and normalized) agent `current`'s next version, unless it is
/// the configuration `current` already has: then `current` itself, and no version is
/// written. `skills_set`: the change sets the skills, which are checked against the
/// workspace now (skills kept were checked when they were set; sessions check them again
/// when they start). The `multiagent` roster is resolved again, as on a create: string
/// ids pinned to the latest version, every agent still live. Call [`check_updatable`]
/// first.
pub async fn update(
    store: &dyn Store,
    workspace_id: &str,
    current: &Resource,
    mut config: Map<String, Value>,
    skills_set: bool,
) -> DomainResult<Resource> {
    if skills_set {
        skills::require_usable(store, workspace_id, config.get("skills").unwrap_or(&Value::Null)).await?;
    }
    multiagent::resolve(store, workspace_id, &current.id, &mut config).await?;
    let changed = config.iter().any(|(field, value)| current.body.get(field) != Some(value));
    if !changed {
        return Ok(current.clone());
    }
    let mut agent = current.body.as_object().cloned().unwrap_or_default();
    agent.extend(config);
    save(store, workspace_id, current, agent).await
}

/// Writes `agent` as the version after `current` (compare-and-swap on its version: a
/// `Conflict` when another write came first).
pub async fn save(
    store: &dyn Store,
    workspace_id: &str,
    current: &Resource,
    mut agent: Map<String, Value>,
) -> DomainResult<Resource> {
    agent.insert("version".into(), json!(current.version + 1));
    agent.insert("updated_at".into(), json!(rfc3339(now_ms())));
    let update = ResourceUpdate {
        workspace_id: workspace_id.to_owned(),
        kind: KIND.into(),
        id: current.id.clone(),
        expected_version: current.version,
        body: Value::Object(agent),
        versioned: true,
    };
    Ok(store.update_resource(update).await?)
}
