//! The live bus seam: best-effort fan-out of live events and control signals.
//!
//! Contract (both implementations, checked by `tests/tests/bus_conformance.rs`):
//! - **Not durable**: a message published while nobody subscribes is lost. Committed
//!   history in the store is authoritative; the bus only carries previews and
//!   "something was committed" notifications.
//! - **Ordering**: messages from one publisher on one channel arrive in publish order.
//! - **Fan-out**: every live subscription of a channel receives every message
//!   published after [`Bus::subscribe`] returned.
//! - **Gaps are visible**: a subscriber that fell behind, or whose backend connection
//!   dropped, receives [`BusItem::Gap`] and must re-read committed history.

pub mod memory;
pub mod redis;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;

/// Why a bus operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// The backend could not be reached or did not answer in time.
    #[error("bus unavailable: {0}")]
    Unavailable(String),
}

/// One item of a subscription stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusItem {
    /// A published payload.
    Message(Bytes),
    /// Messages may have been lost (lagging subscriber or reconnect).
    Gap,
}

/// A live subscription; dropping it unsubscribes.
pub type Subscription = BoxStream<'static, BusItem>;

/// Fan-out publish/subscribe by channel name.
#[async_trait]
pub trait Bus: Send + Sync + 'static {
    /// Publishes `payload` to every current subscriber of `channel`.
    async fn publish(&self, channel: &str, payload: Bytes) -> Result<(), BusError>;

    /// Subscribes to `channel`; messages published after this returns are delivered.
    async fn subscribe(&self, channel: &str) -> Result<Subscription, BusError>;

    /// Checks that the backend answers (used by `/readyz`).
    async fn ping(&self) -> Result<(), BusError>;

    /// A short name for logs and metrics (`redis`, `memory`).
    fn backend_name(&self) -> &'static str;
}
