//! Session threads on the worker (ADR 0022 §4, §5): the thread tools the primary
//! thread's agent is armed with (`tools.rs`), the plan of a dispatch — which call spawns
//! or messages which child, which is refused (`plan.rs`) — the reply a child owes its
//! parent (`reply.rs`), and the handoffs that commit a dispatch, a reply or the closing
//! of a parent's waits (`handoffs.rs`, shared by `run/threads.rs` and
//! `consumer.rs::exhaust`). The IO is in `run/threads.rs`.

mod handoffs;
mod plan;
mod reply;
mod tools;

pub use agentd_schema::events::THREAD_CALL_KEY;
pub use handoffs::{Replying, close_awaiting, dispatch_handoff, reply_handoff};
pub use plan::{Child, Dispatch, MAX_CHILD_THREADS, Planned, plan};
pub use reply::{Owed, owed_reply, reply_text};
pub use tools::{
    Armed, CONSULT_ADVISOR, MESSAGE_THREAD, Roster, RosterAgent, SELF, SPAWN_THREAD, TOOL_TYPE, ThreadTool,
    advisor_model, arm, class, specs,
};

use agentd_schema::{Store, StoreError, ThreadQuery};
use serde_json::Value;

/// Thread rows a session's waits are read from (a session has at most a few dozen).
const ROWS: i64 = 1_000;

/// The primary's dispatched calls still waiting for a child's reply. The rows say which
/// (a reply releases its wait in the transaction that answers the call), never history
/// read earlier, so a reply committed meanwhile is not answered twice.
pub async fn open_waits(store: &dyn Store, session_id: &str) -> Result<Vec<Waiting>, StoreError> {
    let query = ThreadQuery { limit: ROWS, ..ThreadQuery::default() };
    let rows = store.list_threads(session_id, &query).await?;
    Ok(rows.into_iter().filter_map(|row| Some(Waiting { call_id: row.awaited_by?, thread_id: row.id })).collect())
}

/// A thread tool call of the primary thread that is not dispatched yet.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadCall {
    /// The id of its `agent.tool_use` event (the child thread's id and the dispatch's
    /// event ids derive from it).
    pub id: String,
    /// `spawn_thread` or `message_thread`.
    pub tool: ThreadTool,
    /// The model's input.
    pub input: Value,
}

/// A dispatched thread call waiting for its child's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// The id of its `agent.tool_use` event.
    pub call_id: String,
    /// The child thread it went to.
    pub thread_id: String,
}

/// What a thread message is to the call it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRole {
    /// The parent's message to the child (input of the child's turn).
    Request,
    /// The child's answer (the call's result is committed with it).
    Reply,
}

/// The call a thread message belongs to (its `_thread_call`) and its role.
pub fn thread_call(body: &Value) -> Option<(&str, CallRole)> {
    let marker = &body[THREAD_CALL_KEY];
    let role = match marker["role"].as_str()? {
        "request" => CallRole::Request,
        "reply" => CallRole::Reply,
        _ => return None,
    };
    Some((marker["tool_use_id"].as_str()?, role))
}
