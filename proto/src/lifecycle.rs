//! Process lifecycle shared by every role: ready → draining. Draining is one-way; it
//! starts on `POST /admin/drain` or SIGTERM, turns `/readyz` and gRPC health to
//! not-serving, and tells long-lived work (streams, runs, consumers) to wind down.
//!
//! The lifecycle also knows the process's long-lived components (the consumer, the
//! outbox relay, the in-process runner): each runs under [`Lifecycle::supervise`], which
//! restarts one that stops or panics with backoff and marks it down meanwhile, so
//! `/readyz` answers 503 with the reason instead of "ready" for a process that cannot
//! do its work.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::health::Health;

/// Shared drain state of one process.
#[derive(Default)]
pub struct Lifecycle {
    draining: CancellationToken,
    health: Mutex<Option<Health>>,
    /// Supervised components: `None` while running, else why not.
    components: Mutex<BTreeMap<&'static str, Option<String>>>,
}

/// A supervised component's first restart waits this long, doubling up to
/// [`RESTART_MAX`]; one that ran [`RESTART_RESET`] before stopping starts over at the
/// first delay.
const RESTART_FIRST: Duration = Duration::from_secs(1);
const RESTART_MAX: Duration = Duration::from_secs(30);
const RESTART_RESET: Duration = Duration::from_secs(60);

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle").field("draining", &self.is_draining()).finish()
    }
}

impl Lifecycle {
    /// A new, ready lifecycle.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Whether draining has started.
    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Starts draining (idempotent) and reports NOT_SERVING over gRPC at once.
    pub async fn drain(&self) {
        if !self.draining.is_cancelled() {
            tracing::info!("draining: no new work is accepted; in-flight work may finish");
        }
        self.draining.cancel();
        self.report(false).await;
    }

    /// Completes when draining starts.
    pub async fn draining(&self) {
        self.draining.cancelled().await;
    }

    /// A token cancelled when draining starts.
    pub fn drain_token(&self) -> CancellationToken {
        self.draining.clone()
    }

    /// Connects the gRPC health reporter; its status follows [`Lifecycle::report`].
    pub fn attach_health(&self, health: Health) {
        *self.health.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(health);
    }

    /// Reports whether the process can take work: `backends_ok`, every supervised
    /// component running, and not draining.
    pub async fn report(&self, backends_ok: bool) {
        let health = self.health.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        if let Some(health) = health {
            health.set_serving(backends_ok && self.components_up() && !self.is_draining()).await;
        }
    }

    /// Runs the component `name` until `stop` or draining: `start` makes one run of it,
    /// and a run that ends before either (with an error, a panic or none) marks the
    /// component down with the reason and is started again after a backoff (1 s
    /// doubling to 30 s).
    pub async fn supervise<F, Fut>(&self, name: &'static str, stop: CancellationToken, mut start: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let mut backoff = RESTART_FIRST;
        loop {
            self.set_component(name, None);
            let started = Instant::now();
            let ended = AssertUnwindSafe(start()).catch_unwind().await;
            // Draining winds components down on purpose.
            if stop.is_cancelled() || self.is_draining() {
                return;
            }
            let why = match ended {
                Ok(Ok(())) => "stopped unexpectedly".to_owned(),
                Ok(Err(error)) => error,
                Err(panic) => format!("panicked: {}", panic_text(panic.as_ref())),
            };
            if started.elapsed() >= RESTART_RESET {
                backoff = RESTART_FIRST;
            }
            tracing::error!(component = name, error = %why, retry_in = ?backoff, "a component stopped; restarting it");
            metrics::counter!("agentd_component_restarts_total", "component" => name).increment(1);
            self.set_component(name, Some(why));
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(RESTART_MAX);
        }
    }

    /// Every supervised component and why it is down (`None`: running), by name.
    pub fn components(&self) -> Vec<(&'static str, Option<String>)> {
        let components = self.components.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        components.iter().map(|(name, down)| (*name, down.clone())).collect()
    }

    /// Whether every supervised component is running.
    pub fn components_up(&self) -> bool {
        let components = self.components.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        components.values().all(Option::is_none)
    }

    fn set_component(&self, name: &'static str, down: Option<String>) {
        metrics::gauge!("agentd_component_up", "component" => name).set(if down.is_none() { 1.0 } else { 0.0 });
        self.components.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(name, down);
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str)).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_component_that_stops_is_down_with_its_reason_until_restarted() {
        let lifecycle = Lifecycle::new();
        let stop = CancellationToken::new();
        let runs = Arc::new(AtomicU32::new(0));
        let supervised = {
            let (lifecycle, stop, runs) = (lifecycle.clone(), stop.clone(), runs.clone());
            tokio::spawn(async move {
                lifecycle
                    .supervise("runner", stop, || {
                        let run = runs.fetch_add(1, Ordering::SeqCst);
                        async move {
                            match run {
                                0 => Err("building the HTTP client".to_owned()),
                                1 => panic!("boom"),
                                _ => std::future::pending().await,
                            }
                        }
                    })
                    .await;
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(lifecycle.components(), vec![("runner", Some("building the HTTP client".to_owned()))]);
        tokio::time::sleep(RESTART_FIRST).await;
        assert_eq!(lifecycle.components(), vec![("runner", Some("panicked: boom".to_owned()))]);
        tokio::time::sleep(RESTART_FIRST * 2).await;
        assert_eq!(lifecycle.components(), vec![("runner", None)], "running again after two restarts");
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        stop.cancel();
        // The run in progress ignores the stop here; the supervisor returns with it.
        supervised.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_component_ended_by_the_stop_is_not_restarted() {
        let lifecycle = Lifecycle::new();
        let stop = CancellationToken::new();
        let runs = AtomicU32::new(0);
        let run = lifecycle.supervise("consumer", stop.clone(), || {
            runs.fetch_add(1, Ordering::SeqCst);
            let stop = stop.clone();
            async move {
                stop.cancelled().await;
                Ok(())
            }
        });
        tokio::join!(run, async { stop.cancel() });
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(lifecycle.components(), vec![("consumer", None)]);
    }
}
