//! Rate limiting: one token bucket per organization and operation class, refilled
//! continuously; requests without a credential (the public A2A agent cards) share one
//! bucket of their own, [`super::auth::ANONYMOUS_BUCKET`]. The Redis limiter is shared
//! by every gateway replica (one atomic script per request); `agentd dev` uses the
//! in-process one. A limiter that cannot answer fails closed with 503. Every surface is
//! metered by one rule ([`classify`]) and answers a refusal in its own error shape
//! ([`Surface`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::Value;

use super::Tenant;
use super::auth::{ANONYMOUS_BUCKET, Anonymous};
use crate::AppState;
use crate::error::ApiError;

/// Operation classes with separate buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationClass {
    /// Starting, steering or changing a run or a resource (every write).
    Create,
    /// Reading (GET, HEAD).
    Read,
}

impl OperationClass {
    fn as_str(self) -> &'static str {
        match self {
            OperationClass::Create => "create",
            OperationClass::Read => "read",
        }
    }
}

/// Bucket capacities, in requests per minute.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Create class capacity.
    pub create_per_minute: u32,
    /// Read class capacity.
    pub read_per_minute: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self { create_per_minute: 300, read_per_minute: 1200 }
    }
}

impl Limits {
    fn capacity(&self, class: OperationClass) -> f64 {
        f64::from(match class {
            OperationClass::Create => self.create_per_minute,
            OperationClass::Read => self.read_per_minute,
        })
    }
}

/// The outcome of one admission.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Bucket capacity.
    pub limit: u32,
    /// Whole tokens left after this request.
    pub remaining: u32,
    /// When the bucket will be full again.
    pub reset_at: DateTime<Utc>,
    /// When denied: whole seconds until one token is available (≥ 1).
    pub retry_after_secs: u64,
}

/// Why the limiter could not decide.
#[derive(Debug, thiserror::Error)]
#[error("rate limiter unavailable: {0}")]
pub struct LimiterUnavailable(pub String);

/// A token-bucket limiter keyed by organization and class.
#[async_trait]
pub trait Limiter: Send + Sync + 'static {
    /// Takes one token from the organization's bucket of `class`, if there is one.
    async fn admit(&self, organization_id: &str, class: OperationClass) -> Result<Decision, LimiterUnavailable>;
}

/// Bucket arithmetic shared by both limiters: takes one token from a bucket holding
/// `tokens` (already refilled to `now_ms`); returns the tokens left and the decision.
fn decide(capacity: f64, tokens: f64, now_ms: i64) -> (f64, Decision) {
    let per_ms = capacity / 60_000.0;
    let allowed = tokens >= 1.0;
    let left = if allowed { tokens - 1.0 } else { tokens };
    let to_full_ms = ((capacity - left) / per_ms).ceil().max(0.0) as i64;
    let reset_ms = now_ms + (to_full_ms + 999) / 1000 * 1000;
    let retry_after_secs = if allowed { 0 } else { (((1.0 - left) / per_ms) / 1000.0).ceil().max(1.0) as u64 };
    let decision = Decision {
        allowed,
        limit: capacity as u32,
        remaining: left.floor().max(0.0) as u32,
        reset_at: DateTime::from_timestamp_millis(reset_ms).unwrap_or_default(),
        retry_after_secs,
    };
    (left, decision)
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// In-process buckets (`agentd dev`, tests). Not shared across processes.
#[derive(Debug, Default)]
pub struct MemoryLimiter {
    limits: Limits,
    buckets: Mutex<HashMap<(String, OperationClass), (f64, i64)>>,
}

impl MemoryLimiter {
    /// A limiter with the given capacities.
    pub fn new(limits: Limits) -> Self {
        Self { limits, buckets: Mutex::default() }
    }
}

#[async_trait]
impl Limiter for MemoryLimiter {
    async fn admit(&self, organization_id: &str, class: OperationClass) -> Result<Decision, LimiterUnavailable> {
        let capacity = self.limits.capacity(class);
        let now = now_ms();
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (tokens, at) = buckets.entry((organization_id.to_owned(), class)).or_insert((capacity, now));
        let refilled = (*tokens + (now - *at).max(0) as f64 * capacity / 60_000.0).min(capacity);
        let (left, decision) = decide(capacity, refilled, now);
        *tokens = left;
        *at = now;
        Ok(decision)
    }
}

/// The bucket update as one atomic Redis script. Time comes from the Redis server so
/// every replica agrees on it. Returns `{tokens_before_take, now_ms}`; the decision
/// itself is computed by [`decide`] so both limiters share one arithmetic.
const BUCKET_SCRIPT: &str = r#"
local capacity = tonumber(ARGV[1])
local per_ms = capacity / 60000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or capacity
local at = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - at) * per_ms)
local left = tokens
if tokens >= 1 then left = tokens - 1 end
redis.call('HSET', KEYS[1], 'tokens', tostring(left), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], 120000)
return {tostring(tokens), tostring(now)}
"#;

/// Buckets in Redis, shared by every gateway replica.
pub struct RedisLimiter {
    limits: Limits,
    prefix: String,
    connection: redis::aio::ConnectionManager,
    script: redis::Script,
}

/// How long one admission may wait for Redis before failing closed.
const REDIS_TIMEOUT: Duration = Duration::from_secs(1);

impl RedisLimiter {
    /// Connects to `url`; keys are `{prefix}:ratelimit:{organization}:{class}`.
    pub async fn connect(url: &str, prefix: &str, limits: Limits) -> Result<Self, LimiterUnavailable> {
        let client = redis::Client::open(url).map_err(|e| LimiterUnavailable(e.to_string()))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT));
        let connection =
            client.get_connection_manager_with_config(config).await.map_err(|e| LimiterUnavailable(e.to_string()))?;
        Ok(Self { limits, prefix: prefix.to_owned(), connection, script: redis::Script::new(BUCKET_SCRIPT) })
    }
}

#[async_trait]
impl Limiter for RedisLimiter {
    async fn admit(&self, organization_id: &str, class: OperationClass) -> Result<Decision, LimiterUnavailable> {
        let capacity = self.limits.capacity(class);
        let key = format!("{}:ratelimit:{organization_id}:{}", self.prefix, class.as_str());
        let mut connection = self.connection.clone();
        let mut invocation = self.script.key(key);
        invocation.arg(capacity);
        let call = invocation.invoke_async::<(String, String)>(&mut connection);
        let (tokens, now) = tokio::time::timeout(REDIS_TIMEOUT, call)
            .await
            .map_err(|_| LimiterUnavailable(format!("no answer within {REDIS_TIMEOUT:?}")))?
            .map_err(|e| LimiterUnavailable(e.to_string()))?;
        let tokens: f64 = tokens.parse().map_err(|_| LimiterUnavailable(format!("bad bucket state {tokens:?}")))?;
        let now: i64 = now.parse().map_err(|_| LimiterUnavailable(format!("bad server time {now:?}")))?;
        Ok(decide(capacity, tokens, now).1)
    }
}

/// JSON-RPC methods that start, steer or change a run or a resource (A2A 1.0, A2A v0.3,
/// MCP); every other method of a JSON-RPC endpoint reads.
const RPC_WRITES: &[&str] = &[
    "SendMessage",
    "SendStreamingMessage",
    "CancelTask",
    "CreateTaskPushNotificationConfig",
    "DeleteTaskPushNotificationConfig",
    "message/send",
    "message/stream",
    "tasks/cancel",
    "tasks/pushNotificationConfig/set",
    "tasks/pushNotificationConfig/delete",
    "tools/call",
];

/// A request as the metering rule sees it.
#[derive(Debug, Clone, Copy)]
pub struct Operation<'a> {
    /// The HTTP method.
    pub method: &'a Method,
    /// The flat path, with or without the `/v1` prefix.
    pub path: &'a str,
    /// The JSON-RPC methods of a call to a JSON-RPC endpoint (A2A, MCP) whose body
    /// could be read; `None` for every other request.
    pub rpc_methods: Option<&'a [String]>,
}

/// Which bucket a request draws from. One rule for every surface (managed routes,
/// extensions, durable run control and the four adapters):
///
/// 1. a JSON-RPC call is classed by its method: [`RPC_WRITES`] draw from `Create`,
///    every other method (a batch: if none of its methods writes) from `Read`;
/// 2. any other request by HTTP method: `GET` and `HEAD` read; every other method
///    starts, steers or changes a run or a resource and draws from `Create` (spec §8
///    names only the two buckets), including a JSON-RPC body too large to read;
/// 3. three route shapes are the exceptions: A2A's `POST …/tasks/{id}:subscribe` and
///    the control plane's `POST /config/agents/{id}/validate` are reads sent as POST,
///    and the hands' lease upkeep (`POST
///    /environments/{id}/work/{work_id}/heartbeat`) is not metered — it keeps alive a
///    run whose input was metered, and a refused heartbeat would lose the lease.
pub fn classify(operation: &Operation<'_>) -> Option<OperationClass> {
    if let Some(methods) = operation.rpc_methods {
        let writes = methods.iter().any(|method| RPC_WRITES.contains(&method.as_str()));
        return Some(if writes { OperationClass::Create } else { OperationClass::Read });
    }
    let method = operation.method;
    if method == Method::GET || method == Method::HEAD {
        return Some(OperationClass::Read);
    }
    // Inside the `/v1` nest the prefix is already stripped; accept both forms.
    let relative = operation.path.strip_prefix("/v1").unwrap_or(operation.path);
    let segments: Vec<&str> = relative.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["environments", _, "work", _, "heartbeat"] => None,
        // Validating a draft writes nothing (docs/api/config.md).
        ["config", "agents", _, "validate"] => Some(OperationClass::Read),
        // So does resolving an agent's MCP servers (docs/api/config.md).
        ["config", "agents", _, "mcp", "resolve"] => Some(OperationClass::Read),
        [.., last] if method == Method::POST && last.ends_with(":subscribe") => Some(OperationClass::Read),
        _ => Some(OperationClass::Create),
    }
}

/// The wire surface of a metered request: how its JSON-RPC method is found and how a
/// refusal is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// Managed routes, extensions, durable run control, AI SDK and AG-UI: the managed
    /// error envelope (the AI SDK and AG-UI clients show a non-2xx body as the error).
    Managed,
    /// A2A JSON-RPC (`POST /a2a`, `POST /a2a/agents/{id}`; 1.0 and v0.3 methods).
    A2aJsonRpc,
    /// A2A HTTP+JSON binding and agent cards.
    A2aRest,
    /// The MCP endpoint.
    Mcp,
}

impl Surface {
    /// The surface of a route served under `/v1` or of the workspace agent card.
    fn of(method: &Method, path: &str) -> Self {
        let relative = path.strip_prefix("/v1").unwrap_or(path);
        let segments: Vec<&str> = relative.trim_matches('/').split('/').collect();
        match segments.as_slice() {
            ["a2a"] | ["a2a", "agents", _] if method == Method::POST => Surface::A2aJsonRpc,
            ["a2a", ..] | [".well-known", "agent-card.json"] => Surface::A2aRest,
            _ => Surface::Managed,
        }
    }

    fn speaks_json_rpc(self) -> bool {
        matches!(self, Surface::A2aJsonRpc | Surface::Mcp)
    }

    /// A refusal of admission (429, or 503 when the limiter cannot answer) in the
    /// surface's own error shape; `id` is the JSON-RPC request id, when known.
    fn refuse(self, error: ApiError, id: &Value) -> Response {
        use crate::adapters::a2a;
        match self {
            Surface::Managed => error.into_response(),
            Surface::A2aJsonRpc => a2a::dispatch::error_response(id, &a2a::A2aError::from(error)),
            Surface::A2aRest => a2a::rest::failure(&a2a::A2aError::from(error)),
            Surface::Mcp => mcp_refusal(id, error),
        }
    }
}

/// The JSON-RPC methods and the id of a call, read from its body.
struct RpcCall {
    methods: Vec<String>,
    id: Value,
}

/// The most of a JSON-RPC body read to find its method (axum's default body limit: a
/// larger body is refused by its handler anyway, and is metered as a write).
const PEEK_LIMIT: usize = 2 << 20;

/// Reads a JSON-RPC body to find its method(s) and id, and gives the request back
/// with the same body. `None` when the body is larger than [`PEEK_LIMIT`], fails, or
/// is not JSON-RPC.
async fn peek_rpc(request: Request) -> (Request, Option<RpcCall>) {
    let (parts, body) = request.into_parts();
    let mut stream = body.into_data_stream();
    let mut buffer = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => {
                buffer.extend_from_slice(&chunk);
                if buffer.len() > PEEK_LIMIT {
                    let read = futures::stream::once(std::future::ready(Ok::<_, axum::Error>(buffer.freeze())));
                    return (Request::from_parts(parts, Body::from_stream(read.chain(stream))), None);
                }
            }
            Err(error) => {
                let failed = futures::stream::once(std::future::ready(Err::<Bytes, _>(error)));
                return (Request::from_parts(parts, Body::from_stream(failed)), None);
            }
        }
    }
    let bytes = buffer.freeze();
    let call = serde_json::from_slice::<Value>(&bytes).ok().and_then(|value| {
        let method = |message: &Value| message.get("method").and_then(Value::as_str).map(str::to_owned);
        match &value {
            Value::Object(_) => {
                Some(RpcCall { methods: method(&value).into_iter().collect(), id: value["id"].clone() })
            }
            Value::Array(batch) => {
                Some(RpcCall { methods: batch.iter().filter_map(method).collect(), id: Value::Null })
            }
            _ => None,
        }
    });
    (Request::from_parts(parts, Body::from(bytes)), call)
}

/// Meters a request under `/v1` (and the workspace agent card) against its
/// organization's bucket, after authentication.
pub async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let surface = Surface::of(request.method(), request.uri().path());
    meter(&state, surface, request, next).await
}

/// Meters a request to the MCP endpoint (wherever `AGENTD_MCP_PATH` puts it).
pub async fn mcp_layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    meter(&state, Surface::Mcp, request, next).await
}

async fn meter(state: &AppState, surface: Surface, request: Request, next: Next) -> Response {
    let (request, call) = if surface.speaks_json_rpc() && request.method() == Method::POST {
        peek_rpc(request).await
    } else {
        (request, None)
    };
    let operation = Operation {
        method: request.method(),
        path: request.uri().path(),
        rpc_methods: call.as_ref().map(|call| call.methods.as_slice()),
    };
    let Some(class) = classify(&operation) else {
        return next.run(request).await;
    };
    let id = call.map_or(Value::Null, |call| call.id);
    // An anonymous request (a public agent card) draws from its client address's bucket.
    let bucket = match request.extensions().get::<Tenant>() {
        Some(tenant) => tenant.organization_id.clone(),
        None if request.extensions().get::<Anonymous>().is_some() => match state.trusted_proxies.client(&request) {
            Some(ip) => format!("{ANONYMOUS_BUCKET}:{ip}"),
            // No peer (in-process): one bucket for all.
            None => ANONYMOUS_BUCKET.to_owned(),
        },
        None => {
            // Never meter by anything the caller sent: no trusted scope, no admission.
            let error = ApiError::Unavailable("managed request has no trusted workspace scope".to_owned());
            return surface.refuse(error, &id);
        }
    };
    let decision = match state.limiter.admit(&bucket, class).await {
        Ok(decision) => decision,
        Err(error) => {
            tracing::warn!(%error, "rate limiter unavailable");
            let error = ApiError::Unavailable("the rate limiter is unavailable; retry once it is back".to_owned());
            return surface.refuse(error, &id);
        }
    };
    let allowed = if decision.allowed { "true" } else { "false" };
    metrics::counter!("agentd_admission_total", "class" => class.as_str(), "allowed" => allowed).increment(1);
    let mut response = if decision.allowed {
        next.run(request).await
    } else {
        let error = ApiError::RateLimited {
            message: format!("rate limit exceeded for {} requests; retry later", class.as_str()),
            retry_after_secs: decision.retry_after_secs,
        };
        surface.refuse(error, &id)
    };
    let headers = response.headers_mut();
    headers.insert("anthropic-ratelimit-requests-limit", HeaderValue::from(decision.limit));
    headers.insert("anthropic-ratelimit-requests-remaining", HeaderValue::from(decision.remaining));
    if let Ok(reset) = HeaderValue::from_str(&decision.reset_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)) {
        headers.insert("anthropic-ratelimit-requests-reset", reset);
    }
    response
}

/// JSON-RPC code of a rate-limited request (implementation-defined range, as A2A's).
pub const RATE_LIMITED: i32 = -32000;

/// Admission's refusal of a JSON-RPC request (rate limited: HTTP 429 with
/// `retry-after`; limiter down: 503) as a JSON-RPC error answering `id`, the body MCP
/// clients surface for a non-2xx answer.
pub fn mcp_refusal(id: &serde_json::Value, error: ApiError) -> Response {
    let status = axum::http::StatusCode::from_u16(error.code().http_status())
        .unwrap_or(axum::http::StatusCode::SERVICE_UNAVAILABLE);
    let retry_after = match &error {
        ApiError::RateLimited { retry_after_secs, .. } => Some(*retry_after_secs),
        _ => None,
    };
    let code = if retry_after.is_some() { RATE_LIMITED } else { rmcp::model::ErrorCode::INTERNAL_ERROR.0 };
    let mut message = serde_json::json!({ "code": code, "message": error.to_string() });
    if let Some(secs) = retry_after {
        message["data"] = serde_json::json!({ "retry_after_secs": secs });
    }
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": message });
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(secs) = retry_after {
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(secs));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(method: Method, path: &str) -> Option<OperationClass> {
        classify(&Operation { method: &method, path, rpc_methods: None })
    }

    fn rpc(methods: &[&str]) -> Option<OperationClass> {
        let methods: Vec<String> = methods.iter().map(|m| (*m).to_owned()).collect();
        classify(&Operation { method: &Method::POST, path: "/v1/a2a", rpc_methods: Some(&methods) })
    }

    #[test]
    fn reads_read_and_every_write_draws_from_create() {
        use OperationClass::{Create, Read};
        assert_eq!(class(Method::GET, "/v1/agents/agent_1"), Some(Read));
        assert_eq!(class(Method::HEAD, "/v1/agents"), Some(Read));
        assert_eq!(class(Method::POST, "/v1/agents"), Some(Create));
        assert_eq!(class(Method::POST, "/agents"), Some(Create), "as seen inside the /v1 nest");
        assert_eq!(class(Method::POST, "/v1/config/agents/agent_1/validate"), Some(Read));
        assert_eq!(class(Method::POST, "/v1/config/agents/agent_1/mcp/resolve"), Some(Read));
        assert_eq!(class(Method::POST, "/v1/config/agents/agent_1/publish"), Some(Create));
        assert_eq!(class(Method::POST, "/v1/vaults/vlt_1/credentials"), Some(Create));
        for (method, path) in [
            (Method::POST, "/v1/agents/agent_1"),
            (Method::POST, "/v1/agents/agent_1/archive"),
            (Method::DELETE, "/v1/environments/env_1"),
            (Method::POST, "/v1/sessions/sesn_1/events"),
            (Method::DELETE, "/v1/sessions/sesn_1/resources/res_1"),
            (Method::PUT, "/v1/ext/sessions/sesn_1/live-inbox/order"),
            (Method::POST, "/v1/durable/threads/t/cancel"),
            (Method::POST, "/v1/ai-sdk/chat"),
            (Method::POST, "/v1/ai-sdk/threads/t/runs"),
            (Method::POST, "/v1/ag-ui"),
            (Method::POST, "/v1/a2a/message:send"),
            (Method::POST, "/v1/a2a/agents/agent_1/tasks/t1:cancel"),
            (Method::POST, "/v1/environments/env_1/work/w1/ack"),
            (Method::DELETE, "/v1/mcp"),
            (Method::POST, "/v1/memory_stores"),
            (Method::POST, "/v1/memory_stores/memstore_1/archive"),
            (Method::DELETE, "/v1/memory_stores/memstore_1"),
            (Method::POST, "/v1/memory_stores/memstore_1/memories"),
            (Method::POST, "/v1/memory_stores/memstore_1/memories/mem_1"),
            (Method::DELETE, "/v1/memory_stores/memstore_1/memories/mem_1"),
            (Method::POST, "/v1/memory_stores/memstore_1/memory_versions/memver_1/redact"),
        ] {
            assert_eq!(class(method.clone(), path), Some(Create), "{method} {path}");
        }
        for path in [
            "/v1/memory_stores",
            "/v1/memory_stores/memstore_1/memories",
            "/v1/memory_stores/memstore_1/memories/mem_1",
            "/v1/memory_stores/memstore_1/memory_versions/memver_1",
        ] {
            assert_eq!(class(Method::GET, path), Some(Read), "{path}");
        }
        assert_eq!(class(Method::POST, "/v1/a2a/tasks/t1:subscribe"), Some(Read), "a read sent as POST");
        assert_eq!(class(Method::POST, "/v1/environments/env_1/work/w1/heartbeat"), None, "lease upkeep");
    }

    #[test]
    fn json_rpc_calls_are_classed_by_method() {
        use OperationClass::{Create, Read};
        for write in ["SendMessage", "SendStreamingMessage", "CancelTask", "message/send", "tasks/cancel", "tools/call"]
        {
            assert_eq!(rpc(&[write]), Some(Create), "{write}");
        }
        for read in ["GetTask", "ListTasks", "tasks/get", "initialize", "tools/list", "ping", "nonsense"] {
            assert_eq!(rpc(&[read]), Some(Read), "{read}");
        }
        assert_eq!(rpc(&["tools/list", "tools/call"]), Some(Create), "a batch with one write");
        assert_eq!(rpc(&[]), Some(Read));
        let unread = Operation { method: &Method::POST, path: "/v1/mcp", rpc_methods: None };
        assert_eq!(classify(&unread), Some(Create), "a body too large to read is metered as a write");
    }

    #[test]
    fn surfaces_follow_the_route() {
        assert_eq!(Surface::of(&Method::POST, "/a2a"), Surface::A2aJsonRpc);
        assert_eq!(Surface::of(&Method::POST, "/v1/a2a/agents/agent_1"), Surface::A2aJsonRpc);
        assert_eq!(Surface::of(&Method::GET, "/a2a/agents/agent_1"), Surface::A2aRest, "the agent card");
        assert_eq!(Surface::of(&Method::POST, "/a2a/message:send"), Surface::A2aRest);
        assert_eq!(Surface::of(&Method::GET, "/.well-known/agent-card.json"), Surface::A2aRest);
        assert_eq!(Surface::of(&Method::POST, "/ai-sdk/chat"), Surface::Managed);
        assert_eq!(Surface::of(&Method::POST, "/sessions/sesn_1/events"), Surface::Managed);
    }

    #[tokio::test]
    async fn an_empty_bucket_denies_with_retry_after() {
        let limiter = MemoryLimiter::new(Limits { create_per_minute: 2, read_per_minute: 10 });
        let first = limiter.admit("org", OperationClass::Create).await.unwrap();
        assert!(first.allowed);
        assert_eq!((first.limit, first.remaining), (2, 1));
        assert!(limiter.admit("org", OperationClass::Create).await.unwrap().allowed);
        let denied = limiter.admit("org", OperationClass::Create).await.unwrap();
        assert!(!denied.allowed);
        assert!(denied.retry_after_secs >= 1);
        assert!(limiter.admit("other", OperationClass::Create).await.unwrap().allowed, "buckets are per organization");
        assert!(limiter.admit("org", OperationClass::Read).await.unwrap().allowed, "and per class");
    }
}
