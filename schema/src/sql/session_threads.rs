//! Session threads (ADR 0022): the rows of a session's primary and child threads, their
//! projections kept by the appending transaction once the session has child threads
//! (status, stop reason, usage and running clock per thread, and the session's status
//! as their aggregate), and the row changes of `RunStore::handoff` (spawn, await,
//! release, archive), each a conditional statement under `queries/session_threads/`.
//!
//! While a session has no child threads none of this runs: its status is kept by
//! `allocate_seq.sql` alone, and reads of its primary's row take the session's
//! projections (`select_threads.sql`), so single-agent turns pay no statement for it.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::FromRow;

use super::{JsonText, SqlStore, Tx, usage};
use crate::error::{StoreError, StoreResult};
use crate::store::{SessionThread, SessionThreadStore, StoredEvent, ThreadQuery};

/// A row of `select_threads.sql`.
#[derive(Debug, FromRow)]
struct ThreadRow {
    id: String,
    session_id: String,
    parent_id: Option<String>,
    status: String,
    stop_reason: Option<String>,
    agent_name: Option<String>,
    awaited_by: Option<String>,
    #[sqlx(try_from = "String")]
    usage: JsonText,
    active_ms: i64,
    running_since_ms: Option<i64>,
    created_at_ms: i64,
    updated_at_ms: i64,
    archived_at_ms: Option<i64>,
    agent: Option<String>,
}

impl TryFrom<ThreadRow> for SessionThread {
    type Error = StoreError;

    fn try_from(row: ThreadRow) -> StoreResult<SessionThread> {
        let json = |text: Option<String>| text.map(|text| JsonText::try_from(text).map(|json| json.0)).transpose();
        Ok(SessionThread {
            id: row.id,
            session_id: row.session_id,
            parent_id: row.parent_id,
            status: row.status,
            stop_reason: json(row.stop_reason)?,
            agent_name: row.agent_name,
            agent: json(row.agent)?,
            awaited_by: row.awaited_by,
            usage: row.usage.0,
            active_ms: row.active_ms,
            running_since_ms: row.running_since_ms,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
            archived_at_ms: row.archived_at_ms,
        })
    }
}

/// What `add_child_threads.sql` returns: the count after, and the session's
/// projections the first spawn copies into the primary's row.
#[derive(Debug, FromRow)]
struct Counted {
    child_threads: i64,
    status: String,
    usage: String,
    active_ms: i64,
    running_since_ms: Option<i64>,
}

/// The status a committed event moves its thread to, if any: the primary's from
/// `session.status_*`, a child's from `session.thread_status_*` (ADR 0022 §7).
pub(super) fn status_of(kind: &str, primary: bool) -> Option<&'static str> {
    let status =
        if primary { kind.strip_prefix("session.status_") } else { kind.strip_prefix("session.thread_status_") };
    match status? {
        "running" => Some("running"),
        "idle" => Some("idle"),
        "rescheduled" => Some("rescheduling"),
        "terminated" => Some("terminated"),
        _ => None,
    }
}

/// What one append changes on one thread's row.
#[derive(Debug, Default)]
struct ThreadChange<'a> {
    /// The thread's last status event of the append: its status and the event.
    status: Option<(&'static str, &'a StoredEvent)>,
    /// The usage events of the append on the thread.
    spent: Vec<&'a StoredEvent>,
}

/// Keeps the rows of a session with child threads in step with an append (inside the
/// appending transaction, which holds the session row): each thread whose status
/// changed or that spent usage gets one `update_thread.sql`, and when a status changed
/// the session's status is projected from the rows (`project_session_status.sql`);
/// returns that status when the append changed it.
pub(super) async fn project(
    tx: &mut Tx,
    session_id: &str,
    stored: &[StoredEvent],
    now: i64,
) -> StoreResult<Option<String>> {
    let mut changes: BTreeMap<&str, ThreadChange<'_>> = BTreeMap::new();
    for event in stored {
        let primary = event.thread_id == session_id;
        if let Some(status) = status_of(&event.kind, primary) {
            changes.entry(&event.thread_id).or_default().status = Some((status, event));
        }
        if usage::spends(&event.kind, &event.body) {
            changes.entry(&event.thread_id).or_default().spent.push(event);
        }
    }
    if changes.is_empty() {
        return Ok(None);
    }
    let mut usages = BTreeMap::new();
    if changes.values().any(|change| !change.spent.is_empty()) {
        let rows: Vec<(String, String)> =
            sqlx::query_as(include_str!("../../queries/session_threads/select_thread_usage.sql"))
                .bind(session_id)
                .fetch_all(&mut *tx)
                .await?;
        usages = rows.into_iter().collect();
    }
    let mut status_changed = false;
    for (thread_id, change) in &changes {
        let usage = match (change.spent.is_empty(), usages.remove(*thread_id)) {
            (false, Some(text)) => {
                let mut total = JsonText::try_from(text)?.0;
                for event in &change.spent {
                    usage::add_event(&mut total, &event.kind, &event.body);
                }
                Some(total.to_string())
            }
            _ => None,
        };
        let stop_reason = change
            .status
            .and_then(|(_, event)| event.body.get("stop_reason"))
            .filter(|reason| !reason.is_null())
            .map(Value::to_string);
        status_changed |= change.status.is_some();
        sqlx::query(include_str!("../../queries/session_threads/update_thread.sql"))
            .bind(session_id)
            .bind(*thread_id)
            .bind(change.status.map(|(status, _)| status))
            .bind(stop_reason)
            .bind(usage)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    }
    if !status_changed {
        return Ok(None);
    }
    project_session(tx, session_id, now).await
}

/// Projects the session's status and running clock from its threads' rows.
pub(super) async fn project_session(tx: &mut Tx, session_id: &str, now: i64) -> StoreResult<Option<String>> {
    let before: Option<(String,)> =
        sqlx::query_as(include_str!("../../queries/session_threads/select_session_status.sql"))
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await?;
    let after: Option<(String,)> =
        sqlx::query_as(include_str!("../../queries/session_threads/project_session_status.sql"))
            .bind(session_id)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
    Ok(after.map(|(after,)| after).filter(|after| before.as_ref().is_none_or(|(before,)| before != after)))
}

/// Counts `count` new child threads of the session, locking its row (the spawning
/// handoff's first write); at its first spawn brings the primary's row in step with
/// the session. `NotFound` if there is no such session.
pub(super) async fn count_spawned(tx: &mut Tx, session_id: &str, count: i64, now: i64) -> StoreResult<()> {
    let counted: Option<Counted> = sqlx::query_as(include_str!("../../queries/session_threads/add_child_threads.sql"))
        .bind(session_id)
        .bind(count)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(counted) = counted else {
        return Err(StoreError::NotFound { what: "session", id: session_id.to_owned() });
    };
    if counted.child_threads == count {
        sqlx::query(include_str!("../../queries/session_threads/copy_primary_thread.sql"))
            .bind(session_id)
            .bind(&counted.status)
            .bind(&counted.usage)
            .bind(counted.active_ms)
            .bind(counted.running_since_ms)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Inserts a child thread, `running` from now. A taken id is a `Conflict`.
pub(super) async fn insert(
    tx: &mut Tx,
    session_id: &str,
    thread: &crate::store::NewThread,
    snapshot_id: &str,
    now: i64,
) -> StoreResult<()> {
    sqlx::query(include_str!("../../queries/session_threads/insert_thread.sql"))
        .bind(&thread.id)
        .bind(session_id)
        .bind(&thread.parent_id)
        .bind(snapshot_id)
        .bind(&thread.agent_name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// A conditional change of one thread's row (`await_thread.sql`, `release_thread.sql`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Condition {
    /// The call awaits the thread: a child, not archived, not awaited.
    Await,
    /// The call no longer awaits the thread: only while it is what the thread awaits.
    Release,
}

/// Applies `condition` to `thread` for the call `tool_use_id`; `Conflict` when it
/// matches no row (the caller rolls back: nothing of the handoff is written).
pub(super) async fn apply(
    tx: &mut Tx,
    session_id: &str,
    condition: Condition,
    (thread_id, tool_use_id): (&str, &str),
    now: i64,
) -> StoreResult<()> {
    let (sql, refusal) = match condition {
        Condition::Await => (
            include_str!("../../queries/session_threads/await_thread.sql"),
            "is not a child thread that may be awaited (archived, awaited already, or unknown)",
        ),
        Condition::Release => {
            (include_str!("../../queries/session_threads/release_thread.sql"), "is not awaited by that call")
        }
    };
    let row =
        sqlx::query(sql).bind(session_id).bind(thread_id).bind(tool_use_id).bind(now).fetch_optional(&mut *tx).await?;
    if row.is_none() {
        return Err(StoreError::Conflict(format!(
            "thread {thread_id} of session {session_id} {refusal} ({tool_use_id})"
        )));
    }
    Ok(())
}

/// Archives a child thread; `Conflict` when it is not a child of the session that is
/// not archived yet.
pub(super) async fn archive(tx: &mut Tx, session_id: &str, thread_id: &str, now: i64) -> StoreResult<()> {
    let row = sqlx::query(include_str!("../../queries/session_threads/archive_thread.sql"))
        .bind(session_id)
        .bind(thread_id)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
    if row.is_none() {
        return Err(StoreError::Conflict(format!(
            "thread {thread_id} of session {session_id} is not a child thread that may be archived"
        )));
    }
    Ok(())
}

impl SqlStore {
    async fn select_threads(
        &self,
        session_id: &str,
        thread_id: Option<&str>,
        query: &ThreadQuery,
    ) -> StoreResult<Vec<SessionThread>> {
        let statuses: Vec<String> = (0..query.statuses.len()).map(|i| format!("${}", 5 + i)).collect();
        let statuses =
            if statuses.is_empty() { String::new() } else { format!("AND status IN ({})", statuses.join(", ")) };
        let sql = include_str!("../../queries/session_threads/select_threads.sql").replace("{statuses}", &statuses);
        let mut statement = sqlx::query_as::<_, ThreadRow>(&sql)
            .bind(session_id)
            .bind(thread_id)
            .bind(&query.after_id)
            .bind(query.limit.max(0));
        for status in &query.statuses {
            statement = statement.bind(status);
        }
        let rows = statement.fetch_all(&self.readers).await?;
        rows.into_iter().map(SessionThread::try_from).collect()
    }
}

#[async_trait]
impl SessionThreadStore for SqlStore {
    async fn list_threads(&self, session_id: &str, query: &ThreadQuery) -> StoreResult<Vec<SessionThread>> {
        self.select_threads(session_id, None, query).await
    }

    async fn get_thread(&self, session_id: &str, thread_id: &str) -> StoreResult<Option<SessionThread>> {
        let query = ThreadQuery { limit: 1, ..ThreadQuery::default() };
        Ok(self.select_threads(session_id, Some(thread_id), &query).await?.pop())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_primary_moves_on_session_statuses_and_a_child_on_thread_statuses() {
        assert_eq!(status_of("session.status_running", true), Some("running"));
        assert_eq!(status_of("session.status_rescheduled", true), Some("rescheduling"));
        assert_eq!(status_of("session.thread_status_idle", true), None);
        assert_eq!(status_of("session.thread_status_idle", false), Some("idle"));
        assert_eq!(status_of("session.thread_status_terminated", false), Some("terminated"));
        assert_eq!(status_of("session.status_idle", false), None);
        assert_eq!(status_of("session.thread_created", false), None);
    }
}
