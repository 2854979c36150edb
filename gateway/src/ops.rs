//! Operations routes, outside `/v1` and without beta headers: `GET /readyz`,
//! `GET /metrics`, `POST /admin/drain`. Served by every HTTP-serving role, on the main
//! listener or on a separate one (`AGENTD_OPS_ADDR`). `/admin/drain` carries no
//! credential of its own: protect it at the deployment boundary.

use std::sync::Arc;
use std::time::Duration;

use agentd_proto::{Bus, Lifecycle, Queue};
use agentd_schema::Store;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::telemetry;

/// How long one backend may take to answer a readiness check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// The backends a process depends on; `None` where a role does not use one.
#[derive(Clone)]
pub struct Backends {
    /// Committed truth.
    pub store: Arc<dyn Store>,
    /// Submission queue.
    pub queue: Option<Arc<dyn Queue>>,
    /// Live bus.
    pub bus: Option<Arc<dyn Bus>>,
}

/// One backend's answer to a readiness check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The seam: `store`, `queue` or `bus`.
    pub seam: &'static str,
    /// The implementation, e.g. `postgres`, `jetstream`, `redis`.
    pub backend: &'static str,
    /// `None` when healthy, else why not.
    pub error: Option<String>,
}

impl Backends {
    /// Asks every backend at once, each bounded by a short timeout.
    pub async fn check(&self) -> Vec<Check> {
        let store = {
            let store = self.store.clone();
            async move {
                let result = bounded(async { store.ping().await.map_err(|e| e.to_string()) }).await;
                Check { seam: "store", backend: store.backend().name(), error: result.err() }
            }
        };
        let queue = {
            let queue = self.queue.clone();
            async move {
                let queue = queue?;
                let result = bounded(async { queue.ping().await.map_err(|e| e.to_string()) }).await;
                Some(Check { seam: "queue", backend: queue.backend_name(), error: result.err() })
            }
        };
        let bus = {
            let bus = self.bus.clone();
            async move {
                let bus = bus?;
                let result = bounded(async { bus.ping().await.map_err(|e| e.to_string()) }).await;
                Some(Check { seam: "bus", backend: bus.backend_name(), error: result.err() })
            }
        };
        let (store, queue, bus) = tokio::join!(store, queue, bus);
        let checks: Vec<Check> = std::iter::once(store).chain(queue).chain(bus).collect();
        for check in &checks {
            metrics::gauge!("agentd_backend_up", "seam" => check.seam, "backend" => check.backend)
                .set(if check.error.is_none() { 1.0 } else { 0.0 });
        }
        checks
    }
}

async fn bounded(check: impl Future<Output = Result<(), String>>) -> Result<(), String> {
    tokio::time::timeout(CHECK_TIMEOUT, check)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {CHECK_TIMEOUT:?}")))
}

/// What the operations routes need.
#[derive(Clone)]
pub struct OpsState {
    /// Backends checked by `/readyz`.
    pub backends: Backends,
    /// Drain state.
    pub lifecycle: Arc<Lifecycle>,
}

/// The operations routes.
pub fn router(state: OpsState) -> Router {
    Router::new()
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/admin/drain", post(drain))
        .with_state(state)
}

async fn readyz(State(state): State<OpsState>) -> Response {
    let checks = state.backends.check().await;
    let healthy = checks.iter().all(|check| check.error.is_none());
    state.lifecycle.report(healthy).await;
    let draining = state.lifecycle.is_draining();
    let status = match (draining, healthy) {
        (true, _) => "draining",
        (false, false) => "unavailable",
        (false, true) => "ready",
    };
    let backends: serde_json::Map<String, Value> = checks
        .iter()
        .map(|check| {
            let mut entry = json!({ "backend": check.backend, "ok": check.error.is_none() });
            if let Some(error) = &check.error {
                entry["error"] = json!(error);
            }
            (check.seam.to_owned(), entry)
        })
        .collect();
    let code = if status == "ready" { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, Json(json!({ "status": status, "backends": backends }))).into_response()
}

async fn metrics_text() -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], telemetry::prometheus().render())
        .into_response()
}

async fn drain(State(state): State<OpsState>) -> Response {
    state.lifecycle.drain().await;
    (StatusCode::ACCEPTED, Json(json!({ "draining": true }))).into_response()
}

/// Keeps gRPC health and the `agentd_backend_up` gauges current between probes,
/// until `stop` fires.
pub fn spawn_health_monitor(state: OpsState, every: Duration, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let checks = state.backends.check().await;
            for check in checks.iter().filter(|check| check.error.is_some()) {
                tracing::warn!(seam = check.seam, backend = check.backend, error = ?check.error, "backend unhealthy");
            }
            state.lifecycle.report(checks.iter().all(|check| check.error.is_none())).await;
        }
    })
}
