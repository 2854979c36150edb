//! The rows `sql/sessions.rs` reads: sessions (with their agent snapshot, and with
//! their agent's and environment's state), events, and what a sequence allocation sees.

use serde_json::Value;
use sqlx::FromRow;

use crate::error::{StoreError, StoreResult};
use crate::sql::JsonText;
use crate::store::{ResourceState, Session, SessionForTurn, StoredEvent};

/// A `sessions` row as stored.
#[derive(Debug, FromRow)]
pub(super) struct SessionRow {
    pub(super) id: String,
    pub(super) workspace_id: String,
    pub(super) status: String,
    #[sqlx(try_from = "String")]
    pub(super) body: JsonText,
    pub(super) agent_id: Option<String>,
    pub(super) agent_version: Option<i64>,
    #[sqlx(try_from = "String")]
    pub(super) usage: JsonText,
    pub(super) next_seq: i64,
    pub(super) created_at_ms: i64,
    pub(super) updated_at_ms: i64,
    pub(super) archived_at_ms: Option<i64>,
    pub(super) active_ms: i64,
    pub(super) running_since_ms: Option<i64>,
    pub(super) inbox_version: i64,
    pub(super) resources_revision: i64,
    pub(super) agent_snapshot_id: Option<String>,
    pub(super) child_threads: i64,
}

impl From<SessionRow> for Session {
    fn from(row: SessionRow) -> Self {
        Session {
            id: row.id,
            workspace_id: row.workspace_id,
            status: row.status,
            body: row.body.0,
            agent_id: row.agent_id,
            agent_version: row.agent_version,
            usage: row.usage.0,
            next_seq: row.next_seq,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
            archived_at_ms: row.archived_at_ms,
            active_ms: row.active_ms,
            running_since_ms: row.running_since_ms,
            inbox_version: row.inbox_version,
            resources_revision: row.resources_revision,
            agent_snapshot_id: row.agent_snapshot_id,
            child_threads: row.child_threads,
        }
    }
}

/// A session read with its agent snapshot (`select_session.sql`).
#[derive(Debug, FromRow)]
pub(super) struct SessionWithAgentRow {
    #[sqlx(flatten)]
    pub(super) session: SessionRow,
    pub(super) agent_snapshot: Option<String>,
}

impl TryFrom<SessionWithAgentRow> for Session {
    type Error = StoreError;

    fn try_from(row: SessionWithAgentRow) -> StoreResult<Session> {
        let mut session = Session::from(row.session);
        if let Some(agent) = row.agent_snapshot {
            embed(&mut session.body, JsonText::try_from(agent)?.0);
        }
        Ok(session)
    }
}

/// A session read with the state of its agent and environment
/// (`select_session_for_turn.sql`).
#[derive(Debug, FromRow)]
pub(super) struct SessionForTurnRow {
    #[sqlx(flatten)]
    pub(super) session: SessionWithAgentRow,
    pub(super) environment_id: Option<String>,
    pub(super) agent_state_id: Option<String>,
    pub(super) agent_archived_at_ms: Option<i64>,
    pub(super) agent_disabled: Option<i64>,
    pub(super) environment_state_id: Option<String>,
    pub(super) environment_archived_at_ms: Option<i64>,
    pub(super) environment_disabled: Option<i64>,
}

impl TryFrom<SessionForTurnRow> for SessionForTurn {
    type Error = StoreError;

    fn try_from(row: SessionForTurnRow) -> StoreResult<SessionForTurn> {
        let state = |kind: &str, id: Option<String>, archived_at_ms: Option<i64>, disabled: Option<i64>| {
            id.map(|id| ResourceState { id, kind: kind.to_owned(), archived_at_ms, disabled: disabled == Some(1) })
        };
        let agent_state = state("agent", row.agent_state_id, row.agent_archived_at_ms, row.agent_disabled);
        let environment_state =
            state("environment", row.environment_state_id, row.environment_archived_at_ms, row.environment_disabled);
        let session = Session::try_from(row.session)?;
        Ok(SessionForTurn {
            agent: session.agent_id.clone().map(|id| (id, agent_state)),
            environment: row.environment_id.map(|id| (id, environment_state)),
            session,
        })
    }
}

/// A `session_events` row as stored.
#[derive(Debug, FromRow)]
pub(super) struct EventRow {
    pub(super) session_id: String,
    pub(super) seq: i64,
    pub(super) event_id: String,
    pub(super) thread_id: String,
    #[sqlx(rename = "type")]
    pub(super) kind: String,
    #[sqlx(try_from = "String")]
    pub(super) body: JsonText,
    pub(super) processed_at_ms: i64,
}

impl From<EventRow> for StoredEvent {
    fn from(row: EventRow) -> Self {
        StoredEvent {
            session_id: row.session_id,
            seq: row.seq,
            event_id: row.event_id,
            thread_id: row.thread_id,
            kind: row.kind,
            body: row.body.0,
            processed_at_ms: row.processed_at_ms,
        }
    }
}

/// What `allocate_seq.sql` returns: the counter after the allocation, the usage
/// projection (JSON text, as the allocation left it), whether the session has child threads, its status, and whether
/// the append starts a turn while an outcome waits for one.
#[derive(Debug, FromRow)]
pub(super) struct Allocated {
    pub(super) next_seq: i64,
    pub(super) usage: String,
    pub(super) capture_level: Option<String>,
    pub(super) captured_through_seq: i64,
    pub(super) workspace_id: String,
    pub(super) child_threads: i64,
    pub(super) status: String,
    pub(super) webhook_subscriptions: i64,
    pub(super) outcomes_pending: i64,
    pub(super) inbox_version: i64,
    /// Only the fenced allocation's (`allocate_seq_fenced.*.sql`): how many runs match the claim, 0 or 1.
    #[sqlx(default)]
    pub(super) fence_held: Option<i64>,
}

pub(super) fn embed(body: &mut Value, agent: Value) {
    if let Some(map) = body.as_object_mut() {
        map.insert("agent".into(), agent);
    }
}
