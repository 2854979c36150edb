//! Sessions: create (the agent snapshot, the environment, vaults and budget checked
//! against what the workspace holds now), load for a tenant, archive, delete. The
//! request is typed; the JSON wire shape is parsed by the managed handler.

use agentd_schema::capture;
use agentd_schema::ids::{SessionId, UserProfileId};
use agentd_schema::{EventType, NewEvent, NewSession, Session};
use serde_json::{Map, Value, json};

use super::commit;
use super::error::{DomainError, DomainResult};
use crate::AppState;
use crate::admission::Tenant;
use crate::managed::agent_config::{self, normalize_in};

/// Fields of an agent a session keeps (its snapshot).
const SNAPSHOT_FIELDS: &[&str] = &[
    "id",
    "type",
    "version",
    "name",
    "description",
    "system",
    "model",
    "tools",
    "mcp_servers",
    "skills",
    "multiagent",
    "execution_identity",
];

/// The agent a session starts from.
#[derive(Debug, Clone, Default)]
pub struct AgentRef {
    /// `agent_…`.
    pub id: String,
    /// A version of it (the current one when `None`).
    pub version: Option<i64>,
    /// Configuration fields that override the agent's (`agent_with_overrides`).
    pub overrides: Map<String, Value>,
}

/// A session to create: each field already parsed from the wire.
#[derive(Debug, Clone, Default)]
pub struct CreateSession {
    /// The agent.
    pub agent: AgentRef,
    /// The environment its tools run in.
    pub environment_id: String,
    /// Vaults whose credentials the session may use.
    pub vault_ids: Vec<String>,
    /// `{"type":"limit","max_list_cost":{…}}` in canonical form, or `None`.
    pub budget: Option<Value>,
    /// Metadata (validated).
    pub metadata: Value,
    /// The title.
    pub title: Option<String>,
    /// Session resources (validated, secrets sealed).
    pub resources: Value,
    /// `user.message` / `user.define_outcome` bodies to submit at once (and
    /// `system.message` for a deployment's session).
    pub initial_events: Vec<Map<String, Value>>,
    /// The session's id, when the caller derived it (a deployment run's, so a retry
    /// finds the session an interrupted attempt created); a new `sesn_…` otherwise.
    pub id: Option<String>,
    /// The deployment whose run creates it.
    pub deployment_id: Option<String>,
    /// The data subject the session is attributed to (`uprof_…`).
    pub user_profile_id: Option<UserProfileId>,
    /// The content capture its creator asks for (`full` when `None`).
    pub content_capture: Option<capture::Level>,
    /// The ceiling of the deployment that launches it (`full` when `None`).
    pub capture_ceiling: Option<capture::Level>,
}

/// Loads a session of the caller's workspace. The id was authorized by the caller
/// (the route's scope check, or a binding read inside the tenant's workspace).
pub async fn load(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<Session> {
    state
        .backends
        .store
        .get_session(&tenant.workspace_id, id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("session not found: {id}")))
}

/// Resolves the agent of a create request to the snapshot the session keeps.
async fn agent_snapshot(state: &AppState, tenant: &Tenant, agent: &AgentRef) -> DomainResult<Value> {
    let store = state.backends.store.as_ref();
    let id = &agent.id;
    let resource = store
        .get_resource(&tenant.workspace_id, "agent", id)
        .await?
        .ok_or_else(|| DomainError::invalid(format!("agent: no agent {id} in this workspace")))?;
    if resource.archived_at_ms.is_some() {
        return Err(DomainError::AgentArchived(format!("agent: agent {id} is archived and cannot start sessions")));
    }
    if resource.body.get("disabled_at").is_some_and(|v| !v.is_null()) {
        return Err(DomainError::AgentDisabled(format!("agent: agent {id} is disabled and cannot start sessions")));
    }
    let mut snapshot = match agent.version {
        None => resource.body.clone(),
        Some(version) => store
            .get_resource_version(id, version)
            .await?
            .ok_or_else(|| DomainError::invalid(format!("agent.version: agent {id} has no version {version}")))?,
    };
    if !agent.overrides.is_empty() {
        let mut config: Map<String, Value> = agent_config::CONFIG_FIELDS
            .iter()
            .filter_map(|f| snapshot.get(*f).map(|v| ((*f).to_owned(), v.clone())))
            .collect();
        config.extend(agent.overrides.clone());
        let catalog = state.catalogs.of(&tenant.workspace_id)?;
        let resolved = normalize_in(&config, &catalog).map_err(|e| DomainError::invalid(format!("agent: {e}")))?;
        for (key, value) in resolved {
            snapshot[key] = value;
        }
    }
    let mut snapshot: Map<String, Value> =
        SNAPSHOT_FIELDS.iter().map(|f| ((*f).to_owned(), snapshot.get(*f).cloned().unwrap_or(Value::Null))).collect();
    // The session runs the skill versions that are latest now, whatever is added later.
    let skills = snapshot.get("skills").cloned().unwrap_or(Value::Null);
    let pinned = super::skills::resolve(store, &tenant.workspace_id, &skills, "agent.skills").await?;
    snapshot.insert("skills".into(), pinned);
    // Its threads' agents too, at their pinned versions: the worker never reads agents.
    let multiagent = super::multiagent::session_shape(store, &tenant.workspace_id, &snapshot).await?;
    snapshot.insert("multiagent".into(), multiagent);
    Ok(Value::Object(snapshot))
}

/// The rules of a session's resources, for every path that writes them (create, the
/// manifest replace, `resources.add`): each `file` names a live file of the workspace,
/// each `memory_store` a live store attached once at a mount of its own, snapshotted
/// (`memory_mounts::attach`). `current` is the session's resources before the change
/// (`Null` at creation): files and stores already there stay as they were mounted.
pub async fn check_resources(
    store: &dyn agentd_schema::Store,
    workspace_id: &str,
    resources: &mut Value,
    current: &Value,
) -> DomainResult<()> {
    let mounted = super::files::mounted_ids(current);
    super::files::require_mountable(store, workspace_id, resources, &mounted).await?;
    super::memory_mounts::attach(store, workspace_id, resources, current).await
}

/// A budget needs a list price in `catalog` (the workspace's effective one) for every
/// model a thread of the session may run.
pub fn check_budgetable(catalog: &agentd_schema::catalog::Catalog, agent: &Value) -> DomainResult<()> {
    super::multiagent::check_budgetable(catalog, agent)
}

/// Creates a session; its initial events are submitted and its hands queued.
pub async fn create(state: &AppState, tenant: &Tenant, request: CreateSession) -> DomainResult<Session> {
    let store = state.backends.store.as_ref();
    let agent = agent_snapshot(state, tenant, &request.agent).await?;
    let capture = capture_decision(state, tenant, &request).await?;
    let environment_id = request.environment_id;
    let environment =
        store.get_resource(&tenant.workspace_id, "environment", &environment_id).await?.ok_or_else(|| {
            DomainError::invalid(format!("environment_id: no environment {environment_id} in this workspace"))
        })?;
    if environment.archived_at_ms.is_some() {
        return Err(DomainError::invalid_with_code(
            "environment_archived",
            format!("environment_id: environment {environment_id} is archived"),
        ));
    }
    // The environment's sandbox policy as bound now: the session keeps it for its life.
    let sandbox_policy = super::sandbox_policies::pin(store, &tenant.workspace_id, &environment_id).await?;
    let mut resources = request.resources;
    check_resources(store, &tenant.workspace_id, &mut resources, &Value::Null).await?;
    for (i, id) in request.vault_ids.iter().enumerate() {
        if store.get_resource(&tenant.workspace_id, "vault", id).await?.is_none() {
            return Err(DomainError::invalid(format!("vault_ids[{i}]: no vault {id} in this workspace")));
        }
    }
    // Prices are read once: the budget check and the frozen snapshot agree.
    let catalog = state.catalogs.of(&tenant.workspace_id)?;
    if request.budget.is_some() {
        check_budgetable(&catalog, &agent)?;
    }
    for (i, event) in request.initial_events.iter().enumerate() {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default();
        let deployed_system = request.deployment_id.is_some() && *kind == EventType::SystemMessage;
        if *kind != EventType::UserMessage && *kind != EventType::UserDefineOutcome && !deployed_system {
            return Err(DomainError::invalid(format!(
                "initial_events[{i}].type: initial events may only be user.message or user.define_outcome"
            )));
        }
    }
    for (i, event) in request.initial_events.iter().enumerate() {
        if event.get("type").and_then(Value::as_str) == Some(EventType::UserDefineOutcome.as_str())
            && let Some(rubric) = event.get("rubric").filter(|rubric| rubric["type"] == "file")
        {
            let file_id = rubric["file_id"].as_str().unwrap_or_default();
            let path = format!("initial_events[{i}].rubric.file_id");
            super::files::require_live(store, &tenant.workspace_id, file_id, &path).await?;
        }
    }
    let id = request.id.clone().unwrap_or_else(|| agentd_schema::ids::new_id("sesn"));
    let now = agentd_schema::live::rfc3339(crate::managed::query::now_ms());
    let session_body = json!({
        "type": "session",
        "id": id,
        "agent": agent,
        "environment_id": environment_id,
        "metadata": request.metadata,
        "title": request.title,
        "vault_ids": request.vault_ids,
        "budget": request.budget,
        "resources": resources,
        // Kept by the store from the outcome events (`agentd_schema::events`, outcomes).
        "outcome_evaluations": [],
        "deployment_id": request.deployment_id,
        "user_profile_id": request.user_profile_id.as_ref().map(UserProfileId::as_str),
        "content_capture": capture.to_json(),
        "created_at": now,
        "_price_snapshot": super::multiagent::price_snapshot(&catalog, &agent),
        "_sandbox_policy": sandbox_policy,
    });
    let session = store
        .create_session(NewSession {
            id: id.clone(),
            workspace_id: tenant.workspace_id.clone(),
            status: "idle".into(),
            agent_id: agent["id"].as_str().map(str::to_owned),
            agent_version: agent["version"].as_i64(),
            body: session_body,
        })
        .await?;
    // Fault tests: the session exists, its initial events are not submitted yet.
    agentd_schema::faults::crash_point("session.created");
    submit_initial_events(state, &id, request.initial_events, request.id.is_some()).await?;
    // Session start: a session whose agent has built-in tools needs hands.
    if agentd_schema::hands::needs_hands(&session.body["agent"]) {
        commit::queue_hands(state, tenant, &session).await?;
    }
    load(state, tenant, &session.id).await
}

/// Decides a new session's content capture: the lowest of the deployment's ceiling, the
/// level asked for and the consent of the data subject (read now; a later change of
/// consent applies to sessions created after it).
async fn capture_decision(
    state: &AppState,
    tenant: &Tenant,
    request: &CreateSession,
) -> DomainResult<capture::Decision> {
    let consent = match &request.user_profile_id {
        None => None,
        Some(id) => {
            Some(super::user_profiles::consent_bound(state, tenant, id).await.map_err(|error| match error {
                DomainError::NotFound(_) => {
                    DomainError::invalid(format!("user_profile_id: no user profile {id} in this workspace"))
                }
                other => other,
            })?)
        }
    };
    let ceiling = request.capture_ceiling.unwrap_or(capture::Level::Full);
    Ok(capture::Decision::decide(request.content_capture.unwrap_or(capture::Level::Full), ceiling, consent))
}

/// The id of a session's `index`-th initial event when the session's id is derived (a
/// deployment run's): derived from the session's id too.
fn initial_event_id(session_id: &str, index: usize) -> String {
    let suffix = session_id.split_once('_').map_or(session_id, |(_, suffix)| suffix);
    let head: String = suffix.chars().take(24).collect();
    format!("sevt_{head}{index:02}")
}

/// Submits a session's initial events (none: nothing to do). For a session whose id is
/// `derived` (a deployment run's, which a later attempt may create again after a crash),
/// their ids are derived from the session's, so submitting them again finds them
/// committed — the store's unique event ids refuse the repeat — instead of starting a
/// second turn; that repeat is a success.
pub async fn submit_initial_events(
    state: &AppState,
    session_id: &str,
    events: Vec<Map<String, Value>>,
    derived: bool,
) -> DomainResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let mut events: Vec<NewEvent> = events
        .into_iter()
        .enumerate()
        .map(|(i, body)| {
            let mut event = NewEvent::new(session_id, Value::Object(body));
            if derived {
                event.event_id = initial_event_id(session_id, i);
            }
            event
        })
        .collect();
    agentd_schema::events::define_outcomes(&mut events);
    match commit::submit_and_publish(state, session_id, events).await {
        Ok(_) => Ok(()),
        Err(DomainError::Conflict(_)) if derived => Ok(()),
        Err(error) => Err(error),
    }
}

/// Archives a session (idempotent): it keeps its history and takes no more input.
pub async fn archive(state: &AppState, tenant: &Tenant, id: &SessionId) -> DomainResult<Session> {
    Ok(state.backends.store.archive_session(&tenant.workspace_id, id).await?)
}

/// Deletes a session with its history; open streams end with `session.deleted`.
pub async fn delete(state: &AppState, tenant: &Tenant, id: &SessionId) -> DomainResult<()> {
    if !state.backends.store.delete_session(&tenant.workspace_id, id).await? {
        return Err(DomainError::NotFound(format!("session not found: {id}")));
    }
    if let Some(bus) = &state.backends.bus {
        let event = json!({
            "type": EventType::SessionDeleted,
            "id": agentd_schema::ids::new_id("sevt"),
            "processed_at": agentd_schema::live::rfc3339(crate::managed::query::now_ms()),
        });
        agentd_schema::live::publish_terminal(bus.as_ref(), id, &event).await;
    }
    Ok(())
}
