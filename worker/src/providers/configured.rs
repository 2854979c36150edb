//! Providers a workspace configured (`/v1/config/*`, docs/api/config.md): the client of
//! a model's [`Route`], built from its endpoint and credential on first use and kept
//! while the route stays the same, so requests reuse connections and a configuration
//! change takes effect on the next request.
//!
//! The base URL is tenant-aimed: it passes the egress guard (public addresses only
//! unless `AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`), the client's connection is pinned to the
//! address the guard checked (checked and pinned again after [`CLIENT_TTL`]), and it
//! follows no redirect: a 3xx answer is a terminal provider error, so an endpoint cannot
//! send the worker to an address the guard never saw. The credential is opened here, from its sealed form in
//! the catalog, with the process's `AGENTD_SECRET_KEY`. A credential of a pool that the
//! provider refuses (401, 403, 429) is passed over for the pool's cooldown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd_schema::catalog::{ProviderKind, Route, RouteEndpoint, SealedCredential};
use agentd_schema::secrets::SecretBox;
use async_trait::async_trait;
use futures::StreamExt;

use super::{ErrorKind, ModelRequest, ModelStream, Provider, ProviderError};

/// Clients kept at most; past it the cache starts over (routes change rarely).
const MAX_CLIENTS: usize = 256;

/// How long a client is kept: past it the endpoint's host is resolved, checked and
/// pinned again, so a DNS change reaches the worker and is checked by the guard.
const CLIENT_TTL: Duration = Duration::from_secs(5 * 60);

/// The default connection timeout of a configured endpoint.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The clients of configured routes, shared by every attempt of the process.
pub struct Configured {
    /// Opens the credentials (`None`: this process has no `AGENTD_SECRET_KEY`).
    secrets: Option<Arc<SecretBox>>,
    /// Endpoints may be private addresses (`AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`).
    allow_private: bool,
    /// How long a client is kept ([`CLIENT_TTL`]).
    ttl: Duration,
    /// Clients by route.
    clients: Mutex<HashMap<String, Cached>>,
    /// Credentials passed over until the instant, by id.
    cooldowns: Arc<Mutex<HashMap<String, Instant>>>,
}

/// A client and the instant it was built.
type Cached = (Arc<dyn Provider>, Instant);

impl Default for Configured {
    fn default() -> Self {
        Self {
            secrets: None,
            allow_private: false,
            ttl: CLIENT_TTL,
            clients: Mutex::default(),
            cooldowns: Arc::default(),
        }
    }
}

fn unusable(message: String) -> ProviderError {
    ProviderError { kind: ErrorKind::RequestFailed, retryable: false, message }
}

impl Configured {
    /// Clients opened with `secrets`, to endpoints checked against `allow_private`.
    pub fn new(secrets: Option<Arc<SecretBox>>, allow_private: bool) -> Self {
        Self { secrets, allow_private, ..Self::default() }
    }

    /// The credential to use now: the first not cooling down (all cooling: the first).
    fn pick<'a>(&self, endpoint: &'a RouteEndpoint) -> Option<&'a SealedCredential> {
        let now = Instant::now();
        let cooling = self.cooldowns.lock().unwrap_or_else(|p| p.into_inner());
        endpoint
            .credentials
            .iter()
            .find(|c| cooling.get(&c.id).is_none_or(|until| *until <= now))
            .or_else(|| endpoint.credentials.first())
    }

    /// The provider client of `route`, and the model's name at the provider.
    pub async fn provider(&self, route: &Route) -> Result<(Arc<dyn Provider>, String), ProviderError> {
        let endpoint = route
            .endpoint
            .as_ref()
            .ok_or_else(|| unusable(format!("provider {} has no endpoint configured", route.provider_id)))?;
        let credential = if endpoint.authenticated {
            Some(self.pick(endpoint).ok_or_else(|| {
                unusable(format!(
                    "endpoint {} of provider {} has no usable credential (archived?)",
                    endpoint.id, route.provider_id
                ))
            })?)
        } else {
            None
        };
        let key = format!(
            "{}|{}|{:?}|{:?}|{}|{}",
            route.kind.as_str(),
            endpoint.base_url,
            endpoint.connect_timeout_ms,
            endpoint.request_timeout_ms,
            endpoint.cooldown_ms,
            credential.map_or("", |c| c.sealed.as_str())
        );
        let cached = self.clients.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        if let Some((client, built)) = &cached
            && built.elapsed() < self.ttl
        {
            return Ok((client.clone(), route.provider_model.clone()));
        }
        let client = match self.build(route, endpoint, credential).await {
            Ok(client) => client,
            // The host did not resolve just now: the address checked before still
            // serves (checked again next time), and without one the turn retries.
            Err(error) if error.retryable => match cached {
                Some((client, _)) => return Ok((client, route.provider_model.clone())),
                None => return Err(error),
            },
            Err(error) => return Err(error),
        };
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, (client.clone(), Instant::now()));
        Ok((client, route.provider_model.clone()))
    }

    async fn build(
        &self,
        route: &Route,
        endpoint: &RouteEndpoint,
        credential: Option<&SealedCredential>,
    ) -> Result<Arc<dyn Provider>, ProviderError> {
        let api_key = match credential {
            None => None,
            Some(credential) => {
                let secrets = self.secrets.as_ref().ok_or_else(|| {
                    unusable("this worker has no AGENTD_SECRET_KEY to open provider credentials".to_owned())
                })?;
                let opened = secrets.open(&credential.id, &credential.sealed).map_err(|error| {
                    tracing::error!(%error, credential = %credential.id, "cannot open a provider credential");
                    unusable(format!("credential {} cannot be opened with this worker's key", credential.id))
                })?;
                opened["api_key"].as_str().map(str::to_owned)
            }
        };
        let rules = agentd_schema::egress::Rules { allow_private: self.allow_private, https_only: false };
        let target = agentd_schema::egress::check(&endpoint.base_url, rules).await.map_err(|refused| {
            let mut error = unusable(format!("endpoint {} of provider {}: {refused}", endpoint.id, route.provider_id));
            // Resolution failing is not a verdict on the address: worth another try.
            error.retryable = refused.0.contains("does not resolve") || refused.0.contains("timed out");
            error
        })?;
        let connect = endpoint.connect_timeout_ms.map_or(CONNECT_TIMEOUT, |ms| Duration::from_millis(ms.max(1) as u64));
        // No redirects: the target of one was never checked by the guard, and the pin
        // covers only this host. The 3xx itself is a terminal error (`status_error`).
        let mut builder = target.pin(
            reqwest::Client::builder()
                .connect_timeout(connect)
                .tcp_nodelay(true)
                .redirect(reqwest::redirect::Policy::none()),
        );
        if let Some(ms) = endpoint.request_timeout_ms {
            builder = builder.timeout(Duration::from_millis(ms.max(1) as u64));
        }
        let http = builder.build().map_err(|e| unusable(format!("endpoint {}: {e}", endpoint.id)))?;
        let base_url = endpoint.base_url.clone();
        let client: Arc<dyn Provider> = match route.kind {
            ProviderKind::Anthropic => Arc::new(super::anthropic::Anthropic::with_client(base_url, api_key, http)),
            ProviderKind::OpenAiCompatible => Arc::new(super::openai::OpenAi::with_client(base_url, api_key, http)),
        };
        Ok(match credential {
            Some(credential) if endpoint.cooldown_ms > 0 => Arc::new(Pooled {
                inner: client,
                credential_id: credential.id.clone(),
                cooldown: Duration::from_millis(endpoint.cooldown_ms as u64),
                cooldowns: self.cooldowns.clone(),
            }),
            _ => client,
        })
    }
}

/// A pool's credential: a refusal by the provider puts it in cooldown.
struct Pooled {
    inner: Arc<dyn Provider>,
    credential_id: String,
    cooldown: Duration,
    cooldowns: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Pooled {
    fn observe(&self, error: &ProviderError) {
        // Rate limited, or the key refused (`ProviderError::from_status`'s message).
        let refused = error.kind == ErrorKind::RateLimited
            || ["401", "403"].iter().any(|s| error.message.starts_with(&format!("model provider answered {s}")));
        if refused {
            let mut cooldowns = self.cooldowns.lock().unwrap_or_else(|p| p.into_inner());
            cooldowns.insert(self.credential_id.clone(), Instant::now() + self.cooldown);
        }
    }
}

#[async_trait]
impl Provider for Pooled {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        match self.inner.stream(request).await {
            Ok(stream) => {
                let cooldowns = self.cooldowns.clone();
                let (id, cooldown) = (self.credential_id.clone(), self.cooldown);
                Ok(stream
                    .inspect(move |item| {
                        if let Err(error) = item
                            && error.kind == ErrorKind::RateLimited
                        {
                            let mut cooldowns = cooldowns.lock().unwrap_or_else(|p| p.into_inner());
                            cooldowns.insert(id.clone(), Instant::now() + cooldown);
                        }
                    })
                    .boxed())
            }
            Err(error) => {
                self.observe(&error);
                Err(error)
            }
        }
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A server on 127.0.0.1 that records the `x-api-key` of every request (empty
    /// when none) and answers what `reply` makes of it.
    async fn serve(reply: impl Fn(&str) -> String + Send + 'static) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let keys = Arc::new(Mutex::new(Vec::new()));
        let seen = keys.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 8192];
                while !String::from_utf8_lossy(&buffer).contains("\r\n\r\n") {
                    let read = socket.read(&mut chunk).await.unwrap_or(0);
                    if read == 0 {
                        break;
                    }
                    buffer.extend_from_slice(&chunk[..read]);
                }
                let head = String::from_utf8_lossy(&buffer).to_string();
                let key = head.lines().find_map(|l| l.strip_prefix("x-api-key: ")).unwrap_or_default().to_owned();
                let answer = reply(&key);
                seen.lock().unwrap().push(key);
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        (base, keys)
    }

    /// A model server that answers 401, echoing the key it was sent.
    async fn recording() -> (String, Arc<Mutex<Vec<String>>>) {
        serve(|key| {
            let body = format!(r#"{{"error":{{"message":"invalid key {key}"}}}}"#);
            format!(
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        })
        .await
    }

    fn sealed(secrets: &SecretBox, key: &str) -> SealedCredential {
        let id = agentd_schema::ids::new_id("pcrd");
        SealedCredential { sealed: secrets.seal(&id, &serde_json::json!({ "api_key": key })), id }
    }

    fn route(base_url: &str, credentials: Vec<SealedCredential>, cooldown_ms: i64) -> Route {
        Route {
            provider_id: "fakes".into(),
            kind: ProviderKind::Anthropic,
            provider_model: "upstream".into(),
            endpoint: Some(RouteEndpoint {
                id: "main".into(),
                base_url: base_url.into(),
                connect_timeout_ms: Some(1_000),
                request_timeout_ms: Some(5_000),
                authenticated: true,
                credentials,
                cooldown_ms,
            }),
        }
    }

    #[tokio::test]
    async fn a_route_sends_its_opened_credential_and_a_refused_pool_member_cools_down() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let secrets = Arc::new(SecretBox::from_encoded(&SecretBox::generate_key()).unwrap());
        let (base, keys) = recording().await;
        let route = route(&base, vec![sealed(&secrets, "sk-first"), sealed(&secrets, "sk-second")], 60_000);
        let configured = Configured::new(Some(secrets.clone()), true);
        for _ in 0..2 {
            let (provider, model) = configured.provider(&route).await.unwrap();
            assert_eq!(model, "upstream");
            let Err(error) = provider.stream(ModelRequest::default()).await else { panic!("a 401 is an error") };
            assert!(
                !error.message.contains("sk-") && error.message.contains("invalid key [redacted]"),
                "the echoed key is scrubbed: {}",
                error.message
            );
        }
        assert_eq!(*keys.lock().unwrap(), ["sk-first", "sk-second"], "the refused first key cooled down");

        // Private addresses only when allowed; no key to open sealed credentials: refused.
        let guarded = Configured::new(Some(secrets.clone()), false);
        let refused = guarded.provider(&route).await.err().expect("a loopback endpoint is refused");
        assert!(refused.message.contains("endpoint main of provider fakes"), "{}", refused.message);
        let keyless = Configured::new(None, true);
        let refused = keyless.provider(&route).await.err().expect("nothing opens the credential");
        assert!(refused.message.contains("AGENTD_SECRET_KEY"), "{}", refused.message);
        let archived = self::route(&base, vec![], 0);
        let refused = configured.provider(&archived).await.err().expect("no usable credential");
        assert!(!refused.retryable && refused.message.contains("no usable credential"), "{}", refused.message);
    }

    #[tokio::test]
    async fn a_redirect_is_a_terminal_error_and_is_not_followed() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let secrets = Arc::new(SecretBox::from_encoded(&SecretBox::generate_key()).unwrap());
        let (internal, reached) = recording().await;
        // The endpoint redirects to the internal server.
        let location = format!("{internal}/v1/messages");
        let (base, asked) = serve(move |_| {
            format!(
                "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
        })
        .await;
        let configured = Configured::new(Some(secrets.clone()), true);
        let (provider, _) = configured.provider(&route(&base, vec![sealed(&secrets, "sk-first")], 0)).await.unwrap();
        let Err(error) = provider.stream(ModelRequest::default()).await else { panic!("a 307 is an error") };
        assert!(!error.retryable, "a redirect is terminal: {error:?}");
        assert!(error.message.starts_with("model provider answered 307"), "{}", error.message);
        assert!(!error.message.contains("invalid key"), "nothing of the target reached the caller: {}", error.message);
        assert_eq!(asked.lock().unwrap().len(), 1, "the endpoint was asked");
        assert!(reached.lock().unwrap().is_empty(), "the redirect target received nothing");
    }

    #[tokio::test]
    async fn clients_are_rebuilt_after_their_ttl_and_per_cooldown() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let secrets = Arc::new(SecretBox::from_encoded(&SecretBox::generate_key()).unwrap());
        let (base, keys) = recording().await;
        let credentials = vec![sealed(&secrets, "sk-first"), sealed(&secrets, "sk-second")];
        let configured = Configured::new(Some(secrets.clone()), true);
        let (plain, _) = configured.provider(&route(&base, credentials.clone(), 0)).await.unwrap();
        let (again, _) = configured.provider(&route(&base, credentials.clone(), 0)).await.unwrap();
        assert!(Arc::ptr_eq(&plain, &again), "a route's client is kept within its ttl");

        // The same route with a cooldown is another client: a refusal cools its key down.
        let pooled = route(&base, credentials.clone(), 60_000);
        for _ in 0..2 {
            let (provider, _) = configured.provider(&pooled).await.unwrap();
            assert!(provider.stream(ModelRequest::default()).await.is_err());
        }
        assert_eq!(*keys.lock().unwrap(), ["sk-first", "sk-second"], "the pool's cooldown is in force");

        let expiring = Configured { ttl: Duration::ZERO, ..Configured::new(Some(secrets.clone()), true) };
        let (first, _) = expiring.provider(&route(&base, credentials.clone(), 0)).await.unwrap();
        let (second, _) = expiring.provider(&route(&base, credentials, 0)).await.unwrap();
        assert!(!Arc::ptr_eq(&first, &second), "past its ttl a client is checked and built again");
    }

    #[tokio::test]
    async fn a_host_that_does_not_resolve_is_worth_a_retry() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let secrets = Arc::new(SecretBox::from_encoded(&SecretBox::generate_key()).unwrap());
        let configured = Configured::new(Some(secrets.clone()), true);
        let unknown = route("https://agentd-no-such-host.invalid", vec![sealed(&secrets, "sk-x")], 0);
        let error = configured.provider(&unknown).await.err().expect("the host does not resolve");
        assert!(error.retryable, "{error:?}");
    }
}
