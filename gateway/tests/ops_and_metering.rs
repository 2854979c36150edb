//! The operations listener and the public one (deliverable 3 of issue 15), and metering
//! of every route that starts, steers or changes a run or a resource, on every surface,
//! each refusal in that surface's error shape (deliverable 6). Driven through `app` /
//! `ops_app` with `oneshot` over an embedded store.

use std::sync::Arc;
use std::time::Duration;

use agentd_gateway::admission::auth::KeyCache;
use agentd_gateway::admission::limiter::OperationClass;
use agentd_gateway::ops::{Backends, OpsState};
use agentd_gateway::{AppState, Limits, MemoryLimiter, Shared, app, ops_app};
use agentd_proto::Lifecycle;
use agentd_proto::bus::memory::MemoryBus;
use agentd_proto::queue::memory::MemoryQueue;
use agentd_schema::ids::new_id;
use agentd_schema::secrets::SecretBox;
use agentd_schema::store::prelude::*;
use agentd_schema::{ConnectOptions, KeyKind, SqlStore, SystemClock};
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A gateway over an in-memory SQLite store with one API key, and its buckets.
struct Gateway {
    state: AppState,
    key: String,
    organization: String,
    _blobs_dir: tempfile::TempDir,
}

impl Gateway {
    async fn start(limits: Limits) -> Self {
        let url = format!("sqlite:file:{}?mode=memory&cache=shared", new_id("test"));
        let store = SqlStore::connect(ConnectOptions::new(url), Arc::new(SystemClock)).await.expect("connect");
        store.migrate().await.expect("migrate");
        let workspace = store.ensure_workspace("default", "default").await.expect("workspace");
        let key = agentd_schema::ids::new_secret("sk-agentd-test");
        store.insert_api_key(&workspace.id, "test", &key, &KeyKind::Api).await.expect("key");
        let store: Arc<dyn Store> = Arc::new(store);
        let blobs_dir = tempfile::tempdir().expect("a blob directory");
        let state = AppState::new(Shared {
            outbox: agentd_schema::outbox::Sweeper::spawn(store.clone()),
            backends: Backends {
                store,
                queue: Some(Arc::new(MemoryQueue::new(Default::default()))),
                bus: Some(Arc::new(MemoryBus::new())),
                blobs: agentd_schema::blobs::Blobs::filesystem(blobs_dir.path()).expect("blobs"),
            },
            max_file_bytes: agentd_gateway::domain::files::DEFAULT_MAX_FILE_BYTES,
            lifecycle: Lifecycle::new(),
            limiter: Arc::new(MemoryLimiter::new(limits)),
            secrets: Arc::new(SecretBox::from_encoded(&SecretBox::generate_key()).expect("secret box")),
            key_cache: Arc::new(KeyCache::new(Duration::from_secs(2))),
            max_attempts: 5,
            default_agent: None,
            mcp: Default::default(),
            a2a: Default::default(),
            trusted_proxies: Default::default(),
            remote_allow_private: false,
            webhooks: Default::default(),
            tunnels: Arc::new(agentd_gateway::tunnel::Connectors::new()),
            catalogs: Arc::new(agentd_schema::catalogs::Catalogs::new(agentd_schema::catalog::current().clone())),
        });
        Self { state, key, organization: workspace.organization_id, _blobs_dir: blobs_dir }
    }

    /// A gateway whose create bucket is empty and whose read bucket is full.
    async fn without_creates() -> Self {
        let gateway = Self::start(Limits { create_per_minute: 1, read_per_minute: 1_000 }).await;
        let taken = gateway.state.limiter.admit(&gateway.organization, OperationClass::Create).await.unwrap();
        assert!(taken.allowed, "the one create token");
        gateway
    }

    fn ops(&self, token: Option<&str>) -> Router {
        ops_app(OpsState {
            backends: self.state.backends.clone(),
            lifecycle: self.state.lifecycle.clone(),
            drain_token: token.map(Arc::from),
        })
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Response<Body>) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {}", self.key))
            .header("anthropic-beta", "managed-agents-2026-04-01")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.map_or_else(Body::empty, |body| Body::from(body.to_string())))
            .unwrap();
        let response = app(self.state.clone()).oneshot(request).await.unwrap();
        (response.status(), response)
    }
}

async fn json_of(response: Response<Body>) -> Value {
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)))
}

fn retry_after(response: &Response<Body>) -> u64 {
    let value = response.headers().get("retry-after").expect("retry-after on a 429");
    let secs: u64 = value.to_str().unwrap().parse().expect("whole seconds");
    assert!(secs >= 1, "retry-after {secs}");
    secs
}

fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).unwrap()
}

// --- the operations listener --------------------------------------------------------

#[tokio::test]
async fn the_public_listener_serves_no_metrics_and_no_drain() {
    let gateway = Gateway::start(Limits::default()).await;
    let public = app(gateway.state.clone());
    for request in [get("/metrics"), Request::post("/admin/drain").body(Body::empty()).unwrap(), get("/admin/x")] {
        let path = request.uri().path().to_owned();
        let response = public.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        let body = json_of(response).await;
        assert_eq!((body["type"].as_str(), body["error"]["type"].as_str()), (Some("error"), Some("not_found_error")));
    }
    assert!(!gateway.state.lifecycle.is_draining(), "nothing drained the gateway");

    // Load balancers keep a readiness probe, without backend details.
    let ready = public.oneshot(get("/readyz")).await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    assert_eq!(json_of(ready).await, json!({ "status": "ready" }));
}

#[tokio::test]
async fn the_operations_listener_serves_readiness_metrics_and_drain() {
    let gateway = Gateway::start(Limits::default()).await;
    let ops = gateway.ops(None);
    let ready = ops.clone().oneshot(get("/readyz")).await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    assert_eq!(json_of(ready).await["backends"]["store"]["backend"], "sqlite");
    assert_eq!(ops.clone().oneshot(get("/metrics")).await.unwrap().status(), StatusCode::OK);
    let missing = ops.clone().oneshot(get("/v1/agents")).await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND, "no API on the operations listener");

    let drained = ops.oneshot(Request::post("/admin/drain").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(drained.status(), StatusCode::ACCEPTED);
    assert!(gateway.state.lifecycle.is_draining());
}

#[tokio::test]
async fn drain_refuses_requests_from_browsers() {
    let gateway = Gateway::start(Limits::default()).await;
    for token in [None, Some("ops-secret")] {
        let mut request = Request::post("/admin/drain").header("origin", "https://evil.example");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = gateway.ops(token).oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "token {token:?}");
        assert_eq!(json_of(response).await["error"]["type"], "permission_error");
    }
    assert!(!gateway.state.lifecycle.is_draining());
}

#[tokio::test]
async fn drain_requires_the_ops_token_when_one_is_set() {
    let gateway = Gateway::start(Limits::default()).await;
    let ops = gateway.ops(Some("ops-secret"));
    for authorization in [None, Some("Bearer wrong"), Some("Bearer ops-secre"), Some("Basic ops-secret")] {
        let mut request = Request::post("/admin/drain");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let response = ops.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{authorization:?}");
        assert_eq!(json_of(response).await["error"]["type"], "authentication_error");
        assert!(!gateway.state.lifecycle.is_draining(), "{authorization:?} drained");
    }
    let request = Request::post("/admin/drain").header("authorization", "bearer ops-secret");
    let response = ops.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert!(gateway.state.lifecycle.is_draining());
}

// --- metering, one test per surface --------------------------------------------------

/// The managed envelope of a 429: AI SDK and AG-UI answer errors before their stream
/// in it too (their clients show the body as the message), and so does durable control.
async fn assert_managed_429(gateway: &Gateway, method: Method, path: &str, body: Option<Value>) {
    let (status, response) = gateway.send(method.clone(), path, body).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{method} {path}");
    retry_after(&response);
    assert_eq!(response.headers()["anthropic-ratelimit-requests-limit"], "1");
    let body = json_of(response).await;
    assert_eq!(body["type"], "error", "{method} {path}: {body}");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{method} {path}: {body}");
}

#[tokio::test]
async fn managed_writes_draw_from_the_create_bucket() {
    let gateway = Gateway::without_creates().await;
    let session = new_id("sesn");
    let agent = new_id("agent");
    let message = json!({ "events": [{ "type": "user.message", "content": [{ "type": "text", "text": "hi" }] }] });
    assert_managed_429(&gateway, Method::POST, &format!("/v1/sessions/{session}/events"), Some(message)).await;
    let interrupt = json!({ "events": [{ "type": "user.interrupt" }] });
    assert_managed_429(&gateway, Method::POST, &format!("/v1/sessions/{session}/events"), Some(interrupt)).await;
    assert_managed_429(&gateway, Method::POST, &format!("/v1/agents/{agent}"), Some(json!({ "version": 1 }))).await;
    assert_managed_429(&gateway, Method::POST, &format!("/v1/agents/{agent}/archive"), None).await;
    assert_managed_429(&gateway, Method::DELETE, &format!("/v1/sessions/{session}"), None).await;
    assert_managed_429(&gateway, Method::POST, &format!("/v1/sessions/{session}"), Some(json!({}))).await;
    let resource = new_id("sres");
    assert_managed_429(&gateway, Method::DELETE, &format!("/v1/sessions/{session}/resources/{resource}"), None).await;
    let inbox = json!({ "content": [{ "type": "text", "text": "hi" }] });
    assert_managed_429(&gateway, Method::POST, &format!("/v1/ext/sessions/{session}/live-inbox"), Some(inbox)).await;
    // Flat and workspace-path requests share the bucket.
    let projected = format!("/v1/workspaces/default/sessions/{session}/events");
    assert_managed_429(&gateway, Method::POST, &projected, Some(json!({ "events": [] }))).await;

    // Reads have their own bucket: the handler answers (404: no such session).
    let (status, _) = gateway.send(Method::GET, &format!("/v1/sessions/{session}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn durable_verbs_draw_from_the_create_bucket() {
    let gateway = Gateway::without_creates().await;
    let thread = new_id("sesn");
    let body = Some(json!({ "text": "hi" }));
    assert_managed_429(&gateway, Method::POST, &format!("/v1/durable/threads/{thread}/submit_background"), body).await;
    assert_managed_429(
        &gateway,
        Method::POST,
        &format!("/v1/durable/threads/{thread}/cancel"),
        Some(json!({ "run_id": "r" })),
    )
    .await;
    let (status, _) = gateway.send(Method::GET, &format!("/v1/durable/threads/{thread}/dispatches"), None).await;
    assert_ne!(status, StatusCode::TOO_MANY_REQUESTS, "reads are not creates");
}

#[tokio::test]
async fn ai_sdk_runs_are_metered() {
    let gateway = Gateway::without_creates().await;
    let message = json!({ "id": "m1", "role": "user", "parts": [{ "type": "text", "text": "hi" }] });
    let body = json!({ "id": "thread-1", "messages": [message] });
    let agent = new_id("agent");
    assert_managed_429(&gateway, Method::POST, "/v1/ai-sdk/chat", Some(body.clone())).await;
    assert_managed_429(&gateway, Method::POST, "/v1/ai-sdk/threads/thread-1/runs", Some(body.clone())).await;
    assert_managed_429(&gateway, Method::POST, &format!("/v1/ai-sdk/agents/{agent}/runs"), Some(body)).await;
}

#[tokio::test]
async fn ag_ui_runs_are_metered() {
    let gateway = Gateway::without_creates().await;
    let body = json!({
        "threadId": "thread-1", "runId": "run-1", "state": {}, "tools": [], "context": [],
        "messages": [{ "id": "u1", "role": "user", "content": "hi" }],
    });
    let agent = new_id("agent");
    assert_managed_429(&gateway, Method::POST, "/v1/ag-ui", Some(body.clone())).await;
    assert_managed_429(&gateway, Method::POST, &format!("/v1/ag-ui/agents/{agent}"), Some(body)).await;
}

fn a2a_message() -> Value {
    json!({ "messageId": "m1", "role": "ROLE_USER", "parts": [{ "text": "hi" }] })
}

#[tokio::test]
async fn a2a_json_rpc_send_message_answers_a_json_rpc_429() {
    let gateway = Gateway::without_creates().await;
    let agent = new_id("agent");
    let v03 =
        json!({ "kind": "message", "messageId": "m1", "role": "user", "parts": [{ "kind": "text", "text": "hi" }] });
    let calls = [
        (
            "/v1/a2a",
            json!({ "jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": { "message": a2a_message() } }),
        ),
        (
            "/v1/a2a",
            json!({ "jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage", "params": { "message": a2a_message() } }),
        ),
        ("/v1/a2a", json!({ "jsonrpc": "2.0", "id": 8, "method": "message/send", "params": { "message": v03 } })),
        (
            &format!("/v1/a2a/agents/{agent}") as &str,
            json!({ "jsonrpc": "2.0", "id": 9, "method": "SendMessage", "params": { "message": a2a_message() } }),
        ),
    ];
    for (path, call) in calls {
        let (status, response) = gateway.send(Method::POST, path, Some(call.clone())).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{path} {call}");
        retry_after(&response);
        let body = json_of(response).await;
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["id"], call["id"], "the error answers the request's id");
        assert_eq!(body["error"]["code"], -32000, "{body}");
        assert_eq!(body["error"]["data"][0]["reason"], "RATE_LIMITED", "{body}");
    }

    // GetTask reads: the handler answers (task not found), not the limiter.
    let get = json!({ "jsonrpc": "2.0", "id": 10, "method": "GetTask", "params": { "id": "nope" } });
    let (status, response) = gateway.send(Method::POST, "/v1/a2a", Some(get)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json_of(response).await["error"]["code"], -32001);
}

#[tokio::test]
async fn a2a_rest_send_message_answers_resource_exhausted() {
    let gateway = Gateway::without_creates().await;
    let agent = new_id("agent");
    for path in ["/v1/a2a/message:send", "/v1/a2a/message:stream", &format!("/v1/a2a/agents/{agent}/message:send")] {
        let (status, response) = gateway.send(Method::POST, path, Some(json!({ "message": a2a_message() }))).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{path}");
        retry_after(&response);
        let body = json_of(response).await;
        assert_eq!(body["error"]["code"], 429, "{body}");
        assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED", "{body}");
        assert_eq!(body["error"]["details"][0]["reason"], "RATE_LIMITED", "{body}");
    }
    let (status, _) = gateway.send(Method::POST, "/v1/a2a/tasks/nope:cancel", None).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "cancel is a write");
    let (status, _) = gateway.send(Method::GET, "/v1/a2a/tasks/nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "reads pass to the handler");
}

#[tokio::test]
async fn mcp_tools_call_answers_a_json_rpc_429() {
    let gateway = Gateway::without_creates().await;
    let call = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {
            "name": "anything", "arguments": { "prompt": "hi" },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let (status, response) = gateway.send(Method::POST, "/v1/mcp", Some(call)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    retry_after(&response);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    let body = json_of(response).await;
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], 3);
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("rate limit"), "{body}");

    // Listing tools reads.
    let list = json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {} });
    let (status, _) = gateway.send(Method::POST, "/v1/mcp", Some(list)).await;
    assert_ne!(status, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn an_object_store_that_does_not_answer_fails_readiness() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let gateway = Gateway::start(Limits::default()).await;
    // Nothing listens on this port: the blob check fails (within its timeout), the rest answers.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let keys = agentd_schema::blobs::S3Keys {
        access_key_id: "test".into(),
        secret_access_key: "test".into(),
        region: "us-east-1".into(),
    };
    let endpoint = format!("http://{closed}");
    let blobs =
        agentd_schema::blobs::Blobs::from_url_with_keys("s3://agentd-nowhere/prefix", Some(&endpoint), &keys).unwrap();
    let mut backends = gateway.state.backends.clone();
    backends.blobs = blobs;
    let ops =
        agentd_gateway::ops_app(OpsState { backends, lifecycle: gateway.state.lifecycle.clone(), drain_token: None });
    let ready = ops.oneshot(get("/readyz")).await.unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = json_of(ready).await;
    assert_eq!(body["backends"]["blobs"]["backend"], "s3", "{body}");
    assert_eq!(body["backends"]["blobs"]["ok"], false, "{body}");
    assert_eq!(body["backends"]["store"]["ok"], true, "{body}");
}
