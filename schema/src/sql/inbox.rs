//! The live inbox of a session (`/v1/ext/sessions/{id}/live-inbox`). Every change locks
//! the session row first (bumping `inbox_version`), then checks that a run is live, so
//! a change and the worker taking the inbox into a commit never interleave.

use sqlx::{Any, Row, Transaction};

use super::{SqlStore, json};
use crate::error::{StoreError, StoreResult};
use crate::ids::new_id;
use crate::store::{InboxChange, InboxMessage, InboxSnapshot, NewEvent};

fn message(row: &sqlx::any::AnyRow) -> StoreResult<InboxMessage> {
    Ok(InboxMessage {
        id: row.try_get("id")?,
        content: json(row, "content")?,
        created_at_ms: row.try_get("created_at_ms")?,
    })
}

async fn messages(tx: &mut Transaction<'_, Any>, session_id: &str) -> StoreResult<Vec<InboxMessage>> {
    let rows =
        sqlx::query("SELECT id, content, created_at_ms FROM live_inbox WHERE session_id = $1 ORDER BY position, id")
            .bind(session_id)
            .fetch_all(&mut **tx)
            .await?;
    rows.iter().map(message).collect()
}

async fn live(tx: &mut Transaction<'_, Any>, session_id: &str) -> StoreResult<bool> {
    let row = sqlx::query("SELECT id FROM runs WHERE thread_id = $1 AND status = 'leased' LIMIT 1")
        .bind(session_id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.is_some())
}

pub(super) async fn snapshot(store: &SqlStore, session_id: &str) -> StoreResult<InboxSnapshot> {
    let mut tx = store.pool.begin().await?;
    let row = sqlx::query("SELECT inbox_version FROM sessions WHERE id = $1")
        .bind(session_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound { what: "session", id: session_id.to_owned() })?;
    let version = row.try_get("inbox_version")?;
    let snapshot = InboxSnapshot {
        active: live(&mut tx, session_id).await?,
        version,
        messages: messages(&mut tx, session_id).await?,
    };
    tx.commit().await?;
    Ok(snapshot)
}

/// Applies `change` when a run is live; `Ok(Err(why))` when it does not apply.
pub(super) async fn change(
    store: &SqlStore,
    session_id: &str,
    change: InboxChange,
) -> StoreResult<Result<InboxSnapshot, crate::store::InboxRefusal>> {
    use crate::store::InboxRefusal;
    let now = store.now();
    let mut tx = store.pool.begin().await?;
    let row =
        sqlx::query("UPDATE sessions SET inbox_version = inbox_version + 1 WHERE id = $1 RETURNING inbox_version")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| StoreError::NotFound { what: "session", id: session_id.to_owned() })?;
    let version: i64 = row.try_get("inbox_version")?;
    if !live(&mut tx, session_id).await? {
        tx.rollback().await?;
        return Ok(Err(InboxRefusal::NoLiveRun));
    }
    let current = messages(&mut tx, session_id).await?;
    let known = |id: &str| current.iter().any(|m| m.id == id);
    match change {
        InboxChange::Enqueue { content } => {
            sqlx::query(
                "INSERT INTO live_inbox (id, session_id, position, content, created_at_ms) \
                 VALUES ($1, $2, (SELECT COALESCE(MAX(position), 0) + 1 FROM live_inbox WHERE session_id = $2), $3, $4)",
            )
            .bind(new_id("inbox"))
            .bind(session_id)
            .bind(content.to_string())
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        InboxChange::Reorder { expected_version, order } => {
            let mut sorted: Vec<&str> = order.iter().map(String::as_str).collect();
            sorted.sort_unstable();
            let mut ids: Vec<&str> = current.iter().map(|m| m.id.as_str()).collect();
            ids.sort_unstable();
            if expected_version != version - 1 {
                tx.rollback().await?;
                return Ok(Err(InboxRefusal::StaleVersion { current: version - 1 }));
            }
            if sorted != ids {
                tx.rollback().await?;
                return Ok(Err(InboxRefusal::NotAPermutation));
            }
            for (position, id) in order.iter().enumerate() {
                sqlx::query("UPDATE live_inbox SET position = $1 WHERE id = $2")
                    .bind(position as i64 + 1)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        InboxChange::Replace { id, content } => {
            if !known(&id) {
                tx.rollback().await?;
                return Ok(Err(InboxRefusal::UnknownMessage));
            }
            sqlx::query("UPDATE live_inbox SET content = $1 WHERE id = $2")
                .bind(content.to_string())
                .bind(&id)
                .execute(&mut *tx)
                .await?;
        }
        InboxChange::Withdraw { id } => {
            if !known(&id) {
                tx.rollback().await?;
                return Ok(Err(InboxRefusal::UnknownMessage));
            }
            sqlx::query("DELETE FROM live_inbox WHERE id = $1").bind(&id).execute(&mut *tx).await?;
        }
    }
    let snapshot = InboxSnapshot { active: true, version, messages: messages(&mut tx, session_id).await? };
    tx.commit().await?;
    Ok(Ok(snapshot))
}

/// Inside a commit's transaction: takes the session's inbox (oldest position first) as
/// `user.message` events to commit ahead of `events`. Locks the session row first.
pub(super) async fn take(
    tx: &mut Transaction<'_, Any>,
    session_id: &str,
    thread_id: &str,
) -> StoreResult<Vec<NewEvent>> {
    sqlx::query("UPDATE sessions SET inbox_version = inbox_version + 1 WHERE id = $1")
        .bind(session_id)
        .execute(&mut **tx)
        .await?;
    let taken = messages(tx, session_id).await?;
    if taken.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query("DELETE FROM live_inbox WHERE session_id = $1").bind(session_id).execute(&mut **tx).await?;
    Ok(taken
        .into_iter()
        .map(|m| NewEvent::user_message_content(thread_id, m.content).with_id(m.id.replacen("inbox_", "sevt_", 1)))
        .collect())
}

/// Whether a session has inbox messages waiting.
pub(super) async fn pending(store: &SqlStore, session_id: &str) -> StoreResult<bool> {
    let row = sqlx::query("SELECT id FROM live_inbox WHERE session_id = $1 LIMIT 1")
        .bind(session_id)
        .fetch_optional(&store.pool)
        .await?;
    Ok(row.is_some())
}
