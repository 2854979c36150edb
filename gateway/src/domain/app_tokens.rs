//! Application access tokens (docs/api/app-tokens.md): the rules of issuing one — what
//! it may grant, which threads it binds to which sessions, how long it lives — and
//! revoking it. Resolving a presented token is `admission::auth`; what it reaches is
//! `admission::scope` (routes) and `domain::threads::bound` (threads).

use std::collections::HashSet;

use agentd_schema::ids::{SessionId, new_id, new_secret, secret_hash};
use agentd_schema::{AppTokenRow, NewAppToken, ThreadBinding};

use super::error::{DomainError, DomainResult};
use crate::AppState;
use crate::admission::Tenant;
use crate::admission::auth::APP_TOKEN_PREFIX;

/// The protocols a token may grant.
pub const PROTOCOLS: &[&str] = &["ai-sdk", "ag-ui"];
/// The operations a token may grant.
pub const OPERATIONS: &[&str] = &["thread.run", "thread.messages.read"];
/// The longest life of a token, and the default.
pub const MAX_LIFETIME_SECS: i64 = 900;
/// The default life of a token.
pub const DEFAULT_LIFETIME_SECS: i64 = 300;
/// The most threads one token binds.
pub const MAX_BINDINGS: usize = 100;

/// A token to issue, each field already parsed from the wire.
#[derive(Debug, Clone)]
pub struct IssueToken {
    /// Who issues it (the caller's own authority).
    pub authority_id: String,
    /// The application it is for.
    pub application_scope: String,
    /// The end user it is for.
    pub actor_key: Option<String>,
    /// Protocols, each of [`PROTOCOLS`], unique.
    pub protocols: Vec<String>,
    /// Operations, each of [`OPERATIONS`], unique.
    pub operations: Vec<String>,
    /// Threads and the sessions they are.
    pub bindings: Vec<ThreadBinding>,
    /// Lifetime, 1..=900 seconds.
    pub expires_in_seconds: i64,
}

/// An issued token: its row and its secret (shown once).
#[derive(Debug, Clone)]
pub struct Issued {
    /// The stored token.
    pub row: AppTokenRow,
    /// The bearer secret.
    pub access_token: String,
}

fn unique(values: &[String], allowed: &[&str], field: &str) -> DomainResult<()> {
    if values.is_empty() {
        return Err(DomainError::invalid(format!("{field}: name at least one of {}", allowed.join(", "))));
    }
    let mut seen = HashSet::new();
    for value in values {
        if !allowed.contains(&value.as_str()) {
            return Err(DomainError::invalid(format!("{field}: {value:?} is not one of {}", allowed.join(", "))));
        }
        if !seen.insert(value) {
            return Err(DomainError::invalid(format!("{field}: {value:?} is listed twice")));
        }
    }
    Ok(())
}

/// Checks a request against every rule; the sessions must be the workspace's, and open
/// to new turns when the token may run them.
pub async fn issue(state: &AppState, tenant: &Tenant, request: IssueToken) -> DomainResult<Issued> {
    unique(&request.protocols, PROTOCOLS, "protocols")?;
    unique(&request.operations, OPERATIONS, "operations")?;
    if !(1..=MAX_LIFETIME_SECS).contains(&request.expires_in_seconds) {
        return Err(DomainError::invalid(format!(
            "expires_in_seconds: 1 to {MAX_LIFETIME_SECS}, got {}",
            request.expires_in_seconds
        )));
    }
    if request.bindings.is_empty() || request.bindings.len() > MAX_BINDINGS {
        return Err(DomainError::invalid(format!(
            "thread_bindings: give 1 to {MAX_BINDINGS}, got {}",
            request.bindings.len()
        )));
    }
    let (mut threads, mut sessions) = (HashSet::new(), HashSet::new());
    for (i, binding) in request.bindings.iter().enumerate() {
        let thread = &binding.external_thread_id;
        if thread.is_empty() || thread.len() > super::threads::MAX_THREAD_CHARS || thread.contains('\0') {
            return Err(DomainError::invalid(format!(
                "thread_bindings[{i}].external_thread_id: 1 to 256 characters, no NUL"
            )));
        }
        if SessionId::parse(&binding.managed_session_id).is_err() {
            return Err(DomainError::invalid(format!(
                "thread_bindings[{i}].managed_session_id: not a session id: {:?}",
                binding.managed_session_id
            )));
        }
        if !threads.insert(thread) || !sessions.insert(&binding.managed_session_id) {
            return Err(DomainError::invalid(format!(
                "thread_bindings[{i}]: each thread binds one session and each session one thread"
            )));
        }
    }
    let runs = request.operations.iter().any(|o| o == "thread.run");
    let store = state.backends.store.as_ref();
    for binding in &request.bindings {
        let id = &binding.managed_session_id;
        let session = store
            .get_session(&tenant.workspace_id, id)
            .await?
            .ok_or_else(|| DomainError::NotFound(format!("session not found: {id}")))?;
        if runs && (session.archived_at_ms.is_some() || session.status == "terminated") {
            return Err(DomainError::Conflict(format!(
                "session {id} is {} and takes no new turns: a token cannot grant thread.run on it",
                if session.archived_at_ms.is_some() { "archived" } else { "terminated" }
            )));
        }
    }
    let now = crate::managed::query::now_ms();
    // `sk-agentd-aat-<256 random bits>`: the prefix is how authentication recognises it.
    let access_token = new_secret(APP_TOKEN_PREFIX.trim_end_matches('-'));
    let row = AppTokenRow {
        id: new_id("aat"),
        workspace_id: tenant.workspace_id.clone(),
        organization_id: tenant.organization_id.clone(),
        authority_id: request.authority_id,
        application_scope: request.application_scope,
        actor_key: request.actor_key,
        protocols: request.protocols,
        operations: request.operations,
        thread_bindings: request.bindings,
        created_at_ms: now,
        expires_at_ms: now + request.expires_in_seconds * 1000,
    };
    let new = NewAppToken { row, token_sha256: secret_hash(&access_token), issued_by_key_id: tenant.key_id.clone() };
    let row = store.insert_app_token(new).await?;
    Ok(Issued { row, access_token })
}

/// Revokes a token of the workspace at once.
pub async fn revoke(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<()> {
    if state.backends.store.delete_app_token(&tenant.workspace_id, id).await? {
        Ok(())
    } else {
        Err(DomainError::NotFound(format!("application access token not found: {id}")))
    }
}

/// Removes expired tokens (they never resolve once expired; this keeps the table
/// small): every minute in every gateway, until `stop`.
pub fn spawn_sweeper(state: AppState, stop: tokio_util::sync::CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let before = crate::managed::query::now_ms() - 60_000;
            match state.backends.store.purge_app_tokens(before).await {
                Ok(0) => {}
                Ok(removed) => tracing::debug!(removed, "expired application access tokens removed"),
                Err(error) => tracing::warn!(%error, "removing expired application access tokens failed; retrying"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
            }
        }
    })
}
