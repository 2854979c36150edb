//! The submission queue seam: durable, at-least-once delivery of run submissions.
//!
//! Contract (both implementations, checked by `tests/tests/queue_conformance.rs`):
//! - **Durability**: once [`Queue::publish`] returns `Ok`, the message survives the
//!   publisher crashing (JetStream: the server acked it to its stream).
//! - **Dedupe**: a second publish with the same `msg_id` inside the dedupe window is
//!   accepted and dropped; it is delivered once.
//! - **At-least-once**: a fetched message that is neither acked nor nakked is delivered
//!   again after the ack wait; [`Delivery::in_progress`] restarts the ack wait.
//! - **Bounded redelivery**: after `max_deliver` deliveries a message is no longer
//!   delivered (the store's retry budget, not the queue, decides the run's fate).
//! - **Ordering**: none guaranteed; consumers must not depend on it.

pub mod jetstream;
pub mod memory;

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

/// Settings shared by every queue implementation.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// How long a delivered message may stay unacked before it is redelivered.
    pub ack_wait: Duration,
    /// Deliveries after which a message is no longer redelivered.
    pub max_deliver: i64,
    /// Window in which a repeated `msg_id` is dropped.
    pub dedupe_window: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self { ack_wait: Duration::from_secs(30), max_deliver: 1_000, dedupe_window: Duration::from_secs(120) }
    }
}

/// Why a queue operation failed.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The backend could not be reached or did not answer in time; retry later.
    #[error("queue unavailable: {0}")]
    Unavailable(String),
    /// The backend answered with something we cannot act on.
    #[error("queue error: {0}")]
    Backend(String),
}

/// A durable, deduplicating, at-least-once work queue.
#[async_trait]
pub trait Queue: Send + Sync + 'static {
    /// Publishes `payload`; durable once this returns `Ok`. Idempotent per `msg_id`
    /// within the dedupe window.
    async fn publish(&self, msg_id: &str, payload: Bytes) -> Result<(), QueueError>;

    /// Fetches up to `max` messages, waiting at most `wait` for the first one.
    /// Returns an empty batch when nothing arrived in time.
    async fn fetch(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError>;

    /// Checks that the backend answers (used by `/readyz`).
    async fn ping(&self) -> Result<(), QueueError>;

    /// How many messages wait to be delivered to the consumer (JetStream's consumer
    /// `num_pending`): a backlog means workers are stopped or behind, not that a message
    /// is missing.
    async fn undelivered(&self) -> Result<u64, QueueError>;

    /// A short name for logs and metrics (`jetstream`, `memory`).
    fn backend_name(&self) -> &'static str;
}

/// One delivery of a message. Dropping it without settling leaves the message to
/// be redelivered after the ack wait.
pub struct Delivery {
    /// The published payload.
    pub payload: Bytes,
    /// The `msg_id` it was published with.
    pub msg_id: String,
    /// 1 for the first delivery, 2 for the first redelivery, and so on.
    pub delivery_count: u64,
    acker: Box<dyn Acker>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("msg_id", &self.msg_id)
            .field("delivery_count", &self.delivery_count)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// Builds a delivery; used by queue implementations.
    pub fn new(payload: Bytes, msg_id: String, delivery_count: u64, acker: Box<dyn Acker>) -> Self {
        Self { payload, msg_id, delivery_count, acker }
    }

    /// The message is done; it is never delivered again.
    pub async fn ack(self) -> Result<(), QueueError> {
        self.acker.ack().await
    }

    /// The message could not be handled now; deliver it again after `delay`.
    pub async fn nak(self, delay: Duration) -> Result<(), QueueError> {
        self.acker.nak(delay).await
    }

    /// Still working on it: restart the ack wait.
    pub async fn in_progress(&self) -> Result<(), QueueError> {
        self.acker.in_progress().await
    }
}

/// Settles one delivery; implemented by each queue backend.
#[async_trait]
pub trait Acker: Send + Sync {
    /// See [`Delivery::ack`].
    async fn ack(&self) -> Result<(), QueueError>;
    /// See [`Delivery::nak`].
    async fn nak(&self, delay: Duration) -> Result<(), QueueError>;
    /// See [`Delivery::in_progress`].
    async fn in_progress(&self) -> Result<(), QueueError>;
}
