//! Sessions and their committed event history.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;
use crate::store::ResourceState;

/// A session read for admitting a turn ([`SessionStore::get_session_for_turn`]): the
/// session, and the state of the agent and the environment its row names, read with it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionForTurn {
    /// The session, as [`SessionStore::get_session`] reads it.
    pub session: Session,
    /// The agent id the row names (its `agent_id`) and that agent's state; `None` as the
    /// state: the workspace has no such agent. `None`: the row names no agent.
    pub agent: Option<(String, Option<ResourceState>)>,
    /// Likewise the environment the session was created in.
    pub environment: Option<(String, Option<ResourceState>)>,
}

/// A session row; the wire body holds everything not queried or fenced.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// `sesn_…`; also the id of the session's primary thread.
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// `idle`, `running`, `rescheduling`, `terminated`.
    pub status: String,
    /// The wire body (agent snapshot, metadata, …). Every read of one session holds
    /// the `agent`; [`SessionStore::list_sessions`] leaves it out (see `agent_snapshot_id`).
    pub body: Value,
    /// The agent the session was created from, for list filters.
    pub agent_id: Option<String>,
    /// That agent's version.
    pub agent_version: Option<i64>,
    /// Cumulative token usage, a projection of committed `span.model_request_end` events.
    pub usage: Value,
    /// The next event sequence number.
    pub next_seq: i64,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Last update, epoch ms.
    pub updated_at_ms: i64,
    /// Set once archived.
    pub archived_at_ms: Option<i64>,
    /// Time spent in `running` up to the last status change, ms.
    pub active_ms: i64,
    /// When the current `running` stretch began; `None` unless running.
    pub running_since_ms: Option<i64>,
    /// Changes to the live inbox so far (0: never used, nothing to take).
    pub inbox_version: i64,
    /// Revision of the session's resources (1 at creation, bumped by every change).
    pub resources_revision: i64,
    /// The stored agent snapshot the body's `agent` is (shared by every session of the
    /// same agent configuration; `None` for a body without an agent).
    pub agent_snapshot_id: Option<String>,
    /// How many child threads the session has (ADR 0022). While 0 the session's status
    /// is its primary thread's; after, the aggregate of its threads'.
    pub child_threads: i64,
}

impl Session {
    /// Cumulative seconds spent in `running`, including a stretch still under way.
    pub fn active_seconds(&self, now_ms: i64) -> f64 {
        let ongoing = self.running_since_ms.map_or(0, |since| (now_ms - since).max(0));
        (self.active_ms + ongoing) as f64 / 1000.0
    }
}

/// A session to create.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// `sesn_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Initial status.
    pub status: String,
    /// The wire body.
    pub body: Value,
    /// The agent it was created from.
    pub agent_id: Option<String>,
    /// That agent's version.
    pub agent_version: Option<i64>,
}

/// A page request over sessions.
#[derive(Debug, Clone, Default)]
pub struct SessionQuery {
    /// Only these statuses (any when empty).
    pub statuses: Vec<String>,
    /// Only sessions of this agent.
    pub agent_id: Option<String>,
    /// Only this version of `agent_id`.
    pub agent_version: Option<i64>,
    /// Only sessions with this memory store among their resources.
    pub memory_store_id: Option<String>,
    /// Only sessions created by runs of this deployment.
    pub deployment_id: Option<String>,
    /// Creation time bounds, epoch ms: `(gt, gte, lt, lte)`.
    pub created: TimeBounds,
    /// Include archived sessions.
    pub include_archived: bool,
    /// Return ids strictly after this one in the listing order.
    pub after_id: Option<String>,
    /// Return ids strictly before this one in the listing order (the page is still
    /// returned in listing order).
    pub before_id: Option<String>,
    /// At most this many rows.
    pub limit: i64,
    /// Newest first when true.
    pub descending: bool,
}

/// Exclusive and inclusive bounds on a time column, epoch ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeBounds {
    /// Strictly after.
    pub gt: Option<i64>,
    /// At or after.
    pub gte: Option<i64>,
    /// Strictly before.
    pub lt: Option<i64>,
    /// At or before.
    pub lte: Option<i64>,
}

/// A page request over a session's events.
#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    /// Only events of this thread.
    pub thread_id: Option<String>,
    /// Only these types (any when empty).
    pub types: Vec<String>,
    /// `processed_at` bounds.
    pub processed: TimeBounds,
    /// Events with `seq` strictly past this one in the listing order.
    pub after_seq: Option<i64>,
    /// At most this many rows.
    pub limit: i64,
    /// Newest first when true.
    pub descending: bool,
    /// The session-level view of a session with child threads: the primary's events
    /// and the child events of `events::CROSS_POSTED` only (ADR 0022 §6).
    pub primary_view: bool,
}

/// An event to append to a session's history.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// `sevt_…`; unique across all sessions. Deterministic ids make replays idempotent.
    pub event_id: String,
    /// The thread it belongs to (a session id for the primary thread).
    pub thread_id: String,
    /// The event type, e.g. `user.message`.
    pub kind: String,
    /// The wire body.
    pub body: Value,
}

impl NewEvent {
    /// An event on `thread_id` with a fresh id, its type taken from `body["type"]`.
    pub fn new(thread_id: &str, body: Value) -> Self {
        Self {
            event_id: crate::ids::new_id("sevt"),
            thread_id: thread_id.to_owned(),
            kind: body["type"].as_str().unwrap_or_default().to_owned(),
            body,
        }
    }

    /// A `user.message` with one text block.
    pub fn user_message(thread_id: &str, text: &str) -> Self {
        Self::new(
            thread_id,
            serde_json::json!({ "type": "user.message", "content": [{ "type": "text", "text": text }] }),
        )
    }
}

/// A committed event.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// The session.
    pub session_id: String,
    /// Position in the session's history, from 1, gap-free.
    pub seq: i64,
    /// `sevt_…`
    pub event_id: String,
    /// The thread.
    pub thread_id: String,
    /// The event type.
    pub kind: String,
    /// The wire body.
    pub body: Value,
    /// Commit time, epoch ms.
    pub processed_at_ms: i64,
}

/// The memory stores among a session's resources (`body["resources"]`, entries of type
/// `memory_store`), each once: what `session_memory_stores` holds for the session.
pub fn memory_store_ids(body: &Value) -> Vec<&str> {
    let mut ids: Vec<&str> = body["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|resource| resource["type"] == "memory_store")
        .filter_map(|resource| resource["memory_store_id"].as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// A change to a session's resources (see [`SessionStore::replace_session_resources`]).
#[derive(Debug, Clone)]
pub struct ResourcesReplacement {
    /// Owning workspace.
    pub workspace_id: String,
    /// The session.
    pub session_id: String,
    /// The resources revision the new body was computed from; `None` replaces
    /// unconditionally.
    pub expected_revision: Option<i64>,
    /// The new wire body.
    pub body: Value,
    /// Events to commit with it (e.g. `session.updated`).
    pub events: Vec<NewEvent>,
}

/// Sessions and their event history.
///
/// Durability: every method that returns `Ok` has committed. Ordering: a session's
/// events are numbered by the database (`seq` from 1, gap-free, in commit order); every
/// append locks the session row first (lock order: session, then run), so appends to
/// one session serialize. Projections kept by the appending transaction itself: the
/// session's `status` and running time (from `session.status_*` on the primary thread;
/// with child threads, from its threads' rows — `running` while any non-archived one
/// runs, `idle` only when every one is, time with overlaps counted once: ADR 0022 §7),
/// its `usage` (from `span.model_request_end`, the outcome grader's spans, web tool
/// results and an `agent.tool_result`'s `_model_usage`; a span's `_model` also counts
/// under `usage._models`), each thread's status, usage and clock once it has child
/// threads ([`SessionThreadStore`](super::SessionThreadStore)) and the tool-call
/// ledger ([`ToolCallStore`](super::ToolCallStore)). A session's `agent` is stored once per
/// distinct configuration (`agent_snapshots`) and put back into single-session reads.
/// The memory stores among its resources ([`memory_store_ids`]) are indexed for
/// [`SessionQuery::memory_store_id`] by the transaction that writes the resources: its
/// creation, [`SessionStore::replace_session_resources`] and its deletion.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Creates a session (its primary thread shares its id) and indexes its memory
    /// stores. A taken id is a `Conflict`.
    async fn create_session(&self, new: NewSession) -> StoreResult<Session>;

    /// Reads a session of a workspace.
    async fn get_session(&self, workspace_id: &str, id: &str) -> StoreResult<Option<Session>>;

    /// Reads a session of a workspace with the state of its agent and environment, in
    /// one read: what admitting a turn checks.
    async fn get_session_for_turn(&self, workspace_id: &str, id: &str) -> StoreResult<Option<SessionForTurn>>;

    /// Reads a session by id alone, for workers (which hold a claim, not a workspace).
    async fn load_session(&self, id: &str) -> StoreResult<Option<Session>>;

    /// Appends events outside any run (e.g. `session.updated`) in one transaction and
    /// one multi-row insert; sequence numbers are allocated by the database.
    /// Idempotent per event id: a repeated id is a `Conflict` and nothing of the batch
    /// is written. `NotFound` if the session does not exist.
    async fn append_events(&self, session_id: &str, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>>;

    /// Events of a session with `seq > after_seq`, ascending, at most `limit`.
    async fn list_events(&self, session_id: &str, after_seq: i64, limit: i64) -> StoreResult<Vec<StoredEvent>>;

    /// The sequence number of one event of a session: where a stream resumed with
    /// `Last-Event-ID` goes on from. `None` when the session has no such event.
    async fn event_seq(&self, session_id: &str, event_id: &str) -> StoreResult<Option<i64>>;

    /// Events of a session filtered and paged as `query` says.
    async fn query_events(&self, session_id: &str, query: &EventQuery) -> StoreResult<Vec<StoredEvent>>;

    /// Replaces a session's wire body and commits `events` (e.g. `session.updated`) in
    /// one transaction. A body without an `agent` keeps the session's snapshot.
    async fn update_session(
        &self,
        workspace_id: &str,
        id: &str,
        body: Value,
        events: Vec<NewEvent>,
    ) -> StoreResult<(Session, Vec<StoredEvent>)>;

    /// Replaces the body after a change to the session's resources (bumping their
    /// revision) when `expected_revision` is the current revision or `None`;
    /// `Ok(Err(current))` (nothing written) when the precondition fails. The events and
    /// the index of its memory stores are written in the same transaction.
    async fn replace_session_resources(
        &self,
        change: ResourcesReplacement,
    ) -> StoreResult<Result<(Session, Vec<StoredEvent>), i64>>;

    /// Lists sessions of a workspace. The bodies come **without** their `agent`: a page
    /// of sessions of one large agent would otherwise hold a copy per session. Load it
    /// once per distinct `agent_snapshot_id` with [`SessionStore::agent_snapshot`].
    async fn list_sessions(&self, workspace_id: &str, query: &SessionQuery) -> StoreResult<Vec<Session>>;

    /// A stored agent snapshot (immutable: a changed agent is a new snapshot).
    async fn agent_snapshot(&self, id: &str) -> StoreResult<Option<Value>>;

    /// Marks a session archived (idempotent; keeps the first archive time).
    async fn archive_session(&self, workspace_id: &str, id: &str) -> StoreResult<Session>;

    /// Deletes a session with its threads, events, tool calls, runs and memory-store
    /// index rows; `false` if it did not exist.
    async fn delete_session(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;
}
