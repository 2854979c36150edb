//! `Mcp-Session-Id` across gateways (ADR 0008). rmcp keeps each handshake-era session
//! as an in-process worker; with several stateless gateways behind a load balancer the
//! next request of a session may land on another replica. [`RedisSessions`] persists
//! what rmcp needs to rebuild a session there (the client's `initialize` parameters),
//! and [`SharedSessions`] wraps rmcp's local manager so that a session ended on one
//! gateway (`DELETE`) is refused on every other one too.
//!
//! `agentd dev` is one process: it runs without a store and keeps sessions in memory.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError};
use rmcp::transport::streamable_http_server::session::{
    EventStore, ServerSseMessage, SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};

use crate::admission::Tenant;

/// How long a session lives in the store after its last request.
const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a session worker may idle in memory before it stops (the store keeps the
/// session; the next request rebuilds the worker). Longer than any silent turn.
const WORKER_IDLE: Duration = Duration::from_secs(30 * 60);
/// How long one store operation may wait for Redis.
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

/// MCP sessions in Redis, shared by every gateway replica: one key per session,
/// `{prefix}:mcp:session:{id}`, holding the client's `initialize` parameters, expiring
/// [`SESSION_TTL`] after the last request that named it.
pub struct RedisSessions {
    prefix: String,
    connection: redis::aio::ConnectionManager,
}

impl RedisSessions {
    /// Connects to `url`; keys are prefixed with `prefix`.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT));
        let connection = client.get_connection_manager_with_config(config).await?;
        Ok(Self { prefix: prefix.to_owned(), connection })
    }

    fn key(&self, id: &str) -> String {
        format!("{}:mcp:session:{id}", self.prefix)
    }

    fn workspace_key(&self, id: &str) -> String {
        format!("{}:mcp:workspace:{id}", self.prefix)
    }

    fn level_key(&self, id: &str) -> String {
        format!("{}:mcp:level:{id}", self.prefix)
    }

    /// Keeps the log level a session chose (`logging/setLevel`) for as long as the session.
    pub(super) async fn set_level(&self, id: &str, level: &str) -> Result<(), redis::RedisError> {
        let mut connection = self.connection.clone();
        redis::cmd("SET")
            .arg(self.level_key(id))
            .arg(level)
            .arg("EX")
            .arg(SESSION_TTL.as_secs())
            .query_async(&mut connection)
            .await
    }

    /// The log level the session chose, if any.
    pub(super) async fn level(&self, id: &str) -> Result<Option<String>, redis::RedisError> {
        let mut connection = self.connection.clone();
        redis::cmd("GET").arg(self.level_key(id)).query_async(&mut connection).await
    }

    /// Whether the session is still open anywhere; extends its life if so.
    async fn touch(&self, id: &str) -> Result<bool, redis::RedisError> {
        let mut connection = self.connection.clone();
        redis::cmd("EXPIRE").arg(self.key(id)).arg(SESSION_TTL.as_secs()).query_async(&mut connection).await
    }
}

#[async_trait::async_trait]
impl SessionStore for RedisSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let mut connection = self.connection.clone();
        let stored: Option<String> = redis::cmd("GET").arg(self.key(session_id)).query_async(&mut connection).await?;
        Ok(stored.map(|json| serde_json::from_str(&json)).transpose()?)
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let mut connection = self.connection.clone();
        let json = serde_json::to_string(state)?;
        let _: () = redis::cmd("SET")
            .arg(self.key(session_id))
            .arg(json)
            .arg("EX")
            .arg(SESSION_TTL.as_secs())
            .query_async(&mut connection)
            .await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let mut connection = self.connection.clone();
        let _: i64 = redis::cmd("DEL").arg(self.key(session_id)).query_async(&mut connection).await?;
        Ok(())
    }
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// The in-process session worker failed or is unknown.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// Redis did not answer; the request fails rather than guess whether the session
    /// was ended elsewhere.
    #[error("the MCP session store is unavailable: {0}")]
    Store(#[from] redis::RedisError),
}

/// rmcp's in-process session manager, checked against the shared store when there is
/// one: a session ended through another gateway stops here too. Closing a worker here
/// (idle timeout, shutdown) leaves the shared session alone; only `DELETE` ends it
/// (rmcp deletes the store entry itself).
///
/// A client's reply to a server request (an elicitation) may land on any gateway; it
/// must reach the one whose handler asked. Every reply a gateway takes is also published
/// on the bus (`mcp.replies.{session}`), and a gateway waiting for replies in a session
/// ([`SharedSessions::relay`]) hands the ones it did not take itself to its local worker,
/// which answers the request it knows and ignores the rest.
pub struct SharedSessions {
    local: LocalSessionManager,
    store: Option<Arc<RedisSessions>>,
    bus: Option<Arc<dyn agentd_proto::Bus>>,
    /// This process, so that it skips the replies it published itself.
    origin: String,
}

fn replies_channel(session: &str) -> String {
    format!("mcp.replies.{session}")
}

/// Stops relaying replies when dropped.
pub struct Relay(tokio::task::AbortHandle);

impl Drop for Relay {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl SharedSessions {
    /// Sessions in memory, checked against `store` when given; their SSE streams
    /// logged in `streams` so that a reconnect resumes them.
    pub fn new(
        store: Option<Arc<RedisSessions>>,
        streams: Arc<dyn EventStore>,
        bus: Option<Arc<dyn agentd_proto::Bus>>,
    ) -> Self {
        let mut local = LocalSessionManager::default().with_event_store(streams);
        local.session_config.keep_alive = Some(WORKER_IDLE);
        Self { local, store, bus, origin: uuid::Uuid::new_v4().to_string() }
    }

    /// Hands the client's replies in session `id` that other gateways took to the local
    /// worker, until the returned guard is dropped. Subscribed before it returns, so a
    /// request sent after it cannot miss its reply. `None` without a bus (one process).
    pub async fn relay(self: &Arc<Self>, id: &str) -> Option<Relay> {
        let bus = self.bus.as_ref()?;
        let mut replies = match bus.subscribe(&replies_channel(id)).await {
            Ok(replies) => replies,
            Err(error) => {
                tracing::warn!(%error, "MCP replies are not relayed: the bus is unavailable");
                return None;
            }
        };
        let (sessions, id) = (Arc::clone(self), SessionId::from(id.to_owned()));
        let task = tokio::spawn(async move {
            while let Some(item) = futures::StreamExt::next(&mut replies).await {
                let agentd_proto::BusItem::Message(bytes) = item else { continue };
                let Ok(relayed) = serde_json::from_slice::<serde_json::Value>(&bytes) else { continue };
                if relayed["origin"] == sessions.origin.as_str() {
                    continue;
                }
                let Ok(message) = serde_json::from_value::<ClientJsonRpcMessage>(relayed["message"].clone()) else {
                    continue;
                };
                if let Err(error) = sessions.local.accept_message(&id, message).await {
                    tracing::debug!(%error, "a relayed MCP reply was not taken");
                }
            }
        });
        Some(Relay(task.abort_handle()))
    }

    /// Publishes a client's reply for the gateway that asked (best effort: the bus is not
    /// durable; a lost reply leaves the request to its timeout).
    async fn publish_reply(&self, id: &SessionId, message: &ClientJsonRpcMessage) {
        let Some(bus) = &self.bus else { return };
        if !matches!(message, ClientJsonRpcMessage::Response(_) | ClientJsonRpcMessage::Error(_)) {
            return;
        }
        let payload = serde_json::json!({ "origin": self.origin, "message": message });
        let Ok(bytes) = serde_json::to_vec(&payload) else { return };
        if let Err(error) = bus.publish(&replies_channel(id), bytes.into()).await {
            tracing::warn!(%error, "an MCP reply was not relayed to the other gateways");
        }
    }
}

impl SessionManager for SharedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        Ok(self.local.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        if !self.local.has_session(id).await? {
            return Ok(false);
        }
        let Some(store) = &self.store else { return Ok(true) };
        if store.touch(id).await? {
            return Ok(true);
        }
        // Ended (DELETE) through another gateway, or expired: stop the local worker.
        self.local.close_session(id).await?;
        Ok(false)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.local.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_stream(id, message).await?)
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.publish_reply(id, &message).await;
        Ok(self.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.resume(id, last_event_id).await?)
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        Ok(self.local.restore_session(id).await?)
    }

    /// None: the log serves handshake-era sessions only (their workers and `resume`
    /// use it). A stateless 2026-07-28 request keeps its own life: closing its stream
    /// cancels it (docs/api/mcp.md).
    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        None
    }
}

/// Which workspace opened each MCP session: a session id presented with another
/// workspace's key is refused like an unknown one (404), so it cannot be followed
/// (`GET`), used or ended (`DELETE`) from there. Kept in Redis next to the session
/// (`{prefix}:mcp:workspace:{id}`, same lifetime) when sessions are shared, in memory
/// otherwise (with when each was last used: a binding idle longer than a session worker
/// may idle belongs to a session that is gone, and is dropped at the next `initialize`).
pub struct WorkspaceBindings {
    store: Option<Arc<RedisSessions>>,
    memory: std::sync::Mutex<std::collections::HashMap<String, (String, std::time::Instant)>>,
}

impl WorkspaceBindings {
    /// Bindings in `store` when given, in memory otherwise.
    pub fn new(store: Option<Arc<RedisSessions>>) -> Self {
        Self { store, memory: std::sync::Mutex::default() }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (String, std::time::Instant)>> {
        self.memory.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn bind(&self, session: &str, workspace: &str) -> Result<(), redis::RedisError> {
        let Some(store) = &self.store else {
            let mut memory = self.memory();
            memory.retain(|_, (_, used)| used.elapsed() <= WORKER_IDLE);
            memory.insert(session.to_owned(), (workspace.to_owned(), std::time::Instant::now()));
            return Ok(());
        };
        let mut connection = store.connection.clone();
        redis::cmd("SET")
            .arg(store.workspace_key(session))
            .arg(workspace)
            .arg("EX")
            .arg(SESSION_TTL.as_secs())
            .query_async(&mut connection)
            .await
    }

    /// The session's workspace (its lifetime extended), `None` when it has none.
    async fn workspace(&self, session: &str) -> Result<Option<String>, redis::RedisError> {
        let Some(store) = &self.store else {
            let mut memory = self.memory();
            return Ok(memory.get_mut(session).map(|(workspace, used)| {
                *used = std::time::Instant::now();
                workspace.clone()
            }));
        };
        let mut connection = store.connection.clone();
        redis::cmd("GETEX")
            .arg(store.workspace_key(session))
            .arg("EX")
            .arg(SESSION_TTL.as_secs())
            .query_async(&mut connection)
            .await
    }

    async fn unbind(&self, session: &str) -> Result<(), redis::RedisError> {
        let Some(store) = &self.store else {
            self.memory().remove(session);
            return Ok(());
        };
        let mut connection = store.connection.clone();
        let _: i64 = redis::cmd("DEL").arg(store.workspace_key(session)).query_async(&mut connection).await?;
        Ok(())
    }
}

const SESSION_HEADER: &str = "mcp-session-id";

/// The answer rmcp gives for an unknown session, for a session of another workspace.
fn unknown_session() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

fn unavailable(error: &redis::RedisError) -> Response {
    tracing::warn!(%error, "MCP session store unavailable");
    (StatusCode::SERVICE_UNAVAILABLE, "the MCP session store is unavailable").into_response()
}

/// Middleware (after admission): a request naming a session must come from the
/// workspace that opened it; a response that opens a session binds it to the caller's
/// workspace before the client learns its id; a successful `DELETE` drops the binding.
pub async fn bind_workspace(State(bindings): State<Arc<WorkspaceBindings>>, request: Request, next: Next) -> Response {
    let Some(workspace) = request.extensions().get::<Tenant>().map(|t| t.workspace_id.clone()) else {
        return next.run(request).await;
    };
    let named = request.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let Some(session) = named else {
        let response = next.run(request).await;
        let opened = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        if let Some(opened) = opened
            && let Err(error) = bindings.bind(&opened, &workspace).await
        {
            // Unbound, the session is unusable: the client never learns its id.
            return unavailable(&error);
        }
        return response;
    };
    match bindings.workspace(&session).await {
        Ok(Some(owner)) if owner == workspace => {}
        Ok(_) => return unknown_session(),
        Err(error) => return unavailable(&error),
    }
    let delete = request.method() == Method::DELETE;
    let response = next.run(request).await;
    if delete
        && response.status().is_success()
        && let Err(error) = bindings.unbind(&session).await
    {
        tracing::warn!(%error, "MCP session binding not removed; it expires with the session");
    }
    response
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{WORKER_IDLE, WorkspaceBindings};

    #[tokio::test]
    async fn in_memory_bindings_of_gone_sessions_are_dropped() {
        let bindings = WorkspaceBindings::new(None);
        bindings.bind("old", "wrk_a").await.unwrap();
        bindings.bind("recent", "wrk_a").await.unwrap();
        let long_ago = Instant::now().checked_sub(WORKER_IDLE + Duration::from_secs(1)).unwrap();
        bindings.memory().get_mut("old").unwrap().1 = long_ago;

        bindings.bind("new", "wrk_b").await.unwrap();

        assert_eq!(bindings.workspace("old").await.unwrap(), None, "idle past a worker's life: gone");
        assert_eq!(bindings.workspace("recent").await.unwrap().as_deref(), Some("wrk_a"));
        assert_eq!(bindings.workspace("new").await.unwrap().as_deref(), Some("wrk_b"));
    }
}
