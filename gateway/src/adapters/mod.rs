//! Application adapters over the same sessions as the managed API: an adapter thread id
//! is bound to one session on first use (table `adapter_threads`), so a conversation
//! started through one surface continues through any other.

pub mod a2a;
pub mod ag_ui;
pub mod ai_sdk;
pub mod mcp;

use std::time::Duration;

use agentd_schema::{EventQuery, StoredEvent, live};
use axum::http::Uri;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

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

/// Turns one protocol's view of committed events into its wire events.
pub(crate) trait Translate: Send + 'static {
    /// The wire events for one committed event, and whether the run is over.
    fn translate(&mut self, event: &StoredEvent) -> (Vec<Value>, bool);
    /// The wire event that reports a store failure mid-stream (`message` is generic).
    fn failure(&self, message: String) -> Value;
}

/// Follows a session's committed events after `after_seq`: `first` goes out at once,
/// then every event through `translator` until it says the run is over. The store is
/// read on every bus notification for the session (and every 500 ms), so nothing
/// committed is missed or sent twice. `on_gone` runs if the client leaves first.
pub(crate) fn follow<T, G, F>(
    state: AppState,
    session_id: String,
    after_seq: i64,
    first: Value,
    mut translator: T,
    on_gone: G,
) -> mpsc::Receiver<Value>
where
    T: Translate,
    G: FnOnce(AppState, String) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send,
{
    let (tx, rx) = mpsc::channel::<Value>(256);
    tokio::spawn(async move {
        let mut wake = match &state.backends.bus {
            Some(bus) => bus.subscribe(&live::session_channel(&session_id)).await.ok(),
            None => None,
        };
        if tx.send(first).await.is_err() {
            return;
        }
        let mut last_seq = after_seq;
        loop {
            let query = EventQuery { after_seq: Some(last_seq), limit: 500, ..EventQuery::default() };
            let committed = match state.backends.store.query_events(&session_id, &query).await {
                Ok(events) => events,
                Err(error) => {
                    // The cause stays in the log: store errors name internals.
                    tracing::error!(%error, session = %session_id, "adapter stream: reading committed events failed");
                    let _ = tx.send(translator.failure(HISTORY_UNAVAILABLE.to_owned())).await;
                    return;
                }
            };
            for event in &committed {
                last_seq = event.seq;
                let (out, done) = translator.translate(event);
                for item in out {
                    if tx.send(item).await.is_err() {
                        return on_gone(state, session_id).await;
                    }
                }
                if done {
                    return;
                }
            }
            if committed.len() == 500 {
                continue;
            }
            let tick = tokio::time::sleep(Duration::from_millis(500));
            let gone = match wake.as_mut() {
                Some(subscription) => tokio::select! {
                    () = tx.closed() => true,
                    _ = subscription.next() => false,
                    () = tick => false,
                },
                None => tokio::select! {
                    () = tx.closed() => true,
                    () = tick => false,
                },
            };
            if gone {
                return on_gone(state, session_id).await;
            }
        }
    });
    rx
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
