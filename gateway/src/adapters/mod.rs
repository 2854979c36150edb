//! Application adapters over the same sessions as the managed API: an adapter thread id
//! is bound to one session on first use (table `adapter_threads`), so a conversation
//! started through one surface continues through any other.

pub mod a2a;
pub mod ag_ui;
pub mod ai_sdk;
pub(crate) mod follow;
pub mod mcp;

pub(crate) use follow::{Preview, Shown, Translate, Wake, follow};

use agentd_schema::{EventQuery, Session, StoredEvent};
use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::Uri;
use serde_json::{Value, json};

use crate::AppState;
use crate::admission::Tenant;
use crate::error::{ApiError, ApiResult};
use crate::managed::query::{Query, cursor_page, decode_cursor};
use crate::managed::{environments, sessions};

/// What a stream says when committed events cannot be read; the cause is logged.
pub const HISTORY_UNAVAILABLE: &str = "the run's history is temporarily unavailable; retry the request";

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

/// The text parts of content blocks, joined by newlines.
pub(crate) fn text_of(content: &Value) -> String {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `GET …/threads/{thread_id}/messages` for either protocol: the thread's committed
/// history through `render` (oldest first), `limit` (≤ 100) per page with a `page`
/// cursor, plus `thread_id` and `session_id`.
pub(crate) async fn thread_messages(
    state: &AppState,
    tenant: &Tenant,
    thread: &str,
    uri: &Uri,
    render: fn(&[StoredEvent]) -> Vec<Value>,
) -> ApiResult<Value> {
    let store = state.backends.store.as_ref();
    let query = Query::from_uri(uri);
    let limit = query.int("limit", 1, 100)?.unwrap_or(100);
    let after = query.string("page").map(decode_cursor).transpose()?;
    let Some(session_id) = store.thread_session(&tenant.workspace_id, thread).await? else {
        return Err(ApiError::NotFound(format!("thread not found: {thread}")));
    };
    let session = sessions::load(store, tenant, &session_id).await?;
    let events = store.query_events(&session.id, &EventQuery { limit: 100_000, ..EventQuery::default() }).await?;
    let all = render(&events);
    let start = after.as_deref().and_then(|id| all.iter().position(|m| m["id"] == id)).map_or(0, |i| i + 1);
    let rows: Vec<Value> = all[start.min(all.len())..].iter().take(limit as usize + 1).cloned().collect();
    let mut page = cursor_page(rows, limit, |m| m["id"].as_str().unwrap_or_default().to_owned(), Clone::clone);
    page["thread_id"] = json!(thread);
    page["session_id"] = json!(session.id);
    Ok(page)
}
