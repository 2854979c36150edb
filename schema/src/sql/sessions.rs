//! Sessions and their committed event history. Projections are kept in step with the
//! history by the transaction that commits it: the session's `status` (from
//! `session.status_*` events), the time it spent running (from the same events), its
//! cumulative `usage` (`super::usage`: model requests, the grader's, web tool results
//! for `server_tool_use`, the advisor's) and the tool-call ledger
//! (`super::tool_calls`). Once the session has child threads, its threads' rows and the
//! status as their aggregate are kept instead (`super::session_threads`, ADR 0022).
//!
//! A session's `agent` is not stored in its row: sessions reference a row of
//! `agent_snapshots` (migration 0012), one per distinct agent configuration, so all
//! sessions of one agent version share a single copy. Reads that return one session
//! put it back into the body; `list_sessions` leaves it out.
//!
//! The memory stores among a session's resources are indexed in `session_memory_stores`
//! (migration 0016) by the transaction that writes the resources, for `list_sessions`'
//! `memory_store_id` filter. A session without memory stores costs no statement at
//! creation.

use std::sync::LazyLock;

use async_trait::async_trait;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::{JsonText, SqlStore, Tx, session_threads, tool_calls, usage};
use crate::capture;
use crate::error::{StoreError, StoreResult};
use crate::events::{CROSS_POSTED, outcome_projection};
use crate::store::{
    Backend, EventQuery, NewEvent, NewSession, ResourcesReplacement, Session, SessionForTurn, SessionQuery,
    SessionStore, StoredEvent, memory_store_ids,
};
use crate::webhooks::{self, Fact};

mod known_usage;
mod rows;

use known_usage::Known;
pub(super) use known_usage::KnownUsage;

use rows::{Allocated, EventRow, SessionForTurnRow, SessionRow, SessionWithAgentRow, embed};

/// Events per INSERT statement: 2 + 5 × this bound parameters, far below the limits of
/// both dialects (SQLite 32766, PostgreSQL 65535). A commit holds a handful of events;
/// only an unusually large batch takes more than one statement.
const EVENTS_PER_STATEMENT: usize = 1000;

/// Moves the body's `agent` into `agent_snapshots` (inside the caller's transaction)
/// and returns its snapshot id with the agent; a body without an agent object has none.
/// Snapshots are content-addressed, so writing one that exists is a no-op.
async fn store_agent(tx: &mut Tx, body: &mut Value, now: i64) -> StoreResult<Option<(String, Value)>> {
    let Some(agent) = body.as_object_mut().and_then(|map| map.remove("agent")) else { return Ok(None) };
    if !agent.is_object() {
        embed(body, agent);
        return Ok(None);
    }
    let id = store_snapshot(tx, &agent, now).await?;
    Ok(Some((id, agent)))
}

/// Stores `agent` in `agent_snapshots` (inside the caller's transaction) and returns
/// its id: content-addressed, so writing one that exists is a no-op. A session's agent
/// and a child thread's (ADR 0022) are stored alike.
pub(super) async fn store_snapshot(tx: &mut Tx, agent: &Value, now: i64) -> StoreResult<String> {
    let text = agent.to_string();
    let id = format!("asnap_{}", &hex::encode(Sha256::digest(text.as_bytes()))[..32]);
    sqlx::query(include_str!("../../queries/sessions/insert_agent_snapshot.sql"))
        .bind(&id)
        .bind(agent["id"].as_str())
        .bind(agent["version"].as_i64())
        .bind(&text)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    Ok(id)
}

/// A session read by `RETURNING` (which cannot join) with the agent its writer stored.
fn with_agent(row: SessionRow, agent: Option<(String, Value)>) -> Session {
    let mut session = Session::from(row);
    if let Some((_, agent)) = agent {
        embed(&mut session.body, agent);
    }
    session
}

/// The session in a row that carries `select_session.sql`'s columns beside others (a
/// claim's, `claim_run.*.sql`): `None` when they are NULL, the session being gone.
pub(super) fn session_in(row: &AnyRow) -> StoreResult<Option<Session>> {
    if row.try_get::<Option<String>, _>("id")?.is_none() {
        return Ok(None);
    }
    SessionWithAgentRow::from_row(row)?.try_into().map(Some)
}

/// Appends `events` inside the caller's transaction, numbering them from the session's
/// counter, inserting them with one statement, and updating the status, usage and
/// tool-call projections. Must be the transaction's first write to the session row
/// (lock order: session, then run; see `queries/sessions/allocate_seq.sql`).
pub(super) async fn append(
    tx: &mut Tx,
    session_id: &str,
    events: Vec<NewEvent>,
    now: i64,
) -> StoreResult<Vec<StoredEvent>> {
    Ok(append_seen(tx, session_id, events, now, None, None).await?.events)
}

/// The claim an append commits under, checked by the append's allocation itself
/// (`allocate_seq_fenced.*.sql`): the fence of `fence_run.sql` without a statement of
/// its own. The check is the dialect's (a row lock on PostgreSQL, the write lock on
/// SQLite; ADR 0036).
#[derive(Debug, Clone, Copy)]
pub(super) struct Fence<'a> {
    pub run_id: &'a str,
    pub epoch: i64,
    pub backend: Backend,
}

impl Fence<'_> {
    /// The fenced allocation in this fence's dialect.
    fn allocation(&self) -> &'static str {
        static POSTGRES: LazyLock<String> =
            LazyLock::new(|| fenced(include_str!("../../queries/sessions/allocate_seq_fenced.postgres.sql")));
        static SQLITE: LazyLock<String> =
            LazyLock::new(|| fenced(include_str!("../../queries/sessions/allocate_seq_fenced.sqlite.sql")));
        fn fenced(template: &str) -> String {
            debug_assert_eq!(template.matches("{allocate_seq}").count(), 1, "one placeholder");
            template.replace("{allocate_seq}", include_str!("../../queries/sessions/allocate_seq.sql"))
        }
        match self.backend {
            Backend::Postgres => &POSTGRES,
            Backend::Sqlite => &SQLITE,
        }
    }
}

/// What an append committed, and what it saw of the session row it locked.
pub(super) struct Appended {
    /// The events as stored.
    pub events: Vec<StoredEvent>,
    /// The session's live-inbox version (`None` for an empty append, which reads nothing).
    pub inbox_version: Option<i64>,
    /// The session's usage after the append (`None` for an empty append): the caller
    /// records it in its [`KnownUsage`] once the transaction has committed.
    pub usage: Option<Known>,
    /// Whether the claim of the append's [`Fence`] still holds: `None` when no fence was
    /// asked or nothing was appended (the caller fences with a statement of its own),
    /// `Some(false)` when it was lost and the caller must roll back.
    pub fence_held: Option<bool>,
}

/// [`append`], returning what it saw of the session row too. Given the session's usage
/// as last committed (`known`), an append that spends writes the new total with its
/// allocation instead of with `update_usage.sql`, unless the session moved on since.
pub(super) async fn append_seen(
    tx: &mut Tx,
    session_id: &str,
    events: Vec<NewEvent>,
    now: i64,
    known: Option<Known>,
    fence: Option<Fence<'_>>,
) -> StoreResult<Appended> {
    if events.is_empty() {
        return Ok(Appended { events: Vec::new(), inbox_version: None, usage: None, fence_held: None });
    }
    let count = events.len() as i64;
    // Only the primary thread's status is the session's status; the last one wins (the
    // events of one append share `now`, so the running time is the same either way).
    let status = events
        .iter()
        .rev()
        .filter(|event| event.thread_id == session_id)
        .find_map(|event| session_threads::status_of(&event.kind, true));
    let offer = match known {
        Some(known) => spent_on(&known.usage, &events)?.map(|total| (known.next_seq, total)),
        None => None,
    };
    let allocation = fence.map_or(include_str!("../../queries/sessions/allocate_seq.sql"), |f| f.allocation());
    let allocated = sqlx::query(allocation)
        .bind(session_id)
        .bind(count)
        .bind(now)
        .bind(status)
        .bind(format!("%{}%", outcome_projection::PENDING_MARK))
        .bind(offer.as_ref().map(|(at, _)| *at))
        .bind(offer.as_ref().map(|(_, total)| total.as_str()))
        .bind(fence.map(|f| f.run_id))
        .bind(fence.map(|f| f.epoch))
        .fetch_optional(&mut *tx)
        .await?;
    let Some(allocated) = allocated else {
        return Err(StoreError::NotFound { what: "session", id: session_id.to_owned() });
    };
    let Allocated {
        next_seq,
        usage,
        capture_level,
        captured_through_seq,
        workspace_id,
        child_threads,
        status,
        webhook_subscriptions,
        outcomes_pending,
        inbox_version,
        fence_held,
    } = Allocated::from_row(&allocated)?;
    let fence_held = fence.map(|_| fence_held.unwrap_or(0) > 0);
    if fence_held == Some(false) {
        return Ok(Appended { events: Vec::new(), inbox_version: None, usage: None, fence_held });
    }
    let first = next_seq - count;
    // The allocation wrote the offered total exactly when the counter was where the
    // offer was read (`known_usage.rs`); otherwise `usage` is the session's, and the
    // append adds to it here.
    let usage = match offer {
        Some((at, total)) if at == first => total,
        _ => match spent_on(&usage, &events)? {
            Some(total) if total != usage => {
                sqlx::query(include_str!("../../queries/sessions/update_usage.sql"))
                    .bind(session_id)
                    .bind(&total)
                    .execute(&mut *tx)
                    .await?;
                total
            }
            _ => usage,
        },
    };
    let stored: Vec<StoredEvent> = events
        .into_iter()
        .enumerate()
        .map(|(offset, new)| StoredEvent {
            session_id: session_id.to_owned(),
            seq: first + offset as i64,
            event_id: new.event_id,
            thread_id: new.thread_id,
            kind: new.kind,
            body: new.body,
            processed_at_ms: now,
        })
        .collect();
    for chunk in stored.chunks(EVENTS_PER_STATEMENT) {
        insert_events(tx, session_id, chunk, now).await?;
    }
    // With child threads, each thread's row follows its own events and the session's
    // status follows the rows (ADR 0022 §7); a single-agent append skips this.
    let aggregate =
        if child_threads > 0 { session_threads::project(tx, session_id, &stored, now).await? } else { None };
    tool_calls::record(tx, session_id, &stored).await?;
    if webhook_subscriptions > 0 {
        let facts =
            webhooks::session_facts(&workspace_id, session_id, &stored, child_threads > 0, aggregate.as_deref());
        super::webhooks::record(tx, &facts, now).await?;
    }
    if outcomes_pending > 0 || stored.iter().any(|event| outcome_projection::projected(&event.kind)) {
        let level = capture_level.as_deref().and_then(capture::Level::parse);
        let running = matches!(status.as_str(), "running" | "rescheduling");
        project_outcomes(tx, session_id, &stored, level, running).await?;
    }
    if let Some(level) = capture_level.as_deref().and_then(capture::Level::parse)
        && let Some(end) =
            stored.iter().rev().find(|e| e.thread_id == session_id && capture::ends_turn(&e.kind, &e.body))
    {
        // Through the append's last event: whatever it commits with the turn's end is over too.
        let through = stored.last().map_or(end.seq, |last| last.seq);
        capture_turn(tx, session_id, captured_through_seq, through, level).await?;
    }
    Ok(Appended {
        events: stored,
        inbox_version: Some(inbox_version),
        usage: Some(Known { next_seq, usage }),
        fence_held,
    })
}

/// The usage total `usage` (JSON text) with what `events` spend added, or `None` when
/// they spend nothing. A corrupt total is an error.
fn spent_on(usage: &str, events: &[NewEvent]) -> StoreResult<Option<String>> {
    let spending = || events.iter().filter(|event| usage::spends(&event.kind, &event.body));
    if spending().next().is_none() {
        return Ok(None);
    }
    let mut total = JsonText::try_from(usage.to_owned())?.0;
    for event in spending() {
        usage::add_event(&mut total, &event.kind, &event.body);
    }
    Ok(Some(total.to_string()))
}

/// Keeps the session's `outcome_evaluations` (in its body) in step with the outcome
/// events of an append and the turn starts that begin work on them (`running`: the
/// session runs after the append), inside the appending transaction, which holds the
/// session row. A session below `full` content capture keeps no grader explanation and
/// no description in it (ADR 0019).
async fn project_outcomes(
    tx: &mut Tx,
    session_id: &str,
    stored: &[StoredEvent],
    capture: Option<capture::Level>,
    running: bool,
) -> StoreResult<()> {
    let (body,): (String,) = sqlx::query_as(include_str!("../../queries/sessions/select_session_body.sql"))
        .bind(session_id)
        .fetch_one(&mut *tx)
        .await?;
    let mut body = JsonText::try_from(body)?.0;
    if !body["outcome_evaluations"].is_array() {
        body["outcome_evaluations"] = json!([]);
    }
    let mut changed = false;
    for event in stored {
        let processed_at = crate::live::rfc3339(event.processed_at_ms);
        changed |= outcome_projection::project(&mut body["outcome_evaluations"], event, &processed_at);
        changed |= outcome_projection::begin_work(&mut body["outcome_evaluations"], event, running);
    }
    if let Some(level) = capture.filter(|level| *level < capture::Level::Full) {
        let kept = if level == capture::Level::Off { Value::Null } else { json!(capture::REDACTED) };
        for evaluation in body["outcome_evaluations"].as_array_mut().into_iter().flatten() {
            for field in ["explanation", "description"] {
                if evaluation.get(field).is_some_and(|e| !e.is_null()) {
                    evaluation[field] = kept.clone();
                }
            }
        }
    }
    if changed {
        sqlx::query(include_str!("../../queries/sessions/update_outcome_evaluations.sql"))
            .bind(session_id)
            .bind(body.to_string())
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Rewrites the events of a session's settled turn (`after` < seq ≤ `through`) to what
/// `level` keeps of them and moves the session's mark, inside the append that ends the
/// turn: the content is never committed without the turn's redaction committed with it.
/// The events the append returns keep their content; they are published live once.
async fn capture_turn(
    tx: &mut Tx,
    session_id: &str,
    after: i64,
    through: i64,
    level: capture::Level,
) -> StoreResult<()> {
    let rows: Vec<(i64, String, String)> =
        sqlx::query_as(include_str!("../../queries/sessions/select_turn_events.sql"))
            .bind(session_id)
            .bind(after)
            .bind(through)
            .fetch_all(&mut *tx)
            .await?;
    for (seq, kind, body) in rows {
        let body = JsonText::try_from(body)?.0;
        if let Some(kept) = capture::redact(&kind, &body, level) {
            sqlx::query(include_str!("../../queries/sessions/update_event_body.sql"))
                .bind(session_id)
                .bind(seq)
                .bind(kept.to_string())
                .execute(&mut *tx)
                .await?;
        }
    }
    sqlx::query(include_str!("../../queries/sessions/mark_captured.sql"))
        .bind(session_id)
        .bind(through)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// One multi-row INSERT of `events` (see `queries/sessions/insert_events.sql`).
async fn insert_events(tx: &mut Tx, session_id: &str, events: &[StoredEvent], now: i64) -> StoreResult<()> {
    let mut sql = String::from(include_str!("../../queries/sessions/insert_events.sql"));
    for (i, _) in events.iter().enumerate() {
        let n = 3 + 5 * i;
        let separator = if i == 0 { "" } else { ", " };
        sql.push_str(&format!("{separator}($1, ${n}, ${}, ${}, ${}, ${}, $2)", n + 1, n + 2, n + 3, n + 4));
    }
    let mut statement = sqlx::query(&sql).bind(session_id).bind(now);
    for event in events {
        statement = statement
            .bind(event.seq)
            .bind(&event.event_id)
            .bind(&event.thread_id)
            .bind(&event.kind)
            .bind(event.body.to_string());
    }
    statement.execute(&mut *tx).await?;
    Ok(())
}

/// Puts the agent back into a session read by `RETURNING`: the one its writer stored,
/// or else the snapshot it references.
async fn complete(tx: &mut Tx, row: SessionRow, agent: Option<(String, Value)>) -> StoreResult<Session> {
    let mut session = Session::from(row);
    let agent = match (agent, &session.agent_snapshot_id) {
        (Some((_, agent)), _) => Some(agent),
        (None, Some(snapshot)) => {
            let row: Option<(String,)> = sqlx::query_as("SELECT body FROM agent_snapshots WHERE id = $1")
                .bind(snapshot)
                .fetch_optional(&mut *tx)
                .await?;
            row.map(|(body,)| JsonText::try_from(body).map(|json| json.0)).transpose()?
        }
        (None, None) => None,
    };
    if let Some(agent) = agent {
        embed(&mut session.body, agent);
    }
    Ok(session)
}

/// Writes the index rows of the memory stores among `body`'s resources (inside the
/// caller's transaction, after the caller removed the session's old rows, if any): one
/// multi-row INSERT, none without memory stores.
async fn index_memory_stores(tx: &mut Tx, session_id: &str, body: &Value) -> StoreResult<()> {
    let stores = memory_store_ids(body);
    if stores.is_empty() {
        return Ok(());
    }
    let mut sql = String::from(include_str!("../../queries/sessions/insert_session_memory_stores.sql"));
    let rows: Vec<String> = (0..stores.len()).map(|i| format!("($1, ${})", i + 2)).collect();
    sql.push_str(&rows.join(", "));
    let mut statement = sqlx::query(&sql).bind(session_id);
    for store in stores {
        statement = statement.bind(store);
    }
    statement.execute(&mut *tx).await?;
    Ok(())
}

/// Locks the session row (see `queries/sessions/lock_session.sql`); `NotFound` if
/// there is none.
pub(super) async fn lock(tx: &mut Tx, session_id: &str, now: i64) -> StoreResult<()> {
    let touched = sqlx::query(include_str!("../../queries/sessions/lock_session.sql"))
        .bind(session_id)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if touched == 0 {
        return Err(StoreError::NotFound { what: "session", id: session_id.to_owned() });
    }
    Ok(())
}

impl SqlStore {
    async fn select_session(&self, id: &str, workspace_id: Option<&str>) -> StoreResult<Option<Session>> {
        let row: Option<SessionWithAgentRow> =
            sqlx::query_as(include_str!("../../queries/sessions/select_session.sql"))
                .bind(id)
                .bind(workspace_id)
                .fetch_optional(&self.readers)
                .await?;
        row.map(Session::try_from).transpose()
    }
}

#[async_trait]
impl SessionStore for SqlStore {
    async fn create_session(&self, new: NewSession) -> StoreResult<Session> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let mut body = new.body;
        let agent = store_agent(&mut tx, &mut body, now).await?;
        let row: SessionRow = sqlx::query_as(include_str!("../../queries/sessions/insert_session.sql"))
            .bind(&new.id)
            .bind(&new.workspace_id)
            .bind(&new.status)
            .bind(body.to_string())
            .bind(&new.agent_id)
            .bind(new.agent_version)
            .bind(now)
            .bind(agent.as_ref().map(|(id, _)| id.as_str()))
            .bind(body["user_profile_id"].as_str())
            .bind(
                capture::Decision::from_json(&body["content_capture"])
                    .map(|d| d.effective)
                    .filter(|level| *level < capture::Level::Full)
                    .map(capture::Level::as_str),
            )
            .bind(body["environment_id"].as_str())
            .fetch_one(&mut tx)
            .await?;
        sqlx::query(include_str!("../../queries/sessions/insert_primary_thread.sql"))
            .bind(&new.id)
            .bind(now)
            .execute(&mut tx)
            .await?;
        index_memory_stores(&mut tx, &new.id, &body).await?;
        super::webhooks::record(&mut tx, &[Fact::new(&new.workspace_id, "session.created", &new.id)], now).await?;
        tx.commit().await?;
        Ok(with_agent(row, agent))
    }

    async fn get_session(&self, workspace_id: &str, id: &str) -> StoreResult<Option<Session>> {
        self.select_session(id, Some(workspace_id)).await
    }

    async fn get_session_for_turn(&self, workspace_id: &str, id: &str) -> StoreResult<Option<SessionForTurn>> {
        let row: Option<SessionForTurnRow> =
            sqlx::query_as(include_str!("../../queries/sessions/select_session_for_turn.sql"))
                .bind(id)
                .bind(workspace_id)
                .fetch_optional(&self.readers)
                .await?;
        row.map(SessionForTurn::try_from).transpose()
    }

    async fn load_session(&self, id: &str) -> StoreResult<Option<Session>> {
        self.select_session(id, None).await
    }

    async fn append_events(&self, session_id: &str, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>> {
        let mut tx = self.primary.begin().await?;
        let stored = append(&mut tx, session_id, events, self.now()).await?;
        tx.commit().await?;
        Ok(stored)
    }

    async fn list_events(&self, session_id: &str, after_seq: i64, limit: i64) -> StoreResult<Vec<StoredEvent>> {
        let query = EventQuery { after_seq: Some(after_seq), limit, ..EventQuery::default() };
        self.query_events(session_id, &query).await
    }

    async fn event_seq(&self, session_id: &str, event_id: &str) -> StoreResult<Option<i64>> {
        Ok(sqlx::query_scalar("SELECT seq FROM session_events WHERE event_id = $1 AND session_id = $2")
            .bind(event_id)
            .bind(session_id)
            .fetch_optional(&self.readers)
            .await?)
    }

    async fn query_events(&self, session_id: &str, query: &EventQuery) -> StoreResult<Vec<StoredEvent>> {
        let (order, after_op) = if query.descending { ("DESC", "<") } else { ("ASC", ">") };
        // Types are few and fixed-vocabulary; they are bound as parameters, never inlined.
        let types: Vec<String> = (0..query.types.len()).map(|i| format!("${}", 9 + i)).collect();
        let types = if types.is_empty() { String::new() } else { format!("AND type IN ({})", types.join(", ")) };
        // The view's types are a constant list of known event types: inlined, so the
        // statement text (and its prepared statement) is one per shape.
        let view = if query.primary_view {
            let cross: Vec<String> = CROSS_POSTED.iter().map(|kind| format!("'{}'", kind.as_str())).collect();
            format!("AND (thread_id = $1 OR type IN ({}))", cross.join(", "))
        } else {
            String::new()
        };
        let sql = include_str!("../../queries/sessions/select_events.sql")
            .replace("{after_op}", after_op)
            .replace("{order}", order)
            .replace("{types}", &types)
            .replace("{view}", &view);
        let mut statement = sqlx::query_as::<_, EventRow>(&sql)
            .bind(session_id)
            .bind(&query.thread_id)
            // No cursor: the bound before every seq in the order read (seqs are ≥ 0).
            .bind(query.after_seq.unwrap_or(if query.descending { i64::MAX } else { -1 }))
            .bind(query.limit.max(0))
            .bind(query.processed.gt)
            .bind(query.processed.gte)
            .bind(query.processed.lt)
            .bind(query.processed.lte);
        for kind in &query.types {
            statement = statement.bind(kind);
        }
        let rows = statement.fetch_all(&self.readers).await?;
        Ok(rows.into_iter().map(StoredEvent::from).collect())
    }

    async fn update_session(
        &self,
        workspace_id: &str,
        id: &str,
        body: Value,
        events: Vec<NewEvent>,
    ) -> StoreResult<(Session, Vec<StoredEvent>)> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        // The row lock first (an append takes it; without events, `lock` does), so the
        // projection read below is the one this update commits over.
        let stored = if events.is_empty() {
            lock(&mut tx, id, now).await?;
            Vec::new()
        } else {
            append(&mut tx, id, events, now).await?
        };
        let mut body = body;
        // `outcome_evaluations` is a projection the worker's appends keep in the same row;
        // the caller's body was read before this transaction, so the stored one wins.
        let current: Option<(String,)> = sqlx::query_as(include_str!("../../queries/sessions/select_session_body.sql"))
            .bind(id)
            .fetch_optional(&mut tx)
            .await?;
        if let Some((current,)) = current {
            let current = JsonText::try_from(current)?.0;
            if current["outcome_evaluations"].is_array() {
                body["outcome_evaluations"] = current["outcome_evaluations"].clone();
            }
        }
        let agent = store_agent(&mut tx, &mut body, now).await?;
        // A body without an agent keeps the snapshot the session has.
        let row: Option<SessionRow> = sqlx::query_as(include_str!("../../queries/sessions/update_body.sql"))
            .bind(id)
            .bind(workspace_id)
            .bind(body.to_string())
            .bind(now)
            .bind(None::<i64>)
            .bind(0_i64)
            .bind(agent.as_ref().map(|(id, _)| id.as_str()))
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = row else {
            return Err(StoreError::NotFound { what: "session", id: id.to_owned() });
        };
        let session = complete(&mut tx, row, agent).await?;
        super::webhooks::record(&mut tx, &[Fact::new(workspace_id, "session.updated", id)], now).await?;
        tx.commit().await?;
        Ok((session, stored))
    }

    async fn replace_session_resources(
        &self,
        change: ResourcesReplacement,
    ) -> StoreResult<Result<(Session, Vec<StoredEvent>), i64>> {
        let ResourcesReplacement { workspace_id, session_id: id, expected_revision, body, events } = change;
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        // The append locks the session row first (or, without events, the lock does).
        let stored = if events.is_empty() {
            lock(&mut tx, &id, now).await.or_else(|error| match error {
                // Reported below, scoped to the workspace.
                StoreError::NotFound { .. } => Ok(()),
                other => Err(other),
            })?;
            Vec::new()
        } else {
            append(&mut tx, &id, events, now).await?
        };
        let mut body = body;
        let agent = store_agent(&mut tx, &mut body, now).await?;
        let row: Option<SessionRow> = sqlx::query_as(include_str!("../../queries/sessions/update_body.sql"))
            .bind(&id)
            .bind(&workspace_id)
            .bind(body.to_string())
            .bind(now)
            .bind(expected_revision)
            .bind(1_i64)
            .bind(agent.as_ref().map(|(id, _)| id.as_str()))
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = row else {
            let current = sqlx::query("SELECT resources_revision FROM sessions WHERE id = $1 AND workspace_id = $2")
                .bind(&id)
                .bind(&workspace_id)
                .fetch_optional(&mut tx)
                .await?;
            tx.rollback().await?;
            return match current {
                Some(row) => Ok(Err(row.try_get("resources_revision")?)),
                None => Err(StoreError::NotFound { what: "session", id }),
            };
        };
        // The index follows the resources (the row is locked: no writer races this).
        sqlx::query(include_str!("../../queries/sessions/delete_session_memory_stores.sql"))
            .bind(&id)
            .execute(&mut tx)
            .await?;
        index_memory_stores(&mut tx, &id, &body).await?;
        let session = complete(&mut tx, row, agent).await?;
        tx.commit().await?;
        Ok(Ok((session, stored)))
    }

    async fn list_sessions(&self, workspace_id: &str, query: &SessionQuery) -> StoreResult<Vec<Session>> {
        // `before_id` pages backwards: scan in the opposite order, then flip the page.
        let backwards = query.before_id.is_some() && query.after_id.is_none();
        let descending = query.descending != backwards;
        let (order, cursor_op) = if descending { ("DESC", "<") } else { ("ASC", ">") };
        let cursor = if backwards { &query.before_id } else { &query.after_id };
        // Parameters: $1..$6 fixed, $7..$10 the creation bounds, $11 the memory store,
        // $12 the deployment, then one per status.
        let statuses: Vec<String> = (0..query.statuses.len()).map(|i| format!("${}", 13 + i)).collect();
        let statuses =
            if statuses.is_empty() { String::new() } else { format!("AND status IN ({})", statuses.join(", ")) };
        let sql = include_str!("../../queries/sessions/select_sessions.sql")
            .replace("{cursor_op}", cursor_op)
            .replace("{order}", order)
            .replace("{statuses}", &statuses);
        let mut statement = sqlx::query_as::<_, SessionRow>(&sql)
            .bind(workspace_id)
            .bind(&query.agent_id)
            .bind(query.agent_version)
            .bind(i64::from(query.include_archived))
            .bind(cursor)
            .bind(query.limit.max(0));
        statement =
            statement.bind(query.created.gt).bind(query.created.gte).bind(query.created.lt).bind(query.created.lte);
        statement = statement.bind(&query.memory_store_id).bind(&query.deployment_id);
        for status in &query.statuses {
            statement = statement.bind(status);
        }
        let mut sessions: Vec<Session> =
            statement.fetch_all(&self.readers).await?.into_iter().map(Session::from).collect();
        if backwards {
            sessions.reverse();
        }
        Ok(sessions)
    }

    async fn agent_snapshot(&self, id: &str) -> StoreResult<Option<Value>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT body FROM agent_snapshots WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.readers)
            .await?;
        row.map(|(body,)| JsonText::try_from(body).map(|json| json.0)).transpose()
    }

    async fn archive_session(&self, workspace_id: &str, id: &str) -> StoreResult<Session> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let row: Option<SessionRow> = sqlx::query_as(include_str!("../../queries/sessions/archive_session.sql"))
            .bind(id)
            .bind(workspace_id)
            .bind(now)
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = row else {
            return Err(StoreError::NotFound { what: "session", id: id.to_owned() });
        };
        // Archiving an archived session changes nothing and reports nothing.
        if row.archived_at_ms == Some(now) {
            super::webhooks::record(&mut tx, &[Fact::new(workspace_id, "session.archived", id)], now).await?;
        }
        let session = complete(&mut tx, row, None).await?;
        tx.commit().await?;
        Ok(session)
    }

    async fn delete_session(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        let mut tx = self.primary.begin().await?;
        let owned = sqlx::query("SELECT id FROM sessions WHERE id = $1 AND workspace_id = $2")
            .bind(id)
            .bind(workspace_id)
            .fetch_optional(&mut tx)
            .await?
            .is_some();
        if !owned {
            return Ok(false);
        }
        // Children first and explicitly: SQLite enforces cascades only with foreign_keys on.
        for table in ["tool_calls", "session_events", "runs", "session_threads"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE session_id = $1")).bind(id).execute(&mut tx).await?;
        }
        sqlx::query(include_str!("../../queries/sessions/delete_session_memory_stores.sql"))
            .bind(id)
            .execute(&mut tx)
            .await?;
        sqlx::query("DELETE FROM sessions WHERE id = $1").bind(id).execute(&mut tx).await?;
        super::webhooks::record(&mut tx, &[Fact::new(workspace_id, "session.deleted", id)], self.now()).await?;
        tx.commit().await?;
        Ok(true)
    }
}
