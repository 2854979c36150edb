//! Operations routes, outside `/v1` and without beta headers: `GET /readyz`,
//! `GET /metrics`, `POST /admin/drain`, served by every role on its own listener
//! (`AGENTD_OPS_ADDR`, loopback unless configured), never on the public one. The spec
//! puts drain's protection at the deployment boundary; the listener adds two checks of
//! its own: a request carrying `Origin` (a browser, so possibly a cross-site form or a
//! page a session opened) is refused, and `AGENTD_OPS_TOKEN`, when set, is required as
//! `Authorization: Bearer <token>`. The public listener keeps a bare `GET /readyz` for
//! load balancers ([`public_router`]).

use std::sync::Arc;
use std::time::Duration;

use agentd_proto::{Bus, Lifecycle, Queue};
use agentd_schema::Store;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
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
    /// Bytes of files and skill archives (ADR 0015).
    pub blobs: agentd_schema::blobs::Blobs,
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
        let blobs = {
            let blobs = self.blobs.clone();
            async move {
                let result = bounded(async { blobs.ping().await.map_err(|e| e.to_string()) }).await;
                Check { seam: "blobs", backend: blobs.backend().name(), error: result.err() }
            }
        };
        let (store, queue, bus, blobs) = tokio::join!(store, queue, bus, blobs);
        let checks: Vec<Check> = std::iter::once(store).chain(queue).chain(bus).chain(Some(blobs)).collect();
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
    /// The bearer token `POST /admin/drain` requires (`AGENTD_OPS_TOKEN`); `None`: none.
    pub drain_token: Option<Arc<str>>,
}

/// The operations listener's routes; anything else is the managed 404.
pub fn router(state: OpsState) -> Router {
    Router::new()
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/admin/drain", post(drain))
        .fallback(unknown)
        .with_state(state)
}

/// What the public listener serves of operations: `GET /readyz` for load balancers,
/// the status alone (backend names and errors are for the operations listener).
pub fn public_router(state: OpsState) -> Router {
    Router::new().route("/readyz", get(public_readyz)).with_state(state)
}

async fn unknown(request: axum::extract::Request) -> ApiError {
    ApiError::NotFound(format!("no route for {} {}", request.method(), request.uri().path()))
}

async fn public_readyz(State(state): State<OpsState>) -> Response {
    let (code, body) = readiness(&state).await;
    (code, Json(json!({ "status": body["status"] }))).into_response()
}

async fn readyz(State(state): State<OpsState>) -> Response {
    let (code, body) = readiness(&state).await;
    (code, Json(body)).into_response()
}

/// Checks every backend and the process's supervised components, reports the result
/// to the lifecycle (gRPC health), and answers 200 when ready, else 503; the body names
/// each backend and component and why any is down.
async fn readiness(state: &OpsState) -> (StatusCode, Value) {
    let checks = state.backends.check().await;
    let backends_ok = checks.iter().all(|check| check.error.is_none());
    state.lifecycle.report(backends_ok).await;
    let healthy = backends_ok && state.lifecycle.components_up();
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
    let components: serde_json::Map<String, Value> = state
        .lifecycle
        .components()
        .into_iter()
        .map(|(name, down)| {
            let entry = match down {
                None => json!({ "ok": true }),
                Some(error) => json!({ "ok": false, "error": error }),
            };
            (name.to_owned(), entry)
        })
        .collect();
    let code = if status == "ready" { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, json!({ "status": status, "backends": backends, "components": components }))
}

async fn metrics_text() -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], telemetry::prometheus().render())
        .into_response()
}

async fn drain(State(state): State<OpsState>, headers: HeaderMap) -> Response {
    if let Err(error) = may_drain(state.drain_token.as_deref(), &headers) {
        return error.into_response();
    }
    state.lifecycle.drain().await;
    (StatusCode::ACCEPTED, Json(json!({ "draining": true }))).into_response()
}

/// Browsers send `Origin` on every cross-origin POST (and on same-origin ones): no
/// operator's tool needs one, so a request carrying it is refused whatever else it
/// carries. Then the token, when configured.
fn may_drain(token: Option<&str>, headers: &HeaderMap) -> Result<(), ApiError> {
    if headers.contains_key(header::ORIGIN) {
        return Err(ApiError::PermissionDenied(
            "POST /admin/drain refuses requests that carry an Origin header (browsers); call it from an operator's tool"
                .to_owned(),
        ));
    }
    let Some(token) = token else { return Ok(()) };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, presented)| presented.trim());
    match presented {
        Some(presented) if same_secret(presented, token) => Ok(()),
        _ => Err(ApiError::Unauthenticated(
            "POST /admin/drain needs `Authorization: Bearer <AGENTD_OPS_TOKEN>`".to_owned(),
        )),
    }
}

/// Compares two secrets in time independent of where they differ (and of their
/// lengths): both are hashed first, then every byte of the digests is compared.
fn same_secret(presented: &str, expected: &str) -> bool {
    let (a, b) = (Sha256::digest(presented.as_bytes()), Sha256::digest(expected.as_bytes()));
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
