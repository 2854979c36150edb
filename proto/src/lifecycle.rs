//! Process lifecycle shared by every role: ready → draining. Draining is one-way; it
//! starts on `POST /admin/drain` or SIGTERM, turns `/readyz` and gRPC health to
//! not-serving, and tells long-lived work (streams, runs, consumers) to wind down.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::health::Health;

/// Shared drain state of one process.
#[derive(Default)]
pub struct Lifecycle {
    draining: CancellationToken,
    health: Mutex<Option<Health>>,
}

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

    /// Reports whether the process can take work: `backends_ok` and not draining.
    pub async fn report(&self, backends_ok: bool) {
        let health = self.health.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        if let Some(health) = health {
            health.set_serving(backends_ok && !self.is_draining()).await;
        }
    }
}
