//! The live inbox of a session (`/v1/ext/sessions/{id}/live-inbox`). Every change locks
//! the session row first (bumping `inbox_version`), then checks that a run is live, so
//! a change and the worker taking the inbox into a commit never interleave.

use async_trait::async_trait;
use sqlx::FromRow;

use super::{JsonText, SqlStore, Tx, runs};
use crate::error::{StoreError, StoreResult};
use crate::ids::new_id;
use crate::store::{Claim, InboxChange, InboxMessage, InboxRefusal, InboxSnapshot, InboxStore, NewEvent, StoredEvent};

/// A `live_inbox` row as read (`queries/inbox/take.sql`).
#[derive(Debug, FromRow)]
struct MessageRow {
    id: String,
    #[sqlx(try_from = "String")]
    content: JsonText,
    created_at_ms: i64,
}

impl From<MessageRow> for InboxMessage {
    fn from(row: MessageRow) -> Self {
        InboxMessage { id: row.id, content: row.content.0, created_at_ms: row.created_at_ms }
    }
}

async fn messages(tx: &mut Tx, session_id: &str) -> StoreResult<Vec<InboxMessage>> {
    let rows: Vec<MessageRow> =
        sqlx::query_as(include_str!("../../queries/inbox/take.sql")).bind(session_id).fetch_all(&mut *tx).await?;
    Ok(rows.into_iter().map(InboxMessage::from).collect())
}

async fn live(tx: &mut Tx, session_id: &str) -> StoreResult<bool> {
    let row =
        sqlx::query(include_str!("../../queries/inbox/live_run.sql")).bind(session_id).fetch_optional(&mut *tx).await?;
    Ok(row.is_some())
}

/// Locks the session row by bumping its inbox version; returns the new version.
async fn bump(tx: &mut Tx, session_id: &str) -> StoreResult<i64> {
    let row: Option<(i64,)> = sqlx::query_as(include_str!("../../queries/inbox/bump_version.sql"))
        .bind(session_id)
        .fetch_optional(&mut *tx)
        .await?;
    row.map(|(version,)| version).ok_or_else(|| StoreError::NotFound { what: "session", id: session_id.to_owned() })
}

/// Inside a commit's transaction: takes the session's inbox (oldest position first) as
/// `user.message` events to commit ahead of the commit's own. Locks the session row first.
async fn take(tx: &mut Tx, session_id: &str, thread_id: &str) -> StoreResult<Vec<NewEvent>> {
    match bump(tx, session_id).await {
        // A session deleted under a live run: the fence reports the lost run.
        Ok(_) | Err(StoreError::NotFound { .. }) => {}
        Err(other) => return Err(other),
    }
    let taken = messages(tx, session_id).await?;
    if taken.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query(include_str!("../../queries/inbox/delete_all.sql")).bind(session_id).execute(&mut *tx).await?;
    Ok(taken
        .into_iter()
        .map(|m| NewEvent::user_message_content(thread_id, m.content).with_id(m.id.replacen("inbox_", "sevt_", 1)))
        .collect())
}

#[async_trait]
impl InboxStore for SqlStore {
    async fn inbox(&self, session_id: &str) -> StoreResult<InboxSnapshot> {
        let mut tx = self.primary.begin().await?;
        let row: Option<(i64,)> = sqlx::query_as("SELECT inbox_version FROM sessions WHERE id = $1")
            .bind(session_id)
            .fetch_optional(&mut tx)
            .await?;
        let (version,) = row.ok_or_else(|| StoreError::NotFound { what: "session", id: session_id.to_owned() })?;
        let snapshot = InboxSnapshot {
            active: live(&mut tx, session_id).await?,
            version,
            messages: messages(&mut tx, session_id).await?,
        };
        tx.commit().await?;
        Ok(snapshot)
    }

    async fn change_inbox(
        &self,
        session_id: &str,
        change: InboxChange,
    ) -> StoreResult<Result<InboxSnapshot, InboxRefusal>> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let version = bump(&mut tx, session_id).await?;
        if !live(&mut tx, session_id).await? {
            tx.rollback().await?;
            return Ok(Err(InboxRefusal::NoLiveRun));
        }
        let current = messages(&mut tx, session_id).await?;
        let known = |id: &str| current.iter().any(|m| m.id == id);
        match change {
            InboxChange::Enqueue { content } => {
                sqlx::query(include_str!("../../queries/inbox/enqueue.sql"))
                    .bind(new_id("inbox"))
                    .bind(session_id)
                    .bind(content.to_string())
                    .bind(now)
                    .execute(&mut tx)
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
                    sqlx::query(include_str!("../../queries/inbox/reorder.sql"))
                        .bind(position as i64 + 1)
                        .bind(id)
                        .execute(&mut tx)
                        .await?;
                }
            }
            InboxChange::Replace { id, content } => {
                if !known(&id) {
                    tx.rollback().await?;
                    return Ok(Err(InboxRefusal::UnknownMessage));
                }
                sqlx::query(include_str!("../../queries/inbox/replace.sql"))
                    .bind(content.to_string())
                    .bind(&id)
                    .execute(&mut tx)
                    .await?;
            }
            InboxChange::Withdraw { id } => {
                if !known(&id) {
                    tx.rollback().await?;
                    return Ok(Err(InboxRefusal::UnknownMessage));
                }
                sqlx::query(include_str!("../../queries/inbox/withdraw.sql")).bind(&id).execute(&mut tx).await?;
            }
        }
        let snapshot = InboxSnapshot { active: true, version, messages: messages(&mut tx, session_id).await? };
        tx.commit().await?;
        Ok(Ok(snapshot))
    }

    async fn inbox_pending(&self, session_id: &str) -> StoreResult<bool> {
        let row = sqlx::query(include_str!("../../queries/inbox/pending.sql"))
            .bind(session_id)
            .fetch_optional(&self.readers)
            .await?;
        Ok(row.is_some())
    }

    async fn commit_with_inbox(&self, claim: &Claim, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>> {
        let mut tx = self.primary.begin().await?;
        let mut taken = take(&mut tx, &claim.session_id, &claim.thread_id).await?;
        taken.extend(events);
        Ok(runs::commit_in(self, tx, claim, taken, None).await?.events)
    }
}
