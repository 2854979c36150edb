//! Runs: submission, claim, lease renewal, fenced commits and the handoff that commits
//! a step reaching past its own thread (ADR 0022). The claim and fencing statements are
//! the named files under `queries/runs/`.

use agentd_proto::v1::RunSubmission;
use async_trait::async_trait;
use prost::Message;
use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::session_threads::{self, Condition};
use super::{Backend, Flag, SqlStore, Tx, sessions};
use crate::error::{StoreError, StoreResult};
use crate::ids::new_id;
use crate::store::{
    Claim, ClaimOutcome, DEFAULT_MAX_ATTEMPTS, HandedOff, Handoff, NewEvent, OutboxMessage, Run, RunStatus, RunStore,
    Session, Settled, Settlement, StoredEvent, StrandedRun, Submission, Submitted,
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

/// What `claim_run.*.sql` returns.
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
    tx: &mut Tx,
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
        .fetch_one(&mut *tx)
        .await?
        .try_get("id")?;
    Ok(OutboxMessage { id, topic: SUBMISSIONS_TOPIC.to_owned(), msg_id, payload, created_at_ms: now })
}

/// Commits `events` under `claim` inside `tx` (which may already hold the session row:
/// the live inbox is taken first) and, when given, settles the attempt; the epoch check
/// guards it all. Commits `tx`. The usage the commit leaves is remembered for the
/// claim's next commit (`sessions::KnownUsage`).
pub(super) async fn commit_in(
    store: &SqlStore,
    mut tx: Tx,
    claim: &Claim,
    events: Vec<NewEvent>,
    settlement: Option<Settlement>,
) -> StoreResult<Settled> {
    let now = store.now();
    // Lock order session → run (see allocate_seq.sql); a fenced outcome rolls the
    // appended events back with the rest of the transaction. A commit that does not
    // settle is fenced by its allocation (ADR 0036); one that appends nothing, or
    // settles, by its run write.
    let known = store.known_usage.get(&claim.session_id);
    let fence = settlement.is_none().then_some(sessions::Fence {
        run_id: &claim.run_id,
        epoch: claim.epoch,
        backend: store.backend,
    });
    let appended = sessions::append_seen(&mut tx, &claim.session_id, events, now, known, fence).await?;
    let status = match appended.fence_held {
        Some(true) => Ok(RunStatus::Leased),
        Some(false) => Err(fenced(claim)),
        None => fence_or_settle(&mut tx, claim, settlement, now).await,
    };
    let status = match status {
        Ok(status) => status,
        Err(error) => {
            tx.rollback().await?;
            return Err(error);
        }
    };
    let settlement_asked = status != RunStatus::Leased;
    let (before, after) =
        if settlement_asked { ("settle.before", "settle.after") } else { ("commit.before", "commit.after") };
    crate::faults::crash_point(before);
    tx.commit().await?;
    crate::faults::crash_point(after);
    if let Some(usage) = appended.usage {
        store.known_usage.record(&claim.session_id, usage);
    }
    Ok(Settled { events: appended.events, status })
}

/// The run write of a transaction under `claim`: `fence_run.sql`, or with a settlement
/// `settle_run.sql` (fenced by the same condition, in one statement). `Fenced` when the
/// epoch is stale; the caller rolls back. Returns the run's status afterwards.
async fn fence_or_settle(
    tx: &mut Tx,
    claim: &Claim,
    settlement: Option<Settlement>,
    now: i64,
) -> StoreResult<RunStatus> {
    let Some(settlement) = settlement else {
        let fence = sqlx::query(include_str!("../../queries/runs/fence_run.sql"))
            .bind(&claim.run_id)
            .bind(claim.epoch)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
        return fence.map(|_| RunStatus::Leased).ok_or_else(|| fenced(claim));
    };
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
    let (settled,) = settled.ok_or_else(|| fenced(claim))?;
    RunStatus::try_from(settled)
}

/// A thread's run made runnable by [`make_runnable`].
#[derive(Debug)]
struct Runnable {
    run_id: String,
    generation: i64,
    live: bool,
    outbox: OutboxMessage,
}

/// Makes `thread_id`'s run runnable inside `tx`, which holds the session row (so two
/// submissions to one thread serialize and the second sees the run the first created):
/// its open run (`submit_run.sql`) or a new one (`insert_run.sql`, retry budget
/// `max_attempts`), with its queue message in the outbox. A wake from another thread
/// (`keep_pause`) leaves a paused ticket paused: then there is nothing to run (`None`).
async fn make_runnable(
    tx: &mut Tx,
    session_id: &str,
    thread_id: &str,
    max_attempts: i64,
    keep_pause: bool,
    trace_context: &[(String, String)],
    now: i64,
) -> StoreResult<Option<Runnable>> {
    let open: Vec<OpenRunRow> = sqlx::query_as(include_str!("../../queries/runs/submit_run.sql"))
        .bind(thread_id)
        .bind(now)
        .bind(i64::from(keep_pause))
        .bind(session_id)
        .fetch_all(&mut *tx)
        .await?;
    if open.first().is_some_and(|row| row.status == RunStatus::Awaiting) {
        return Ok(None);
    }
    let (run_id, generation, live) = match open.into_iter().next() {
        Some(row) => (row.id, row.generation, row.status == RunStatus::Leased),
        None => {
            let run_id = new_id("run");
            sqlx::query(include_str!("../../queries/runs/insert_run.sql"))
                .bind(&run_id)
                .bind(session_id)
                .bind(thread_id)
                .bind(max_attempts)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            (run_id, 1, false)
        }
    };
    let message = RunSubmission {
        run_id: run_id.clone(),
        session_id: session_id.to_owned(),
        thread_id: thread_id.to_owned(),
        generation: generation as u64,
        trace_context: trace_context.iter().cloned().collect(),
        submitted_at_ms: now,
    };
    let outbox = enqueue(tx, &message, format!("{run_id}:{generation}"), now).await?;
    Ok(Some(Runnable { run_id, generation, live, outbox }))
}

/// The body of [`RunStore::handoff`] inside `tx`, in lock order session → thread rows →
/// runs (ADR 0022 §3). Any error leaves the caller to roll back.
async fn handoff_in(tx: &mut Tx, claim: Option<&Claim>, handoff: Handoff, now: i64) -> StoreResult<HandedOff> {
    let Handoff {
        session_id,
        events,
        new_threads,
        awaits,
        releases,
        archive,
        wake,
        settlement,
        trace_context,
        max_attempts,
    } = handoff;
    let session = session_id.as_str();
    // New threads first: counting them locks the session row, and the append's
    // projections then find their rows (a child's first status event moves its row).
    if !new_threads.is_empty() {
        session_threads::count_spawned(tx, session, new_threads.len() as i64, now).await?;
        for thread in &new_threads {
            let snapshot = sessions::store_snapshot(tx, &thread.agent, now).await?;
            session_threads::insert(tx, session, thread, &snapshot, now).await?;
        }
    }
    let stored = if !events.is_empty() {
        sessions::append(tx, session, events, now).await?
    } else {
        if new_threads.is_empty() {
            sessions::lock(tx, session, now).await?;
        }
        Vec::new()
    };
    for (thread, call) in &awaits {
        session_threads::apply(tx, session, Condition::Await, (thread, call), now).await?;
    }
    for (thread, call) in &releases {
        session_threads::apply(tx, session, Condition::Release, (thread, call), now).await?;
    }
    for thread in &archive {
        session_threads::archive(tx, session, thread, now).await?;
    }
    // A thread that began running or left the aggregate changes the session's status.
    if !new_threads.is_empty() || !archive.is_empty() {
        session_threads::project_session(tx, session, now).await?;
    }
    let status = match claim {
        Some(claim) => fence_or_settle(tx, claim, settlement, now).await?,
        None => RunStatus::Pending,
    };
    let max_attempts = claim.map_or(max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS), |claim| claim.max_attempts);
    let mut outbox = Vec::with_capacity(wake.len());
    for thread in &wake {
        if let Some(woken) = make_runnable(tx, session, thread, max_attempts, true, &trace_context, now).await? {
            outbox.push(woken.outbox);
        }
    }
    Ok(HandedOff { events: stored, status, outbox })
}

fn fenced(claim: &Claim) -> StoreError {
    StoreError::Fenced { run_id: claim.run_id.clone(), epoch: claim.epoch }
}

#[async_trait]
impl RunStore for SqlStore {
    async fn submit(&self, submission: Submission) -> StoreResult<Submitted> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let session = submission.session_id.as_str();
        let events = if submission.events.is_empty() {
            sessions::lock(&mut tx, session, now).await?;
            Vec::new()
        } else {
            sessions::append(&mut tx, session, submission.events, now).await?
        };
        let (attempts, trace) = (submission.max_attempts, submission.trace_context.as_slice());
        // A client's input ends a pause, so its threads' runs are always made runnable.
        let runnable = make_runnable(&mut tx, session, &submission.thread_id, attempts, false, trace, now).await?;
        let Some(Runnable { run_id, generation, live, outbox }) = runnable else {
            return Err(StoreError::Backend("a submission left its run paused".to_owned()));
        };
        let mut also = Vec::with_capacity(submission.also_wake.len());
        for thread in &submission.also_wake {
            let woken = make_runnable(&mut tx, session, thread, attempts, false, trace, now).await?;
            also.extend(woken.map(|woken| woken.outbox));
        }
        tx.commit().await?;
        Ok(Submitted { run_id, generation, live, events, outbox, also })
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<Run>> {
        let row: Option<RunRow> = sqlx::query_as(include_str!("../../queries/runs/select_run.sql"))
            .bind(run_id)
            .fetch_optional(&self.readers)
            .await?;
        Ok(row.map(Run::from))
    }

    async fn claim_run_with_session(
        &self,
        run_id: &str,
        owner: &str,
        lease_ms: i64,
    ) -> StoreResult<(ClaimOutcome, Option<Session>)> {
        let now = self.now();
        let statement = match self.backend {
            Backend::Postgres => include_str!("../../queries/runs/claim_run.postgres.sql"),
            Backend::Sqlite => include_str!("../../queries/runs/claim_run.sqlite.sql"),
        };
        let claimed = sqlx::query(statement)
            .bind(run_id)
            .bind(owner)
            .bind(now)
            .bind(lease_ms)
            .fetch_optional(&self.primary)
            .await;
        let row = match claimed {
            Ok(row) => row,
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                return Ok((ClaimOutcome::ThreadBusy, None));
            }
            Err(other) => return Err(other.into()),
        };
        if let Some(row) = row {
            let session = sessions::session_in(&row)?;
            let row = ClaimRow::from_row(&row)?;
            let claim = ClaimOutcome::Claimed(Claim {
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
            });
            return Ok((claim, session));
        }
        // Not claimable: tell a live lease (retry later) from a settled or unknown run.
        let outcome = match self.get_run(run_id).await? {
            Some(Run { status: RunStatus::Leased, lease_until_ms: Some(lease_until_ms), .. }) => {
                ClaimOutcome::Held { lease_until_ms }
            }
            _ => ClaimOutcome::Stale,
        };
        Ok((outcome, None))
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
        Ok(commit_in(self, tx, claim, events, None).await?.events)
    }

    async fn settle(&self, claim: &Claim, events: Vec<NewEvent>, settlement: Settlement) -> StoreResult<Settled> {
        let tx = self.primary.begin().await?;
        commit_in(self, tx, claim, events, Some(settlement)).await
    }

    async fn settle_if_current(
        &self,
        claim: &Claim,
        events: Vec<NewEvent>,
        settlement: Settlement,
        inbox_version: i64,
    ) -> StoreResult<Option<Settled>> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        // The same order as `commit_in` (session → run). The append's lock of the session
        // row shows the inbox as it is, the settle's answer whether input arrived; only
        // then is the transaction undone.
        let known = self.known_usage.get(&claim.session_id);
        let appended = sessions::append_seen(&mut tx, &claim.session_id, events, now, known, None).await?;
        if appended.inbox_version.is_some_and(|seen| seen != inbox_version) {
            tx.rollback().await?;
            return Ok(None);
        }
        let status = match fence_or_settle(&mut tx, claim, Some(settlement), now).await {
            Ok(RunStatus::Pending) => {
                tx.rollback().await?;
                return Ok(None);
            }
            Ok(status) => status,
            Err(error) => {
                tx.rollback().await?;
                return Err(error);
            }
        };
        crate::faults::crash_point("settle.before");
        tx.commit().await?;
        crate::faults::crash_point("settle.after");
        if let Some(usage) = appended.usage {
            self.known_usage.record(&claim.session_id, usage);
        }
        Ok(Some(Settled { events: appended.events, status }))
    }

    async fn handoff(&self, claim: Option<&Claim>, handoff: Handoff) -> StoreResult<HandedOff> {
        if let Some(claim) = claim
            && claim.session_id != handoff.session_id
        {
            return Err(StoreError::Conflict(format!(
                "a handoff of session {} under a claim of session {}",
                handoff.session_id, claim.session_id
            )));
        }
        if claim.is_none() && handoff.settlement.is_some() {
            return Err(StoreError::Backend("a handoff settles only under a claim".to_owned()));
        }
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        match handoff_in(&mut tx, claim, handoff, now).await {
            Ok(handed) => {
                crate::faults::crash_point("handoff.before");
                tx.commit().await?;
                crate::faults::crash_point("handoff.after");
                Ok(handed)
            }
            Err(error) => {
                tx.rollback().await?;
                Err(error)
            }
        }
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
