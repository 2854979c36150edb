//! The environment work queue (hands). Every transition is one conditional UPDATE, so
//! concurrent pollers and gateways never both win: the row's state is the lock.

use async_trait::async_trait;
use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::tenancy::hash_secret;
use super::{JsonText, SqlStore, json};
use crate::error::{StoreError, StoreResult};
use crate::ids::new_id;
use crate::store::{Heartbeat, LostHands, SessionsToken, WorkConflict, WorkItem, WorkSource, WorkStats, WorkStore};

const COLUMNS: &str = "id, workspace_id, environment_id, session_id, hands, state, metadata, offered_at_ms, \
    lost_leases, last_heartbeat, ttl_seconds, lease_until_ms, created_at_ms, acknowledged_at_ms, started_at_ms, \
    latest_heartbeat_at_ms, stop_requested_at_ms, stopped_at_ms";

/// Heartbeat TTL bounds (seconds) for `desired_ttl_seconds`.
const TTL_RANGE: (i64, i64) = (5, 300);

/// A `work_items` row as stored (the [`COLUMNS`]).
#[derive(Debug, FromRow)]
struct WorkItemRow {
    id: String,
    workspace_id: String,
    environment_id: String,
    session_id: String,
    hands: String,
    state: String,
    #[sqlx(try_from = "String")]
    metadata: JsonText,
    offered_at_ms: Option<i64>,
    lost_leases: i64,
    last_heartbeat: Option<String>,
    ttl_seconds: i64,
    lease_until_ms: Option<i64>,
    created_at_ms: i64,
    acknowledged_at_ms: Option<i64>,
    started_at_ms: Option<i64>,
    latest_heartbeat_at_ms: Option<i64>,
    stop_requested_at_ms: Option<i64>,
    stopped_at_ms: Option<i64>,
}

impl From<WorkItemRow> for WorkItem {
    fn from(row: WorkItemRow) -> Self {
        WorkItem {
            id: row.id,
            workspace_id: row.workspace_id,
            environment_id: row.environment_id,
            session_id: row.session_id,
            hands: row.hands,
            state: row.state,
            metadata: row.metadata.0,
            offered_at_ms: row.offered_at_ms,
            lost_leases: row.lost_leases,
            last_heartbeat: row.last_heartbeat,
            ttl_seconds: row.ttl_seconds,
            lease_until_ms: row.lease_until_ms,
            created_at_ms: row.created_at_ms,
            acknowledged_at_ms: row.acknowledged_at_ms,
            started_at_ms: row.started_at_ms,
            latest_heartbeat_at_ms: row.latest_heartbeat_at_ms,
            stop_requested_at_ms: row.stop_requested_at_ms,
            stopped_at_ms: row.stopped_at_ms,
        }
    }
}

/// A work item from a row holding the [`COLUMNS`].
fn item(row: &AnyRow) -> StoreResult<WorkItem> {
    Ok(WorkItemRow::from_row(row)?.into())
}

/// Applies `set` where `condition` holds; otherwise reports the item as it is.
async fn transition(
    store: &SqlStore,
    environment_id: &str,
    work_id: &str,
    set: &str,
    condition: &str,
    now: i64,
) -> StoreResult<Option<Result<WorkItem, WorkConflict>>> {
    let row = sqlx::query(&format!(
        "UPDATE work_items SET {set} WHERE id = $1 AND environment_id = $2 AND {condition} RETURNING {COLUMNS}"
    ))
    .bind(work_id)
    .bind(environment_id)
    .bind(now)
    .fetch_optional(&store.primary)
    .await?;
    if let Some(row) = row {
        return Ok(Some(Ok(item(&row)?)));
    }
    Ok(store.get_work(environment_id, work_id).await?.map(|current| Err(WorkConflict { state: current.state })))
}

async fn ack(
    store: &SqlStore,
    environment_id: &str,
    work_id: &str,
) -> StoreResult<Option<Result<WorkItem, WorkConflict>>> {
    // The ack opens a lease of the item's TTL: a worker that never heartbeats loses it.
    transition(
        store,
        environment_id,
        work_id,
        "state = 'starting', acknowledged_at_ms = $3, offered_at_ms = NULL, lease_until_ms = $3 + ttl_seconds * 1000",
        "state = 'queued' AND offered_at_ms IS NOT NULL",
        store.now(),
    )
    .await
}

/// `stamp`, made different from `previous` when both fall in the same microsecond.
fn unique_stamp(stamp: &str, previous: Option<&str>) -> String {
    if previous != Some(stamp) {
        return stamp.to_owned();
    }
    let (head, _) = stamp.split_at(stamp.len() - 1);
    format!("{head}{}Z", rand::random_range(0..1000))
}

#[async_trait]
impl WorkStore for SqlStore {
    async fn ack_work(&self, environment_id: &str, work_id: &str) -> StoreResult<Result<WorkItem, WorkConflict>> {
        match ack(self, environment_id, work_id).await? {
            Some(outcome) => Ok(outcome),
            None => Err(StoreError::NotFound { what: "work", id: work_id.to_owned() }),
        }
    }

    async fn ensure_work_item(
        &self,
        workspace_id: &str,
        environment_id: &str,
        session_id: &str,
        hands: &str,
    ) -> StoreResult<Option<WorkItem>> {
        let row = sqlx::query(&format!(
            "INSERT INTO work_items (id, workspace_id, environment_id, session_id, hands, state, created_at_ms) \
             VALUES ($1, $2, $3, $4, $5, 'queued', $6) \
             ON CONFLICT (session_id) WHERE state <> 'stopped' DO NOTHING RETURNING {COLUMNS}"
        ))
        .bind(new_id("work"))
        .bind(workspace_id)
        .bind(environment_id)
        .bind(session_id)
        .bind(hands)
        .bind(self.now())
        .fetch_optional(&self.primary)
        .await?;
        row.as_ref().map(item).transpose()
    }

    async fn poll_work(
        &self,
        source: &WorkSource,
        reclaim_older_than_ms: i64,
        token_hash: &str,
    ) -> StoreResult<Option<WorkItem>> {
        let now = self.now();
        let (filter, key) = match source {
            WorkSource::Environment(environment_id) => ("environment_id = $3", environment_id.as_str()),
            WorkSource::Cloud { workspace_id } => ("workspace_id = $3 AND hands = 'cloud'", workspace_id.as_str()),
        };
        let offerable = "state = 'queued' AND (offered_at_ms IS NULL OR offered_at_ms < $2)";
        // A concurrent poller may take the chosen row first; the re-checked condition then
        // matches nothing and the next candidate is tried.
        for _ in 0..8 {
            let row = sqlx::query(&format!(
                "UPDATE work_items SET offered_at_ms = $1, token_hash = $4 \
                 WHERE id = (SELECT id FROM work_items WHERE {filter} AND {offerable} ORDER BY created_at_ms, id LIMIT 1) \
                   AND {offerable} RETURNING {COLUMNS}"
            ))
            .bind(now)
            .bind(now - reclaim_older_than_ms)
            .bind(key)
            .bind(token_hash)
            .fetch_optional(&self.primary)
            .await?;
            match row {
                Some(row) => return item(&row).map(Some),
                None => {
                    let waiting: Option<AnyRow> = sqlx::query(&format!(
                        "SELECT id FROM work_items WHERE {} AND {offerable} LIMIT 1",
                        filter.replace("$3", "$1")
                    ))
                    .bind(key)
                    .bind(now - reclaim_older_than_ms)
                    .fetch_optional(&self.primary)
                    .await?;
                    if waiting.is_none() {
                        return Ok(None);
                    }
                }
            }
        }
        Ok(None)
    }

    async fn note_work_poller(&self, environment_id: &str, worker_id: &str) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO work_pollers (environment_id, worker_id, polled_at_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (environment_id, worker_id) DO UPDATE SET polled_at_ms = excluded.polled_at_ms",
        )
        .bind(environment_id)
        .bind(worker_id)
        .bind(self.now())
        .execute(&self.primary)
        .await?;
        Ok(())
    }

    async fn get_work(&self, environment_id: &str, work_id: &str) -> StoreResult<Option<WorkItem>> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM work_items WHERE id = $1 AND environment_id = $2"))
            .bind(work_id)
            .bind(environment_id)
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(item).transpose()
    }

    async fn list_work(&self, environment_id: &str, after_id: Option<&str>, limit: i64) -> StoreResult<Vec<WorkItem>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM work_items WHERE environment_id = $1 AND ($2 IS NULL OR id < $2) \
             ORDER BY id DESC LIMIT $3"
        ))
        .bind(environment_id)
        .bind(after_id)
        .bind(limit)
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(item).collect()
    }

    async fn heartbeat_work(
        &self,
        environment_id: &str,
        work_id: &str,
        expected: &str,
        ttl_seconds: Option<i64>,
    ) -> StoreResult<Option<Heartbeat>> {
        let Some(current) = self.get_work(environment_id, work_id).await? else { return Ok(None) };
        match current.state.as_str() {
            "stopping" | "stopped" => return Ok(Some(Heartbeat::Recorded { item: current, extended: false })),
            // A holder whose lease expired (the item is queued again) is told it lost it.
            "queued" if expected != "NO_HEARTBEAT" => return Ok(Some(Heartbeat::PreconditionFailed(current))),
            "queued" => return Ok(Some(Heartbeat::NotAcked(current))),
            _ => {}
        }
        let now = self.now();
        // Each heartbeat string is unique to the row (time plus a counter in the fraction)
        // so that a worker echoing a stale one is told apart from the current holder.
        let stamp = chrono::DateTime::from_timestamp_millis(now)
            .unwrap_or_default()
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let stamp = unique_stamp(&stamp, current.last_heartbeat.as_deref());
        let ttl = ttl_seconds.map_or(current.ttl_seconds, |ttl| ttl.clamp(TTL_RANGE.0, TTL_RANGE.1));
        let matches = if expected == "NO_HEARTBEAT" { "last_heartbeat IS NULL" } else { "last_heartbeat = $4" };
        let row = sqlx::query(&format!(
            "UPDATE work_items SET state = 'active', started_at_ms = COALESCE(started_at_ms, $3), \
             last_heartbeat = $5, latest_heartbeat_at_ms = $3, ttl_seconds = $6, lease_until_ms = $3 + $6 * 1000 \
             WHERE id = $1 AND environment_id = $2 AND state IN ('starting', 'active') AND {matches} \
             RETURNING {COLUMNS}"
        ))
        .bind(work_id)
        .bind(environment_id)
        .bind(now)
        .bind(expected)
        .bind(&stamp)
        .bind(ttl)
        .fetch_optional(&self.primary)
        .await?;
        if let Some(row) = row {
            return Ok(Some(Heartbeat::Recorded { item: item(&row)?, extended: true }));
        }
        // Lost the race or the precondition: report the item as it is now.
        let Some(current) = self.get_work(environment_id, work_id).await? else { return Ok(None) };
        Ok(Some(match current.state.as_str() {
            "stopping" | "stopped" => Heartbeat::Recorded { item: current, extended: false },
            "queued" if expected == "NO_HEARTBEAT" => Heartbeat::NotAcked(current),
            _ => Heartbeat::PreconditionFailed(current),
        }))
    }

    async fn stop_work(
        &self,
        environment_id: &str,
        work_id: &str,
        force: bool,
    ) -> StoreResult<Option<Result<WorkItem, WorkConflict>>> {
        let now = self.now();
        if force {
            return transition(
                self,
                environment_id,
                work_id,
                "state = 'stopped', stop_requested_at_ms = COALESCE(stop_requested_at_ms, $3), stopped_at_ms = $3, \
                 token_hash = NULL, lease_until_ms = NULL",
                "state <> 'stopped'",
                now,
            )
            .await;
        }
        // Graceful: an item no worker holds stops at once; a held one is asked to stop.
        transition(
            self,
            environment_id,
            work_id,
            "stop_requested_at_ms = COALESCE(stop_requested_at_ms, $3), \
             stopped_at_ms = CASE WHEN state = 'queued' THEN $3 ELSE stopped_at_ms END, \
             token_hash = CASE WHEN state = 'queued' THEN NULL ELSE token_hash END, \
             state = CASE WHEN state = 'queued' THEN 'stopped' ELSE 'stopping' END",
            "state <> 'stopped'",
            now,
        )
        .await
    }

    async fn update_work_metadata(
        &self,
        environment_id: &str,
        work_id: &str,
        patch: &Value,
    ) -> StoreResult<Option<WorkItem>> {
        let mut tx = self.primary.begin().await?;
        let row = sqlx::query("SELECT metadata FROM work_items WHERE id = $1 AND environment_id = $2")
            .bind(work_id)
            .bind(environment_id)
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let mut metadata = json(&row, "metadata")?;
        if let (Some(target), Some(patch)) = (metadata.as_object_mut(), patch.as_object()) {
            for (key, value) in patch {
                match value {
                    Value::Null => target.remove(key),
                    value => target.insert(key.clone(), value.clone()),
                };
            }
        }
        let row = sqlx::query(&format!("UPDATE work_items SET metadata = $2 WHERE id = $1 RETURNING {COLUMNS}"))
            .bind(work_id)
            .bind(metadata.to_string())
            .fetch_one(&mut tx)
            .await?;
        tx.commit().await?;
        item(&row).map(Some)
    }

    async fn work_stats(&self, environment_id: &str) -> StoreResult<WorkStats> {
        let now = self.now();
        let row = sqlx::query(
            "SELECT \
               COALESCE(SUM(CASE WHEN state = 'queued' AND offered_at_ms IS NULL THEN 1 ELSE 0 END), 0) AS depth, \
               COALESCE(SUM(CASE WHEN state = 'queued' AND offered_at_ms IS NOT NULL THEN 1 ELSE 0 END), 0) AS pending, \
               MIN(CASE WHEN state = 'queued' THEN created_at_ms END) AS oldest \
             FROM work_items WHERE environment_id = $1",
        )
        .bind(environment_id)
        .fetch_one(&self.readers)
        .await?;
        let pollers =
            sqlx::query("SELECT COUNT(*) AS n FROM work_pollers WHERE environment_id = $1 AND polled_at_ms > $2")
                .bind(environment_id)
                .bind(now - 30_000)
                .fetch_one(&self.readers)
                .await?;
        Ok(WorkStats {
            depth: row.try_get("depth")?,
            pending: row.try_get("pending")?,
            oldest_queued_at_ms: row.try_get("oldest")?,
            workers_polling: pollers.try_get("n")?,
        })
    }

    async fn resolve_sessions_token(&self, token: &str) -> StoreResult<Option<SessionsToken>> {
        let row = sqlx::query(
            "SELECT i.id, i.session_id, i.environment_id, i.workspace_id, w.organization_id FROM work_items i \
             JOIN workspaces w ON w.id = i.workspace_id \
             WHERE i.token_hash = $1 AND i.state <> 'stopped'",
        )
        .bind(hash_secret(token))
        .fetch_optional(&self.readers)
        .await?;
        row.map(|row| {
            Ok(SessionsToken {
                work_id: row.try_get("id")?,
                session_id: row.try_get("session_id")?,
                environment_id: row.try_get("environment_id")?,
                workspace_id: row.try_get("workspace_id")?,
                organization_id: row.try_get("organization_id")?,
            })
        })
        .transpose()
    }

    async fn expire_work_leases(&self, max_lost_leases: i64) -> StoreResult<Vec<LostHands>> {
        let now = self.now();
        // A stopping item whose worker went away is stopped.
        sqlx::query(
            "UPDATE work_items SET state = 'stopped', stopped_at_ms = $1, token_hash = NULL, lease_until_ms = NULL \
             WHERE state = 'stopping' AND lease_until_ms < $1",
        )
        .bind(now)
        .execute(&self.primary)
        .await?;
        // Given up: stopped, reported so the session's open calls fail.
        let rows = sqlx::query(
            "UPDATE work_items SET state = 'stopped', stopped_at_ms = $1, token_hash = NULL, lease_until_ms = NULL, \
             lost_leases = lost_leases + 1 \
             WHERE state IN ('starting', 'active') AND lease_until_ms < $1 AND lost_leases + 1 >= $2 \
             RETURNING id, session_id, lost_leases",
        )
        .bind(now)
        .bind(max_lost_leases)
        .fetch_all(&self.primary)
        .await?;
        // Otherwise offered again, to any worker, with a fresh token.
        sqlx::query(
            "UPDATE work_items SET state = 'queued', offered_at_ms = NULL, token_hash = NULL, last_heartbeat = NULL, \
             lease_until_ms = NULL, acknowledged_at_ms = NULL, lost_leases = lost_leases + 1 \
             WHERE state IN ('starting', 'active') AND lease_until_ms < $1",
        )
        .bind(now)
        .execute(&self.primary)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(LostHands {
                    work_id: row.try_get("id")?,
                    session_id: row.try_get("session_id")?,
                    lost_leases: row.try_get("lost_leases")?,
                })
            })
            .collect()
    }
}
