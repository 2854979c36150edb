//! Addresses of the real backends the conformance suites run against.
//!
//! The suites never skip: when a service is unreachable the test fails with a message
//! naming the service and the variable to set. `scripts/test` installs and starts the
//! services first, so on CI an unreachable service is a red build, never a silent skip.

use std::time::Duration;

/// PostgreSQL server URL (without a database name is fine; tests create their own).
pub fn postgres_url() -> String {
    std::env::var("AGENTD_TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// NATS server URL with JetStream enabled.
pub fn nats_url() -> String {
    std::env::var("AGENTD_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// Redis server URL.
pub fn redis_url() -> String {
    std::env::var("AGENTD_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A name unique to this test invocation: safe for databases, streams and key prefixes.
pub fn unique_name(prefix: &str) -> String {
    let id = uuid::Uuid::now_v7().simple().to_string();
    // Lowercase alphanumerics and '_' only: valid as a Postgres identifier, a JetStream
    // stream name and a Redis key prefix alike.
    format!("{prefix}_{}_{}", std::process::id(), &id[id.len() - 12..])
}

/// Panics with an actionable message if `addr` (host:port) does not accept TCP.
pub async fn require_tcp(service: &str, env_var: &str, url: &str) {
    let host_port = url
        .split("://")
        .nth(1)
        .unwrap_or(url)
        .rsplit('@')
        .next()
        .unwrap_or(url)
        .split('/')
        .next()
        .unwrap_or(url)
        .to_owned();
    let connect = tokio::net::TcpStream::connect(&host_port);
    match tokio::time::timeout(Duration::from_secs(3), connect).await {
        Ok(Ok(_)) => {}
        other => panic!(
            "{service} is not reachable at {host_port} ({other:?}); start it (scripts/test does) \
             or point {env_var} at one"
        ),
    }
}
