//! Rate limiting: one token bucket per organization and operation class, refilled
//! continuously. The Redis limiter is shared by every gateway replica (one atomic
//! script per request); `agentd dev` uses the in-process one. A limiter that cannot
//! answer fails closed with 503.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use super::Tenant;
use crate::AppState;
use crate::error::ApiError;

/// Operation classes with separate buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationClass {
    /// Creating a resource (POST to a collection or a nested create route).
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

/// Managed collections whose POST creates a resource.
const CREATE_COLLECTIONS: &[&str] = &[
    "agents",
    "sessions",
    "environments",
    "deployments",
    "vaults",
    "memory_stores",
    "skills",
    "user_profiles",
    "dreams",
    "files",
    "tunnels",
];

/// Nested create routes: `/v1/{collection}/{id}/{child}`.
const NESTED_CREATES: &[(&str, &str)] = &[
    ("sessions", "resources"),
    ("vaults", "credentials"),
    ("memory_stores", "memories"),
    ("skills", "versions"),
    ("user_profiles", "enrollment_url"),
    ("tunnels", "certificates"),
];

/// Which bucket a managed request draws from; `None` when it is not metered
/// (updates, archive, events, deletes, extensions).
pub fn classify(method: &Method, path: &str) -> Option<OperationClass> {
    if method == Method::GET || method == Method::HEAD {
        return Some(OperationClass::Read);
    }
    if method != Method::POST {
        return None;
    }
    // Inside the `/v1` nest the prefix is already stripped; accept both forms.
    let relative = path.strip_prefix("/v1").unwrap_or(path);
    let segments: Vec<&str> = relative.trim_start_matches('/').trim_end_matches('/').split('/').collect();
    match segments.as_slice() {
        [collection] if CREATE_COLLECTIONS.contains(collection) => Some(OperationClass::Create),
        [collection, _, child] if NESTED_CREATES.contains(&(*collection, *child)) => Some(OperationClass::Create),
        _ => None,
    }
}

/// Meters the request against its organization's bucket (after authentication).
pub async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(class) = classify(request.method(), request.uri().path()) else {
        return next.run(request).await;
    };
    let Some(tenant) = request.extensions().get::<Tenant>().cloned() else {
        // Never meter by anything the caller sent: no trusted scope, no admission.
        return ApiError::Unavailable("managed request has no trusted workspace scope".to_owned()).into_response();
    };
    let decision = match state.limiter.admit(&tenant.organization_id, class).await {
        Ok(decision) => decision,
        Err(error) => {
            tracing::warn!(%error, "rate limiter unavailable");
            return ApiError::Unavailable("the rate limiter is unavailable; retry once it is back".to_owned())
                .into_response();
        }
    };
    metrics::counter!("agentd_admission_total", "class" => class.as_str(), "allowed" => decision.allowed.to_string())
        .increment(1);
    let mut response = if decision.allowed {
        next.run(request).await
    } else {
        ApiError::RateLimited {
            message: format!("rate limit exceeded for {} requests; retry later", class.as_str()),
            retry_after_secs: decision.retry_after_secs,
        }
        .into_response()
    };
    let headers = response.headers_mut();
    headers.insert("anthropic-ratelimit-requests-limit", HeaderValue::from(decision.limit));
    headers.insert("anthropic-ratelimit-requests-remaining", HeaderValue::from(decision.remaining));
    if let Ok(reset) = HeaderValue::from_str(&decision.reset_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)) {
        headers.insert("anthropic-ratelimit-requests-reset", reset);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_the_collections() {
        assert_eq!(classify(&Method::GET, "/v1/agents/agent_1"), Some(OperationClass::Read));
        assert_eq!(classify(&Method::POST, "/v1/agents"), Some(OperationClass::Create));
        assert_eq!(classify(&Method::POST, "/agents"), Some(OperationClass::Create), "as seen inside the /v1 nest");
        assert_eq!(classify(&Method::POST, "/v1/vaults/vlt_1/credentials"), Some(OperationClass::Create));
        assert_eq!(classify(&Method::POST, "/v1/agents/agent_1"), None, "updates are not metered");
        assert_eq!(classify(&Method::POST, "/v1/agents/agent_1/archive"), None);
        assert_eq!(classify(&Method::DELETE, "/v1/environments/env_1"), None);
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
