//! Runs: submission, claim, lease renewal and fenced commits. The claim and fencing
//! statements are the named files under `queries/runs/`.

use agentd_proto::v1::RunSubmission;
use async_trait::async_trait;
use prost::Message;
use sqlx::any::AnyRow;
use sqlx::{Any, FromRow, Row, Transaction};

use super::{Flag, SqlStore, sessions};
use crate::error::{StoreError, StoreResult};
use crate::ids::new_id;
use crate::store::{
    Claim, ClaimOutcome, NewEvent, OutboxMessage, Run, RunStatus, RunStore, Settled, Settlement, StoredEvent,
    StrandedRun, Submission, Submitted,
};

/// The outbox topic of run submissions.
pub const SUBMISSIONS_TOPIC: &str = "submissions";

/// A `runs` row as stored (`queries/runs/select_run.sql` names its columns).
#[derive(Debug, FromRow)]
pub(super) struct RunRow {
    id: String,
    session_id: String,
    thread_id: String,
    #[sqlx(try_from = "String")]
    status: RunStatus,
    epoch: i64,
    generation: i64,
    owner: Option<String>,
    lease_until_ms: Option<i64>,
    attempts: i64,
    max_attempts: i64,
    #[sqlx(try_from = "i64")]
    cancel_requested: Flag,
    #[sqlx(try_from = "i64")]
    pause_requested: Flag,
    outcome: Option<String>,
}

impl From<RunRow> for Run {
    fn from(row: RunRow) -> Self {
        Run {
            id: row.id,
            session_id: row.session_id,
            thread_id: row.thread_id,
            status: row.status,
            epoch: row.epoch,
            generation: row.generation,
            owner: row.owner,
            lease_until_ms: row.lease_until_ms,
            attempts: row.attempts,
            max_attempts: row.max_attempts,
            cancel_requested: row.cancel_requested.0,
            pause_requested: row.pause_requested.0,
            outcome: row.outcome,
        }
    }
}

/// A run from a row holding every column of [`RunRow`].
pub(super) fn run(row: &AnyRow) -> StoreResult<Run> {
    Ok(RunRow::from_row(row)?.into())
}

/// What `claim_run.sql` returns.
#[derive(Debug, FromRow)]
struct ClaimRow {
    session_id: String,
    thread_id: String,
    epoch: i64,
    generation: i64,
    attempts: i64,
    max_attempts: i64,
    #[sqlx(try_from = "i64")]
    cancel_requested: Flag,
    #[sqlx(try_from = "i64")]
    pause_requested: Flag,
    lease_until_ms: i64,
}

/// What `submit_run.sql` returns.
#[derive(Debug, FromRow)]
struct OpenRunRow {
    id: String,
    #[sqlx(try_from = "String")]
    status: RunStatus,
    generation: i64,
}

/// What `stranded_runs.sql` returns.
#[derive(Debug, FromRow)]
struct StrandedRow {
    id: String,
    session_id: String,
    thread_id: String,
    generation: i64,
    epoch: i64,
}

/// Writes a queue message to the outbox inside `tx` (`queries/runs/insert_outbox.sql`).
pub(super) async fn enqueue(
    tx: &mut Transaction<'_, Any>,
    message: &RunSubmission,
    msg_id: String,
    now: i64,
) -> StoreResult<OutboxMessage> {
    let payload = message.encode_to_vec();
    let id: i64 = sqlx::query(include_str!("../../queries/runs/insert_outbox.sql"))
        .bind(SUBMISSIONS_TOPIC)
        .bind(&msg_id)
        .bind(&payload)
        .bind(now)
        .fetch_one(&mut **tx)
        .await?
        .try_get("id")?;
    Ok(OutboxMessage { id, topic: SUBMISSIONS_TOPIC.to_owned(), msg_id, payload, created_at_ms: now })
}

/// Commits `events` under `claim` inside `tx` (which may already hold the session row:
/// the live inbox is taken first) and, when given, settles the attempt; the epoch check
/// guards it all. Commits `tx`.
pub(super) async fn commit_in(
    mut tx: Transaction<'_, Any>,
    claim: &Claim,
    events: Vec<NewEvent>,
    settlement: Option<Settlement>,
    now: i64,
) -> StoreResult<Settled> {
    // Lock order session → run (see allocate_seq.sql); a fenced outcome rolls the
    // appended events back with the rest of the transaction.
    let stored = sessions::append(&mut tx, &claim.session_id, events, now).await?;
    let status = match settlement {
        None => {
            let fence = sqlx::query(include_str!("../../queries/runs/fence_run.sql"))
                .bind(&claim.run_id)
                .bind(claim.epoch)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            if fence.is_none() {
                tx.rollback().await?;
                return Err(fenced(claim));
            }
            RunStatus::Leased
        }
        // Settling is fenced by the same condition as fence_run.sql, in one statement.
        Some(settlement) => {
            let (asked, outcome) = match settlement {
                Settlement::Awaiting => (RunStatus::Awaiting, None),
                Settlement::Done { outcome } => (RunStatus::Done, Some(outcome)),
            };
            let settled: Option<(String,)> = sqlx::query_as(include_str!("../../queries/runs/settle_run.sql"))
                .bind(&claim.run_id)
                .bind(claim.epoch)
                .bind(asked.as_str())
                .bind(outcome)
                .bind(now)
                .bind(claim.generation)
                .fetch_optional(&mut *tx)
                .await?;
            let Some((settled,)) = settled else {
                tx.rollback().await?;
                return Err(fenced(claim));
            };
            RunStatus::try_from(settled)?
        }
    };
    let settlement_asked = status != RunStatus::Leased;
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

#[async_trait]
impl RunStore for SqlStore {
    async fn submit(&self, submission: Submission) -> StoreResult<Submitted> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let events = if submission.events.is_empty() {
            sessions::lock(&mut tx, &submission.session_id, now).await?;
            Vec::new()
        } else {
            sessions::append(&mut tx, &submission.session_id, submission.events, now).await?
        };
        // The session row is locked now, so two submissions to one thread serialize and
        // the second sees the run the first created.
        let open: Vec<OpenRunRow> = sqlx::query_as(include_str!("../../queries/runs/submit_run.sql"))
            .bind(&submission.thread_id)
            .bind(now)
            .fetch_all(&mut *tx)
            .await?;
        let (run_id, generation, live) = match open.into_iter().next() {
            Some(row) => (row.id, row.generation, row.status == RunStatus::Leased),
            None => {
                let run_id = new_id("run");
                sqlx::query(include_str!("../../queries/runs/insert_run.sql"))
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
        let outbox = enqueue(&mut tx, &message, format!("{run_id}:{generation}"), now).await?;
        tx.commit().await?;
        Ok(Submitted { run_id, generation, live, events, outbox })
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<Run>> {
        let row: Option<RunRow> = sqlx::query_as(include_str!("../../queries/runs/select_run.sql"))
            .bind(run_id)
            .fetch_optional(&self.readers)
            .await?;
        Ok(row.map(Run::from))
    }

    async fn claim_run(&self, run_id: &str, owner: &str, lease_ms: i64) -> StoreResult<ClaimOutcome> {
        let now = self.now();
        let claimed: Result<Option<ClaimRow>, sqlx::Error> =
            sqlx::query_as(include_str!("../../queries/runs/claim_run.sql"))
                .bind(run_id)
                .bind(owner)
                .bind(now)
                .bind(lease_ms)
                .fetch_optional(&self.primary)
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
                epoch: row.epoch,
                session_id: row.session_id,
                thread_id: row.thread_id,
                generation: row.generation,
                attempts: row.attempts,
                max_attempts: row.max_attempts,
                cancel_requested: row.cancel_requested.0,
                pause_requested: row.pause_requested.0,
                lease_until_ms: row.lease_until_ms,
            }));
        }
        // Not claimable: tell a live lease (retry later) from a settled or unknown run.
        Ok(match self.get_run(run_id).await? {
            Some(Run { status: RunStatus::Leased, lease_until_ms: Some(lease_until_ms), .. }) => {
                ClaimOutcome::Held { lease_until_ms }
            }
            _ => ClaimOutcome::Stale,
        })
    }

    async fn renew_lease(&self, claim: &Claim, lease_ms: i64) -> StoreResult<i64> {
        let row: Option<(i64,)> = sqlx::query_as(include_str!("../../queries/runs/renew_lease.sql"))
            .bind(&claim.run_id)
            .bind(claim.epoch)
            .bind(&claim.owner)
            .bind(self.now())
            .bind(lease_ms)
            .fetch_optional(&self.primary)
            .await?;
        row.map(|(until,)| until).ok_or_else(|| fenced(claim))
    }

    async fn relinquish(&self, claim: &Claim) -> StoreResult<()> {
        let row = sqlx::query(include_str!("../../queries/runs/relinquish_run.sql"))
            .bind(&claim.run_id)
            .bind(claim.epoch)
            .bind(&claim.owner)
            .bind(self.now())
            .fetch_optional(&self.primary)
            .await?;
        row.map(|_| ()).ok_or_else(|| fenced(claim))
    }

    async fn commit(&self, claim: &Claim, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>> {
        let tx = self.primary.begin().await?;
        Ok(commit_in(tx, claim, events, None, self.now()).await?.events)
    }

    async fn settle(&self, claim: &Claim, events: Vec<NewEvent>, settlement: Settlement) -> StoreResult<Settled> {
        let tx = self.primary.begin().await?;
        commit_in(tx, claim, events, Some(settlement), self.now()).await
    }

    async fn stranded_runs(&self, cutoff_ms: i64, limit: i64) -> StoreResult<Vec<StrandedRun>> {
        let rows: Vec<StrandedRow> = sqlx::query_as(include_str!("../../queries/runs/stranded_runs.sql"))
            .bind(cutoff_ms)
            .bind(limit.max(0))
            .fetch_all(&self.readers)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| StrandedRun {
                run_id: row.id,
                session_id: row.session_id,
                thread_id: row.thread_id,
                generation: row.generation,
                epoch: row.epoch,
            })
            .collect())
    }
}
