//! Application adapters over the same sessions as the managed API: an adapter thread id
//! is bound to one session on first use (table `adapter_threads`), so a conversation
//! started through one surface continues through any other.

pub mod a2a;
pub mod ag_ui;
pub mod ai_sdk;
pub(crate) mod follow;
pub mod mcp;

pub(crate) use follow::{Preview, Shown, Translate, Wake, follow};

use agentd_schema::{EventQuery, StoredEvent};
use axum::http::Uri;
use serde_json::{Value, json};

use crate::AppState;
use crate::admission::Tenant;
use crate::error::{ApiError, ApiResult};
use crate::managed::query::{Query, cursor_page, decode_cursor};
use crate::managed::sessions;

/// What a stream says when committed events cannot be read; the cause is logged.
pub const HISTORY_UNAVAILABLE: &str = "the run's history is temporarily unavailable; retry the request";

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
    // The one binding lookup, which also authorizes the session for the credential.
    let Some(session_id) = crate::domain::threads::bound(state, tenant, thread).await? else {
        return Err(ApiError::NotFound(format!("thread not found: {thread}")));
    };
    let session = sessions::load(store, tenant, &session_id).await?;
    // A session with child threads: its session-level view (ADR 0022 §6).
    let history = EventQuery { limit: 100_000, primary_view: session.child_threads > 0, ..EventQuery::default() };
    let events = store.query_events(&session.id, &history).await?;
    let all = render(&events);
    let start = after.as_deref().and_then(|id| all.iter().position(|m| m["id"] == id)).map_or(0, |i| i + 1);
    let rows: Vec<Value> = all[start.min(all.len())..].iter().take(limit as usize + 1).cloned().collect();
    let mut page = cursor_page(rows, limit, |m| m["id"].as_str().unwrap_or_default().to_owned(), Clone::clone);
    page["thread_id"] = json!(thread);
    page["session_id"] = json!(session.id);
    Ok(page)
}

/// A client that left or cancelled mid-turn on `surface`: its session's run is
/// interrupted (`user.interrupt`); committed history stays. One rule for every adapter
/// whose request is the turn (AG-UI runs, AI SDK run streams, MCP calls).
pub(crate) async fn interrupt_departed(state: &AppState, session_id: &str, surface: &'static str) {
    match crate::domain::runs::interrupt(state, session_id).await {
        Ok(()) => tracing::info!(session = %session_id, surface, "client left mid-turn; run interrupted"),
        Err(error) => {
            tracing::warn!(%error, session = %session_id, surface, "could not interrupt the run of a departed client")
        }
    }
}
