//! The submission consumer: fetches run submissions from the queue, claims each run
//! with a fresh epoch, drives it, and acks the message only after the run settled.
//! While a run is driven, a heartbeat renews the lease (< lease/2) and tells the
//! queue the message is still in progress. A crash leaves the message unacked and the
//! lease to expire, so another worker recovers the run.

use std::sync::Arc;
use std::time::Duration;

use agentd_proto::v1::RunSubmission;
use agentd_proto::{Delivery, Lifecycle, Queue};
use agentd_schema::{
    ClaimOutcome, ErrorType, EventType, Handoff, NewEvent, RetryStatus, RunStatus, SessionError, Settlement,
    StopReason, StoreError,
};
use prost::Message;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::run::{AttemptEnd, RunContext, drive};
use crate::threads::{self, Owed, Replying};

/// Consumer settings.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// Unique per process: the lease owner.
    pub owner: String,
    /// Lease length; renewed every third of it.
    pub lease: Duration,
    /// Runs driven at once by this process.
    pub max_concurrent_runs: usize,
    /// Fired at the drain deadline: runs still in flight are handed back (without
    /// spending their retry budget) for another worker to finish.
    pub relinquish: CancellationToken,
}

impl ConsumerConfig {
    /// Defaults with a fresh owner id.
    pub fn new() -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "agentd".into());
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        Self {
            owner: format!("{host}-{}-{}", std::process::id(), &suffix[..8]),
            lease: Duration::from_secs(30),
            max_concurrent_runs: 256,
            relinquish: CancellationToken::new(),
        }
    }
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs the consumer until draining starts (or `stop` fires), then waits for the runs
/// in flight to settle.
pub async fn run(
    ctx: RunContext,
    queue: Arc<dyn Queue>,
    config: ConsumerConfig,
    lifecycle: Arc<Lifecycle>,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(config.max_concurrent_runs));
    let config = Arc::new(config);
    tracing::info!(owner = %config.owner, "worker consuming submissions");
    loop {
        let available = tokio::select! {
            () = lifecycle.draining() => break,
            () = stop.cancelled() => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => { drop(permit); permits.available_permits().clamp(1, 32) }
                Err(_) => break,
            },
        };
        let fetched = tokio::select! {
            () = lifecycle.draining() => break,
            () = stop.cancelled() => break,
            fetched = queue.fetch(available, Duration::from_secs(1)) => fetched,
        };
        let deliveries = match fetched {
            Ok(deliveries) => deliveries,
            Err(error) => {
                tracing::warn!(%error, "cannot fetch submissions; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for delivery in deliveries {
            let Ok(permit) = permits.clone().acquire_owned().await else { break };
            let ctx = ctx.clone();
            let config = config.clone();
            let queue = queue.clone();
            tokio::spawn(async move {
                handle(&ctx, queue.as_ref(), &config, delivery).await;
                drop(permit);
            });
        }
    }
    // Let in-flight runs settle: the role's drain deadline bounds this.
    let _ = permits.acquire_many(config.max_concurrent_runs as u32).await;
    tracing::info!("worker stopped consuming; in-flight runs settled");
}

async fn handle(ctx: &RunContext, queue: &dyn Queue, config: &ConsumerConfig, delivery: Delivery) {
    let submission = match RunSubmission::decode(delivery.payload.as_ref()) {
        Ok(submission) => submission,
        Err(error) => {
            tracing::error!(%error, msg_id = %delivery.msg_id, "undecodable submission dropped");
            let _ = delivery.ack().await;
            return;
        }
    };
    let lease_ms = config.lease.as_millis() as i64;
    loop {
        let (outcome, session) =
            match ctx.store.claim_run_with_session(&submission.run_id, &config.owner, lease_ms).await {
                Ok((outcome, session)) => (Ok(outcome), session),
                Err(error) => (Err(error), None),
            };
        let label = match &outcome {
            Ok(ClaimOutcome::Claimed(c)) if c.attempts > 0 => "reclaimed",
            Ok(ClaimOutcome::Claimed(_)) => "claimed",
            Ok(ClaimOutcome::Held { .. }) => "held",
            Ok(ClaimOutcome::ThreadBusy) => "thread_busy",
            Ok(ClaimOutcome::Stale) => "stale",
            Err(_) => "error",
        };
        metrics::counter!("agentd_claims_total", "outcome" => label).increment(1);
        let claim = match outcome {
            Ok(ClaimOutcome::Claimed(claim)) => claim,
            Ok(ClaimOutcome::Stale) => {
                let _ = delivery.ack().await;
                return;
            }
            Ok(ClaimOutcome::ThreadBusy) => {
                // Another run of the thread is live; back off so a long run does not
                // burn this message's deliveries (the stranded-run sweep is the floor).
                let wait = busy_backoff(delivery.delivery_count);
                let _ = delivery.nak(wait).await;
                return;
            }
            Ok(ClaimOutcome::Held { lease_until_ms }) => {
                let now = agentd_schema::Clock::now_ms(&agentd_schema::SystemClock);
                let wait = (lease_until_ms - now).clamp(200, 5_000) as u64 + rand::random_range(0..200);
                let _ = delivery.nak(Duration::from_millis(wait)).await;
                return;
            }
            Err(error) => {
                tracing::warn!(%error, run = %submission.run_id, "cannot claim; retrying later");
                let _ = delivery.nak(Duration::from_secs(2)).await;
                return;
            }
        };
        if claim.cancel_requested || claim.attempts >= claim.max_attempts {
            // An operator cancelled the run, or its retry budget is spent: settle it
            // instead of running again. Never a dead letter; that takes an explicit
            // operator quarantine.
            let ending = if claim.cancel_requested { Ending::Cancelled } else { Ending::Exhausted };
            match exhaust(ctx, queue, &claim, ending).await {
                Ok(()) => {
                    metrics::counter!("agentd_runs_exhausted_total").increment(1);
                    let _ = delivery.ack().await;
                }
                Err(error) => {
                    tracing::warn!(%error, run = %claim.run_id, "could not settle an exhausted run; it stays leased and will be retried");
                    let _ = delivery.nak(config.lease).await;
                }
            }
            return;
        }
        let span = tracing::info_span!("run", run = %claim.run_id, session = %claim.session_id, epoch = claim.epoch);
        // Join the trace of the request that submitted the run.
        let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&submission.trace_context));
        {
            use tracing_opentelemetry::OpenTelemetrySpanExt;
            let _ = span.set_parent(parent);
        }
        let cancel = CancellationToken::new();
        let started = std::time::Instant::now();
        // The attempt updates its copy's consumed generation; the heartbeat keeps the
        // claim as minted.
        let mut driven = claim.clone();
        let end = {
            // Boxed: an attempt's future is large (every step's state), and moved unboxed
            // into the select and this task it was copied each time (callgrind: ~5 % of a
            // turn's instructions in memcpy).
            let driving = Box::pin(tracing::Instrument::instrument(
                drive(ctx, Some(queue), &mut driven, session, cancel.clone()),
                span,
            ));
            let heartbeat = heartbeat(ctx, &claim, &delivery, config.lease, &cancel);
            attempt_end(driving, heartbeat, config.relinquish.cancelled()).await
        };
        metrics::histogram!("agentd_run_attempt_duration_seconds").record(started.elapsed().as_secs_f64());
        match end {
            AttemptEnd::Settled(RunStatus::Pending) => continue,
            AttemptEnd::Settled(_) => {
                metrics::counter!("agentd_runs_settled_total").increment(1);
                let _ = delivery.ack().await;
                return;
            }
            AttemptEnd::Fenced => {
                metrics::counter!("agentd_fencing_rejections_total").increment(1);
                tracing::info!(run = %claim.run_id, "fenced out: another worker owns the run");
                let _ = delivery.ack().await;
                return;
            }
            AttemptEnd::Relinquished => {
                // Dropping the attempt dropped any model stream; nothing uncommitted counts.
                match ctx.store.relinquish(&claim).await {
                    Ok(()) => tracing::info!(run = %claim.run_id, "relinquished at the drain deadline"),
                    Err(error) => {
                        tracing::warn!(%error, run = %claim.run_id, "could not relinquish; the lease will expire")
                    }
                }
                let _ = delivery.nak(Duration::ZERO).await;
                return;
            }
            AttemptEnd::Abandoned(why) => {
                tracing::warn!(run = %claim.run_id, %why, "attempt abandoned; the lease will expire and the run be recovered");
                let _ = delivery.nak(config.lease).await;
                return;
            }
        }
    }
}

/// How long to wait before offering a message again whose thread is busy: 0.5 s,
/// doubling with each delivery, at most 8 s, with jitter.
fn busy_backoff(delivery_count: u64) -> Duration {
    let doublings = delivery_count.saturating_sub(1).min(4) as u32;
    Duration::from_millis(500 * 2u64.pow(doublings) + rand::random_range(0..250))
}

/// How a run is ended without running it again.
enum Ending {
    /// Its retry budget is spent: `session.error` (exhausted), idle `retries_exhausted`,
    /// outcome `indeterminate`.
    Exhausted,
    /// An operator cancelled it: idle `end_turn`, outcome `cancelled`.
    Cancelled,
}

/// Settles a run as `ending` describes, committing its events with the settlement in
/// one fenced transaction. Their ids derive from the run and its generation, so a
/// replay cannot add a second copy (the unique event id rejects it). A model request
/// cut off by the last lost worker is closed first, so history reads cleanly.
///
/// A child thread's failure is its parent's tool error, never a hang: a child whose
/// reply a call awaits replies with the error in the same transaction, and a primary
/// closes the waits of its calls (`threads::reply_handoff`, `threads::close_awaiting`).
async fn exhaust(
    ctx: &RunContext,
    queue: &dyn Queue,
    claim: &agentd_schema::Claim,
    ending: Ending,
) -> Result<(), StoreError> {
    let id = |what: &str| {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(format!("{}:{}:{what}", claim.run_id, claim.generation));
        format!("sevt_{}", &hex::encode(digest)[..26])
    };
    let mut events = Vec::new();
    // Close the span of a request cut off by the last lost worker, so history reads cleanly.
    let last_span = ctx
        .store
        .query_events(
            &claim.session_id,
            &agentd_schema::EventQuery {
                thread_id: Some(claim.thread_id.clone()),
                types: vec![EventType::SpanModelRequestStart.to_string(), EventType::SpanModelRequestEnd.to_string()],
                limit: 1,
                descending: true,
                ..agentd_schema::EventQuery::default()
            },
        )
        .await?;
    let thread = &claim.thread_id;
    if let Some(start) = last_span.first().filter(|e| e.is(EventType::SpanModelRequestStart)) {
        events.push(NewEvent::model_request_abandoned(thread, &start.event_id).with_id(id("span")));
    }
    if let Ending::Exhausted = ending {
        let message =
            format!("the turn was retried {} times after its worker was lost and has been stopped", claim.attempts);
        let error = SessionError::new(ErrorType::UnknownError, message, RetryStatus::Exhausted);
        events.push(NewEvent::session_error(thread, &error).with_id(id("error")));
    }
    let (stop_reason, outcome) = match ending {
        Ending::Exhausted => (StopReason::RetriesExhausted, "indeterminate"),
        Ending::Cancelled => (StopReason::EndTurn, "cancelled"),
    };
    let owed =
        Owed { stop: Some(stop_reason.clone()), interrupted: matches!(ending, Ending::Cancelled), text: String::new() };
    events.push(NewEvent::status_idle(thread, stop_reason).with_id(id("idle")));
    let settlement = Settlement::Done { outcome: outcome.into() };
    let primary = claim.thread_id == claim.session_id;
    for _ in 0..3 {
        let (events, handoff) = thread_effects(ctx, claim, events.clone(), &owed).await?;
        let Some(mut handoff) = handoff else { return settle_alone(ctx, claim, events, settlement).await };
        handoff.settlement = Some(settlement.clone());
        match ctx.store.handoff(Some(claim), handoff).await {
            Ok(handed) => {
                agentd_schema::live::publish_committed(ctx.bus.as_ref(), &handed.events).await;
                for message in &handed.outbox {
                    if let Err(error) = agentd_schema::outbox::publish(ctx.store.as_ref(), queue, message).await {
                        tracing::warn!(%error, msg_id = %message.msg_id, "thread wake deferred to the outbox relay");
                    }
                }
                return Ok(());
            }
            // A child replied meanwhile: the primary reads which calls still wait again.
            Err(StoreError::Conflict(why)) if primary => {
                tracing::info!(run = %claim.run_id, %why, "a thread replied meanwhile; closing the other waits");
            }
            // The child's wait was released meanwhile (the parent's turn ended): nothing is owed.
            Err(StoreError::Conflict(why)) => {
                tracing::info!(run = %claim.run_id, %why, "thread wait released meanwhile");
                return settle_alone(ctx, claim, events, settlement).await;
            }
            Err(error) => return Err(error),
        }
    }
    Err(StoreError::Conflict(format!("the thread waits of run {} kept changing", claim.run_id)))
}

/// Settles the ended run with `events`, touching no other thread.
async fn settle_alone(
    ctx: &RunContext,
    claim: &agentd_schema::Claim,
    events: Vec<NewEvent>,
    settlement: Settlement,
) -> Result<(), StoreError> {
    let settled = ctx.store.settle(claim, events, settlement).await?;
    agentd_schema::live::publish_committed(ctx.bus.as_ref(), &settled.events).await;
    Ok(())
}

/// The ended run's `events` as its thread commits them (a child's statuses are
/// `session.thread_status_*`), and the handoff that also settles what other threads
/// wait on: a child's error reply to the call awaiting it, or a primary's waits closed.
async fn thread_effects(
    ctx: &RunContext,
    claim: &agentd_schema::Claim,
    events: Vec<NewEvent>,
    owed: &Owed,
) -> Result<(Vec<NewEvent>, Option<Handoff>), StoreError> {
    let store = ctx.store.as_ref();
    let session_id = claim.session_id.as_str();
    if claim.thread_id == claim.session_id {
        let waiting = threads::open_waits(store, session_id).await?;
        if waiting.is_empty() {
            return Ok((events, None));
        }
        let handoff = threads::close_awaiting(session_id, &claim.thread_id, events.clone(), &waiting);
        return Ok((events, Some(handoff)));
    }
    let Some(row) = store.get_thread(session_id, &claim.thread_id).await? else { return Ok((events, None)) };
    let agent_name = row.agent_name.clone().unwrap_or_default();
    let events: Vec<NewEvent> = events.into_iter().map(|event| event.for_thread(&agent_name)).collect();
    let (Some(call_id), Some(parent)) = (row.awaited_by.as_deref(), row.parent_id.as_deref()) else {
        return Ok((events, None));
    };
    let to = Replying { session_id, primary: parent, thread_id: &claim.thread_id, agent_name: &agent_name, call_id };
    let handoff = threads::reply_handoff(to, owed, events.clone());
    Ok((events, Some(handoff)))
}

/// Renews the lease every third of it and marks the message in progress (see
/// [`keep_lease`]).
async fn heartbeat(
    ctx: &RunContext,
    claim: &agentd_schema::Claim,
    delivery: &Delivery,
    lease: Duration,
    cancel: &CancellationToken,
) {
    let renew = || async move { ctx.store.renew_lease(claim, lease.as_millis() as i64).await.map(drop) };
    let in_progress = || async move {
        if let Err(error) = delivery.in_progress().await {
            tracing::debug!(%error, "in-progress ack failed");
        }
    };
    let lost = keep_lease(lease, renew, in_progress, cancel);
    tracing::Instrument::instrument(lost, tracing::info_span!("lease", run = %claim.run_id)).await;
}

/// Calls `renew` every third of `lease`, then `in_progress`. When the lease is lost it
/// cancels the attempt and returns only a lease later: the attempt ends on the cancel
/// and says how. That matters when the renewal lost to the attempt's own settlement (a
/// settle releases the lease): an attempt that settled `pending` goes on claiming, and
/// taken for fenced its queue message would be acked with nothing left to claim the run
/// before the stranded-run sweep.
async fn keep_lease<R, P>(
    lease: Duration,
    mut renew: impl FnMut() -> R,
    mut in_progress: impl FnMut() -> P,
    cancel: &CancellationToken,
) where
    R: Future<Output = Result<(), StoreError>>,
    P: Future<Output = ()>,
{
    let every = lease / 3;
    loop {
        tokio::time::sleep(every).await;
        match renew().await {
            Ok(()) => {}
            Err(StoreError::Fenced { .. }) => {
                cancel.cancel();
                // Bounds an attempt stuck where the cancel does not reach.
                tokio::time::sleep(lease).await;
                return;
            }
            Err(error) => tracing::warn!(%error, "lease renewal failed; will retry"),
        }
        in_progress().await;
    }
}

/// How an attempt ended: as `driving` says, unless the lease is lost for good
/// (`heartbeat`) or the drain deadline (`relinquish`) comes first. The attempt is polled
/// first, so an attempt that has finished is never taken for a lost one.
async fn attempt_end(
    driving: impl Future<Output = AttemptEnd>,
    heartbeat: impl Future<Output = ()>,
    relinquish: impl Future<Output = ()>,
) -> AttemptEnd {
    tokio::select! {
        biased;
        end = driving => end,
        () = heartbeat => AttemptEnd::Fenced,
        () = relinquish => AttemptEnd::Relinquished,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fenced() -> StoreError {
        StoreError::Fenced { run_id: "run_x".to_owned(), epoch: 1 }
    }

    /// The renewal loses to the attempt's own settlement (a settle releases the lease, so
    /// the renewal answers fenced) while the attempt is still publishing what it
    /// committed: the attempt's own end wins, so a `pending` settlement is claimed again.
    #[tokio::test(start_paused = true)]
    async fn a_settling_attempt_is_not_taken_for_fenced_when_its_renewal_loses() {
        let lease = Duration::from_secs(3);
        let cancel = CancellationToken::new();
        let driving = async {
            tokio::time::sleep(lease / 3 + Duration::from_millis(50)).await;
            AttemptEnd::Settled(RunStatus::Pending)
        };
        let heartbeat = keep_lease(lease, || async { Err(fenced()) }, || async {}, &cancel);
        let end = attempt_end(driving, heartbeat, std::future::pending()).await;
        assert_eq!(end, AttemptEnd::Settled(RunStatus::Pending));
        assert!(cancel.is_cancelled(), "the attempt was told the lease is gone");
    }

    /// An attempt that ignores the cancel is cut off a lease after the lease was lost.
    #[tokio::test(start_paused = true)]
    async fn an_attempt_deaf_to_the_cancel_is_cut_off_a_lease_later() {
        let lease = Duration::from_secs(3);
        let cancel = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let heartbeat = keep_lease(lease, || async { Err(fenced()) }, || async {}, &cancel);
        let end = attempt_end(std::future::pending(), heartbeat, std::future::pending()).await;
        assert_eq!(end, AttemptEnd::Fenced);
        assert_eq!(started.elapsed(), lease / 3 + lease);
    }

    /// Renewals that succeed, or fail for another reason, keep the attempt going.
    #[tokio::test(start_paused = true)]
    async fn renewals_keep_the_attempt_until_it_ends() {
        let lease = Duration::from_secs(3);
        let cancel = CancellationToken::new();
        let mut renewals = 0;
        let renew = || {
            renewals += 1;
            let failing = renewals % 2 == 0;
            async move { if failing { Err(StoreError::Backend("down".to_owned())) } else { Ok(()) } }
        };
        let driving = async {
            tokio::time::sleep(lease * 10).await;
            AttemptEnd::Settled(RunStatus::Awaiting)
        };
        let end = attempt_end(driving, keep_lease(lease, renew, || async {}, &cancel), std::future::pending()).await;
        assert_eq!(end, AttemptEnd::Settled(RunStatus::Awaiting));
        assert!(!cancel.is_cancelled());
    }
}
