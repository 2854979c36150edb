//! A gateway over a throwaway SQLite store and in-memory queue and bus, driven through
//! [`crate::app`] with `oneshot` (no socket), and one workspace API key.

use std::sync::Arc;

use agentd_proto::Lifecycle;
use agentd_proto::bus::memory::MemoryBus;
use agentd_proto::queue::memory::MemoryQueue;
use agentd_schema::secrets::SecretBox;
use agentd_schema::{ConnectOptions, SqlStore, Store, SystemClock};
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use tower::ServiceExt;

use crate::ops::Backends;
use crate::{AppState, MemoryLimiter, Shared};

/// A gateway and its workspace key; the store's directory lives as long as the rig.
pub struct Rig {
    /// The whole router.
    pub app: Router,
    /// A workspace API key.
    pub key: String,
    /// The gateway's state (for the operations listener, `crate::ops_app`).
    pub state: AppState,
    _dir: tempfile::TempDir,
}

/// An answer: status, headers and the body (JSON when it parses, else a string).
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body as JSON (a JSON string of the text when it does not parse).
    pub body: serde_json::Value,
    /// The body as text.
    pub text: String,
}

impl Rig {
    /// A fresh gateway with one workspace and one API key.
    pub async fn new() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("agentd.db").display());
        let store = SqlStore::connect(ConnectOptions::new(&url), Arc::new(SystemClock)).await.unwrap();
        store.migrate().await.unwrap();
        let store: Arc<dyn Store> = Arc::new(store);
        let workspace = store.ensure_workspace("acme", "default").await.unwrap();
        let key = agentd_schema::ids::new_secret("sk-agentd");
        store.insert_api_key(&workspace.id, "test", &key, &agentd_schema::KeyKind::Api).await.unwrap();
        let state = AppState::new(Shared {
            outbox: agentd_schema::outbox::Sweeper::spawn(store.clone()),
            backends: Backends {
                store,
                queue: Some(Arc::new(MemoryQueue::new(Default::default()))),
                bus: Some(Arc::new(MemoryBus::new())),
                blobs: agentd_schema::blobs::Blobs::filesystem(&dir.path().join("blobs")).unwrap(),
            },
            max_file_bytes: crate::domain::files::DEFAULT_MAX_FILE_BYTES,
            lifecycle: Lifecycle::new(),
            limiter: Arc::new(MemoryLimiter::new(Default::default())),
            secrets: Arc::new(SecretBox::from_encoded(&SecretBox::generate_key()).unwrap()),
            key_cache: Arc::new(crate::admission::auth::KeyCache::new(std::time::Duration::from_secs(2))),
            max_attempts: 3,
            default_agent: None,
            mcp: Default::default(),
            a2a: Default::default(),
            trusted_proxies: Default::default(),
            remote_allow_private: true,
            webhooks: Arc::new(crate::domain::webhooks::Settings { allow_private: true, ..Default::default() }),
            tunnels: Arc::new(crate::tunnel::Connectors::new()),
            catalogs: Arc::new(agentd_schema::catalogs::Catalogs::new(agentd_schema::catalog::current().clone())),
        });
        Self { app: crate::app(state.clone()), key, state, _dir: dir }
    }

    /// A request with the key and the managed beta; `body` is sent as given.
    pub fn request(&self, method: &str, path: &str, body: impl Into<Body>) -> Request<Body> {
        Request::builder()
            .method(method)
            .uri(path)
            .header("x-api-key", &self.key)
            .header("anthropic-beta", crate::admission::beta::MANAGED_AGENTS)
            .header("content-type", "application/json")
            .body(body.into())
            .unwrap()
    }

    /// Sends `request` through the router.
    pub async fn send(&self, request: Request<Body>) -> Answer {
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 24).await.unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::String(text.clone()));
        Answer { status, headers, body, text }
    }

    /// `method path` with a JSON body.
    pub async fn call(&self, method: &str, path: &str, body: serde_json::Value) -> Answer {
        self.send(self.request(method, path, body.to_string())).await
    }
}
