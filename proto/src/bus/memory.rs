//! In-process bus for `agentd dev`, and the in-process fan-out ([`Fanout`]) that both
//! buses deliver through: one bounded queue per subscription.
//!
//! A subscription costs what it holds, not what its channel could hold: its queue is a
//! `VecDeque` behind a lock with a waker, which allocates only as messages queue up and
//! gives the memory back once a burst is read. (A `broadcast` channel per bus channel
//! allocated its whole ring, ~72 KiB, up front; a bounded `mpsc` queue its first block
//! of 32 slots, ~1.3 KiB, per subscription: per idle live stream.)

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};

use async_trait::async_trait;
use bytes::Bytes;
use futures::Stream;
use futures::task::AtomicWaker;

use super::{Bus, BusError, BusItem, Subscription};

/// Items a subscriber may fall behind by before it sees [`BusItem::Gap`]; large enough
/// for a model's delta burst. Memory is taken only as items queue up.
pub(crate) const CHANNEL_CAPACITY: usize = 1024;

/// An in-process [`Bus`]: fan-out to subscriptions in this process only.
#[derive(Clone)]
pub struct MemoryBus {
    fanout: Arc<Fanout>,
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
        Self { fanout: Arc::new(Fanout::new(capacity)) }
    }

    /// Live subscriptions of `channel` (0 once the last one was dropped).
    pub fn subscriber_count(&self, channel: &str) -> usize {
        self.fanout.subscriber_count(channel)
    }
}

#[async_trait]
impl Bus for MemoryBus {
    async fn publish(&self, channel: &str, payload: Bytes) -> Result<(), BusError> {
        self.fanout.send(channel, &BusItem::Message(payload));
        Ok(())
    }

    async fn subscribe(&self, channel: &str) -> Result<Subscription, BusError> {
        Ok(self.fanout.subscribe(channel, || {}))
    }

    async fn ping(&self) -> Result<(), BusError> {
        Ok(())
    }

    fn backend_name(&self) -> &'static str {
        "memory"
    }
}

/// One subscription as the fan-out sees it.
struct Subscriber {
    id: u64,
    inbox: Arc<Inbox>,
}

/// A subscription's queue: items in order, and whether one was lost.
struct Inbox {
    state: Mutex<InboxState>,
    waker: AtomicWaker,
}

#[derive(Default)]
struct InboxState {
    items: VecDeque<BusItem>,
    /// An item could not be queued; the subscription reports a gap next.
    lagged: bool,
    /// The subscription is gone; nothing more is queued.
    closed: bool,
}

/// A drained queue keeps at most this many slots; a burst's memory goes back.
const KEPT_SLOTS: usize = 32;

impl Inbox {
    fn new() -> Self {
        Self { state: Mutex::new(InboxState::default()), waker: AtomicWaker::new() }
    }

    fn lock(&self) -> MutexGuard<'_, InboxState> {
        // Every update leaves the state whole, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `item`, or marks the subscription lagged when `capacity` items wait already.
    fn push(&self, item: &BusItem, capacity: usize) {
        {
            let mut state = self.lock();
            if state.closed {
                return;
            }
            if state.items.len() >= capacity {
                state.lagged = true;
            } else {
                state.items.push_back(item.clone());
            }
        }
        self.waker.wake();
    }

    fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Option<BusItem>> {
        let mut state = self.lock();
        // A lost item is reported before what is still queued: the subscriber re-reads
        // history, which covers everything up to now.
        if std::mem::take(&mut state.lagged) {
            return Poll::Ready(Some(BusItem::Gap));
        }
        if let Some(item) = state.items.pop_front() {
            if state.items.is_empty() && state.items.capacity() > KEPT_SLOTS {
                state.items = VecDeque::new();
            }
            return Poll::Ready(Some(item));
        }
        // Registered under the lock: a push after the check above wakes this waker.
        self.waker.register(cx.waker());
        Poll::Pending
    }

    fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.items = VecDeque::new();
    }
}

/// Subscriptions by channel, each with its own bounded queue. Payloads are [`Bytes`],
/// so a message reaches every subscriber of its channel without a copy.
pub(crate) struct Fanout {
    channels: Mutex<HashMap<String, Vec<Subscriber>>>,
    next_id: AtomicU64,
    capacity: usize,
}

impl Fanout {
    /// A fan-out whose subscribers see a gap once they lag by `capacity` items.
    pub(crate) fn new(capacity: usize) -> Self {
        Self { channels: Mutex::new(HashMap::new()), next_id: AtomicU64::new(0), capacity: capacity.max(1) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Subscriber>>> {
        // The map is never left half-updated, so a poisoned lock is still usable.
        self.channels.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a subscription of `channel`. When it is dropped it leaves the fan-out, then
    /// `on_drop` runs (and may ask [`Fanout::subscriber_count`] whether it was the last).
    pub(crate) fn subscribe(self: &Arc<Self>, channel: &str, on_drop: impl FnOnce() + Send + 'static) -> Subscription {
        let inbox = Arc::new(Inbox::new());
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().entry(channel.to_owned()).or_default().push(Subscriber { id, inbox: inbox.clone() });
        let fanout: Weak<Fanout> = Arc::downgrade(self);
        let channel = channel.to_owned();
        let leave = move || {
            if let Some(fanout) = fanout.upgrade() {
                fanout.leave(&channel, id);
            }
            on_drop();
        };
        Box::pin(QueueStream { inbox, on_drop: Some(Box::new(leave)) })
    }

    fn leave(&self, channel: &str, id: u64) {
        let mut channels = self.lock();
        if let Some(subscribers) = channels.get_mut(channel) {
            subscribers.retain(|subscriber| subscriber.id != id);
            if subscribers.is_empty() {
                channels.remove(channel);
            }
        }
    }

    /// Queues `item` for every subscriber of `channel`; one whose queue is full is
    /// marked lagged instead (it sees [`BusItem::Gap`] and re-reads history).
    pub(crate) fn send(&self, channel: &str, item: &BusItem) {
        let channels = self.lock();
        let Some(subscribers) = channels.get(channel) else { return };
        for subscriber in subscribers {
            subscriber.inbox.push(item, self.capacity);
        }
    }

    /// Tells every subscriber that messages may have been lost (a reconnect).
    pub(crate) fn gap_all(&self) {
        for subscribers in self.lock().values() {
            for subscriber in subscribers {
                subscriber.inbox.push(&BusItem::Gap, self.capacity);
            }
        }
    }

    /// Live subscriptions of `channel`.
    pub(crate) fn subscriber_count(&self, channel: &str) -> usize {
        self.lock().get(channel).map_or(0, Vec::len)
    }
}

/// A subscription's end of its queue.
struct QueueStream {
    inbox: Arc<Inbox>,
    on_drop: Option<Box<dyn FnOnce() + Send>>,
}

impl Stream for QueueStream {
    type Item = BusItem;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<BusItem>> {
        self.inbox.poll_pop(cx)
    }
}

impl Drop for QueueStream {
    fn drop(&mut self) {
        self.inbox.close();
        if let Some(on_drop) = self.on_drop.take() {
            on_drop();
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_sees_a_gap_then_the_rest() {
        let bus = MemoryBus::with_capacity(2);
        let mut slow = bus.subscribe("c").await.unwrap();
        let mut fast = bus.subscribe("c").await.unwrap();
        for payload in ["1", "2", "3"] {
            bus.publish("c", Bytes::from(payload)).await.unwrap();
            if payload != "3" {
                assert_eq!(fast.next().await, Some(BusItem::Message(Bytes::from(payload))));
            }
        }
        assert_eq!(fast.next().await, Some(BusItem::Message(Bytes::from("3"))), "a fast subscriber loses nothing");
        assert_eq!(slow.next().await, Some(BusItem::Gap), "the lost item is reported first");
        assert_eq!(slow.next().await, Some(BusItem::Message(Bytes::from("1"))));
        assert_eq!(slow.next().await, Some(BusItem::Message(Bytes::from("2"))));
        bus.publish("c", Bytes::from("4")).await.unwrap();
        assert_eq!(slow.next().await, Some(BusItem::Message(Bytes::from("4"))), "and it keeps receiving");
    }

    #[tokio::test]
    async fn dropping_every_subscription_forgets_the_channel() {
        let bus = MemoryBus::new();
        let first = bus.subscribe("c").await.unwrap();
        let second = bus.subscribe("c").await.unwrap();
        assert_eq!(bus.subscriber_count("c"), 2);
        drop(first);
        assert_eq!(bus.subscriber_count("c"), 1);
        drop(second);
        assert_eq!(bus.subscriber_count("c"), 0);
        assert!(bus.fanout.lock().is_empty());
    }

    #[tokio::test]
    async fn an_idle_subscription_holds_no_queue_and_a_read_burst_gives_its_memory_back() {
        let bus = MemoryBus::new();
        let mut subscription = bus.subscribe("c").await.unwrap();
        let capacity = || bus.fanout.lock()["c"][0].inbox.lock().items.capacity();
        assert_eq!(capacity(), 0, "nothing allocated before a message arrives");
        for n in 0..500 {
            bus.publish("c", Bytes::from(n.to_string())).await.unwrap();
        }
        assert!(capacity() >= 500);
        for n in 0..500 {
            assert_eq!(subscription.next().await, Some(BusItem::Message(Bytes::from(n.to_string()))));
        }
        assert!(capacity() <= KEPT_SLOTS, "a drained burst keeps at most {KEPT_SLOTS} slots");
    }

    #[tokio::test]
    async fn a_gap_for_everyone_arrives_in_order_and_wakes_a_waiting_subscriber() {
        let bus = MemoryBus::new();
        let mut subscription = bus.subscribe("c").await.unwrap();
        let waiting = tokio::spawn(async move {
            let first = subscription.next().await;
            (first, subscription.next().await, subscription.next().await)
        });
        tokio::task::yield_now().await;
        bus.publish("c", Bytes::from("1")).await.unwrap();
        bus.fanout.gap_all();
        bus.publish("c", Bytes::from("2")).await.unwrap();
        let (first, second, third) = waiting.await.unwrap();
        assert_eq!(first, Some(BusItem::Message(Bytes::from("1"))));
        assert_eq!(second, Some(BusItem::Gap));
        assert_eq!(third, Some(BusItem::Message(Bytes::from("2"))));
    }
}
