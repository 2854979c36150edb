//! In-process queue for `agentd dev`: the JetStream contract minus crash durability.
//!
//! Messages live in one mutex-guarded state; timers (ack-wait deadlines, nak delays) sit
//! in an ordered set so a fetch only looks at what is due. Waiting fetchers sleep on a
//! [`Notify`] until a publish, a settle or the next timer, never by polling.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Acker, Delivery, Queue, QueueConfig, QueueError};

/// An in-process [`Queue`] with JetStream's semantics, except that it dies with the process.
#[derive(Clone)]
pub struct MemoryQueue {
    inner: Arc<Inner>,
}

struct Inner {
    config: QueueConfig,
    state: Mutex<State>,
    notify: Notify,
}

#[derive(Default)]
struct State {
    next_seq: u64,
    messages: HashMap<u64, Message>,
    /// Deliverable now, lowest sequence first (redeliveries go before newer messages).
    ready: BTreeSet<u64>,
    /// One entry per message that waits on time: an ack-wait deadline or a nak delay.
    timers: BTreeSet<(Instant, u64)>,
    /// `msg_id`s seen inside the dedupe window, with when they were first published.
    seen: HashMap<String, Instant>,
    seen_order: VecDeque<(Instant, String)>,
}

struct Message {
    msg_id: String,
    payload: Bytes,
    deliveries: u64,
    status: Status,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Ready,
    /// Out with a consumer; redelivered at `due` unless settled or extended.
    InFlight {
        delivery: u64,
        due: Instant,
    },
    /// Nakked with a delay; ready again at `due`.
    Delayed {
        due: Instant,
    },
}

impl MemoryQueue {
    /// Creates an empty queue.
    pub fn new(config: QueueConfig) -> Self {
        let inner = Inner { config, state: Mutex::new(State::default()), notify: Notify::new() };
        Self { inner: Arc::new(inner) }
    }

    /// Messages published and not yet acked or given up on.
    pub fn len(&self) -> usize {
        self.inner.lock().messages.len()
    }

    /// Whether no message is waiting or in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every critical section leaves the state consistent before anything can panic,
        // so a poisoned lock carries no torn update worth refusing service over.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn exhausted(&self, deliveries: u64) -> bool {
        self.config.max_deliver > 0 && deliveries >= self.config.max_deliver.unsigned_abs()
    }
}

impl State {
    /// Fires every timer due at `now`: expired deliveries and elapsed nak delays become
    /// ready again, or are dropped once they used up `max_deliver`.
    fn fire_timers(&mut self, inner: &Inner, now: Instant) {
        while let Some(&(due, seq)) = self.timers.first() {
            if due > now {
                break;
            }
            self.timers.pop_first();
            let Some(message) = self.messages.get_mut(&seq) else {
                continue;
            };
            match message.status {
                Status::InFlight { .. } if inner.exhausted(message.deliveries) => {
                    self.messages.remove(&seq);
                }
                Status::InFlight { .. } | Status::Delayed { .. } => {
                    message.status = Status::Ready;
                    self.ready.insert(seq);
                }
                Status::Ready => {}
            }
        }
    }

    /// Moves `seq` to `status`, keeping `ready` and `timers` in step with it.
    fn set_status(&mut self, seq: u64, status: Status) {
        let Some(message) = self.messages.get_mut(&seq) else {
            return;
        };
        match std::mem::replace(&mut message.status, status) {
            Status::Ready => self.ready.remove(&seq),
            Status::InFlight { due, .. } | Status::Delayed { due } => self.timers.remove(&(due, seq)),
        };
        match status {
            Status::Ready => self.ready.insert(seq),
            Status::InFlight { due, .. } | Status::Delayed { due } => self.timers.insert((due, seq)),
        };
    }

    fn remove(&mut self, seq: u64) {
        let Some(message) = self.messages.remove(&seq) else {
            return;
        };
        match message.status {
            Status::Ready => self.ready.remove(&seq),
            Status::InFlight { due, .. } | Status::Delayed { due } => self.timers.remove(&(due, seq)),
        };
    }

    fn forget_expired_ids(&mut self, window: Duration, now: Instant) {
        while let Some((at, _)) = self.seen_order.front() {
            if now.duration_since(*at) < window {
                break;
            }
            if let Some((at, id)) = self.seen_order.pop_front()
                && self.seen.get(&id) == Some(&at)
            {
                self.seen.remove(&id);
            }
        }
    }
}

#[async_trait]
impl Queue for MemoryQueue {
    async fn publish(&self, msg_id: &str, payload: Bytes) -> Result<(), QueueError> {
        let now = Instant::now();
        {
            let mut state = self.inner.lock();
            state.forget_expired_ids(self.inner.config.dedupe_window, now);
            if state.seen.contains_key(msg_id) {
                return Ok(());
            }
            state.seen.insert(msg_id.to_owned(), now);
            state.seen_order.push_back((now, msg_id.to_owned()));
            state.next_seq += 1;
            let seq = state.next_seq;
            let message = Message { msg_id: msg_id.to_owned(), payload, deliveries: 0, status: Status::Ready };
            state.messages.insert(seq, message);
            state.ready.insert(seq);
        }
        self.inner.notify.notify_waiters();
        Ok(())
    }

    async fn fetch(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let give_up = Instant::now() + wait;
        loop {
            // Registered before looking at the state so a publish between the check and
            // the sleep still wakes us.
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            let now = Instant::now();
            let next_timer = {
                let mut state = self.inner.lock();
                state.fire_timers(&self.inner, now);
                let mut batch = Vec::new();
                while batch.len() < max {
                    let Some(&seq) = state.ready.first() else {
                        break;
                    };
                    let Some(message) = state.messages.get_mut(&seq) else {
                        state.ready.remove(&seq);
                        continue;
                    };
                    message.deliveries += 1;
                    let delivery = message.deliveries;
                    let (payload, msg_id) = (message.payload.clone(), message.msg_id.clone());
                    let due = now + self.inner.config.ack_wait;
                    state.set_status(seq, Status::InFlight { delivery, due });
                    let acker = MemoryAcker { inner: self.inner.clone(), seq, delivery };
                    batch.push(Delivery::new(payload, msg_id, delivery, Box::new(acker)));
                }
                if !batch.is_empty() || max == 0 {
                    return Ok(batch);
                }
                state.timers.first().map(|(due, _)| *due)
            };

            if now >= give_up {
                return Ok(Vec::new());
            }
            let wake_at = next_timer.map_or(give_up, |due| due.min(give_up));
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(wake_at) => {}
            }
        }
    }

    async fn ping(&self) -> Result<(), QueueError> {
        Ok(())
    }

    async fn undelivered(&self) -> Result<u64, QueueError> {
        Ok(self.inner.lock().ready.len() as u64)
    }

    fn backend_name(&self) -> &'static str {
        "memory"
    }
}

struct MemoryAcker {
    inner: Arc<Inner>,
    seq: u64,
    delivery: u64,
}

impl MemoryAcker {
    /// Moves the message to the status `next` picks (`None` drops it), but only while this
    /// delivery is the one out: a nak or progress from a superseded delivery must not move
    /// the current one's deadline.
    fn settle_current(&self, next: impl FnOnce(u64, Instant) -> Option<Status>) {
        {
            let mut state = self.inner.lock();
            let Some(message) = state.messages.get(&self.seq) else {
                return;
            };
            if !matches!(message.status, Status::InFlight { delivery, .. } if delivery == self.delivery) {
                return;
            }
            match next(message.deliveries, Instant::now()) {
                Some(status) => state.set_status(self.seq, status),
                None => state.remove(self.seq),
            }
        }
        self.inner.notify.notify_waiters();
    }
}

#[async_trait]
impl Acker for MemoryAcker {
    async fn ack(&self) -> Result<(), QueueError> {
        // An ack from any delivery finishes the message, as in JetStream: the work is done.
        self.inner.lock().remove(self.seq);
        Ok(())
    }

    async fn nak(&self, delay: Duration) -> Result<(), QueueError> {
        self.settle_current(|deliveries, now| {
            if self.inner.exhausted(deliveries) {
                None
            } else if delay.is_zero() {
                Some(Status::Ready)
            } else {
                Some(Status::Delayed { due: now + delay })
            }
        });
        Ok(())
    }

    async fn in_progress(&self) -> Result<(), QueueError> {
        let (delivery, ack_wait) = (self.delivery, self.inner.config.ack_wait);
        self.settle_current(|_, now| Some(Status::InFlight { delivery, due: now + ack_wait }));
        Ok(())
    }
}
