//! An in-process gateway over a throwaway store, driven with `tower::ServiceExt::oneshot`
//! (no socket): for suites that send thousands of requests through `app(state)`.

use std::sync::Arc;
use std::time::Duration;

use agentd_gateway::adapters::{a2a, mcp::McpSettings};
use agentd_gateway::ops::Backends;
use agentd_gateway::{AppState, Limits, MemoryLimiter, Shared};
use agentd_proto::{Lifecycle, MemoryBus, MemoryQueue, QueueConfig};
use agentd_schema::secrets::SecretBox;
use agentd_schema::store::prelude::*;
use agentd_schema::{KeyKind, SystemClock};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

use crate::stores::{Kind, TestStore};

/// A gateway router with its store (SQLite), an in-process queue, bus and limiter.
pub struct TestGateway {
    /// The store behind it, for setting up and checking rows directly.
    pub store: TestStore,
    /// The state `app` was built from.
    pub state: AppState,
    router: axum::Router,
    _blobs_dir: tempfile::TempDir,
}

/// What a request answered: status and body (JSON, or a string of the text).
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: StatusCode,
    /// The body as JSON (`Value::String` when it was not JSON).
    pub body: Value,
}

impl TestGateway {
    /// A gateway with generous rate limits.
    pub async fn new() -> Self {
        Self::with_limits(Limits { create_per_minute: 1_000_000, read_per_minute: 1_000_000 }).await
    }

    /// A gateway whose organisation buckets hold `limits`.
    pub async fn with_limits(limits: Limits) -> Self {
        let store = TestStore::new(Kind::Sqlite, Arc::new(SystemClock)).await;
        let queue = Arc::new(MemoryQueue::new(QueueConfig::default()));
        let blobs_dir = tempfile::tempdir().expect("a blob directory");
        let backends = Backends {
            store: store.store.clone(),
            queue: Some(queue),
            bus: Some(Arc::new(MemoryBus::new())),
            blobs: agentd_schema::blobs::Blobs::filesystem(blobs_dir.path()).expect("filesystem blobs"),
        };
        let state = AppState::new(Shared {
            outbox: agentd_schema::outbox::Sweeper::spawn(store.store.clone()),
            backends,
            max_file_bytes: agentd_gateway::domain::files::DEFAULT_MAX_FILE_BYTES,
            lifecycle: Lifecycle::new(),
            limiter: Arc::new(MemoryLimiter::new(limits)),
            secrets: Arc::new(SecretBox::from_encoded(&SecretBox::generate_key()).expect("a fresh key")),
            key_cache: Arc::new(agentd_gateway::admission::auth::KeyCache::new(Duration::from_secs(2))),
            max_attempts: 3,
            default_agent: None,
            mcp: std::sync::Arc::new(McpSettings { allowed_hosts: None, ..McpSettings::default() }),
            a2a: std::sync::Arc::new(a2a::Settings {
                public_url: Some("http://127.0.0.1".to_owned()),
                push_allow_private: false,
            }),
            trusted_proxies: Default::default(),
            remote_allow_private: false,
            webhooks: std::sync::Arc::new(agentd_gateway::domain::webhooks::Settings {
                allow_private: true,
                ..Default::default()
            }),
            catalogs: Arc::new(agentd_schema::catalogs::Catalogs::new(agentd_schema::catalog::current().clone())),
            tunnels: Arc::new(agentd_gateway::tunnel::Connectors::new()),
        });
        let router = agentd_gateway::app(state.clone());
        Self { store, state, router, _blobs_dir: blobs_dir }
    }

    /// A new workspace of a new organisation with one API key; returns (workspace id, key).
    pub async fn workspace(&self, name: &str) -> (String, String) {
        let workspace = self.store.store.ensure_workspace(&format!("org-{name}"), name).await.expect("workspace");
        let key = self.key(&workspace.id, KeyKind::Api).await;
        (workspace.id, key)
    }

    /// A new key of `kind` in the workspace.
    pub async fn key(&self, workspace_id: &str, kind: KeyKind) -> String {
        let secret = agentd_schema::ids::new_secret("sk-agentd-test");
        self.store.store.insert_api_key(workspace_id, "test", &secret, &kind).await.expect("key");
        secret
    }

    /// Sends one request; `uri` is used exactly as given (no re-encoding).
    pub async fn call(&self, key: &str, method: &str, uri: &str, body: Option<Value>) -> Answer {
        let mut request = Request::builder().method(method).uri(uri).header("x-api-key", key).header(
            "anthropic-beta",
            format!(
                "{},{},{}",
                agentd_gateway::admission::beta::MANAGED_AGENTS,
                agentd_gateway::admission::beta::DREAMING,
                agentd_gateway::admission::beta::MCP_TUNNELS
            ),
        );
        let body = match body {
            Some(value) => {
                request = request.header("content-type", "application/json");
                Body::from(value.to_string())
            }
            None => Body::empty(),
        };
        let response = self.router.clone().oneshot(request.body(body).expect("request")).await.expect("infallible");
        let status = response.status();
        // Streams never end: read what is there within a moment.
        let bytes = match tokio::time::timeout(
            Duration::from_millis(200),
            axum::body::to_bytes(response.into_body(), 64 << 20),
        )
        .await
        {
            Ok(Ok(bytes)) => bytes,
            _ => Default::default(),
        };
        let body =
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
        Answer { status, body }
    }

    /// A `POST` that must succeed; returns the body.
    pub async fn create(&self, key: &str, uri: &str, body: Value) -> Value {
        let answer = self.call(key, "POST", uri, Some(body)).await;
        assert_eq!(answer.status, StatusCode::OK, "POST {uri}: {:?}", answer.body);
        answer.body
    }

    /// Removes the store.
    pub async fn cleanup(self) {
        self.store.cleanup().await;
    }
}
