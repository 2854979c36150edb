//! End-to-end checks of the foundation: `agentd` roles started as real processes,
//! their readiness, metrics, drain, gRPC health and startup failures.

use std::time::{Duration, Instant};

use agentd_tests::backends::{TestBucket, nats_url, redis_url, require_tcp, s3_endpoint, unique_name};
use agentd_tests::process::Launch;
use agentd_tests::stores::{create_postgres_database, drop_postgres_database};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

async fn grpc_status(addr: &str, service: &str) -> ServingStatus {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("valid endpoint")
        .connect()
        .await
        .expect("connect to gRPC health");
    let mut client = HealthClient::new(channel);
    let response = client.check(HealthCheckRequest { service: service.to_owned() }).await.expect("health check");
    ServingStatus::try_from(response.into_inner().status).expect("known status")
}

async fn wait_grpc(addr: &str, service: &str, want: ServingStatus) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = ServingStatus::Unknown;
    while Instant::now() < deadline {
        last = grpc_status(addr, service).await;
        if last == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("gRPC health of {service:?} stayed {last:?}, wanted {want:?}");
}

#[tokio::test]
async fn dev_is_ready_within_two_seconds_with_no_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    // Only the listen ports are set, so tests can run side by side; everything else is default.
    let mut dev = Launch::role("dev").cwd(dir.path()).start().await;
    let body = dev.wait_ready(200, Duration::from_secs(10)).await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(2), "dev took {elapsed:?} to become ready");
    assert_eq!(body["status"], "ready");
    assert_eq!(body["backends"]["store"]["backend"], "sqlite");
    assert_eq!(body["backends"]["queue"]["backend"], "memory");
    assert_eq!(body["backends"]["bus"]["backend"], "memory");
    assert!(dir.path().join(".agentd/agentd.db").exists(), "the default data dir holds the SQLite file");
    let status = dev.terminate().await;
    assert!(status.success(), "SIGTERM exits 0, got {status:?}");
}

#[tokio::test]
async fn metrics_parse_as_prometheus_text() {
    let dir = tempfile::tempdir().unwrap();
    let key = "sk-agentd-e2e-ops-0123456789abcdef";
    let mut dev = Launch::role("dev").cwd(dir.path()).env("AGENTD_BOOTSTRAP_API_KEY", key).start().await;
    dev.wait_ready(200, Duration::from_secs(10)).await;
    let client = agentd_tests::http();
    // Authentication comes first, wherever the request goes.
    let anonymous = client.get(format!("{}/v1/nothing-here", dev.http)).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let missing = client.get(format!("{}/v1/nothing-here", dev.http)).bearer_auth(key).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let error: serde_json::Value = missing.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "not_found_error");
    let response = client.get(format!("{}/metrics", dev.ops)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = response.text().await.unwrap();
    let lines = text.lines().map(|line| Ok(line.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text format");
    let find = |name: &'static str| scrape.samples.iter().filter(move |s| s.metric == name);
    let readyz = find("agentd_http_requests_total")
        .find(|s| s.labels.get("route") == Some("/readyz") && s.labels.get("status") == Some("200"))
        .expect("request counter for /readyz 200");
    match readyz.value {
        prometheus_parse::Value::Counter(n) | prometheus_parse::Value::Untyped(n) => {
            assert!(n >= 1.0)
        }
        ref other => panic!("unexpected counter value {other:?}"),
    }
    assert!(find("agentd_http_requests_total").any(|s| s.labels.get("status") == Some("404")), "the 404 is counted");
    assert!(
        find("agentd_http_request_duration_seconds").any(|s| matches!(s.value, prometheus_parse::Value::Histogram(_))),
        "latency is a histogram"
    );
    assert!(find("agentd_http_requests_in_flight").next().is_some());
    let store_up = find("agentd_backend_up").find(|s| s.labels.get("seam") == Some("store")).expect("backend gauge");
    assert!(matches!(store_up.value, prometheus_parse::Value::Gauge(v) if v == 1.0));
}

#[tokio::test]
async fn dev_drain_turns_readyz_and_grpc_health_off() {
    let dir = tempfile::tempdir().unwrap();
    let token = "ops-token-0123456789";
    let mut dev = Launch::role("dev")
        .cwd(dir.path())
        .env("AGENTD_GRPC_ADDR", "127.0.0.1:0")
        .env("AGENTD_OPS_TOKEN", token)
        .start()
        .await;
    dev.wait_ready(200, Duration::from_secs(10)).await;
    let grpc = dev.grpc.clone().expect("grpc address announced");
    wait_grpc(&grpc, "", ServingStatus::Serving).await;
    let client = agentd_tests::http();
    let drain = format!("{}/admin/drain", dev.ops);
    // The token is required, and a browser's request is refused even with it.
    assert_eq!(client.post(&drain).send().await.unwrap().status(), 401);
    assert_eq!(client.post(&drain).bearer_auth("wrong").send().await.unwrap().status(), 401);
    let from_a_page = client.post(&drain).bearer_auth(token).header("origin", "http://127.0.0.1:1").send().await;
    assert_eq!(from_a_page.unwrap().status(), 403);
    dev.wait_ready(200, Duration::from_secs(5)).await;
    let drained = client.post(&drain).bearer_auth(token).send().await.unwrap();
    assert_eq!(drained.status(), 202);
    let body = dev.wait_ready(503, Duration::from_secs(5)).await;
    assert_eq!(body["status"], "draining");
    assert_eq!(grpc_status(&grpc, "").await, ServingStatus::NotServing);
    assert_eq!(grpc_status(&grpc, "liveness").await, ServingStatus::Serving, "liveness survives a drain");
    // New API work is refused while draining; the public readiness probe says why.
    let refused = client.get(format!("{}/v1/anything", dev.http)).send().await.unwrap();
    assert_eq!(refused.status(), 503);
    let error: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["type"], "api_error");
    let public = client.get(format!("{}/readyz", dev.http)).send().await.unwrap();
    assert_eq!(public.status(), 503);
    assert_eq!(public.json::<serde_json::Value>().await.unwrap(), serde_json::json!({ "status": "draining" }));
}

/// A private Redis on its own port, so stopping it cannot disturb other tests.
struct PrivateRedis {
    port: u16,
    child: Option<tokio::process::Child>,
}

impl PrivateRedis {
    async fn start(port: u16) -> Self {
        let mut redis = Self { port, child: None };
        redis.restart().await;
        redis
    }

    async fn restart(&mut self) {
        let child = tokio::process::Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server is installed (scripts/test installs it)");
        self.child = Some(child);
        require_tcp_eventually(self.port).await;
    }

    async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.ok();
            child.wait().await.ok();
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

async fn require_tcp_eventually(port: u16) {
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("private redis on {port} never accepted connections");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn production(role: &str, database_url: &str, redis: &str, stream: &str, blobs: &BlobStore) -> Launch {
    blobs.apply(
        Launch::role(role)
            .env("AGENTD_DATABASE_URL", database_url)
            .env("AGENTD_NATS_URL", nats_url())
            .env("AGENTD_REDIS_URL", redis)
            .env("AGENTD_NATS_STREAM", stream)
            .env("AGENTD_NATS_CONSUMER", format!("{stream}_workers"))
            .env("AGENTD_REDIS_PREFIX", stream)
            .env("AGENTD_SECRET_KEY", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="),
    )
}

/// The object store of the production roles these tests start: a bucket on the S3 test
/// server when `AGENTD_TEST_S3_ENDPOINT` is set (scripts/test sets it), else a shared
/// directory.
enum BlobStore {
    S3(TestBucket),
    Directory,
}

impl BlobStore {
    async fn create() -> Self {
        match s3_endpoint() {
            Some(endpoint) => BlobStore::S3(TestBucket::create(&endpoint).await),
            None => BlobStore::Directory,
        }
    }

    fn apply(&self, launch: Launch) -> Launch {
        match self {
            BlobStore::S3(bucket) => launch
                .env("AGENTD_OBJECT_STORE_URL", bucket.url("agentd"))
                .env("AGENTD_OBJECT_STORE_ENDPOINT", bucket.endpoint.clone())
                .env("AWS_ACCESS_KEY_ID", "test")
                .env("AWS_SECRET_ACCESS_KEY", "test")
                .env("AWS_REGION", "us-east-1"),
            BlobStore::Directory => launch.env("AGENTD_OBJECT_STORE_URL", blob_dir_url()),
        }
    }

    fn backend(&self) -> &'static str {
        match self {
            BlobStore::S3(_) => "s3",
            BlobStore::Directory => "filesystem",
        }
    }

    async fn remove(self) {
        if let BlobStore::S3(bucket) = self {
            bucket.remove().await;
        }
    }
}

/// A shared-directory object store for production roles started by these tests.
fn blob_dir_url() -> String {
    let dir = std::env::temp_dir().join("agentd-e2e-ops-blobs");
    format!("file://{}", dir.display())
}

async fn delete_stream(stream: &str) {
    if let Ok(client) = async_nats::connect(nats_url()).await {
        let _ = async_nats::jetstream::new(client).delete_stream(stream).await;
    }
}

#[tokio::test]
async fn production_roles_follow_their_backends_and_drain() {
    require_tcp("NATS", "AGENTD_TEST_NATS_URL", &nats_url()).await;
    require_tcp("Redis", "AGENTD_TEST_REDIS_URL", &redis_url()).await;
    let (database_url, database) = create_postgres_database("agentd_e2e").await;
    let stream = unique_name("E2E").to_uppercase();
    let mut redis = PrivateRedis::start(free_port()).await;
    let blobs = BlobStore::create().await;
    let outcome = async {
        let migrated = production("migrate", &database_url, &redis.url(), &stream, &blobs).output().await;
        assert!(migrated.status.success(), "migrate failed: {}", String::from_utf8_lossy(&migrated.stderr));
        // Migrating again is a no-op.
        assert!(production("migrate", &database_url, &redis.url(), &stream, &blobs).output().await.status.success());

        let mut gateway = production("gateway", &database_url, &redis.url(), &stream, &blobs).start().await;
        let mut worker = production("worker", &database_url, &redis.url(), &stream, &blobs).start().await;
        let body = gateway.wait_ready(200, Duration::from_secs(20)).await;
        assert_eq!(body["backends"]["store"]["backend"], "postgres");
        assert_eq!(body["backends"]["queue"]["backend"], "jetstream");
        assert_eq!(body["backends"]["bus"]["backend"], "redis");
        assert_eq!(body["backends"]["blobs"]["backend"], blobs.backend());
        worker.wait_ready(200, Duration::from_secs(20)).await;

        redis.stop().await;
        let body = gateway.wait_ready(503, Duration::from_secs(20)).await;
        assert_eq!(body["backends"]["bus"]["ok"], false);
        assert_eq!(body["backends"]["store"]["ok"], true, "only the stopped backend is reported down");
        wait_grpc(gateway.grpc.as_deref().unwrap(), "", ServingStatus::NotServing).await;
        redis.restart().await;
        gateway.wait_ready(200, Duration::from_secs(30)).await;
        wait_grpc(gateway.grpc.as_deref().unwrap(), "", ServingStatus::Serving).await;

        for process in [&mut gateway, &mut worker] {
            let drained = agentd_tests::http().post(format!("{}/admin/drain", process.ops)).send().await.unwrap();
            assert_eq!(drained.status(), 202);
            process.wait_ready(503, Duration::from_secs(5)).await;
            wait_grpc(process.grpc.as_deref().unwrap(), "", ServingStatus::NotServing).await;
        }
        for process in [gateway, worker] {
            let status = process.terminate().await;
            assert!(status.success(), "SIGTERM exits 0, got {status:?}");
        }
    };
    let outcome = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(outcome)).await;
    redis.stop().await;
    blobs.remove().await;
    delete_stream(&stream).await;
    drop_postgres_database(&database).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

async fn failed_start(launch: Launch) -> String {
    let output = launch.output().await;
    assert!(!output.status.success(), "startup should fail");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn production_roles_refuse_to_start_without_their_dependencies() {
    let closed = format!("127.0.0.1:{}", free_port());
    let stderr = failed_start(Launch::role("gateway")).await;
    assert!(stderr.contains("AGENTD_DATABASE_URL"), "{stderr}");
    let stderr =
        failed_start(Launch::role("worker").env("AGENTD_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"))
            .await;
    assert!(stderr.contains("AGENTD_NATS_URL"), "{stderr}");
    let stderr = failed_start(
        Launch::role("gateway")
            .env("AGENTD_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
            .env("AGENTD_NATS_URL", nats_url())
            .env("AGENTD_REDIS_URL", format!("redis://{closed}"))
            .env("AGENTD_OBJECT_STORE_URL", blob_dir_url()),
    )
    .await;
    assert!(stderr.contains("AGENTD_REDIS_URL") && stderr.contains("Redis"), "{stderr}");
    let stderr = failed_start(
        Launch::role("gateway")
            .env("AGENTD_DATABASE_URL", format!("postgres://postgres@{closed}/test"))
            .env("AGENTD_NATS_URL", nats_url())
            .env("AGENTD_REDIS_URL", redis_url())
            .env("AGENTD_OBJECT_STORE_URL", blob_dir_url()),
    )
    .await;
    assert!(stderr.contains("AGENTD_DATABASE_URL"), "{stderr}");
    // No object store, then one that does not answer: both name the setting.
    let stderr = failed_start(
        Launch::role("gateway")
            .env("AGENTD_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
            .env("AGENTD_NATS_URL", nats_url())
            .env("AGENTD_REDIS_URL", redis_url()),
    )
    .await;
    assert!(stderr.contains("AGENTD_OBJECT_STORE_URL"), "{stderr}");
    let stderr = failed_start(
        Launch::role("worker")
            .env("AGENTD_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
            .env("AGENTD_NATS_URL", nats_url())
            .env("AGENTD_REDIS_URL", redis_url())
            .env("AGENTD_OBJECT_STORE_URL", "s3://agentd-missing-bucket/prefix")
            .env("AGENTD_OBJECT_STORE_ENDPOINT", format!("http://{closed}"))
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test"),
    )
    .await;
    assert!(stderr.contains("AGENTD_OBJECT_STORE_URL") && stderr.contains("does not answer"), "{stderr}");
    let stderr = failed_start(Launch::role("migrate")).await;
    assert!(stderr.contains("AGENTD_DATABASE_URL"), "{stderr}");
}

#[tokio::test]
async fn operations_live_on_their_own_listener() {
    let dir = tempfile::tempdir().unwrap();
    let mut dev = Launch::role("dev").cwd(dir.path()).start().await;
    assert_ne!(dev.ops, dev.http);
    dev.wait_ready(200, Duration::from_secs(10)).await;
    let client = agentd_tests::http();
    // The public listener: a bare readiness probe for load balancers, no metrics, no drain.
    let ready = client.get(format!("{}/readyz", dev.http)).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.json::<serde_json::Value>().await.unwrap(), serde_json::json!({ "status": "ready" }));
    for response in [
        client.get(format!("{}/metrics", dev.http)).send().await.unwrap(),
        client.post(format!("{}/admin/drain", dev.http)).send().await.unwrap(),
    ] {
        assert_eq!(response.status(), 404, "{}", response.url());
        let error: serde_json::Value = response.json().await.unwrap();
        assert_eq!(error["error"]["type"], "not_found_error");
    }
    dev.wait_ready(200, Duration::from_secs(5)).await;
    // The operations listener serves no API.
    assert_eq!(client.get(format!("{}/v1/agents", dev.ops)).send().await.unwrap().status(), 404);
    assert_eq!(client.get(format!("{}/metrics", dev.ops)).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn config_file_is_read_and_flags_override_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("from-file");
    std::fs::write(dir.path().join("agentd.toml"), format!("data_dir = {:?}\nhttp_addr = \"127.0.0.1:1\"\n", data))
        .unwrap();
    // AGENTD_HTTP_ADDR (set by the harness) overrides the file's unusable port.
    let mut dev = Launch::role("dev").cwd(dir.path()).env("AGENTD_CONFIG", "agentd.toml").start().await;
    dev.wait_ready(200, Duration::from_secs(10)).await;
    assert!(data.join("agentd.db").exists(), "data_dir came from the file");
    let bad = failed_start(Launch::role("dev").cwd(dir.path()).env("AGENTD_CONFIG", "missing.toml")).await;
    assert!(bad.contains("missing.toml"), "{bad}");
}
