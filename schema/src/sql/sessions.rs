//! Sessions and their committed event history. Projections are kept in step with the
//! history by the transaction that commits it: the session's `status` (from
//! `session.status_*` events), the time it spent running (from the same events), and
//! its cumulative `usage` (from `span.model_request_end` events).
//!
//! A session's `agent` is not stored in its row: sessions reference a row of
//! `agent_snapshots` (migration 0012), one per distinct agent configuration, so all
//! sessions of one agent version share a single copy. Reads that return one session
//! put it back into the body; [`list`] leaves it out (see `Store::list_sessions`).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::{SqlStore, json};
use crate::error::{StoreError, StoreResult};
use crate::store::{EventQuery, NewEvent, NewSession, Session, SessionQuery, StoredEvent, TimeBounds};

const SESSION_COLUMNS: &str = "id, workspace_id, status, body, agent_id, agent_version, usage, next_seq, created_at_ms, updated_at_ms, archived_at_ms, active_ms, running_since_ms, inbox_version, resources_revision, agent_snapshot_id";
/// The session's agent snapshot, as an extra column of single-session reads.
const AGENT_COLUMN: &str =
    "(SELECT a.body FROM agent_snapshots a WHERE a.id = sessions.agent_snapshot_id) AS agent_snapshot";
const EVENT_COLUMNS: &str = "session_id, seq, event_id, thread_id, type, body, processed_at_ms";

fn session(row: &AnyRow) -> StoreResult<Session> {
    Ok(Session {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        status: row.try_get("status")?,
        body: json(row, "body")?,
        agent_id: row.try_get("agent_id")?,
        agent_version: row.try_get("agent_version")?,
        usage: json(row, "usage")?,
        next_seq: row.try_get("next_seq")?,
        created_at_ms: row.try_get("created_at_ms")?,
        updated_at_ms: row.try_get("updated_at_ms")?,
        archived_at_ms: row.try_get("archived_at_ms")?,
        active_ms: row.try_get("active_ms")?,
        running_since_ms: row.try_get("running_since_ms")?,
        inbox_version: row.try_get("inbox_version")?,
        resources_revision: row.try_get("resources_revision")?,
        agent_snapshot_id: row.try_get("agent_snapshot_id")?,
    })
}

/// A session read together with [`AGENT_COLUMN`]: the snapshot goes back into the body.
fn session_with_agent(row: &AnyRow) -> StoreResult<Session> {
    let mut session = session(row)?;
    if session.agent_snapshot_id.is_some() {
        let agent = json(row, "agent_snapshot")?;
        embed(&mut session.body, agent);
    }
    Ok(session)
}

fn embed(body: &mut Value, agent: Value) {
    if let Some(map) = body.as_object_mut() {
        map.insert("agent".into(), agent);
    }
}

/// Moves the body's `agent` into `agent_snapshots` (inside the caller's transaction)
/// and returns its snapshot id with the agent; a body without an agent object has none.
/// Snapshots are content-addressed, so writing one that exists is a no-op.
async fn store_agent(
    tx: &mut Transaction<'_, Any>,
    body: &mut Value,
    now: i64,
) -> StoreResult<Option<(String, Value)>> {
    let Some(agent) = body.as_object_mut().and_then(|map| map.remove("agent")) else { return Ok(None) };
    if !agent.is_object() {
        embed(body, agent);
        return Ok(None);
    }
    let text = agent.to_string();
    let id = format!("asnap_{}", &hex::encode(Sha256::digest(text.as_bytes()))[..32]);
    sqlx::query(
        "INSERT INTO agent_snapshots (id, agent_id, agent_version, body, created_at_ms) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(&id)
    .bind(agent["id"].as_str())
    .bind(agent["version"].as_i64())
    .bind(&text)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(Some((id, agent)))
}

/// The agent snapshot `id`.
pub(super) async fn agent_snapshot(store: &SqlStore, id: &str) -> StoreResult<Option<Value>> {
    let row =
        sqlx::query("SELECT body FROM agent_snapshots WHERE id = $1").bind(id).fetch_optional(&store.pool).await?;
    row.map(|row| json(&row, "body")).transpose()
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
    let mut body = new.body;
    let agent = store_agent(&mut tx, &mut body, now).await?;
    let row = sqlx::query(&format!(
        "INSERT INTO sessions (id, workspace_id, status, body, agent_id, agent_version, usage, next_seq, created_at_ms, updated_at_ms, agent_snapshot_id) \
         VALUES ($1, $2, $3, $4, $5, $6, '{{}}', 1, $7, $7, $8) RETURNING {SESSION_COLUMNS}"
    ))
    .bind(&new.id)
    .bind(&new.workspace_id)
    .bind(&new.status)
    .bind(body.to_string())
    .bind(&new.agent_id)
    .bind(new.agent_version)
    .bind(now)
    .bind(agent.as_ref().map(|(id, _)| id.as_str()))
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
    with_agent(session(&row)?, agent)
}

/// A session read by `RETURNING` (which cannot join) with the agent its writer stored.
fn with_agent(mut session: Session, agent: Option<(String, Value)>) -> StoreResult<Session> {
    if let Some((_, agent)) = agent {
        embed(&mut session.body, agent);
    }
    Ok(session)
}

pub(super) async fn get(store: &SqlStore, workspace_id: &str, id: &str) -> StoreResult<Option<Session>> {
    let row = sqlx::query(&format!(
        "SELECT {SESSION_COLUMNS}, {AGENT_COLUMN} FROM sessions WHERE id = $1 AND workspace_id = $2"
    ))
    .bind(id)
    .bind(workspace_id)
    .fetch_optional(&store.pool)
    .await?;
    row.as_ref().map(session_with_agent).transpose()
}

pub(super) async fn load(store: &SqlStore, id: &str) -> StoreResult<Option<Session>> {
    let row = sqlx::query(&format!("SELECT {SESSION_COLUMNS}, {AGENT_COLUMN} FROM sessions WHERE id = $1"))
        .bind(id)
        .fetch_optional(&store.pool)
        .await?;
    row.as_ref().map(session_with_agent).transpose()
}

/// The session status a committed event moves the session to, if any.
fn status_of(kind: &str) -> Option<&'static str> {
    match kind {
        "session.status_running" => Some("running"),
        "session.status_idle" => Some("idle"),
        "session.status_rescheduled" => Some("rescheduling"),
        "session.status_terminated" => Some("terminated"),
        _ => None,
    }
}

/// Adds one `span.model_request_end`'s `model_usage` to a cumulative usage object.
fn add_usage(total: &mut Value, model_usage: &Value) {
    let field = |usage: &Value, key: &str| usage[key].as_i64().unwrap_or(0);
    for key in ["input_tokens", "output_tokens", "cache_read_input_tokens"] {
        total[key] = json!(field(total, key) + field(model_usage, key));
    }
    let created = field(model_usage, "cache_creation_input_tokens");
    let previous = total["cache_creation"]["ephemeral_5m_input_tokens"].as_i64().unwrap_or(0);
    total["cache_creation"] =
        json!({ "ephemeral_5m_input_tokens": previous + created, "ephemeral_1h_input_tokens": 0 });
}

/// Appends `events` inside the caller's transaction, numbering them from the session's
/// counter and updating the status and usage projections. Must be the transaction's
/// first write to the session row (lock order: session, then run; see
/// `queries/allocate_seq.sql`).
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
    let allocated = sqlx::query(include_str!("../../queries/allocate_seq.sql"))
        .bind(session_id)
        .bind(count)
        .bind(now)
        .fetch_optional(&mut **tx)
        .await?;
    let Some(allocated) = allocated else {
        return Err(StoreError::NotFound { what: "session", id: session_id.to_owned() });
    };
    let next: i64 = allocated.try_get("next_seq")?;
    let mut usage = json(&allocated, "usage")?;
    let mut active_ms: i64 = allocated.try_get("active_ms")?;
    let mut running_since_ms: Option<i64> = allocated.try_get("running_since_ms")?;
    let mut status = None;
    let mut usage_changed = false;
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
        // Only the primary thread's status is the session's status.
        if new.thread_id == session_id
            && let Some(next) = status_of(&new.kind)
        {
            status = Some(next);
            match (next == "running", running_since_ms) {
                (true, None) => running_since_ms = Some(now),
                (false, Some(since)) => {
                    active_ms += (now - since).max(0);
                    running_since_ms = None;
                }
                _ => {}
            }
        }
        if new.kind == "span.model_request_end" {
            add_usage(&mut usage, &new.body["model_usage"]);
            usage_changed = true;
        }
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
    if status.is_some() || usage_changed {
        sqlx::query(
            "UPDATE sessions SET status = COALESCE($2, status), usage = $3, active_ms = $4, running_since_ms = $5 \
             WHERE id = $1",
        )
        .bind(session_id)
        .bind(status)
        .bind(usage.to_string())
        .bind(active_ms)
        .bind(running_since_ms)
        .execute(&mut **tx)
        .await?;
    }
    Ok(stored)
}

pub(super) async fn list_events(
    store: &SqlStore,
    session_id: &str,
    after_seq: i64,
    limit: i64,
) -> StoreResult<Vec<StoredEvent>> {
    let query = EventQuery { after_seq: Some(after_seq), limit, ..EventQuery::default() };
    query_events(store, session_id, &query).await
}

/// `$n IS NULL OR column op $n` for each bound, numbered from `first`.
fn time_filter(column: &str, first: usize) -> String {
    format!(
        "AND (${a} IS NULL OR {column} > ${a}) AND (${b} IS NULL OR {column} >= ${b}) \
         AND (${c} IS NULL OR {column} < ${c}) AND (${d} IS NULL OR {column} <= ${d})",
        a = first,
        b = first + 1,
        c = first + 2,
        d = first + 3
    )
}

fn bind_bounds<'q>(
    query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
    bounds: &TimeBounds,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    query.bind(bounds.gt).bind(bounds.gte).bind(bounds.lt).bind(bounds.lte)
}

pub(super) async fn query_events(
    store: &SqlStore,
    session_id: &str,
    query: &EventQuery,
) -> StoreResult<Vec<StoredEvent>> {
    let (order, after_op) = if query.descending { ("DESC", "<") } else { ("ASC", ">") };
    // Types are few and fixed-vocabulary; they are bound as parameters, never inlined.
    let types: Vec<String> = (0..query.types.len()).map(|i| format!("${}", 9 + i)).collect();
    let type_filter = if types.is_empty() { String::new() } else { format!("AND type IN ({})", types.join(", ")) };
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM session_events \
         WHERE session_id = $1 AND ($2 IS NULL OR thread_id = $2) AND ($3 IS NULL OR seq {after_op} $3) {} {type_filter} \
         ORDER BY seq {order} LIMIT $4",
        time_filter("processed_at_ms", 5)
    );
    let mut statement =
        sqlx::query(&sql).bind(session_id).bind(&query.thread_id).bind(query.after_seq).bind(query.limit.max(0));
    statement = bind_bounds(statement, &query.processed);
    for kind in &query.types {
        statement = statement.bind(kind);
    }
    let rows = statement.fetch_all(&store.pool).await?;
    rows.iter().map(event).collect()
}

pub(super) async fn update(
    store: &SqlStore,
    workspace_id: &str,
    id: &str,
    body: Value,
    events: Vec<NewEvent>,
) -> StoreResult<(Session, Vec<StoredEvent>)> {
    let now = store.now();
    let mut tx = store.pool.begin().await?;
    let stored = append(&mut tx, id, events, now).await?;
    let mut body = body;
    let agent = store_agent(&mut tx, &mut body, now).await?;
    // A body without an agent keeps the snapshot the session has.
    let row = sqlx::query(&format!(
        "UPDATE sessions SET body = $3, updated_at_ms = $4, agent_snapshot_id = COALESCE($5, agent_snapshot_id) \
         WHERE id = $1 AND workspace_id = $2 RETURNING {SESSION_COLUMNS}"
    ))
    .bind(id)
    .bind(workspace_id)
    .bind(body.to_string())
    .bind(now)
    .bind(agent.as_ref().map(|(id, _)| id.as_str()))
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Err(StoreError::NotFound { what: "session", id: id.to_owned() });
    };
    let session = complete(&mut tx, session(&row)?, agent).await?;
    tx.commit().await?;
    Ok((session, stored))
}

/// Replaces a session's body after a change to its resources, bumping their revision,
/// when `expected` (if given) is the current revision; `Ok(Err(current))` otherwise.
pub(super) async fn replace_resources(
    store: &SqlStore,
    workspace_id: &str,
    id: &str,
    expected: Option<i64>,
    body: Value,
    events: Vec<NewEvent>,
) -> StoreResult<Result<(Session, Vec<StoredEvent>), i64>> {
    let now = store.now();
    let mut tx = store.pool.begin().await?;
    // The append locks the session row first (or, without events, this no-op update).
    let stored = if events.is_empty() {
        lock(&mut tx, id).await?;
        Vec::new()
    } else {
        append(&mut tx, id, events, now).await?
    };
    let mut body = body;
    let agent = store_agent(&mut tx, &mut body, now).await?;
    let row = sqlx::query(&format!(
        "UPDATE sessions SET body = $3, updated_at_ms = $4, resources_revision = resources_revision + 1, \
         agent_snapshot_id = COALESCE($6, agent_snapshot_id) \
         WHERE id = $1 AND workspace_id = $2 AND ($5 IS NULL OR resources_revision = $5) RETURNING {SESSION_COLUMNS}"
    ))
    .bind(id)
    .bind(workspace_id)
    .bind(body.to_string())
    .bind(now)
    .bind(expected)
    .bind(agent.as_ref().map(|(id, _)| id.as_str()))
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        let current = sqlx::query("SELECT resources_revision FROM sessions WHERE id = $1 AND workspace_id = $2")
            .bind(id)
            .bind(workspace_id)
            .fetch_optional(&mut *tx)
            .await?;
        tx.rollback().await?;
        return match current {
            Some(row) => Ok(Err(row.try_get("resources_revision")?)),
            None => Err(StoreError::NotFound { what: "session", id: id.to_owned() }),
        };
    };
    let session = complete(&mut tx, session(&row)?, agent).await?;
    tx.commit().await?;
    Ok(Ok((session, stored)))
}

/// Puts the agent back into a session read by `RETURNING`: the one its writer stored,
/// or else the snapshot it references.
async fn complete(
    tx: &mut Transaction<'_, Any>,
    mut session: Session,
    agent: Option<(String, Value)>,
) -> StoreResult<Session> {
    let agent = match (agent, &session.agent_snapshot_id) {
        (Some((_, agent)), _) => Some(agent),
        (None, Some(snapshot)) => {
            let row = sqlx::query("SELECT body FROM agent_snapshots WHERE id = $1")
                .bind(snapshot)
                .fetch_optional(&mut **tx)
                .await?;
            row.map(|row| json(&row, "body")).transpose()?
        }
        (None, None) => None,
    };
    if let Some(agent) = agent {
        embed(&mut session.body, agent);
    }
    Ok(session)
}

async fn lock(tx: &mut Transaction<'_, Any>, id: &str) -> StoreResult<()> {
    sqlx::query("UPDATE sessions SET next_seq = next_seq WHERE id = $1").bind(id).execute(&mut **tx).await?;
    Ok(())
}

pub(super) async fn list(store: &SqlStore, workspace_id: &str, query: &SessionQuery) -> StoreResult<Vec<Session>> {
    // `before_id` pages backwards: scan in the opposite order, then flip the page.
    let backwards = query.before_id.is_some() && query.after_id.is_none();
    let descending = query.descending != backwards;
    let (order, cursor_op) = if descending { ("DESC", "<") } else { ("ASC", ">") };
    let cursor = if backwards { &query.before_id } else { &query.after_id };
    // Parameters: $1..$6 fixed, $7..$10 the creation bounds, then one per status.
    let statuses: Vec<String> = (0..query.statuses.len()).map(|i| format!("${}", 11 + i)).collect();
    let status_filter =
        if statuses.is_empty() { String::new() } else { format!("AND status IN ({})", statuses.join(", ")) };
    let sql = format!(
        "SELECT {SESSION_COLUMNS} FROM sessions \
         WHERE workspace_id = $1 AND ($2 IS NULL OR agent_id = $2) AND ($3 IS NULL OR agent_version = $3) \
           AND ($4 = 1 OR archived_at_ms IS NULL) AND ($5 IS NULL OR id {cursor_op} $5) {} {status_filter} \
         ORDER BY id {order} LIMIT $6",
        time_filter("created_at_ms", 7)
    );
    let mut statement = sqlx::query(&sql)
        .bind(workspace_id)
        .bind(&query.agent_id)
        .bind(query.agent_version)
        .bind(i64::from(query.include_archived))
        .bind(cursor)
        .bind(query.limit.max(0));
    statement = bind_bounds(statement, &query.created);
    for status in &query.statuses {
        statement = statement.bind(status);
    }
    let rows = statement.fetch_all(&store.pool).await?;
    let mut sessions: Vec<Session> = rows.iter().map(session).collect::<StoreResult<_>>()?;
    if backwards {
        sessions.reverse();
    }
    Ok(sessions)
}

pub(super) async fn archive(store: &SqlStore, workspace_id: &str, id: &str) -> StoreResult<Session> {
    let mut tx = store.pool.begin().await?;
    let row = sqlx::query(&format!(
        "UPDATE sessions SET archived_at_ms = COALESCE(archived_at_ms, $3), updated_at_ms = $3 \
         WHERE id = $1 AND workspace_id = $2 RETURNING {SESSION_COLUMNS}"
    ))
    .bind(id)
    .bind(workspace_id)
    .bind(store.now())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Err(StoreError::NotFound { what: "session", id: id.to_owned() });
    };
    let session = complete(&mut tx, session(&row)?, None).await?;
    tx.commit().await?;
    Ok(session)
}

pub(super) async fn delete(store: &SqlStore, workspace_id: &str, id: &str) -> StoreResult<bool> {
    let mut tx = store.pool.begin().await?;
    let owned = sqlx::query("SELECT id FROM sessions WHERE id = $1 AND workspace_id = $2")
        .bind(id)
        .bind(workspace_id)
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
    if !owned {
        return Ok(false);
    }
    // Children first and explicitly: SQLite enforces cascades only with foreign_keys on.
    for table in ["session_events", "runs", "session_threads"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE session_id = $1")).bind(id).execute(&mut *tx).await?;
    }
    sqlx::query("DELETE FROM sessions WHERE id = $1").bind(id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(true)
}

pub(super) async fn thread_session(
    store: &SqlStore,
    workspace_id: &str,
    thread_key: &str,
) -> StoreResult<Option<String>> {
    let row = sqlx::query("SELECT session_id FROM adapter_threads WHERE workspace_id = $1 AND thread_key = $2")
        .bind(workspace_id)
        .bind(thread_key)
        .fetch_optional(&store.pool)
        .await?;
    row.map(|row| Ok(row.try_get("session_id")?)).transpose()
}

pub(super) async fn bind_thread(
    store: &SqlStore,
    workspace_id: &str,
    thread_key: &str,
    session_id: &str,
) -> StoreResult<String> {
    sqlx::query(
        "INSERT INTO adapter_threads (workspace_id, thread_key, session_id, created_at_ms) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (workspace_id, thread_key) DO NOTHING",
    )
    .bind(workspace_id)
    .bind(thread_key)
    .bind(session_id)
    .bind(store.now())
    .execute(&store.pool)
    .await?;
    thread_session(store, workspace_id, thread_key)
        .await?
        .ok_or_else(|| StoreError::Backend("adapter thread binding vanished".into()))
}
