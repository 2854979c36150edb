//! What reaches a live attempt over the bus, on its thread's control channel: committed
//! `user.interrupt`s of the thread (signalled by whoever commits one,
//! `agentd_schema::live::publish_committed`) and operator control signals (pause,
//! wake). Without the bus all of them still arrive, one step later, through the store.

use agentd_proto::v1::ControlSignal;
use agentd_proto::v1::control_signal::Kind;
use agentd_proto::{Bus, BusItem};
use agentd_schema::live;
use futures::StreamExt;
use prost::Message;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Watches the thread's control channel until `cancel` fires: interrupts of the thread,
/// and pause and wake signals to `run_id`. One subscription per attempt.
pub async fn watch(bus: &dyn Bus, thread_id: &str, run_id: &str, cancel: &CancellationToken) -> (Interrupts, Control) {
    let (interrupt_tx, interrupts) = watch::channel(0);
    let (pause_tx, pause) = watch::channel(0u64);
    let (wake_tx, wake) = watch::channel(0u64);
    let run_id = run_id.to_owned();
    on_bus_messages(bus, &live::control_channel(thread_id), cancel, move |bytes| {
        let Ok(signal) = ControlSignal::decode(bytes) else { return };
        match Kind::try_from(signal.kind) {
            Ok(Kind::Interrupt) => {
                interrupt_tx.send_if_modified(|seen| {
                    let later = signal.seq > *seen;
                    *seen = (*seen).max(signal.seq);
                    later
                });
            }
            Ok(Kind::Pause) if signal.run_id == run_id => pause_tx.send_modify(|n| *n += 1),
            Ok(Kind::Wake) if signal.run_id == run_id => wake_tx.send_modify(|n| *n += 1),
            _ => {}
        }
    })
    .await;
    (Interrupts(interrupts), Control { pause, wake })
}

/// The highest sequence number of a committed `user.interrupt` of the thread seen on
/// the bus.
#[derive(Clone)]
pub struct Interrupts(watch::Receiver<i64>);

impl Interrupts {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agentd_proto::MemoryBus;
    use agentd_schema::store::StoredEvent;

    use super::*;

    fn committed(thread_id: &str, seq: i64, kind: &str) -> StoredEvent {
        StoredEvent {
            session_id: "sesn_a".into(),
            seq,
            event_id: format!("sevt_{seq}"),
            thread_id: thread_id.into(),
            kind: kind.into(),
            body: serde_json::json!({ "type": kind }),
            processed_at_ms: 0,
        }
    }

    /// Waits until `condition` holds, or fails after five seconds.
    async fn eventually(condition: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(5), async {
            while !condition() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the signal arrived");
    }

    #[tokio::test]
    async fn a_committed_interrupt_reaches_the_attempt_on_its_threads_control_channel() {
        let bus = MemoryBus::new();
        let cancel = CancellationToken::new();
        let (interrupts, control) = watch(&bus, "sesn_a", "run_a", &cancel).await;
        // The session's other traffic and another thread's interrupt do not reach it.
        live::publish_committed(
            &bus,
            &[committed("sesn_a", 3, "user.message"), committed("sthr_b", 4, "user.interrupt")],
        )
        .await;
        live::publish_committed(&bus, &[committed("sesn_a", 7, "user.interrupt")]).await;
        eventually(|| interrupts.since(6)).await;
        assert!(!interrupts.since(7), "the highest interrupt seen is 7");
        // An older interrupt signalled late does not move it back.
        live::publish_committed(&bus, &[committed("sesn_a", 5, "user.interrupt")]).await;
        // Pause and wake count only when they name this attempt's run.
        live::publish_control(&bus, "sesn_a", "run_other", Kind::Pause).await;
        live::publish_control(&bus, "sesn_a", "run_a", Kind::Wake).await;
        eventually(|| *control.wake.borrow() == 1).await;
        assert!(!control.paused());
        assert!(interrupts.since(6) && !interrupts.since(7));
        live::publish_control(&bus, "sesn_a", "run_a", Kind::Pause).await;
        eventually(|| control.paused()).await;
        cancel.cancel();
    }

    #[tokio::test]
    async fn the_interrupt_wait_resolves_only_for_a_later_interrupt() {
        let (tx, rx) = watch::channel(0);
        let interrupts = Interrupts(rx);
        tx.send_replace(5);
        let waited = tokio::time::timeout(Duration::from_millis(50), interrupts.after(5)).await;
        assert!(waited.is_err(), "an interrupt at or before the step does not cut it");
        assert!(!interrupts.since(5) && interrupts.since(4));
        let later = tokio::spawn({
            let interrupts = interrupts.clone();
            async move { interrupts.after(5).await }
        });
        tx.send_replace(7);
        tokio::time::timeout(Duration::from_secs(5), later).await.expect("resolved").unwrap();
        // A watch that ends first leaves the wait pending: the next step reads history.
        drop(tx);
        let waited = tokio::time::timeout(Duration::from_millis(50), interrupts.after(9)).await;
        assert!(waited.is_err());
    }
}
