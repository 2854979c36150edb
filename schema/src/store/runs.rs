//! Runs and fencing: submission, claim, lease renewal and fenced commits.

use async_trait::async_trait;
use serde_json::Value;

use super::outbox::OutboxMessage;
use super::sessions::{NewEvent, Session, StoredEvent};
use crate::error::{StoreError, StoreResult};

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Runnable: waiting for a worker to claim it.
    Pending,
    /// Claimed by a worker until `lease_until_ms`.
    Leased,
    /// Parked at a checkpoint, waiting for input.
    Awaiting,
    /// Settled with an outcome.
    Done,
    /// Quarantined by an operator; only an explicit requeue revives it.
    DeadLetter,
    /// Replaced by a newer run of the thread (`supersede`); terminal, never claimed.
    Superseded,
}

impl RunStatus {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Leased => "leased",
            RunStatus::Awaiting => "awaiting",
            RunStatus::Done => "done",
            RunStatus::DeadLetter => "dead_letter",
            RunStatus::Superseded => "superseded",
        }
    }

    /// Parses the stored text.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => RunStatus::Pending,
            "leased" => RunStatus::Leased,
            "awaiting" => RunStatus::Awaiting,
            "done" => RunStatus::Done,
            "dead_letter" => RunStatus::DeadLetter,
            "superseded" => RunStatus::Superseded,
            _ => return None,
        })
    }
}

/// A run row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// `run_…`
    pub id: String,
    /// The session.
    pub session_id: String,
    /// The thread it runs on.
    pub thread_id: String,
    /// Life-cycle state.
    pub status: RunStatus,
    /// Fencing token: bumped by every claim.
    pub epoch: i64,
    /// Bumped by every submission; names the queue message.
    pub generation: i64,
    /// The worker holding the lease.
    pub owner: Option<String>,
    /// Lease expiry, epoch ms.
    pub lease_until_ms: Option<i64>,
    /// Expired-lease recoveries since the last checkpoint.
    pub attempts: i64,
    /// Retry budget.
    pub max_attempts: i64,
    /// A durable cancel intent was recorded.
    pub cancel_requested: bool,
    /// A durable pause intent: the live attempt parks at its next step boundary, and an
    /// awaiting run with it is a paused ticket.
    pub pause_requested: bool,
    /// Set once done.
    pub outcome: Option<String>,
}

/// Proof of holding a run for one attempt; every fenced call presents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The run.
    pub run_id: String,
    /// The claiming worker.
    pub owner: String,
    /// The epoch minted by this claim.
    pub epoch: i64,
    /// The run's session.
    pub session_id: String,
    /// The run's thread.
    pub thread_id: String,
    /// The submission generation at claim time.
    pub generation: i64,
    /// Recoveries since the last checkpoint, including this claim if it was one.
    pub attempts: i64,
    /// The run's retry budget.
    pub max_attempts: i64,
    /// A cancel intent was recorded before the claim.
    pub cancel_requested: bool,
    /// A pause intent was recorded before the claim: park at the first step boundary.
    pub pause_requested: bool,
    /// Lease expiry, epoch ms.
    pub lease_until_ms: i64,
}

/// The result of trying to claim a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// This worker holds the run now.
    Claimed(Claim),
    /// Another worker holds a live lease until the given time: try again later.
    Held {
        /// Lease expiry, epoch ms.
        lease_until_ms: i64,
    },
    /// Another run of the same thread is live: try again later.
    ThreadBusy,
    /// The run is settled or unknown: the message that named it is stale.
    Stale,
}

/// Input that makes a thread's run runnable (life of a turn, step 2).
#[derive(Debug, Clone)]
pub struct Submission {
    /// The session.
    pub session_id: String,
    /// The thread.
    pub thread_id: String,
    /// Events to commit with the submission (may be empty, e.g. a wake).
    pub events: Vec<NewEvent>,
    /// Retry budget of a newly created run.
    pub max_attempts: i64,
    /// W3C trace context to carry to the worker.
    pub trace_context: Vec<(String, String)>,
    /// Other threads of the session whose runs become runnable too (answers to calls
    /// on several threads in one request, ADR 0022 §8): each like `thread_id`, its
    /// queue message in [`Submitted::also`]. Each must be a thread of the session.
    pub also_wake: Vec<String>,
}

/// What a submission committed.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// The run that will process the input.
    pub run_id: String,
    /// Its generation after this submission.
    pub generation: i64,
    /// True when the run is leased: the live attempt picks the input up itself.
    pub live: bool,
    /// The committed events.
    pub events: Vec<StoredEvent>,
    /// The outbox row holding the queue message to publish.
    pub outbox: OutboxMessage,
    /// The outbox rows of the runs of [`Submission::also_wake`], in its order: publish
    /// each like `outbox`.
    pub also: Vec<OutboxMessage>,
}

/// The retry budget of a run a [`Handoff`] creates without a claim to take it from.
pub const DEFAULT_MAX_ATTEMPTS: i64 = 5;

/// A child thread to create in a [`Handoff`].
#[derive(Debug, Clone, PartialEq)]
pub struct NewThread {
    /// `sthr_…`, derived from the spawning call (`events::thread_id_for`), so a
    /// repeated spawn is a `Conflict`, not a second thread.
    pub id: String,
    /// The thread that spawns it (the primary).
    pub parent_id: String,
    /// The agent it runs: a snapshot (stored content-addressed in `agent_snapshots`).
    pub agent: Value,
    /// The agent's name, for its events and listings.
    pub agent_name: String,
}

/// Every cross-thread effect of one step, committed in one transaction by
/// [`RunStore::handoff`] (ADR 0022 §3). Conditions are checked in the transaction: one
/// that matches no row is a `Conflict` and nothing is written.
#[derive(Debug, Clone, Default)]
pub struct Handoff {
    /// The session (with a claim: the claim's).
    pub session_id: String,
    /// Events on any threads of the session (a new thread's included).
    pub events: Vec<NewEvent>,
    /// Child threads to create, `running` (their runs are made by `wake`).
    pub new_threads: Vec<NewThread>,
    /// `(thread, tool_use_id)`: the thread's reply is awaited by the call. Requires a
    /// child that is not archived and not awaited already.
    pub awaits: Vec<(String, String)>,
    /// `(thread, tool_use_id)`: the call no longer awaits the thread. Requires that
    /// the call is what the thread is awaited by.
    pub releases: Vec<(String, String)>,
    /// Child threads to archive (`terminated`, out of the session's status). Requires a
    /// child not archived yet.
    pub archive: Vec<String>,
    /// Threads whose run becomes runnable (created for a new thread), each with its
    /// queue message in [`HandedOff::outbox`].
    pub wake: Vec<String>,
    /// With a claim: settle the attempt instead of only fencing the commit.
    pub settlement: Option<Settlement>,
    /// W3C trace context for the woken runs' queue messages.
    pub trace_context: Vec<(String, String)>,
    /// The retry budget of a run a handoff without a claim creates (`None`: the
    /// default); with a claim, the claim's.
    pub max_attempts: Option<i64>,
}

/// What a handoff committed.
#[derive(Debug, Clone, PartialEq)]
pub struct HandedOff {
    /// The committed events.
    pub events: Vec<StoredEvent>,
    /// The claim's run afterwards, as [`Settled::status`] says (`Leased` when the
    /// handoff did not settle). Without a claim: `Pending`.
    pub status: RunStatus,
    /// The outbox rows of the woken threads' runs, in [`Handoff::wake`]'s order.
    pub outbox: Vec<OutboxMessage>,
}

/// What settling an attempt committed.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The committed events.
    pub events: Vec<StoredEvent>,
    /// The run's status afterwards: `Pending` when input arrived during the attempt
    /// (the caller should claim it again), else what was asked for.
    pub status: RunStatus,
}

/// A run that may need its submission republished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrandedRun {
    /// The run.
    pub run_id: String,
    /// Its session.
    pub session_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Its submission generation.
    pub generation: i64,
    /// Its epoch (changes with every claim).
    pub epoch: i64,
}

/// How an attempt ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// Parked at a checkpoint until new input; the retry budget resets.
    Awaiting,
    /// Finished with an outcome (e.g. `completed`, `cancelled`, `indeterminate`).
    Done {
        /// The outcome recorded on the run.
        outcome: String,
    },
}

impl TryFrom<String> for RunStatus {
    type Error = StoreError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        RunStatus::parse(&text).ok_or_else(|| StoreError::Backend(format!("unknown run status {text:?}")))
    }
}

/// Runs and fencing (life of a turn, steps 3–5; ADR 0002).
///
/// Every write under a claim presents its epoch: the transaction's first write to the
/// run row is `queries/runs/fence_run.sql`, so a stale epoch writes nothing and returns
/// `StoreError::Fenced` (certainly not committed). Transactions that touch both lock the
/// session row first, then the run row. Every method that returns `Ok` has committed.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Life of a turn, step 2, in one transaction: append the input events, make the
    /// thread's open run runnable (or create one, `pending`), and write the queue
    /// message to the outbox — the same for each thread of `also_wake`. Nothing is
    /// published here. `NotFound` if the session does not exist.
    async fn submit(&self, submission: Submission) -> StoreResult<Submitted>;

    /// Reads a run.
    async fn get_run(&self, run_id: &str) -> StoreResult<Option<Run>>;

    /// Claims a run for `lease_ms`, minting a new epoch (see `queries/runs/claim_run.*.sql`).
    /// At most one claim of a run is live, and at most one run of a thread is leased.
    async fn claim_run(&self, run_id: &str, owner: &str, lease_ms: i64) -> StoreResult<ClaimOutcome> {
        Ok(self.claim_run_with_session(run_id, owner, lease_ms).await?.0)
    }

    /// [`claim_run`](Self::claim_run), with the run's session as the claim read it, in
    /// the same statement (`None` unless claimed, or when the session is gone). On
    /// PostgreSQL a claim that waited for the run's lock may see the session as it was
    /// before the lock holder's commit: the caller checks it against what it reads next.
    async fn claim_run_with_session(
        &self,
        run_id: &str,
        owner: &str,
        lease_ms: i64,
    ) -> StoreResult<(ClaimOutcome, Option<Session>)>;

    /// Extends the lease of `claim`; returns the new expiry. `Fenced` if it was lost.
    async fn renew_lease(&self, claim: &Claim, lease_ms: i64) -> StoreResult<i64>;

    /// Hands the run back as `pending` without spending retry budget. `Fenced` if the
    /// claim was already lost.
    async fn relinquish(&self, claim: &Claim) -> StoreResult<()>;

    /// Commits events under `claim`, atomically with the epoch check. `Fenced` (and
    /// nothing written) if the epoch is no longer current.
    async fn commit(&self, claim: &Claim, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>>;

    /// Commits final events and settles the attempt in one fenced transaction. Input
    /// that arrived during the attempt leaves the run `pending` (see `Settled::status`).
    async fn settle(&self, claim: &Claim, events: Vec<NewEvent>, settlement: Settlement) -> StoreResult<Settled>;

    /// [`RunStore::settle`] only if nothing came in since the attempt looked: no input
    /// since the claim's generation (which would leave the run `pending`) and no change
    /// to the session's live inbox since it read `inbox_version`. `None`, with nothing
    /// written, otherwise. For events that are final only if nothing came in meanwhile
    /// (a turn's idle committed with the answer that ends it).
    async fn settle_if_current(
        &self,
        claim: &Claim,
        events: Vec<NewEvent>,
        settlement: Settlement,
        inbox_version: i64,
    ) -> StoreResult<Option<Settled>>;

    /// Commits a step that reaches past its own thread (ADR 0022 §3) in one
    /// transaction, in lock order session → thread rows → runs: the new threads (the
    /// first spawn of a session brings its primary's row in step with the session),
    /// the events with their projections, the awaits, releases and archives, then
    /// under `claim` the fence (or the settlement), then each woken thread's run made
    /// runnable with its outbox row (a new run gets the claim's `max_attempts`, or
    /// [`DEFAULT_MAX_ATTEMPTS`]). `Fenced` when the claim is stale and `Conflict` when a
    /// condition of the handoff matches no row (or an id is taken): nothing written.
    /// `NotFound` if the session does not exist.
    async fn handoff(&self, claim: Option<&Claim>, handoff: Handoff) -> StoreResult<HandedOff>;

    /// Runs `pending` since before `cutoff_ms`, or leased with a lease that expired
    /// before it: candidates for a republished submission (see `stranded_runs.sql`).
    async fn stranded_runs(&self, cutoff_ms: i64, limit: i64) -> StoreResult<Vec<StrandedRun>>;
}
