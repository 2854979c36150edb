//! Workflow revisions (docs/api/workflows.md): a project's workflow definition saved as an
//! immutable revision addressed by its content, and the project override that points new
//! work at one revision, moved by compare-and-swap on its `override_version`.
//!
//! A save checks the whole request ([`declaration`]), resolves each `requires` entry's
//! environment to the exact environment it is now (its id, row version, update time and
//! the SHA-256 of its stored config), and hands the store one transaction: claim the
//! idempotency key, create or reuse the revision, move the override. Nothing is stored
//! unless every check passed. Projects and definitions are slugs naming namespaces of the
//! workspace; a (project, definition) exists once a revision of it was saved.

pub mod declaration;
#[cfg(test)]
mod tests;

use agentd_schema::ids::EnvironmentId;
use agentd_schema::{
    ClearOutcome, SaveOutcome, SaveWorkflowRevision, SavedWorkflowRevision, Store, WorkflowKey, WorkflowOverrideRow,
    WorkflowRevisionRow,
};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::agent_drafts::canonical;
use super::error::{DomainError, DomainResult};
use crate::managed::body::FieldError;

/// The prefix of a revision id; the rest is the revision's `content_sha256`.
pub const REVISION_PREFIX: &str = "wfrev_";
/// Characters of a project or definition slug.
pub const MAX_SLUG_CHARS: usize = 63;

/// Whether `value` is a project or definition slug: lowercase ASCII letters, digits and
/// `-`, starting with a letter or digit, at most [`MAX_SLUG_CHARS`].
pub fn is_slug(value: &str) -> bool {
    let mut bytes = value.bytes();
    value.len() <= MAX_SLUG_CHARS
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Whether `value` is a revision id as a save writes it (`wfrev_` + lowercase hex SHA-256).
pub fn is_revision_id(value: &str) -> bool {
    value
        .strip_prefix(REVISION_PREFIX)
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// What a save answered.
#[derive(Debug)]
pub enum Save {
    /// The request is invalid (every problem listed); nothing was stored.
    Rejected(Vec<FieldError>),
    /// Saved now, or the replay of the key's first save.
    Saved(Box<SavedWorkflowRevision>),
}

/// Hex SHA-256 of the canonical JSON (keys sorted, no whitespace) of `value`.
fn sha256(value: &Value) -> String {
    hex::encode(Sha256::digest(canonical(value).to_string().as_bytes()))
}

fn key(workspace_id: &str, project: &str, definition: &str) -> WorkflowKey {
    WorkflowKey {
        workspace_id: workspace_id.to_owned(),
        project: project.to_owned(),
        definition: definition.to_owned(),
    }
}

fn version_conflict(project: &str, definition: &str, expected: i64, current: i64) -> DomainError {
    DomainError::Conflict(format!(
        "expected_override_version: the override of workflow {definition} in project {project} is at version \
         {current}, not {expected}; read it again and retry only if the change still applies"
    ))
}

fn key_reused(key: &str) -> DomainError {
    DomainError::Conflict(format!(
        "idempotency_key: {key:?} was used for another request to this workflow; use a new key for a new request"
    ))
}

/// Saves a revision of `definition` in `project` from the request `body` and moves the
/// project override to it (docs/api/workflows.md "Save").
pub async fn save(
    store: &dyn Store,
    workspace_id: &str,
    project: &str,
    definition: &str,
    body: &Value,
) -> DomainResult<Save> {
    let request = match declaration::check_save(body) {
        Ok(request) => request,
        Err(problems) => return Ok(Save::Rejected(problems)),
    };
    let key = key(workspace_id, project, definition);
    let request_sha256 = sha256(body);
    // A replay answers the first result even when an environment changed since; the
    // transaction below decides again for a key that races.
    if let Some((first, saved)) = store.workflow_save_replay(&key, &request.idempotency_key).await? {
        return if first == request_sha256 {
            Ok(Save::Saved(Box::new(saved)))
        } else {
            Err(key_reused(&request.idempotency_key))
        };
    }
    let resolved = match resolve(store, workspace_id, &request.requires).await? {
        Ok(resolved) => resolved,
        Err(problems) => return Ok(Save::Rejected(problems)),
    };
    let declaration = Value::Object(request.declaration);
    let content_sha256 = sha256(&json!({ "declaration": declaration, "resolved": resolved }));
    let save = SaveWorkflowRevision {
        key,
        id: format!("{REVISION_PREFIX}{content_sha256}"),
        content_sha256,
        declaration,
        resolved,
        expected_override_version: request.expected_override_version,
        idempotency_key: request.idempotency_key.clone(),
        request_sha256,
    };
    match store.save_workflow_revision(save).await? {
        SaveOutcome::Saved(saved) | SaveOutcome::Replayed(saved) => Ok(Save::Saved(Box::new(saved))),
        SaveOutcome::KeyReused => Err(key_reused(&request.idempotency_key)),
        SaveOutcome::VersionConflict { current } => {
            Err(version_conflict(project, definition, request.expected_override_version, current))
        }
    }
}

/// Resolves each requirement's environment (an `env_…` id of the workspace) to the exact
/// environment it is now: `{requires: {role: {environment: {id, name, version,
/// updated_at_ms, config_sha256}}}}`. A missing, archived or malformed reference is a
/// problem at its pointer.
async fn resolve(
    store: &dyn Store,
    workspace_id: &str,
    requires: &std::collections::BTreeMap<String, String>,
) -> DomainResult<Result<Value, Vec<FieldError>>> {
    let mut problems = Vec::new();
    let mut resolved = Map::new();
    for (role, reference) in requires {
        let pointer = format!("/declaration/requires/{role}/environment");
        let mut problem =
            |what: String| problems.push(FieldError { message: format!("{pointer}: {what}"), path: pointer.clone() });
        let Ok(id) = EnvironmentId::parse(reference) else {
            problem(format!("must be an environment id (env_…) of this workspace, not {reference:?}"));
            continue;
        };
        match store.get_resource(workspace_id, "environment", &id).await? {
            None => problem(format!("environment {id} not found")),
            Some(environment) if environment.archived_at_ms.is_some() => {
                problem(format!("environment {id} is archived"));
            }
            Some(environment) => {
                let revision = json!({
                    "id": environment.id,
                    "name": environment.body["name"],
                    "version": environment.version,
                    "updated_at_ms": environment.updated_at_ms,
                    "config_sha256": sha256(&environment.body["config"]),
                });
                resolved.insert(role.clone(), json!({ "environment": revision }));
            }
        }
    }
    Ok(if problems.is_empty() { Ok(json!({ "requires": resolved })) } else { Err(problems) })
}

/// Clears the project override of `definition` by compare-and-swap (docs/api/workflows.md
/// "Clear"); the revisions stay.
pub async fn clear(
    store: &dyn Store,
    workspace_id: &str,
    project: &str,
    definition: &str,
    body: &Value,
) -> DomainResult<Result<WorkflowOverrideRow, Vec<FieldError>>> {
    let expected = match declaration::check_clear(body) {
        Ok(expected) => expected,
        Err(problems) => return Ok(Err(problems)),
    };
    match store.clear_workflow_override(&key(workspace_id, project, definition), expected).await? {
        ClearOutcome::Cleared(row) => Ok(Ok(row)),
        ClearOutcome::NotFound => Err(not_found(project, definition)),
        ClearOutcome::VersionConflict { current } => Err(version_conflict(project, definition, expected, current)),
    }
}

fn not_found(project: &str, definition: &str) -> DomainError {
    DomainError::NotFound(format!("workflow not found: no revision of {definition} was saved in project {project}"))
}

/// The project override of `definition` (404 until a revision of it was saved).
pub async fn current_override(
    store: &dyn Store,
    workspace_id: &str,
    project: &str,
    definition: &str,
) -> DomainResult<WorkflowOverrideRow> {
    store
        .get_workflow_override(&key(workspace_id, project, definition))
        .await?
        .ok_or_else(|| not_found(project, definition))
}

/// A revision of `definition` saved in `project`, exactly as it was saved.
pub async fn revision(
    store: &dyn Store,
    workspace_id: &str,
    project: &str,
    definition: &str,
    id: &str,
) -> DomainResult<WorkflowRevisionRow> {
    store
        .get_workflow_revision(&key(workspace_id, project, definition), id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("workflow revision not found: {id}")))
}
