//! Deployments (docs/api/deployments.md): an agent pinned to a version, bound to an
//! environment, initial events, resources, vaults and an optional cron schedule
//! ([`super::cron`]). Each fire — a schedule's slot or `run` — is an append-only run that
//! records the session it created (through [`super::sessions::create`], like any
//! session) or a typed error.
//!
//! Exactly once: the [`spawn_scheduler`] task of every gateway claims a due slot in the
//! store (`DeploymentStore::claim_deployment_slot`: a conditional update of the deployment's next
//! slot and the slot's run, in one transaction; the store refuses a second run for a
//! slot), so one gateway fires each slot. The run is written before its session, whose
//! id is derived from the run's: an attempt cut short by a crash is finished by the next
//! tick of any gateway ([`finish`]), which finds the session if it was created and
//! records it with a compare-and-swap. After downtime only the latest missed slot fires.

use std::time::Duration;

use agentd_schema::capture;
use agentd_schema::ids::{UserProfileId, derived_id};
use agentd_schema::store::{
    DeploymentConfig, DeploymentQuery, DeploymentRow, DeploymentRunQuery, DeploymentRunRow, NewDeployment,
    NewDeploymentRun, RunTrigger, ScheduleRow, SlotClaim,
};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::cron::Schedule;
use super::error::{DomainError, DomainResult};
use super::sessions::{self, AgentRef, CreateSession};
use crate::AppState;
use crate::admission::limiter::OperationClass;
use crate::admission::{Access, Tenant};
use crate::managed::query::now_ms;

/// Initial events per deployment, at least one.
pub const MAX_INITIAL_EVENTS: usize = 50;
/// Vaults per deployment.
pub const MAX_VAULTS: usize = 50;
/// Resources per deployment (wire: "Maximum 500"; a session created by the managed
/// route takes at most 100, one created by a deployment's fire takes them all).
pub const MAX_RESOURCES: usize = 500;
/// Tests only: the scheduler's tick in milliseconds (production: one second; a shorter
/// tick changes how soon a slot fires, never which slots fire).
pub const TEST_TICK_ENV: &str = "AGENTD_TEST_DEPLOYMENT_TICK_MS";
/// How often the scheduler ticks.
const TICK: Duration = Duration::from_secs(1);
/// A run with neither session nor error this long after it was written was cut short.
const UNFINISHED_AFTER_MS: i64 = 30_000;

/// The agent a deployment pins: an id (its latest version now) or an id and a version.
#[derive(Debug, Clone)]
pub struct AgentPin {
    /// `agent_…`
    pub id: String,
    /// The version (`None`: the latest, resolved now).
    pub version: Option<i64>,
}

/// A deployment to create, each field parsed from the wire.
#[derive(Debug, Clone)]
pub struct CreateDeployment {
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// The agent.
    pub agent: AgentPin,
    /// The environment.
    pub environment_id: String,
    /// 1–50 `user.message`, `user.define_outcome` or `system.message` bodies.
    pub initial_events: Vec<Map<String, Value>>,
    /// Session resources (validated, secrets sealed).
    pub resources: Value,
    /// Vault ids.
    pub vault_ids: Vec<String>,
    /// Metadata (validated).
    pub metadata: Value,
    /// The budget in canonical form.
    pub budget: Option<Value>,
    /// `(expression, timezone)`.
    pub schedule: Option<(String, String)>,
    /// The data subject its sessions are attributed to.
    pub user_profile_id: Option<UserProfileId>,
    /// The highest content capture its sessions may have (`full` when `None`).
    pub content_capture_ceiling: Option<capture::Level>,
}

/// An update: `None` keeps a field; the inner `None` of a clearable one clears it.
#[derive(Debug, Clone, Default)]
pub struct UpdateDeployment {
    /// New name.
    pub name: Option<String>,
    /// New description (`Some(None)` clears).
    pub description: Option<Option<String>>,
    /// Re-pin the agent.
    pub agent: Option<AgentPin>,
    /// New environment.
    pub environment_id: Option<String>,
    /// New initial events (cannot be cleared).
    pub initial_events: Option<Vec<Map<String, Value>>>,
    /// New resources (`[]` clears).
    pub resources: Option<Value>,
    /// New vault ids (`[]` clears).
    pub vault_ids: Option<Vec<String>>,
    /// The metadata after the patch.
    pub metadata: Option<Value>,
    /// New budget (`Some(None)` clears).
    pub budget: Option<Option<Value>>,
    /// New schedule (`Some(None)`: manual only).
    pub schedule: Option<Option<(String, String)>>,
    /// New data subject (`Some(None)` clears).
    pub user_profile_id: Option<Option<UserProfileId>>,
    /// New content capture ceiling (`Some(None)` clears: `full`).
    pub content_capture_ceiling: Option<Option<capture::Level>>,
}

fn not_found(id: &str) -> DomainError {
    DomainError::NotFound(format!("deployment not found: {id}"))
}

/// The scheduler's tick (one second; shorter only under [`TEST_TICK_ENV`]).
fn tick_every() -> Duration {
    std::env::var(TEST_TICK_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms >= 50)
        .map_or(TICK, |ms| Duration::from_millis(ms).min(TICK))
}

/// Parses a stored or requested schedule.
pub fn schedule_of(row: &ScheduleRow) -> DomainResult<Schedule> {
    Schedule::parse(&row.expression, &row.timezone).map_err(DomainError::invalid)
}

/// Resolves the agent: it must exist and not be archived; a bare id pins its latest
/// version. Returns the version and the agent's body at it.
async fn pin_agent(state: &AppState, ws: &str, pin: &AgentPin) -> DomainResult<(i64, Value)> {
    let store = state.backends.store.as_ref();
    let resource = store
        .get_resource(ws, "agent", &pin.id)
        .await?
        .ok_or_else(|| DomainError::invalid(format!("agent: no agent {} in this workspace", pin.id)))?;
    if resource.archived_at_ms.is_some() {
        return Err(DomainError::invalid(format!("agent: agent {} is archived", pin.id)));
    }
    match pin.version {
        None => Ok((resource.version, resource.body)),
        Some(version) => {
            let body = store.get_resource_version(&pin.id, version).await?.ok_or_else(|| {
                DomainError::invalid(format!("agent.version: agent {} has no version {version}", pin.id))
            })?;
            Ok((version, body))
        }
    }
}

/// Checks a whole config against what the workspace holds now.
async fn check(state: &AppState, ws: &str, config: &DeploymentConfig, agent: &Value) -> DomainResult<()> {
    let store = state.backends.store.as_ref();
    let events = config.initial_events.as_array().map_or(0, Vec::len);
    if events == 0 || events > MAX_INITIAL_EVENTS {
        return Err(DomainError::invalid(format!(
            "initial_events: give 1 to {MAX_INITIAL_EVENTS} events, got {events}"
        )));
    }
    if config.vault_ids.len() > MAX_VAULTS {
        return Err(DomainError::invalid(format!("vault_ids: at most {MAX_VAULTS}, got {}", config.vault_ids.len())));
    }
    let resources = config.resources.as_array().map_or(0, Vec::len);
    if resources > MAX_RESOURCES {
        return Err(DomainError::invalid(format!("resources: at most {MAX_RESOURCES} items, got {resources}")));
    }
    let environment = store.get_resource(ws, "environment", &config.environment_id).await?.ok_or_else(|| {
        DomainError::invalid(format!("environment_id: no environment {} in this workspace", config.environment_id))
    })?;
    if environment.archived_at_ms.is_some() {
        return Err(DomainError::invalid_with_code(
            "environment_archived",
            format!("environment_id: environment {} is archived", config.environment_id),
        ));
    }
    for (i, id) in config.vault_ids.iter().enumerate() {
        if store.get_resource(ws, "vault", id).await?.is_none() {
            return Err(DomainError::invalid(format!("vault_ids[{i}]: no vault {id} in this workspace")));
        }
    }
    // The files and memory stores must be mountable now (each fire checks again).
    let mut resources = config.resources.clone();
    sessions::check_resources(store, ws, &mut resources, &Value::Null).await?;
    if config.budget.is_some() {
        sessions::check_budgetable(&*state.catalogs.of(ws)?, agent)?;
    }
    if let Some(profile) = &config.user_profile_id {
        let live = store.get_user_profile(ws, profile).await?.is_some_and(|row| row.deleted_at_ms.is_none());
        if !live {
            return Err(DomainError::invalid(format!("user_profile_id: no user profile {profile} in this workspace")));
        }
    }
    if let Some(schedule) = &config.schedule {
        schedule_of(schedule)?;
    }
    Ok(())
}

fn first_slot(schedule: &Option<ScheduleRow>, now: i64) -> DomainResult<Option<i64>> {
    match schedule {
        None => Ok(None),
        Some(row) => Ok(schedule_of(row)?.next_after(now)),
    }
}

/// Creates a deployment (active; its schedule's first slot is the first after now).
pub async fn create(state: &AppState, tenant: &Tenant, request: CreateDeployment) -> DomainResult<DeploymentRow> {
    let ws = &tenant.workspace_id;
    let (agent_version, agent) = pin_agent(state, ws, &request.agent).await?;
    let config = DeploymentConfig {
        name: request.name,
        description: request.description,
        agent_id: request.agent.id,
        agent_version,
        environment_id: request.environment_id,
        initial_events: Value::Array(request.initial_events.into_iter().map(Value::Object).collect()),
        resources: request.resources,
        vault_ids: request.vault_ids,
        metadata: request.metadata,
        budget: request.budget,
        schedule: request.schedule.map(|(expression, timezone)| ScheduleRow { expression, timezone }),
        user_profile_id: request.user_profile_id.map(|id| id.as_str().to_owned()),
        content_capture_ceiling: request.content_capture_ceiling,
    };
    check(state, ws, &config, &agent).await?;
    let next_slot_ms = first_slot(&config.schedule, now_ms())?;
    Ok(state
        .backends
        .store
        .insert_deployment(NewDeployment {
            id: agentd_schema::ids::new_id("depl"),
            workspace_id: ws.clone(),
            organization_id: tenant.organization_id.clone(),
            config,
            next_slot_ms,
        })
        .await?)
}

/// A deployment of the caller's workspace.
pub async fn get(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<DeploymentRow> {
    state.backends.store.get_deployment(&tenant.workspace_id, id).await?.ok_or_else(|| not_found(id))
}

/// A page of deployments.
pub async fn list(state: &AppState, tenant: &Tenant, query: &DeploymentQuery) -> DomainResult<Vec<DeploymentRow>> {
    Ok(state.backends.store.list_deployments(&tenant.workspace_id, query).await?)
}

/// Updates a deployment: each given field replaces the stored one, the whole result is
/// checked again; a changed schedule restarts from the first slot after now.
pub async fn update(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
    change: UpdateDeployment,
) -> DomainResult<DeploymentRow> {
    let ws = &tenant.workspace_id;
    let current = get(state, tenant, id).await?;
    if current.archived_at_ms.is_some() {
        return Err(DomainError::invalid(format!("deployment {id} is archived and cannot be updated")));
    }
    let mut config = current.config.clone();
    if let Some(name) = change.name {
        config.name = name;
    }
    if let Some(description) = change.description {
        config.description = description;
    }
    let pin = match change.agent {
        Some(pin) => pin,
        None => AgentPin { id: config.agent_id.clone(), version: Some(config.agent_version) },
    };
    let (agent_version, agent) = pin_agent(state, ws, &pin).await?;
    config.agent_id = pin.id;
    config.agent_version = agent_version;
    if let Some(environment_id) = change.environment_id {
        config.environment_id = environment_id;
    }
    if let Some(events) = change.initial_events {
        config.initial_events = Value::Array(events.into_iter().map(Value::Object).collect());
    }
    if let Some(resources) = change.resources {
        config.resources = resources;
    }
    if let Some(vault_ids) = change.vault_ids {
        config.vault_ids = vault_ids;
    }
    if let Some(metadata) = change.metadata {
        config.metadata = metadata;
    }
    if let Some(budget) = change.budget {
        config.budget = budget;
    }
    if let Some(profile) = change.user_profile_id {
        config.user_profile_id = profile.map(|id| id.as_str().to_owned());
    }
    if let Some(ceiling) = change.content_capture_ceiling {
        config.content_capture_ceiling = ceiling;
    }
    let mut next_slot = None;
    if let Some(schedule) = change.schedule {
        config.schedule = schedule.map(|(expression, timezone)| ScheduleRow { expression, timezone });
        if config.schedule != current.config.schedule {
            next_slot = Some(first_slot(&config.schedule, now_ms())?);
        }
    }
    check(state, ws, &config, &agent).await?;
    state
        .backends
        .store
        .update_deployment(ws, id, config, next_slot)
        .await?
        .ok_or_else(|| DomainError::invalid(format!("deployment {id} is archived and cannot be updated")))
}

/// Archives a deployment (idempotent): its schedule stops for good.
pub async fn archive(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<DeploymentRow> {
    state.backends.store.archive_deployment(&tenant.workspace_id, id).await?.ok_or_else(|| not_found(id))
}

/// Pauses (`paused_reason` manual) or unpauses a deployment; an unpaused schedule
/// resumes at the first slot after now (slots missed while paused do not fire).
pub async fn set_paused(state: &AppState, tenant: &Tenant, id: &str, paused: bool) -> DomainResult<DeploymentRow> {
    let current = get(state, tenant, id).await?;
    if current.archived_at_ms.is_some() {
        let verb = if paused { "paused" } else { "unpaused" };
        return Err(DomainError::invalid(format!("deployment {id} is archived and cannot be {verb}")));
    }
    let (reason, next_slot) = if paused {
        (Some(json!({ "type": "manual" })), None)
    } else {
        (None, first_slot(&current.config.schedule, now_ms())?)
    };
    state
        .backends
        .store
        .set_deployment_paused(&tenant.workspace_id, id, reason, next_slot)
        .await?
        .ok_or_else(|| DomainError::invalid(format!("deployment {id} is archived")))
}

/// `POST /v1/deployments/{id}/run`: a manual run, now (whether paused or not; an
/// archived deployment is refused).
pub async fn run_now(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<DeploymentRunRow> {
    let deployment = get(state, tenant, id).await?;
    if deployment.archived_at_ms.is_some() {
        return Err(DomainError::invalid(format!("deployment {id} is archived and cannot run")));
    }
    let run = state.backends.store.insert_deployment_run(new_run(&deployment, RunTrigger::Manual)).await?;
    finish(state, &deployment, run).await
}

/// A run of the caller's workspace.
pub async fn get_deployment_run(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<DeploymentRunRow> {
    state
        .backends
        .store
        .get_deployment_run(&tenant.workspace_id, id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("deployment run not found: {id}")))
}

/// A page of runs.
pub async fn list_deployment_runs(
    state: &AppState,
    tenant: &Tenant,
    query: &DeploymentRunQuery,
) -> DomainResult<Vec<DeploymentRunRow>> {
    Ok(state.backends.store.list_deployment_runs(&tenant.workspace_id, query).await?)
}

fn new_run(deployment: &DeploymentRow, trigger: RunTrigger) -> NewDeploymentRun {
    let id = agentd_schema::ids::new_id("drun");
    NewDeploymentRun {
        planned_session_id: derived_id(&id, "sesn"),
        id,
        workspace_id: deployment.workspace_id.clone(),
        deployment_id: deployment.id.clone(),
        agent: json!({ "type": "agent", "id": deployment.config.agent_id, "version": deployment.config.agent_version }),
        trigger,
    }
}

fn run_error(kind: &str, message: String) -> Value {
    json!({ "type": kind, "message": message })
}

/// The first skill of an agent configuration that no longer exists, as a message: a
/// deleted skill, or a pinned version of one that was deleted (`latest` follows the
/// skill's remaining versions).
async fn missing_skill(state: &AppState, ws: &str, agent: &Value) -> DomainResult<Option<String>> {
    let store = state.backends.store.as_ref();
    for skill in agent["skills"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let id = skill["skill_id"].as_str().unwrap_or_default();
        if store.get_skill(ws, id).await?.is_none() {
            return Ok(Some(format!("skill {id} no longer exists")));
        }
        match skill["version"].as_str() {
            None | Some("latest") => {}
            Some(version) => {
                if store.get_skill_version(ws, id, version).await?.is_none() {
                    return Ok(Some(format!("skill {id} no longer has version {version}")));
                }
            }
        }
    }
    Ok(None)
}

/// Resources a self-hosted environment cannot mount: its hands (the customer's worker)
/// place the agent's skills and sync memory stores, but mount no files and clone no
/// repositories.
fn unmountable_on_self_hosted(resource: &Value) -> bool {
    matches!(resource["type"].as_str(), Some("file" | "github_repository"))
}

/// Why the deployment cannot start a session now, as a run error that pauses a
/// schedule (the reference's auto-pause causes this service checks, in this order): the
/// agent archived or gone, a skill of its pinned version gone, the environment gone or
/// archived, files or repositories on a self-hosted environment, a vault gone or
/// archived, a file gone (or expired), a memory store archived or gone.
async fn blocked(state: &AppState, deployment: &DeploymentRow) -> DomainResult<Option<Value>> {
    let store = state.backends.store.as_ref();
    let ws = &deployment.workspace_id;
    let c = &deployment.config;
    match store.get_resource(ws, "agent", &c.agent_id).await? {
        Some(agent) if agent.archived_at_ms.is_none() => {}
        _ => return Ok(Some(run_error("agent_archived_error", format!("agent {} is archived", c.agent_id)))),
    }
    let agent = store.get_resource_version(&c.agent_id, c.agent_version).await?.unwrap_or(Value::Null);
    if let Some(message) = missing_skill(state, ws, &agent).await? {
        let message = format!("agent {} version {}: {message}", c.agent_id, c.agent_version);
        return Ok(Some(run_error("skill_not_found_error", message)));
    }
    let resources = c.resources.as_array().map(Vec::as_slice).unwrap_or_default();
    match store.get_resource(ws, "environment", &c.environment_id).await? {
        None => {
            let message = format!("environment {} no longer exists", c.environment_id);
            return Ok(Some(run_error("environment_not_found_error", message)));
        }
        Some(env) if env.archived_at_ms.is_some() => {
            let message = format!("environment {} is archived", c.environment_id);
            return Ok(Some(run_error("environment_archived_error", message)));
        }
        Some(env) => {
            let unmountable = resources.iter().filter(|r| unmountable_on_self_hosted(r)).count();
            if agentd_schema::hands::hands_of(&env.body) == "self_hosted" && unmountable > 0 {
                let message = format!(
                    "environment {} is self-hosted and cannot mount the deployment's {unmountable} file or \
                     github_repository resource(s); use a cloud environment or remove them",
                    c.environment_id
                );
                return Ok(Some(run_error("self_hosted_resources_unsupported_error", message)));
            }
        }
    }
    for id in &c.vault_ids {
        match store.get_resource(ws, "vault", id).await? {
            None => return Ok(Some(run_error("vault_not_found_error", format!("vault {id} no longer exists")))),
            Some(vault) if vault.archived_at_ms.is_some() => {
                return Ok(Some(run_error("vault_archived_error", format!("vault {id} is archived"))));
            }
            Some(_) => {}
        }
    }
    for resource in resources {
        match resource["type"].as_str() {
            Some("file") => {
                let id = resource["file_id"].as_str().unwrap_or_default();
                let live = store.get_file(ws, id).await?.is_some_and(|file| file.is_live(now_ms()));
                if !live {
                    return Ok(Some(run_error("file_not_found_error", format!("file {id} no longer exists"))));
                }
            }
            Some("memory_store") => {
                let id = resource["memory_store_id"].as_str().unwrap_or_default();
                match store.get_memory_store(ws, id).await? {
                    Some(row) if row.archived_at_ms.is_none() => {}
                    Some(_) => {
                        let message = format!("memory store {id} is archived");
                        return Ok(Some(run_error("memory_store_archived_error", message)));
                    }
                    None => {
                        let message = format!("memory store {id} no longer exists");
                        return Ok(Some(run_error("session_resource_not_found_error", message)));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(None)
}

/// The run error a refusal of the session service records: an archived agent or
/// environment is its own kind (and pauses a schedule); every other refusal is
/// `session_creation_rejected_error`.
fn rejection_kind(error: &DomainError) -> &'static str {
    match error {
        DomainError::AgentArchived(_) => "agent_archived_error",
        DomainError::EnvironmentArchived(_) => "environment_archived_error",
        DomainError::NotFound(_)
        | DomainError::Invalid { .. }
        | DomainError::Archived(_)
        | DomainError::Deleted(_)
        | DomainError::Terminated(_)
        | DomainError::BudgetReached(_)
        | DomainError::AgentDisabled(_)
        | DomainError::Conflict(_)
        | DomainError::Gone(_)
        | DomainError::Expired(_)
        | DomainError::TooLarge(_)
        | DomainError::NameTaken(_)
        | DomainError::MemoryPreconditionFailed(_)
        | DomainError::MemoryPathConflict(_)
        | DomainError::Unavailable(_)
        | DomainError::Internal(_) => "session_creation_rejected_error",
    }
}

/// The deployment's initial events, as a session's create takes them.
fn initial_events(deployment: &DeploymentRow) -> Vec<serde_json::Map<String, Value>> {
    let events = deployment.config.initial_events.as_array();
    events.map(|events| events.iter().filter_map(|e| e.as_object().cloned()).collect()).unwrap_or_default()
}

/// Creates a run's session (with the id derived from the run) and records it, or
/// records why it could not. Idempotent: a session an earlier attempt created is found
/// and recorded; an outcome already recorded is returned as it is. Errors that may pass
/// (the store down) record nothing: the run is finished by a later tick.
pub async fn finish(
    state: &AppState,
    deployment: &DeploymentRow,
    run: DeploymentRunRow,
) -> DomainResult<DeploymentRunRow> {
    if run.session_id.is_some() || run.error.is_some() {
        return Ok(run);
    }
    let store = state.backends.store.as_ref();
    let scheduled = matches!(run.trigger, RunTrigger::Schedule(_));
    let reread = |run: DeploymentRunRow| async move {
        Ok::<_, DomainError>(store.get_deployment_run(&run.workspace_id, &run.id).await?.unwrap_or(run))
    };
    if store.get_session(&run.workspace_id, &run.planned_session_id).await?.is_some() {
        // An attempt that died after creating the session may not have submitted its
        // initial events: submit them (a repeat of a submission that happened is a no-op).
        sessions::submit_initial_events(state, &run.planned_session_id, initial_events(deployment), true).await?;
        return match store.record_deployment_run_session(&run.id, &run.planned_session_id).await? {
            Some(done) => Ok(done),
            None => reread(run).await,
        };
    }
    if let Some(error) = blocked(state, deployment).await? {
        tracing::info!(deployment = %deployment.id, run = %run.id, error = %error["type"], "deployment run failed");
        return match store.record_deployment_run_error(&run.id, error, scheduled).await? {
            Some(done) => Ok(done),
            None => reread(run).await,
        };
    }
    // A scheduled fire spends the organization's create bucket like any session create
    // (a manual run's request spent it at admission); refused, the run records
    // `session_rate_limited_error` and the schedule keeps firing.
    if scheduled {
        let decision = state
            .limiter
            .admit(&deployment.organization_id, OperationClass::Create)
            .await
            .map_err(|e| DomainError::Unavailable(e.to_string()))?;
        if !decision.allowed {
            let message = format!(
                "the organization's session create rate limit is exhausted; retry in {} s",
                decision.retry_after_secs
            );
            return match store
                .record_deployment_run_error(&run.id, run_error("session_rate_limited_error", message), false)
                .await?
            {
                Some(done) => Ok(done),
                None => reread(run).await,
            };
        }
    }
    let tenant = Tenant {
        organization_id: deployment.organization_id.clone(),
        workspace_id: deployment.workspace_id.clone(),
        key_id: deployment.id.clone(),
        access: Access::Workspace,
    };
    let c = &deployment.config;
    let request = CreateSession {
        agent: AgentRef { id: c.agent_id.clone(), version: Some(c.agent_version), ..AgentRef::default() },
        environment_id: c.environment_id.clone(),
        vault_ids: c.vault_ids.clone(),
        budget: c.budget.clone(),
        metadata: json!({}),
        title: Some(c.name.clone()),
        resources: c.resources.clone(),
        initial_events: initial_events(deployment),
        id: Some(run.planned_session_id.clone()),
        deployment_id: Some(deployment.id.clone()),
        user_profile_id: c.user_profile_id.as_deref().and_then(|id| UserProfileId::parse(id).ok()),
        content_capture: None,
        capture_ceiling: c.content_capture_ceiling,
    };
    let outcome = match sessions::create(state, &tenant, request).await {
        Ok(session) => store.record_deployment_run_session(&run.id, &session.id).await?,
        // Created by a racing attempt of this run.
        Err(DomainError::Conflict(_)) => store.record_deployment_run_session(&run.id, &run.planned_session_id).await?,
        Err(error @ (DomainError::Unavailable(_) | DomainError::Internal(_) | DomainError::Gone(_))) => {
            return Err(error);
        }
        Err(error) => {
            let kind = rejection_kind(&error);
            let pause = scheduled && kind != "session_creation_rejected_error";
            store.record_deployment_run_error(&run.id, run_error(kind, error.to_string()), pause).await?
        }
    };
    match outcome {
        Some(done) => Ok(done),
        None => reread(run).await,
    }
}

/// One tick of the scheduler: claim and fire the due slots, then finish runs a crash
/// cut short.
pub async fn tick(state: &AppState) -> DomainResult<()> {
    let store = state.backends.store.as_ref();
    let now = now_ms();
    for deployment in store.due_deployments(now, 100).await? {
        let (Some(expected), Some(row)) = (deployment.next_slot_ms, deployment.config.schedule.as_ref()) else {
            continue;
        };
        let schedule = match schedule_of(row) {
            Ok(schedule) => schedule,
            Err(error) => {
                tracing::warn!(%error, deployment = %deployment.id, "stored schedule does not parse");
                continue;
            }
        };
        let Some((slot, next)) = schedule.due(expected, now) else { continue };
        let run = new_run(&deployment, RunTrigger::Schedule(slot));
        let claim = SlotClaim { expected_next_ms: expected, slot_ms: slot, next_ms: next, now_ms: now, run };
        match store.claim_deployment_slot(&deployment.id, claim).await {
            Ok(Some(run)) => {
                tracing::info!(deployment = %deployment.id, run = %run.id, slot, "deployment schedule fired");
                if let Err(error) = finish(state, &deployment, run).await {
                    tracing::warn!(%error, deployment = %deployment.id, "deployment run failed; retrying later");
                }
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, deployment = %deployment.id, "claiming a deployment slot failed"),
        }
    }
    for run in store.unfinished_deployment_runs(now - UNFINISHED_AFTER_MS, 50).await? {
        let Some(deployment) = store.get_deployment(&run.workspace_id, &run.deployment_id).await? else { continue };
        let id = run.id.clone();
        if let Err(error) = finish(state, &deployment, run).await {
            tracing::warn!(%error, run = %id, "finishing a deployment run failed; retrying later");
        }
    }
    Ok(())
}

/// The deployment scheduler of this gateway: a tick every second (less under the
/// tests-only setting) until `stop`.
pub fn spawn_scheduler(state: AppState, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    let every = tick_every();
    tokio::spawn(async move {
        loop {
            if let Err(error) = tick(&state).await {
                tracing::warn!(%error, "deployment scheduler tick failed; retrying");
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    })
}
