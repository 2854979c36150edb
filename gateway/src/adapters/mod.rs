//! Application adapters over the same sessions as the managed API: an adapter thread id
//! is bound to one session on first use (table `adapter_threads`), so a conversation
//! started through one surface continues through any other.

pub mod ag_ui;
pub mod ai_sdk;

use agentd_schema::Session;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use serde_json::json;

use crate::AppState;
use crate::admission::Tenant;
use crate::error::{ApiError, ApiResult};
use crate::managed::{environments, sessions};

/// The binding key of the workspace's adapter environment (reserved: no thread has it).
const ENVIRONMENT_KEY: &str = "agentd:adapter-environment";

/// The session bound to `thread`, created on first use for `agent` (and bound; the
/// first binding wins a race). `None` agent on an unbound thread is a 400.
pub async fn thread_session(
    state: &AppState,
    tenant: &Tenant,
    thread: &str,
    agent: Option<&str>,
) -> ApiResult<Session> {
    if thread.is_empty() || thread.len() > 256 || thread.contains('\0') || thread == ENVIRONMENT_KEY {
        return Err(ApiError::invalid("thread id: 1 to 256 characters, no NUL"));
    }
    let store = state.backends.store.as_ref();
    if let Some(id) = store.thread_session(&tenant.workspace_id, thread).await? {
        return sessions::load(store, tenant, &id).await;
    }
    let Some(agent) = agent.or(state.default_agent.as_deref()) else {
        return Err(ApiError::invalid(
            "agent: required to start a new thread (the `agent` body field, the `x-agentd-agent` header, \
             or AGENTD_ADAPTER_DEFAULT_AGENT)",
        ));
    };
    let environment = adapter_environment(state, tenant).await?;
    let body = json!({ "agent": agent, "environment_id": environment, "metadata": { "adapter_thread": thread } });
    let created =
        sessions::create(State(state.clone()), Extension(tenant.clone()), Bytes::from(body.to_string())).await?;
    let id = created.0["id"].as_str().unwrap_or_default().to_owned();
    let bound = store.bind_thread(&tenant.workspace_id, thread, &id).await?;
    sessions::load(store, tenant, &bound).await
}

/// The workspace's `cloud` environment for adapter sessions, created on first use.
async fn adapter_environment(state: &AppState, tenant: &Tenant) -> ApiResult<String> {
    let store = state.backends.store.as_ref();
    if let Some(id) = store.thread_session(&tenant.workspace_id, ENVIRONMENT_KEY).await? {
        return Ok(id);
    }
    let body = json!({ "name": "agentd-adapters", "config": { "type": "cloud" } });
    let created =
        environments::create(State(state.clone()), Extension(tenant.clone()), Bytes::from(body.to_string())).await?;
    let id = created.0["id"].as_str().unwrap_or_default().to_owned();
    Ok(store.bind_thread(&tenant.workspace_id, ENVIRONMENT_KEY, &id).await?)
}
