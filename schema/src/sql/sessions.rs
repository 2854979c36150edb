//! Sessions and their committed event history.

use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::{SqlStore, json};
use crate::error::{StoreError, StoreResult};
use crate::store::{NewEvent, NewSession, Session, StoredEvent};

const SESSION_COLUMNS: &str = "id, workspace_id, status, body, next_seq, created_at_ms, updated_at_ms, archived_at_ms";
const EVENT_COLUMNS: &str = "session_id, seq, event_id, thread_id, type, body, processed_at_ms";

fn session(row: &AnyRow) -> StoreResult<Session> {
    Ok(Session {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        status: row.try_get("status")?,
        body: json(row, "body")?,
        next_seq: row.try_get("next_seq")?,
        created_at_ms: row.try_get("created_at_ms")?,
        updated_at_ms: row.try_get("updated_at_ms")?,
        archived_at_ms: row.try_get("archived_at_ms")?,
    })
}

fn event(row: &AnyRow) -> StoreResult<StoredEvent> {
    Ok(StoredEvent {
        session_id: row.try_get("session_id")?,
        seq: row.try_get("seq")?,
        event_id: row.try_get("event_id")?,
        thread_id: row.try_get("thread_id")?,
        kind: row.try_get("type")?,
        body: json(row, "body")?,
        processed_at_ms: row.try_get("processed_at_ms")?,
    })
}

pub(super) async fn create(store: &SqlStore, new: NewSession) -> StoreResult<Session> {
    let now = store.now();
    let mut tx = store.pool.begin().await?;
    let row = sqlx::query(&format!(
        "INSERT INTO sessions (id, workspace_id, status, body, next_seq, created_at_ms, updated_at_ms) \
         VALUES ($1, $2, $3, $4, 1, $5, $5) RETURNING {SESSION_COLUMNS}"
    ))
    .bind(&new.id)
    .bind(&new.workspace_id)
    .bind(&new.status)
    .bind(new.body.to_string())
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    // The primary thread shares the session's id, so `{thread}` may name either.
    sqlx::query(
        "INSERT INTO session_threads (id, session_id, parent_id, body, created_at_ms) VALUES ($1, $1, NULL, '{}', $2)",
    )
    .bind(&new.id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    session(&row)
}

pub(super) async fn get(store: &SqlStore, workspace_id: &str, id: &str) -> StoreResult<Option<Session>> {
    let row = sqlx::query(&format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1 AND workspace_id = $2"))
        .bind(id)
        .bind(workspace_id)
        .fetch_optional(&store.pool)
        .await?;
    row.as_ref().map(session).transpose()
}

/// Appends `events` inside the caller's transaction, numbering them from the session's
/// counter. Must be the transaction's first write to the session row (lock order:
/// session, then run; see `queries/allocate_seq.sql`).
pub(super) async fn append(
    tx: &mut Transaction<'_, Any>,
    session_id: &str,
    events: Vec<NewEvent>,
    now: i64,
) -> StoreResult<Vec<StoredEvent>> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let count = events.len() as i64;
    let next: Option<i64> = sqlx::query(include_str!("../../queries/allocate_seq.sql"))
        .bind(session_id)
        .bind(count)
        .bind(now)
        .fetch_optional(&mut **tx)
        .await?
        .map(|row| row.try_get("next_seq"))
        .transpose()?;
    let Some(next) = next else {
        return Err(StoreError::NotFound { what: "session", id: session_id.to_owned() });
    };
    let mut stored = Vec::with_capacity(events.len());
    for (offset, new) in events.into_iter().enumerate() {
        let seq = next - count + offset as i64;
        sqlx::query(
            "INSERT INTO session_events (session_id, seq, event_id, thread_id, type, body, processed_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(session_id)
        .bind(seq)
        .bind(&new.event_id)
        .bind(&new.thread_id)
        .bind(&new.kind)
        .bind(new.body.to_string())
        .bind(now)
        .execute(&mut **tx)
        .await?;
        stored.push(StoredEvent {
            session_id: session_id.to_owned(),
            seq,
            event_id: new.event_id,
            thread_id: new.thread_id,
            kind: new.kind,
            body: new.body,
            processed_at_ms: now,
        });
    }
    Ok(stored)
}

pub(super) async fn list_events(
    store: &SqlStore,
    session_id: &str,
    after_seq: i64,
    limit: i64,
) -> StoreResult<Vec<StoredEvent>> {
    let rows = sqlx::query(&format!(
        "SELECT {EVENT_COLUMNS} FROM session_events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
    ))
    .bind(session_id)
    .bind(after_seq)
    .bind(limit.max(0))
    .fetch_all(&store.pool)
    .await?;
    rows.iter().map(event).collect()
}
