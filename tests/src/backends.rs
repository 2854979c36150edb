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

/// The S3-compatible test server (`scripts/test` starts moto's), if one is configured.
pub fn s3_endpoint() -> Option<String> {
    std::env::var("AGENTD_TEST_S3_ENDPOINT")
        .ok()
        .filter(|url| !url.is_empty())
        .map(|url| url.trim_end_matches('/').to_owned())
}

/// A bucket on the S3 test server for one test or one deployment, removed with its
/// objects by [`TestBucket::remove`]. The harness's own requests carry an
/// `Authorization` header naming the test key but no real signature: moto checks who
/// asks, not the signature (it refuses anonymous object deletes). The `agentd`
/// processes sign theirs properly with the test credentials.
pub struct TestBucket {
    /// The server, `http://host:port`.
    pub endpoint: String,
    /// The bucket's name.
    pub name: String,
}

/// The `Authorization` header of the harness's own S3 requests (see [`TestBucket`]).
pub const S3_TEST_AUTHORIZATION: &str =
    "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0";

impl TestBucket {
    /// Creates a fresh bucket on `endpoint`; panics naming the server if it does not answer.
    pub async fn create(endpoint: &str) -> Self {
        // Bucket names: lowercase letters, digits and '-', at most 63 characters.
        let name = unique_name("agentd").replace('_', "-");
        let url = format!("{endpoint}/{name}");
        let response =
            crate::http().put(&url).header("authorization", S3_TEST_AUTHORIZATION).send().await.unwrap_or_else(
                |error| {
                    panic!(
                        "the S3 server at {endpoint} does not answer ({error}); start it (scripts/test does) or \
                 point AGENTD_TEST_S3_ENDPOINT at one"
                    )
                },
            );
        assert!(response.status().is_success(), "creating bucket {name} on {endpoint}: {}", response.status());
        Self { endpoint: endpoint.to_owned(), name }
    }

    /// `s3://<bucket>/<prefix>`, the value of `AGENTD_OBJECT_STORE_URL`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.name)
    }

    /// The keys of every object in the bucket.
    pub async fn keys(&self) -> Vec<String> {
        let mut keys = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut request = crate::http()
                .get(format!("{}/{}", self.endpoint, self.name))
                .header("authorization", S3_TEST_AUTHORIZATION)
                .query(&[("list-type", "2")]);
            if let Some(after) = &after {
                request = request.query(&[("start-after", after.as_str())]);
            }
            let body = request.send().await.unwrap().error_for_status().unwrap().text().await.unwrap();
            let page: Vec<String> = body
                .split("<Key>")
                .skip(1)
                .filter_map(|rest| rest.split_once("</Key>"))
                .map(|(key, _)| key.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
                .collect();
            let truncated = body.contains("<IsTruncated>true</IsTruncated>");
            after = page.last().cloned();
            keys.extend(page);
            if !truncated || after.is_none() {
                return keys;
            }
        }
    }

    /// Removes every object, then the bucket.
    pub async fn remove(self) {
        let client = crate::http();
        for key in self.keys().await {
            let _ = client
                .delete(format!("{}/{}/{key}", self.endpoint, self.name))
                .header("authorization", S3_TEST_AUTHORIZATION)
                .send()
                .await;
        }
        let _ = client
            .delete(format!("{}/{}", self.endpoint, self.name))
            .header("authorization", S3_TEST_AUTHORIZATION)
            .send()
            .await;
    }
}
