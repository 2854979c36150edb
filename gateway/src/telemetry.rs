//! HTTP metrics and the process-wide Prometheus recorder.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Latency buckets in seconds: fine below 100 ms where the gateway's own overhead
/// lives, coarse above for model-bound requests.
const LATENCY_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// How often the recorder's upkeep runs (see [`prometheus`]).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The process-wide Prometheus recorder, installed on first use. Every role renders
/// `/metrics` from it, so tests that start several apps in one process share it.
///
/// A recorder built with `build_recorder` keeps every histogram sample until it is
/// drained, which a scrape or `run_upkeep` does: with nobody scraping, each request
/// left its latency sample in memory (the gateway's RSS grew with the requests it
/// served, ~1 MiB a minute in the soak). A thread of its own drains them every
/// [`UPKEEP_EVERY`], whatever runtime the roles run on.
pub fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), LATENCY_BUCKETS)
            .expect("latency buckets are non-empty")
            .build_recorder();
        let handle = recorder.handle();
        // Fails only if another recorder was installed first; then ours renders
        // nothing, which the /metrics tests would catch.
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed; /metrics may be empty");
        }
        let upkeep = handle.clone();
        let started = std::thread::Builder::new().name("metrics-upkeep".to_owned()).spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_EVERY);
                upkeep.run_upkeep();
            }
        });
        if let Err(error) = started {
            tracing::warn!(%error, "metrics upkeep thread not started; histograms are drained only by scrapes");
        }
        handle
    })
}

/// Counts requests by method, route template and status; times them; tracks how
/// many are in flight. The route is the matched template (`/v1/sessions/{id}`), never
/// the raw path, so label cardinality stays bounded.
pub async fn track_http(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().as_str().to_owned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let in_flight = metrics::gauge!("agentd_http_requests_in_flight");
    in_flight.increment(1.0);
    let response = next.run(request).await;
    in_flight.decrement(1.0);
    let status = response.status().as_u16().to_string();
    metrics::counter!("agentd_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("agentd_http_request_duration_seconds", "method" => method, "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}
