//! The live inbox of a session (`/v1/ext/sessions/{id}/live-inbox`).

use async_trait::async_trait;
use serde_json::Value;

use super::runs::Claim;
use super::sessions::{NewEvent, StoredEvent};
use crate::error::StoreResult;

/// A message waiting in a session's live inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxMessage {
    /// `inbox_…`; the committed `user.message` takes the matching `sevt_…` id.
    pub id: String,
    /// Content blocks.
    pub content: Value,
    /// Enqueued at, epoch ms.
    pub created_at_ms: i64,
}

/// A session's live inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxSnapshot {
    /// A run of the session is live (leased).
    pub active: bool,
    /// Changes so far; reorders name the version they were computed from.
    pub version: i64,
    /// In delivery order.
    pub messages: Vec<InboxMessage>,
}

/// A change to a live inbox.
#[derive(Debug, Clone, PartialEq)]
pub enum InboxChange {
    /// Append a message.
    Enqueue {
        /// Content blocks.
        content: Value,
    },
    /// Reorder: `order` must be an exact permutation of the current ids, computed from
    /// `expected_version`.
    Reorder {
        /// The version the order was computed from.
        expected_version: i64,
        /// Every current id, in the new order.
        order: Vec<String>,
    },
    /// Replace one message's content.
    Replace {
        /// The message.
        id: String,
        /// New content.
        content: Value,
    },
    /// Withdraw one message.
    Withdraw {
        /// The message.
        id: String,
    },
}

/// Why an inbox change did not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboxRefusal {
    /// No run of the session is live.
    NoLiveRun,
    /// The reorder was computed from another version.
    StaleVersion {
        /// The version now.
        current: i64,
    },
    /// The reorder is not an exact permutation of the current messages.
    NotAPermutation,
    /// No such message in the inbox.
    UnknownMessage,
}

/// The live inbox: messages for the run that is live, taken into its next fenced
/// commit. Every change locks the session row first (bumping `inbox_version`), then
/// checks that a run is live, so a change and the worker taking the inbox never
/// interleave; a message is committed exactly once or stays in the inbox.
#[async_trait]
pub trait InboxStore: Send + Sync {
    /// A session's live inbox. `NotFound` if the session does not exist.
    async fn inbox(&self, session_id: &str) -> StoreResult<InboxSnapshot>;

    /// Changes a session's live inbox while one of its runs is live; `Ok(Err(why))`
    /// (nothing written) when the change does not apply.
    async fn change_inbox(
        &self,
        session_id: &str,
        change: InboxChange,
    ) -> StoreResult<Result<InboxSnapshot, InboxRefusal>>;

    /// Whether the session's live inbox holds messages.
    async fn inbox_pending(&self, session_id: &str) -> StoreResult<bool>;

    /// Like [`RunStore::commit`](super::RunStore::commit), committing the session's
    /// live inbox (as `user.message` events, in order, ids derived from the messages')
    /// ahead of `events`, in the same fenced transaction. `Fenced`: nothing was taken.
    async fn commit_with_inbox(&self, claim: &Claim, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>>;
}
