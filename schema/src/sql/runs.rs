//! Runs: submission, claim, lease renewal and fenced commits.

use agentd_proto::v1::RunSubmission;
use prost::Message;
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::{SqlStore, flag, sessions};
use crate::error::{StoreError, StoreResult};
use crate::ids::new_id;
use crate::store::{
    Claim, ClaimOutcome, NewEvent, OutboxMessage, Run, RunStatus, Settled, Settlement, StrandedRun, Submission,
    Submitted,
};

/// The outbox topic of run submissions.
pub const SUBMISSIONS_TOPIC: &str = "submissions";

pub(super) const RUN_COLUMNS: &str = "id, session_id, thread_id, status, epoch, generation, owner, lease_until_ms, \
                           attempts, max_attempts, cancel_requested, pause_requested, outcome";

pub(super) fn run(row: &AnyRow) -> StoreResult<Run> {
    let status: String = row.try_get("status")?;
    Ok(Run {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        thread_id: row.try_get("thread_id")?,
        status: RunStatus::parse(&status)
            .ok_or_else(|| StoreError::Backend(format!("unknown run status {status:?}")))?,
        epoch: row.try_get("epoch")?,
        generation: row.try_get("generation")?,
        owner: row.try_get("owner")?,
        lease_until_ms: row.try_get("lease_until_ms")?,
        attempts: row.try_get("attempts")?,
        max_attempts: row.try_get("max_attempts")?,
        cancel_requested: flag(row, "cancel_requested")?,
        pause_requested: flag(row, "pause_requested")?,
        outcome: row.try_get("outcome")?,
    })
}

pub(super) async fn submit(store: &SqlStore, submission: Submission) -> StoreResult<Submitted> {
    let now = store.now();
    let mut tx = store.pool.begin().await?;
    let events = if submission.events.is_empty() {
        lock_session(&mut tx, &submission.session_id, now).await?;
        Vec::new()
    } else {
        sessions::append(&mut tx, &submission.session_id, submission.events, now).await?
    };
    // The session row is locked now, so two submissions to one thread serialize and
    // the second sees the run the first created.
    let open = sqlx::query(include_str!("../../queries/submit_run.sql"))
        .bind(&submission.thread_id)
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
    let (run_id, generation, live) = match open.first() {
        Some(row) => {
            let status: String = row.try_get("status")?;
            (row.try_get::<String, _>("id")?, row.try_get::<i64, _>("generation")?, status == "leased")
        }
        None => {
            let run_id = new_id("run");
            sqlx::query(
                "INSERT INTO runs (id, session_id, thread_id, status, epoch, generation, attempts, max_attempts, \
                 cancel_requested, created_at_ms, updated_at_ms) \
                 VALUES ($1, $2, $3, 'pending', 0, 1, 0, $4, 0, $5, $5)",
            )
            .bind(&run_id)
            .bind(&submission.session_id)
            .bind(&submission.thread_id)
            .bind(submission.max_attempts)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            (run_id, 1, false)
        }
    };
    let message = RunSubmission {
        run_id: run_id.clone(),
        session_id: submission.session_id.clone(),
        thread_id: submission.thread_id.clone(),
        generation: generation as u64,
        trace_context: submission.trace_context.into_iter().collect(),
        submitted_at_ms: now,
    };
    let msg_id = format!("{run_id}:{generation}");
    let payload = message.encode_to_vec();
    let outbox_id: i64 =
        sqlx::query("INSERT INTO outbox (topic, msg_id, payload, created_at_ms) VALUES ($1, $2, $3, $4) RETURNING id")
            .bind(SUBMISSIONS_TOPIC)
            .bind(&msg_id)
            .bind(&payload)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?
            .try_get("id")?;
    tx.commit().await?;
    Ok(Submitted {
        run_id,
        generation,
        live,
        events,
        outbox: OutboxMessage {
            id: outbox_id,
            topic: SUBMISSIONS_TOPIC.to_owned(),
            msg_id,
            payload,
            created_at_ms: now,
        },
    })
}

async fn lock_session(tx: &mut Transaction<'_, Any>, session_id: &str, now: i64) -> StoreResult<()> {
    let touched = sqlx::query("UPDATE sessions SET updated_at_ms = $2 WHERE id = $1")
        .bind(session_id)
        .bind(now)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    if touched == 0 {
        return Err(StoreError::NotFound { what: "session", id: session_id.to_owned() });
    }
    Ok(())
}

pub(super) async fn get(store: &SqlStore, run_id: &str) -> StoreResult<Option<Run>> {
    let row = sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"))
        .bind(run_id)
        .fetch_optional(&store.pool)
        .await?;
    row.as_ref().map(run).transpose()
}

pub(super) async fn claim(store: &SqlStore, run_id: &str, owner: &str, lease_ms: i64) -> StoreResult<ClaimOutcome> {
    let now = store.now();
    let claimed = sqlx::query(include_str!("../../queries/claim_run.sql"))
        .bind(run_id)
        .bind(owner)
        .bind(now)
        .bind(lease_ms)
        .fetch_optional(&store.pool)
        .await;
    let row = match claimed {
        Ok(row) => row,
        Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
            return Ok(ClaimOutcome::ThreadBusy);
        }
        Err(other) => return Err(other.into()),
    };
    if let Some(row) = row {
        return Ok(ClaimOutcome::Claimed(Claim {
            run_id: run_id.to_owned(),
            owner: owner.to_owned(),
            epoch: row.try_get("epoch")?,
            session_id: row.try_get("session_id")?,
            thread_id: row.try_get("thread_id")?,
            generation: row.try_get("generation")?,
            attempts: row.try_get("attempts")?,
            max_attempts: row.try_get("max_attempts")?,
            cancel_requested: flag(&row, "cancel_requested")?,
            pause_requested: flag(&row, "pause_requested")?,
            lease_until_ms: row.try_get("lease_until_ms")?,
        }));
    }
    // Not claimable: tell a live lease (retry later) from a settled or unknown run.
    Ok(match get(store, run_id).await? {
        Some(Run { status: RunStatus::Leased, lease_until_ms: Some(lease_until_ms), .. }) => {
            ClaimOutcome::Held { lease_until_ms }
        }
        _ => ClaimOutcome::Stale,
    })
}

pub(super) async fn renew(store: &SqlStore, claim: &Claim, lease_ms: i64) -> StoreResult<i64> {
    let row = sqlx::query(include_str!("../../queries/renew_lease.sql"))
        .bind(&claim.run_id)
        .bind(claim.epoch)
        .bind(&claim.owner)
        .bind(store.now())
        .bind(lease_ms)
        .fetch_optional(&store.pool)
        .await?;
    match row {
        Some(row) => Ok(row.try_get("lease_until_ms")?),
        None => Err(fenced(claim)),
    }
}

pub(super) async fn stranded(store: &SqlStore, cutoff_ms: i64, limit: i64) -> StoreResult<Vec<StrandedRun>> {
    let rows = sqlx::query(include_str!("../../queries/stranded_runs.sql"))
        .bind(cutoff_ms)
        .bind(limit.max(0))
        .fetch_all(&store.pool)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(StrandedRun {
                run_id: row.try_get("id")?,
                session_id: row.try_get("session_id")?,
                thread_id: row.try_get("thread_id")?,
                generation: row.try_get("generation")?,
                epoch: row.try_get("epoch")?,
            })
        })
        .collect()
}

pub(super) async fn relinquish(store: &SqlStore, claim: &Claim) -> StoreResult<()> {
    let row = sqlx::query(include_str!("../../queries/relinquish_run.sql"))
        .bind(&claim.run_id)
        .bind(claim.epoch)
        .bind(&claim.owner)
        .bind(store.now())
        .fetch_optional(&store.pool)
        .await?;
    row.map(|_| ()).ok_or_else(|| fenced(claim))
}

/// Commits `events` under `claim` and, when given, settles the attempt, all in one
/// transaction that the epoch check guards.
pub(super) async fn commit(
    store: &SqlStore,
    claim: &Claim,
    events: Vec<NewEvent>,
    settlement: Option<Settlement>,
) -> StoreResult<Settled> {
    commit_inner(store, claim, events, settlement, false).await
}

/// [`commit`], optionally taking the session's live inbox ahead of `events`.
pub(super) async fn commit_inner(
    store: &SqlStore,
    claim: &Claim,
    events: Vec<NewEvent>,
    settlement: Option<Settlement>,
    take_inbox: bool,
) -> StoreResult<Settled> {
    let now = store.now();
    let mut tx = store.pool.begin().await?;
    let events = if take_inbox {
        let mut taken = super::inbox::take(&mut tx, &claim.session_id, &claim.thread_id).await?;
        taken.extend(events);
        taken
    } else {
        events
    };
    // Lock order session → run (see allocate_seq.sql); a fenced outcome rolls the
    // appended events back with the rest of the transaction.
    let stored = sessions::append(&mut tx, &claim.session_id, events, now).await?;
    let fence = sqlx::query(include_str!("../../queries/fence_run.sql"))
        .bind(&claim.run_id)
        .bind(claim.epoch)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
    if fence.is_none() {
        tx.rollback().await?;
        return Err(fenced(claim));
    }
    let mut status = RunStatus::Leased;
    let settlement_asked = settlement.is_some();
    if let Some(settlement) = settlement {
        let (asked, outcome) = match settlement {
            Settlement::Awaiting => (RunStatus::Awaiting, None),
            Settlement::Done { outcome } => (RunStatus::Done, Some(outcome)),
        };
        let settled = sqlx::query(include_str!("../../queries/settle_run.sql"))
            .bind(&claim.run_id)
            .bind(claim.epoch)
            .bind(asked.as_str())
            .bind(outcome)
            .bind(now)
            .bind(claim.generation)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(settled) = settled else {
            // Unreachable while the fence holds the row; never commit half a settlement.
            tx.rollback().await?;
            return Err(fenced(claim));
        };
        let text: String = settled.try_get("status")?;
        status = RunStatus::parse(&text).ok_or_else(|| StoreError::Backend(format!("unknown run status {text:?}")))?;
    }
    let (before, after) =
        if settlement_asked { ("settle.before", "settle.after") } else { ("commit.before", "commit.after") };
    crate::faults::crash_point(before);
    tx.commit().await?;
    crate::faults::crash_point(after);
    Ok(Settled { events: stored, status })
}

fn fenced(claim: &Claim) -> StoreError {
    StoreError::Fenced { run_id: claim.run_id.clone(), epoch: claim.epoch }
}
