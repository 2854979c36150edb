//! The gRPC health protocol (`grpc.health.v1.Health`) that gateways and workers serve
//! for probes. The overall service ("") and the role name report SERVING while the
//! process is ready and NOT_SERVING while draining or when a backend is down; the
//! `liveness` service reports SERVING for as long as the process runs, so a liveness
//! probe never restarts a pod that is merely draining or waiting for a dependency.

use std::net::SocketAddr;

use tokio_util::sync::CancellationToken;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// Handle to flip the reported status.
#[derive(Clone)]
pub struct Health {
    reporter: HealthReporter,
    role: &'static str,
}

impl Health {
    /// Reports `serving` for the overall service and for `role`.
    pub async fn set_serving(&self, serving: bool) {
        let status = if serving { ServingStatus::Serving } else { ServingStatus::NotServing };
        self.reporter.set_service_status("", status).await;
        self.reporter.set_service_status(self.role, status).await;
    }
}

/// Binds `addr` and serves the health protocol until `shutdown` fires. Starts
/// NOT_SERVING; the caller flips it once the role is ready.
pub async fn serve(
    addr: SocketAddr,
    role: &'static str,
    shutdown: CancellationToken,
) -> std::io::Result<(Health, SocketAddr, tokio::task::JoinHandle<()>)> {
    let (reporter, service) = tonic_health::server::health_reporter();
    let health = Health { reporter, role };
    health.set_serving(false).await;
    health.reporter.set_service_status("liveness", ServingStatus::Serving).await;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let task = tokio::spawn(async move {
        let result = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
            .await;
        if let Err(error) = result {
            tracing::error!(%error, "grpc health server failed");
        }
    });
    Ok((health, local, task))
}
