//! Agent authoring (docs/api/config.md): a workspace's drafts of its managed agents, their
//! validation — every problem at once, by the checks the managed API applies
//! (`managed::agent_config::check`, then the skills of the workspace) — and their
//! publication: a new version of the agent written by [`super::agents`] exactly as the
//! managed update writes one, and an immutable publication keyed by the fingerprint of
//! what was published.
//!
//! A draft names an agent of its workspace or an agent id no agent has yet: publishing
//! the latter creates the agent with that id. Publishing content the agent already has
//! writes no version, and a publication, once written, never changes: publishing the same
//! content again answers the same fingerprint and the same publication.

use agentd_schema::catalog::Catalog;
use agentd_schema::ids::AgentId;
use agentd_schema::{AgentDraftRow, AgentPublicationRow, Resource, Store};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::agents;
use super::error::{DomainError, DomainResult};
use super::skills;
use crate::managed::agent_config::{self, CONFIG_FIELDS};
use crate::managed::body::{FieldError, pointer_join};

/// What publishing a draft did.
#[derive(Debug)]
pub enum Publish {
    /// The draft is not a valid configuration (every problem listed); nothing was written.
    Rejected(Vec<FieldError>),
    /// The draft is the agent's configuration now.
    Published(Box<Published>),
}

/// A published draft.
#[derive(Debug)]
pub struct Published {
    /// The publication of this content (the earlier one when it was published before).
    pub publication: AgentPublicationRow,
    /// Whether this call wrote the publication.
    pub created: bool,
    /// The agent as it is now (a new version only when its configuration changed).
    pub agent: Resource,
}

fn not_found(agent_id: &str) -> DomainError {
    DomainError::NotFound(format!("agent not found: {agent_id}"))
}

/// An id another workspace's agent has is missing here, as that agent is.
async fn ensure_ours(store: &dyn Store, workspace_id: &str, agent_id: &AgentId) -> DomainResult<()> {
    match store.agent_workspace(agent_id).await? {
        Some(owner) if owner != workspace_id => Err(not_found(agent_id)),
        _ => Ok(()),
    }
}

/// Writes the workspace's draft of `agent_id` (created, or replaced whole). The body is
/// stored as written — a draft may be invalid until it is published; an `id` in it must be
/// the path's and is not stored.
pub async fn put(
    store: &dyn Store,
    workspace_id: &str,
    agent_id: &AgentId,
    mut body: Map<String, Value>,
) -> DomainResult<AgentDraftRow> {
    match body.remove("id") {
        None | Some(Value::Null) => {}
        Some(Value::String(id)) if id == agent_id.as_str() => {}
        Some(other) => {
            return Err(DomainError::invalid(format!(
                "id: the path names agent {agent_id}, the body {other}; leave id out or make them match"
            )));
        }
    }
    ensure_ours(store, workspace_id, agent_id).await?;
    Ok(store.put_agent_draft(workspace_id, agent_id, &Value::Object(body)).await?)
}

/// The workspace's draft of `agent_id`.
pub async fn get(store: &dyn Store, workspace_id: &str, agent_id: &AgentId) -> DomainResult<AgentDraftRow> {
    store
        .get_agent_draft(workspace_id, agent_id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("agent {agent_id} has no draft in this workspace")))
}

/// A page of the workspace's drafts, newest agent first, after `after_agent_id`.
pub async fn list(
    store: &dyn Store,
    workspace_id: &str,
    after_agent_id: Option<&str>,
    limit: i64,
) -> DomainResult<Vec<AgentDraftRow>> {
    Ok(store.list_agent_drafts(workspace_id, after_agent_id, limit).await?)
}

/// Discards the workspace's draft of `agent_id` (the agent and its publications stay).
pub async fn discard(store: &dyn Store, workspace_id: &str, agent_id: &AgentId) -> DomainResult<()> {
    if store.delete_agent_draft(workspace_id, agent_id).await? {
        Ok(())
    } else {
        Err(DomainError::NotFound(format!("agent {agent_id} has no draft in this workspace")))
    }
}

/// Checks the workspace's draft of `agent_id` (its model against `catalog`, the
/// workspace's effective catalog): its normalized configuration, or every problem found,
/// each with the JSON pointer of its field.
pub async fn validate(
    store: &dyn Store,
    catalog: &Catalog,
    workspace_id: &str,
    agent_id: &AgentId,
) -> DomainResult<Result<Map<String, Value>, Vec<FieldError>>> {
    let draft = get(store, workspace_id, agent_id).await?;
    check(store, catalog, workspace_id, agent_id, &draft.body).await
}

/// The managed API's checks of an agent's configuration, reporting every problem rather
/// than the first; the skills it names are then checked against the workspace, and its
/// `multiagent` roster resolved as [`agents`] resolves it (for agent `agent_id`).
async fn check(
    store: &dyn Store,
    catalog: &Catalog,
    workspace_id: &str,
    agent_id: &AgentId,
    body: &Value,
) -> DomainResult<Result<Map<String, Value>, Vec<FieldError>>> {
    let Some(map) = body.as_object() else {
        let message = "body: a draft is a JSON object of the agent's configuration fields";
        return Ok(Err(vec![FieldError::from_message(message)]));
    };
    let mut errors: Vec<FieldError> = map
        .keys()
        .filter(|key| !CONFIG_FIELDS.contains(&key.as_str()))
        .map(|key| FieldError { path: pointer_join("", key), message: format!("{key}: unknown field") })
        .collect();
    let mut config = match agent_config::check_in(map, catalog) {
        Ok(config) => config,
        Err(problems) => {
            errors.extend(problems);
            return Ok(Err(errors));
        }
    };
    match skills::require_usable(store, workspace_id, config.get("skills").unwrap_or(&Value::Null)).await {
        Ok(()) => {}
        Err(DomainError::Invalid { message, .. }) => errors.push(FieldError::from_message(message)),
        Err(other) => return Err(other),
    }
    match super::multiagent::resolve(store, workspace_id, agent_id, &mut config).await {
        Ok(()) => {}
        Err(DomainError::Invalid { message, .. }) => errors.push(FieldError::from_message(message)),
        Err(other) => return Err(other),
    }
    Ok(if errors.is_empty() { Ok(config) } else { Err(errors) })
}

/// Publishes the workspace's draft of `agent_id`: validated as [`validate`] does, then
/// written as the agent's next version (or as a new agent with that id) by
/// [`agents::update`] / [`agents::create`] — the code of the managed API's update and
/// create — and recorded as a publication keyed by [`fingerprint`].
///
/// The two writes are not one transaction: a publish cut short between them left a
/// version that already has the content, so publishing again writes no second version
/// and records the publication then.
pub async fn publish(
    store: &dyn Store,
    catalog: &Catalog,
    workspace_id: &str,
    agent_id: &AgentId,
) -> DomainResult<Publish> {
    let config = match validate(store, catalog, workspace_id, agent_id).await? {
        Ok(config) => config,
        Err(errors) => return Ok(Publish::Rejected(errors)),
    };
    ensure_ours(store, workspace_id, agent_id).await?;
    let fingerprint = fingerprint(agent_id, &config);
    let agent = write_version(store, workspace_id, agent_id, config.clone()).await?;
    let row = AgentPublicationRow {
        workspace_id: workspace_id.to_owned(),
        fingerprint,
        agent_id: agent_id.to_string(),
        agent_version: agent.version,
        config: Value::Object(config),
        created_at_ms: 0,
    };
    let (publication, created) = store.insert_agent_publication(row).await?;
    Ok(Publish::Published(Box::new(Published { publication, created, agent })))
}

/// The agent with `config`: its next version, or the new agent.
async fn write_version(
    store: &dyn Store,
    workspace_id: &str,
    agent_id: &AgentId,
    config: Map<String, Value>,
) -> DomainResult<Resource> {
    let update = async |config: Map<String, Value>| {
        let current =
            store.get_resource(workspace_id, agents::KIND, agent_id).await?.ok_or_else(|| not_found(agent_id))?;
        agents::check_updatable(&current, None)?;
        agents::update(store, workspace_id, &current, config, true).await
    };
    if store.get_resource(workspace_id, agents::KIND, agent_id).await?.is_some() {
        return update(config).await;
    }
    match agents::create(store, workspace_id, agent_id.to_string(), config.clone()).await {
        // Taken meanwhile: by a concurrent publish in this workspace (then this one is an
        // update of it) or by another workspace (then it is missing here).
        Err(DomainError::Conflict(_)) => update(config).await,
        other => other,
    }
}

/// The publication's key: hex SHA-256 of the canonical JSON (keys sorted at every level,
/// no whitespace) of `{"agent_id": …, "config": …}` — the agent is part of what is
/// published, so two agents with one configuration have two publications.
pub fn fingerprint(agent_id: &str, config: &Map<String, Value>) -> String {
    let document = canonical(&json!({ "agent_id": agent_id, "config": config }));
    hex::encode(Sha256::digest(document.to_string().as_bytes()))
}

/// Whether `value` is a fingerprint as [`fingerprint`] writes it.
pub fn is_fingerprint(value: &str) -> bool {
    value.len() == 64 && value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `value` with every object's keys in sorted order, whatever order a map keeps (the
/// canonical JSON content addresses are computed from; workflow revisions use it too).
pub(crate) fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|key| (key.clone(), canonical(&map[key]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The workspace's publication with this fingerprint.
pub async fn publication(
    store: &dyn Store,
    workspace_id: &str,
    fingerprint: &str,
) -> DomainResult<AgentPublicationRow> {
    store
        .get_agent_publication(workspace_id, fingerprint)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("publication not found: {fingerprint}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_is_of_the_content_and_its_agent() {
        let config = |name: &str| json!({"name": name, "model": {"id": "m", "effort": {"type": "high"}}});
        let a = fingerprint("agent_a", config("x").as_object().unwrap());
        assert!(is_fingerprint(&a), "{a}");
        assert_eq!(a, fingerprint("agent_a", config("x").as_object().unwrap()), "stable");
        assert_ne!(a, fingerprint("agent_a", config("y").as_object().unwrap()), "of the content");
        assert_ne!(a, fingerprint("agent_b", config("x").as_object().unwrap()), "of the agent");
        // Key order never matters.
        let reordered: Map<String, Value> =
            [("model".to_owned(), json!({"effort": {"type": "high"}, "id": "m"})), ("name".to_owned(), json!("x"))]
                .into_iter()
                .collect();
        assert_eq!(a, fingerprint("agent_a", &reordered));
        assert!(!is_fingerprint(&a.to_uppercase()) && !is_fingerprint(&a[1..]) && !is_fingerprint("..."));
    }
}
