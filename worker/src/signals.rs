//! What reaches a live attempt over the bus: committed `user.interrupt`s of its thread
//! and operator control signals (pause, wake). Without the bus both still arrive, one
//! step later, through the store.

use agentd_proto::v1::{LiveEvent, live_event};
use agentd_proto::{Bus, BusItem};
use agentd_schema::{EventType, live};
use futures::StreamExt;
use prost::Message;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The highest sequence number of a committed `user.interrupt` of the thread seen on
/// the bus.
#[derive(Clone)]
pub struct Interrupts(watch::Receiver<i64>);

impl Interrupts {
    /// Watches the session's bus channel for committed interrupts of `thread_id` until
    /// `cancel` fires.
    pub async fn watch(bus: &dyn Bus, session_id: &str, thread_id: &str, cancel: &CancellationToken) -> Self {
        let (tx, rx) = watch::channel(0);
        let thread_id = thread_id.to_owned();
        let interrupt = format!("\"{}\"", EventType::UserInterrupt);
        on_bus_messages(bus, &live::session_channel(session_id), cancel, move |bytes| {
            let Ok(message) = LiveEvent::decode(bytes) else { return };
            if let Some(live_event::Kind::Committed(committed)) = message.kind
                && message.thread_id == thread_id
                && committed.body_json.contains(&interrupt)
            {
                tx.send_replace(committed.seq);
            }
        })
        .await;
        Self(rx)
    }

    /// Whether an interrupt committed after `seq` has been seen.
    pub fn since(&self, seq: i64) -> bool {
        *self.0.borrow() > seq
    }

    /// The one interrupt wait: resolves once an interrupt committed after `seq` is
    /// seen, and never when the watch ends first (the next step reads the interrupt
    /// from history).
    pub async fn after(&self, seq: i64) {
        let mut watcher = self.0.clone();
        loop {
            if *watcher.borrow_and_update() > seq {
                return;
            }
            if watcher.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Control signals to this attempt (`/v1/durable/…/pause` and `wake`).
pub struct Control {
    /// Pause requests seen.
    pub pause: watch::Receiver<u64>,
    /// Wake nudges seen.
    pub wake: watch::Receiver<u64>,
}

impl Control {
    /// Watches the thread's control channel for signals to `run_id` until `cancel` fires.
    pub async fn watch(bus: &dyn Bus, thread_id: &str, run_id: &str, cancel: &CancellationToken) -> Self {
        use agentd_proto::v1::{ControlSignal, control_signal::Kind};
        let (pause_tx, pause) = watch::channel(0u64);
        let (wake_tx, wake) = watch::channel(0u64);
        let run_id = run_id.to_owned();
        // Without the bus a pause still reaches the next attempt through the store.
        on_bus_messages(bus, &live::control_channel(thread_id), cancel, move |bytes| {
            let Ok(signal) = ControlSignal::decode(bytes) else { return };
            if signal.run_id != run_id {
                return;
            }
            match Kind::try_from(signal.kind) {
                Ok(Kind::Pause) => pause_tx.send_modify(|n| *n += 1),
                Ok(Kind::Wake) => wake_tx.send_modify(|n| *n += 1),
                _ => {}
            }
        })
        .await;
        Control { pause, wake }
    }

    /// A pause was requested during this attempt.
    pub fn paused(&self) -> bool {
        *self.pause.borrow() > 0
    }

    /// Resolves at the next wake nudge (not at one seen before the call).
    pub async fn woken(&self) {
        let mut woken = self.wake.clone();
        woken.mark_unchanged();
        if woken.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Hands every message published on `channel` to `on_message`, in a task that ends
/// with `cancel` or the subscription. Does nothing when the bus cannot be subscribed.
async fn on_bus_messages(
    bus: &dyn Bus,
    channel: &str,
    cancel: &CancellationToken,
    mut on_message: impl FnMut(&[u8]) + Send + 'static,
) {
    let Ok(mut subscription) = bus.subscribe(channel).await else { return };
    let cancel = cancel.clone();
    tokio::spawn(async move {
        loop {
            let item = tokio::select! {
                () = cancel.cancelled() => return,
                item = subscription.next() => item,
            };
            match item {
                Some(BusItem::Message(bytes)) => on_message(bytes.as_ref()),
                Some(BusItem::Gap) => {}
                None => return,
            }
        }
    });
}
