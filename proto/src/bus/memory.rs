//! In-process bus for `agentd dev`: one `tokio::sync::broadcast` channel per bus channel.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use async_trait::async_trait;
use bytes::Bytes;
use futures::Stream;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use super::{Bus, BusError, BusItem, Subscription};

/// Items a subscriber may fall behind by before it sees [`BusItem::Gap`]; large enough
/// for a model's delta burst, small enough that idle channels stay cheap.
pub(crate) const CHANNEL_CAPACITY: usize = 1024;

/// An in-process [`Bus`]: fan-out to subscriptions in this process only.
#[derive(Clone)]
pub struct MemoryBus {
    inner: Arc<Inner>,
}

struct Inner {
    channels: Mutex<HashMap<String, broadcast::Sender<BusItem>>>,
    capacity: usize,
}

impl Default for MemoryBus {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryBus {
    /// Creates a bus whose subscribers may lag by [`CHANNEL_CAPACITY`] items.
    pub fn new() -> Self {
        Self::with_capacity(CHANNEL_CAPACITY)
    }

    /// Creates a bus whose subscribers see a gap once they lag by `capacity` items.
    pub fn with_capacity(capacity: usize) -> Self {
        Self { inner: Arc::new(Inner { channels: Mutex::new(HashMap::new()), capacity: capacity.max(1) }) }
    }

    /// Live subscriptions of `channel` (0 once the last one was dropped).
    pub fn subscriber_count(&self, channel: &str) -> usize {
        self.inner.lock().get(channel).map_or(0, broadcast::Sender::receiver_count)
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, broadcast::Sender<BusItem>>> {
        // The map is never left half-updated, so a poisoned lock is still usable.
        self.channels.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl Bus for MemoryBus {
    async fn publish(&self, channel: &str, payload: Bytes) -> Result<(), BusError> {
        if let Some(sender) = self.inner.lock().get(channel) {
            // An error only means every receiver is gone: nobody to deliver to.
            let _ = sender.send(BusItem::Message(payload));
        }
        Ok(())
    }

    async fn subscribe(&self, channel: &str) -> Result<Subscription, BusError> {
        let receiver = {
            let mut channels = self.inner.lock();
            let sender =
                channels.entry(channel.to_owned()).or_insert_with(|| broadcast::channel(self.inner.capacity).0);
            sender.subscribe()
        };
        let inner: Weak<Inner> = Arc::downgrade(&self.inner);
        let channel = channel.to_owned();
        Ok(subscription(receiver, move || {
            let Some(inner) = inner.upgrade() else { return };
            let mut channels = inner.lock();
            if channels.get(&channel).is_some_and(|sender| sender.receiver_count() == 0) {
                channels.remove(&channel);
            }
        }))
    }

    async fn ping(&self) -> Result<(), BusError> {
        Ok(())
    }

    fn backend_name(&self) -> &'static str {
        "memory"
    }
}

/// Wraps a broadcast receiver as a [`Subscription`]: lag becomes [`BusItem::Gap`], and
/// `on_drop` runs after the receiver is gone so it can see whether it was the last one.
pub(crate) fn subscription(
    receiver: broadcast::Receiver<BusItem>,
    on_drop: impl FnOnce() + Send + 'static,
) -> Subscription {
    Box::pin(ChannelStream { receiver: Some(BroadcastStream::new(receiver)), on_drop: Some(Box::new(on_drop)) })
}

struct ChannelStream {
    receiver: Option<BroadcastStream<BusItem>>,
    on_drop: Option<Box<dyn FnOnce() + Send>>,
}

impl Stream for ChannelStream {
    type Item = BusItem;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<BusItem>> {
        let Some(receiver) = self.receiver.as_mut() else {
            return Poll::Ready(None);
        };
        Pin::new(receiver).poll_next(cx).map(|item| {
            item.map(|item| match item {
                Ok(item) => item,
                Err(BroadcastStreamRecvError::Lagged(_)) => BusItem::Gap,
            })
        })
    }
}

impl Drop for ChannelStream {
    fn drop(&mut self) {
        // The receiver must be gone before the hook counts the remaining ones.
        drop(self.receiver.take());
        if let Some(on_drop) = self.on_drop.take() {
            on_drop();
        }
    }
}
