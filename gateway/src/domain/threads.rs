//! Adapter threads: an AI SDK chat id, an AG-UI thread, an A2A `contextId` or an MCP
//! `thread_id` is bound to one session on first use (ADR 0007), in a workspace
//! environment the adapters share.

use agentd_schema::Session;
use agentd_schema::ids::SessionId;
use serde_json::json;

use super::environments::{self, CreateEnvironment};
use super::error::{DomainError, DomainResult};
use super::exposure;
use super::sessions::{self, AgentRef, CreateSession};
use crate::AppState;
use crate::admission::scope::{self, Reach};
use crate::admission::{Access, Tenant};
use crate::error::ApiError;

/// The binding key of the workspace's adapter environment (reserved: no thread has it).
const ENVIRONMENT_KEY: &str = "agentd:adapter-environment";
/// The longest thread id.
pub const MAX_THREAD_CHARS: usize = 256;

/// The session bound to `thread`, or `None` when the thread was never bound.
/// A binding whose session was deleted is [`DomainError::Deleted`].
/// For an application access token, the thread must be one it binds, and is the
/// session the token names: it never binds or creates anything.
pub async fn bound(state: &AppState, tenant: &Tenant, thread: &str) -> DomainResult<Option<SessionId>> {
    let store = state.backends.store.as_ref();
    if thread == ENVIRONMENT_KEY {
        return Err(DomainError::NotFound(format!("thread not found: {thread}")));
    }
    let id = match &tenant.access {
        Access::App(grant) => match grant.session_of(thread) {
            Some(id) => id.to_owned(),
            None => {
                return Err(DomainError::NotFound(format!(
                    "thread {thread:?} is not one of this application access token's threads"
                )));
            }
        },
        _ => match store.thread_session(&tenant.workspace_id, thread).await? {
            Some(id) => id,
            None => return Ok(None),
        },
    };
    let id =
        SessionId::parse(&id).map_err(|_| DomainError::Internal(format!("bound session id {id:?} does not parse")))?;
    authorize(state, tenant, &id).await?;
    if store.get_session(&tenant.workspace_id, &id).await?.is_none() {
        return Err(DomainError::Deleted(format!(
            "thread {thread:?}: its session {id} was deleted; start a new thread"
        )));
    }
    Ok(Some(id))
}

/// A session an adapter thread is bound to, with its typed id.
#[derive(Debug, Clone)]
pub struct Bound {
    /// The session's id, authorized for the tenant (read inside its workspace).
    pub id: SessionId,
    /// The session as loaded.
    pub session: Session,
}

/// The one scope check (ADR 0012) on a session reached through a binding rather than a
/// path: today only API keys use the adapters, but a narrower credential must not reach
/// a session outside it by naming its thread.
async fn authorize(state: &AppState, tenant: &Tenant, id: &SessionId) -> DomainResult<()> {
    let reach = Reach::Session(id.clone());
    scope::check(state.backends.store.as_ref(), tenant, &reach).await.map_err(|error| match error {
        ApiError::NotFound(message) => DomainError::NotFound(message),
        ApiError::Unavailable(message) => DomainError::Unavailable(message),
        other => DomainError::Internal(format!("scope check: {other}")),
    })
}

/// The session bound to `thread`, created on first use for `agent` (and bound; the
/// first binding wins a race). An unbound thread without an agent is invalid.
pub async fn session(state: &AppState, tenant: &Tenant, thread: &str, agent: Option<&str>) -> DomainResult<Bound> {
    session_through(state, tenant, thread, agent, None).await
}

/// [`session`] for a protocol endpoint whose agents the workspace gates (A2A, MCP;
/// [`exposure`]): a thread bound to a session of an agent `protocol` does not expose,
/// or a new thread for such an agent, is refused as for an agent that does not exist —
/// before anything is created.
pub async fn session_through(
    state: &AppState,
    tenant: &Tenant,
    thread: &str,
    agent: Option<&str>,
    protocol: Option<exposure::Protocol>,
) -> DomainResult<Bound> {
    if thread.is_empty() || thread.len() > MAX_THREAD_CHARS || thread.contains('\0') || thread == ENVIRONMENT_KEY {
        return Err(DomainError::invalid("thread id: 1 to 256 characters, no NUL"));
    }
    let store = state.backends.store.as_ref();
    let exposed = async |agent: &str| match protocol {
        Some(protocol) => exposure::require(store, &tenant.workspace_id, protocol, agent, || no_agent(agent)).await,
        None => Ok(()),
    };
    if let Some(id) = bound(state, tenant, thread).await? {
        let session = sessions::load(state, tenant, &id).await?;
        if let Some(agent) = &session.agent_id {
            exposed(agent).await?;
        }
        return Ok(Bound { id, session });
    }
    let Some(agent) = agent.or(state.default_agent.as_deref()) else {
        return Err(DomainError::invalid(
            "agent: required to start a new thread (the `agent` body field, the `x-agentd-agent` header, \
             or AGENTD_ADAPTER_DEFAULT_AGENT)",
        ));
    };
    exposed(agent).await?;
    let environment_id = environment(state, tenant).await?;
    let request = CreateSession {
        agent: AgentRef { id: agent.to_owned(), ..AgentRef::default() },
        environment_id,
        metadata: json!({ "adapter_thread": thread }),
        resources: json!([]),
        ..CreateSession::default()
    };
    let created = sessions::create(state, tenant, request).await?;
    let bound = state.backends.store.bind_thread(&tenant.workspace_id, thread, &created.id).await?;
    let id = SessionId::parse(&bound)
        .map_err(|_| DomainError::Internal(format!("bound session id {bound:?} does not parse")))?;
    let session = sessions::load(state, tenant, &id).await?;
    Ok(Bound { id, session })
}

/// What starting a session of a missing agent answers (`sessions::create`): an agent a
/// protocol does not expose is refused with the same words.
fn no_agent(agent: &str) -> DomainError {
    DomainError::invalid(format!("agent: no agent {agent} in this workspace"))
}

/// The workspace's `cloud` environment for adapter sessions, created on first use.
async fn environment(state: &AppState, tenant: &Tenant) -> DomainResult<String> {
    let store = state.backends.store.as_ref();
    if let Some(id) = store.thread_session(&tenant.workspace_id, ENVIRONMENT_KEY).await? {
        return Ok(id);
    }
    let request = CreateEnvironment {
        name: "agentd-adapters".to_owned(),
        description: None,
        config: environments::default_cloud(),
        metadata: json!({}),
        scope: "organization".to_owned(),
    };
    let created = environments::create(state, tenant, request).await?;
    Ok(store.bind_thread(&tenant.workspace_id, ENVIRONMENT_KEY, &created.id).await?)
}
