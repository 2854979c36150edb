//! Moving outbox rows to the queue. A submission commits its queue message to the
//! outbox in the same transaction as the run; [`publish`] sends it right after the
//! commit, and [`run_relay`] (in every process) republishes rows whose publish may have
//! been lost to a crash. Republishing is safe: the queue dedupes by `msg_id` and a
//! stale submission loses the claim.

use std::sync::Arc;
use std::time::Duration;

use agentd_proto::Queue;
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::error::{StoreError, StoreResult};
use crate::store::{OutboxMessage, Store};

/// Why publishing an outbox row failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The queue did not take the message; the row stays for the relay.
    #[error(transparent)]
    Queue(#[from] agentd_proto::QueueError),
    /// The row was published but could not be removed; the relay will republish it
    /// and the queue will drop the duplicate.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Publishes one outbox row and removes it once the queue has it.
pub async fn publish(store: &dyn Store, queue: &dyn Queue, message: &OutboxMessage) -> Result<(), PublishError> {
    queue.publish(&message.msg_id, Bytes::copy_from_slice(&message.payload)).await?;
    store.outbox_delete(&[message.id]).await?;
    Ok(())
}

/// Removes published outbox rows in batches, off the path of the request that published
/// them: the rows published within [`SWEEP_LINGER`] of each other, or while one DELETE
/// runs, go together. A removal lost to a crash leaves the row to the relay, whose
/// republish the queue drops as a duplicate (or the worker, as a stale submission).
#[derive(Debug, Clone)]
pub struct Sweeper(mpsc::UnboundedSender<i64>);

/// Rows per batch of a [`Sweeper`].
const SWEEP_BATCH: usize = 512;

/// How long a [`Sweeper`] lets removals gather after the first one before it deletes
/// them: at one turn at a time a DELETE would otherwise follow every turn. Well inside
/// the relay's `min_age`, so a row waiting here is never republished meanwhile.
const SWEEP_LINGER: Duration = Duration::from_millis(500);

impl Sweeper {
    /// Starts the task that removes what [`Sweeper::publish`] published; it ends once
    /// every clone of the sweeper is dropped and the rows it was given are removed.
    pub fn spawn(store: Arc<dyn Store>) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut ids = Vec::with_capacity(SWEEP_BATCH);
            while rx.recv_many(&mut ids, SWEEP_BATCH).await > 0 {
                if ids.len() < SWEEP_BATCH {
                    tokio::time::sleep(SWEEP_LINGER).await;
                    while ids.len() < SWEEP_BATCH
                        && let Ok(id) = rx.try_recv()
                    {
                        ids.push(id);
                    }
                }
                if let Err(error) = store.outbox_delete(&ids).await {
                    tracing::warn!(%error, rows = ids.len(), "published outbox rows not removed; the relay republishes them");
                }
                ids.clear();
            }
        });
        Self(tx)
    }

    /// Publishes one outbox row; its removal joins the next batch.
    pub async fn publish(&self, queue: &dyn Queue, message: &OutboxMessage) -> Result<(), agentd_proto::QueueError> {
        queue.publish(&message.msg_id, Bytes::copy_from_slice(&message.payload)).await?;
        // The task only ends when every sender is gone, and this is one.
        let _ = self.0.send(message.id);
        Ok(())
    }
}

/// Settings of [`run_relay`].
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// How often to look for stranded rows.
    pub every: Duration,
    /// Rows younger than this are left to the publisher that wrote them.
    pub min_age: Duration,
    /// Rows per pass.
    pub batch: i64,
    /// Runs pending this long, or past an expired lease this long, are republished.
    pub stranded_after: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            every: Duration::from_secs(2),
            min_age: Duration::from_secs(3),
            batch: 256,
            stranded_after: Duration::from_secs(10),
        }
    }
}

/// One relay pass: republishes rows older than `min_age`; returns how many it published.
pub async fn relay_once(
    store: &dyn Store,
    queue: &dyn Queue,
    clock: &dyn Clock,
    config: &RelayConfig,
) -> StoreResult<usize> {
    let cutoff = clock.now_ms() - config.min_age.as_millis() as i64;
    let due = store.outbox_due(cutoff, config.batch).await?;
    let mut published = 0;
    for message in &due {
        match publish(store, queue, message).await {
            Ok(()) => published += 1,
            Err(error) => {
                tracing::warn!(msg_id = %message.msg_id, %error, "outbox relay could not publish; will retry");
                break;
            }
        }
    }
    if published > 0 {
        metrics::counter!("agentd_outbox_relayed_total").increment(published as u64);
    }
    // Only while the queue has delivered everything it holds: a run that waits behind a
    // backlog (workers stopped, or behind) is queued, not stranded, and a second message
    // per run per minute would make the backlog an autoscaler reads (KEDA's consumer
    // lag) grow with the outage instead of counting the work.
    if queue_is_drained(queue).await {
        republish_stranded(store, queue, clock, config).await?;
    }
    expire_hands(store, queue).await?;
    Ok(published)
}

/// The safety net behind queue redelivery: runs that should be moving but may have no
/// message left get a fresh one. The id changes with the epoch and once a minute, so the
/// queue's dedupe window cannot swallow a needed republish.
async fn republish_stranded(
    store: &dyn Store,
    queue: &dyn Queue,
    clock: &dyn Clock,
    config: &RelayConfig,
) -> StoreResult<()> {
    let now = clock.now_ms();
    let stranded = store.stranded_runs(now - config.stranded_after.as_millis() as i64, config.batch).await?;
    for run in &stranded {
        let message = agentd_proto::v1::RunSubmission {
            run_id: run.run_id.clone(),
            session_id: run.session_id.clone(),
            thread_id: run.thread_id.clone(),
            generation: run.generation as u64,
            trace_context: Default::default(),
            submitted_at_ms: now,
        };
        let msg_id = format!("{}:{}:sweep:{}:{}", run.run_id, run.generation, run.epoch, now / 60_000);
        if let Err(error) = queue.publish(&msg_id, Bytes::from(prost::Message::encode_to_vec(&message))).await {
            tracing::warn!(run = %run.run_id, %error, "could not republish a stranded run; will retry");
            break;
        }
        metrics::counter!("agentd_stranded_runs_republished_total").increment(1);
    }
    Ok(())
}

/// Whether the queue holds no undelivered message; `false` when it cannot tell.
async fn queue_is_drained(queue: &dyn Queue) -> bool {
    match queue.undelivered().await {
        Ok(0) => true,
        Ok(backlog) => {
            tracing::debug!(backlog, "submissions wait in the queue: no stranded-run sweep this pass");
            false
        }
        Err(error) => {
            tracing::debug!(%error, "queue backlog unknown: no stranded-run sweep this pass");
            false
        }
    }
}

/// Work items whose hands stopped heartbeating go back to the queue, or are given up:
/// the give-up submissions are published here like any other outbox row.
async fn expire_hands(store: &dyn Store, queue: &dyn Queue) -> StoreResult<()> {
    for message in crate::hands::expire(store).await? {
        if let Err(error) = publish(store, queue, &message).await {
            tracing::warn!(msg_id = %message.msg_id, %error, "hands give-up submission deferred to the next relay pass");
        }
    }
    Ok(())
}

/// Runs [`relay_once`] every `config.every` until `stop` fires.
pub async fn run_relay(
    store: Arc<dyn Store>,
    queue: Arc<dyn Queue>,
    clock: Arc<dyn Clock>,
    config: RelayConfig,
    stop: CancellationToken,
) {
    let mut ticker = tokio::time::interval(config.every);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        if let Err(error) = relay_once(store.as_ref(), queue.as_ref(), clock.as_ref(), &config).await {
            tracing::warn!(%error, "outbox relay pass failed");
        }
    }
}
