//! Model providers: one streaming interface over the Anthropic Messages API, any
//! OpenAI-compatible Chat Completions server, and the offline `scripted` model.
//!
//! A provider turns a [`ModelRequest`] into a stream of [`ModelEvent`]s. Errors say
//! whether a retry may help; the agent loop maps them to `session.error` kinds.

pub mod anthropic;
pub mod configured;
pub mod openai;
mod script;
pub mod scripted;
mod sse;

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::Value;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The user (and tool results).
    User,
    /// The model.
    Assistant,
}

/// One block of a conversation message.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Plain text.
    Text(String),
    /// A content block passed through as the wire JSON (images, documents).
    Raw(Value),
    /// A tool call the model made.
    ToolUse {
        /// Call id (the committed event's id).
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: Value,
    },
    /// The answer to a tool call.
    ToolResult {
        /// The call it answers.
        tool_use_id: String,
        /// Result content blocks (wire JSON).
        content: Value,
        /// Whether the tool failed.
        is_error: bool,
    },
}

/// One conversation turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Speaker.
    pub role: Role,
    /// Content.
    pub content: Vec<Block>,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its input.
    pub input_schema: Value,
}

/// One model request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    /// Model id as the provider knows it.
    pub model: String,
    /// System prompt (agent system prompt plus mid-conversation system messages).
    pub system: Option<String>,
    /// The conversation, shared with the thread's fold (`agent_loop::Conversation`): a
    /// request costs no copy of it, and one that changes it (`Arc::make_mut`) copies it
    /// then.
    pub messages: Arc<Vec<Message>>,
    /// Callable tools.
    pub tools: Vec<ToolSpec>,
    /// Output cap.
    pub max_tokens: u64,
    /// Forces a call of this tool (one of `tools`): the permission judge's answer.
    pub tool_choice: Option<String>,
}

/// Token usage of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens (excluding cache reads and writes).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Tokens read from the prompt cache.
    pub cache_read_input_tokens: u64,
    /// Tokens written to the prompt cache.
    pub cache_creation_input_tokens: u64,
}

/// The kind of a content block being streamed.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockKind {
    /// Text.
    Text,
    /// Extended thinking (only its existence is surfaced).
    Thinking,
    /// A tool call.
    ToolUse {
        /// Provider's call id.
        id: String,
        /// Tool name.
        name: String,
    },
}

/// One streamed model event.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A content block opens at `index`.
    BlockStart {
        /// Block position in the response.
        index: usize,
        /// What it is.
        kind: BlockKind,
    },
    /// Text appended to the text block at `index`.
    TextDelta {
        /// Block position.
        index: usize,
        /// Fragment.
        text: String,
    },
    /// JSON fragment of the tool input at `index`.
    InputDelta {
        /// Block position.
        index: usize,
        /// Partial JSON.
        json: String,
    },
    /// The block at `index` is complete.
    BlockStop {
        /// Block position.
        index: usize,
    },
    /// Usage so far (providers may report it more than once; the last wins per field).
    Usage(Usage),
    /// The response is complete.
    Done {
        /// Provider stop reason (`end_turn`, `tool_use`, `max_tokens`, `refusal`, …).
        stop_reason: String,
    },
}

/// What kind of failure a provider reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// 529 / overloaded.
    Overloaded,
    /// 429.
    RateLimited,
    /// Anything else.
    RequestFailed,
}

impl ErrorKind {
    /// The `session.error` type.
    pub fn error_type(self) -> agentd_schema::ErrorType {
        use agentd_schema::ErrorType;
        match self {
            ErrorKind::Overloaded => ErrorType::ModelOverloadedError,
            ErrorKind::RateLimited => ErrorType::ModelRateLimitedError,
            ErrorKind::RequestFailed => ErrorType::ModelRequestFailedError,
        }
    }
}

/// A provider failure.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    /// Classification.
    pub kind: ErrorKind,
    /// Whether repeating the request may succeed (429, 529, 5xx, connection resets).
    pub retryable: bool,
    /// What happened (no secrets).
    pub message: String,
}

impl ProviderError {
    /// Classifies an HTTP status.
    pub fn from_status(status: u16, detail: &str) -> Self {
        let (kind, retryable) = match status {
            429 => (ErrorKind::RateLimited, true),
            529 => (ErrorKind::Overloaded, true),
            500..=599 => (ErrorKind::RequestFailed, true),
            _ => (ErrorKind::RequestFailed, false),
        };
        Self { kind, retryable, message: format!("model provider answered {status}: {detail}") }
    }

    /// A transport failure (connect, reset, timeout): retryable.
    pub fn transport(error: impl std::fmt::Display) -> Self {
        Self {
            kind: ErrorKind::RequestFailed,
            retryable: true,
            message: format!("model provider unreachable: {error}"),
        }
    }
}

/// The HTTP client every provider uses: bounded connect time, `TCP_NODELAY` so
/// streamed tokens are not held back by Nagle's algorithm.
fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .tcp_nodelay(true)
        .build()
        .unwrap_or_default()
}

/// Turns a non-2xx provider response into a classified error, taking the message from
/// the usual `{"error":{"message":…}}` body when there is one. The message reaches
/// tenants (`session.error`): the operator's `api_key` is scrubbed from it in every
/// encoding, before truncation.
async fn status_error(response: reqwest::Response, api_key: Option<&str>) -> ProviderError {
    let status = response.status().as_u16();
    if response.status().is_redirection() {
        // Clients follow no redirect (an endpoint could aim one at an internal address).
        return ProviderError::from_status(status, "the endpoint redirected; redirects are not followed");
    }
    let scrubber = agentd_schema::scrub::Scrubber::new(api_key);
    let text = scrubber.scrub(&response.text().await.unwrap_or_default());
    let detail = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(200).collect());
    ProviderError::from_status(status, &detail)
}

/// A stream of model events.
pub type ModelStream = BoxStream<'static, Result<ModelEvent, ProviderError>>;

/// A model provider.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// Starts a streamed request; the stream ends after `Done` or an error.
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError>;

    /// A short name for logs and metrics.
    fn name(&self) -> &'static str;
}

/// Routes model ids to providers: a model a workspace configured to its provider's
/// endpoint (`configured`), others to the providers of the environment variables.
#[derive(Clone)]
pub struct Registry {
    anthropic: Option<Arc<dyn Provider>>,
    openai: Option<Arc<dyn Provider>>,
    scripted: Option<Arc<dyn Provider>>,
    /// The catalog models are routed by: a workspace's effective one ([`Registry::bound`]),
    /// else the process's bootstrap catalog. A workspace whose configuration could not
    /// be read routes nothing (never by the bootstrap catalog and the operator's keys).
    catalog: Option<Result<Arc<agentd_schema::catalog::Catalog>, agentd_schema::catalogs::Unloaded>>,
    /// The clients of configured routes.
    configured: Arc<configured::Configured>,
}

impl Registry {
    /// Providers from the conventional variables (`ANTHROPIC_API_KEY`,
    /// `ANTHROPIC_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`). `allow_scripted`
    /// (agentd dev) routes Claude models to the scripted model when no Anthropic
    /// endpoint is configured.
    pub fn from_env(allow_scripted: bool) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let anthropic = (var("ANTHROPIC_API_KEY").is_some() || var("ANTHROPIC_BASE_URL").is_some()).then(|| {
            Arc::new(anthropic::Anthropic::new(
                var("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".into()),
                var("ANTHROPIC_API_KEY"),
            )) as Arc<dyn Provider>
        });
        let openai = (var("OPENAI_API_KEY").is_some() || var("OPENAI_BASE_URL").is_some()).then(|| {
            Arc::new(openai::OpenAi::new(
                var("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".into()),
                var("OPENAI_API_KEY"),
            )) as Arc<dyn Provider>
        });
        let scripted = allow_scripted.then(|| Arc::new(scripted::Scripted) as Arc<dyn Provider>);
        Self { anthropic, openai, scripted, catalog: None, configured: Arc::default() }
    }

    /// The registry whose configured routes open their credentials with `secrets` and
    /// reach private addresses only when `allow_private`.
    pub fn configured(self, secrets: Option<Arc<agentd_schema::secrets::SecretBox>>, allow_private: bool) -> Self {
        Self { configured: Arc::new(configured::Configured::new(secrets, allow_private)), ..self }
    }

    /// The registry routing by `catalog` (a workspace's effective catalog, or why it is
    /// not loaded).
    pub fn bound(
        &self,
        catalog: Result<Arc<agentd_schema::catalog::Catalog>, agentd_schema::catalogs::Unloaded>,
    ) -> Self {
        Self { catalog: Some(catalog), ..self.clone() }
    }

    /// A registry that sends every Claude model to `provider` (tests, here and in the
    /// integration suites).
    pub fn only(provider: Arc<dyn Provider>) -> Self {
        Self { anthropic: Some(provider), openai: None, scripted: None, catalog: None, configured: Arc::default() }
    }

    /// The provider and provider-side model id for `model`, or why there is none.
    pub async fn route(&self, model: &str) -> Result<(Arc<dyn Provider>, String), ProviderError> {
        let catalog = match &self.catalog {
            None => agentd_schema::catalog::current(),
            Some(Ok(catalog)) => catalog.as_ref(),
            // Retryable: the configuration is read again within a second.
            Some(Err(unloaded)) => {
                return Err(ProviderError {
                    kind: ErrorKind::RequestFailed,
                    retryable: true,
                    message: unloaded.to_string(),
                });
            }
        };
        match catalog.find(model).and_then(|m| m.route.as_ref()) {
            Some(route) => self.configured.provider(route).await,
            None => self.route_in(catalog, model),
        }
    }

    fn route_in(
        &self,
        catalog: &agentd_schema::catalog::Catalog,
        model: &str,
    ) -> Result<(Arc<dyn Provider>, String), ProviderError> {
        let unconfigured = |what: &str| ProviderError {
            kind: ErrorKind::RequestFailed,
            retryable: false,
            message: format!("no provider is configured for model {model}: set {what}"),
        };
        let openai = |name: &str| {
            self.openai
                .clone()
                .map(|p| (p, name.to_owned()))
                .ok_or_else(|| unconfigured("OPENAI_API_KEY or OPENAI_BASE_URL"))
        };
        // A model the catalog lists goes to the provider the catalog names; others by
        // their id (`openai/<model>`, else Claude).
        match catalog.find(model).map(|m| m.provider.as_str()) {
            Some("openai") => return openai(model.strip_prefix("openai/").unwrap_or(model)),
            // The operator chose the offline model for this id (benchmarks, demos).
            Some("scripted") => return Ok((Arc::new(scripted::Scripted) as Arc<dyn Provider>, model.to_owned())),
            _ => {}
        }
        if let Some(name) = model.strip_prefix("openai/") {
            return openai(name);
        }
        if let Some(provider) = &self.anthropic {
            return Ok((provider.clone(), model.to_owned()));
        }
        self.scripted
            .clone()
            .map(|p| (p, model.to_owned()))
            .ok_or_else(|| unconfigured("ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL"))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A provider on 127.0.0.1 that refuses every request with 401, echoing the key it
    /// was sent (`x-api-key` or bearer) in every encoding, in the message and outside it.
    async fn echoing_provider() -> String {
        echoing(false).await
    }

    /// The same, but answering 200 and putting the echo into an `error` event of the
    /// stream (both providers' in-stream error shapes at once).
    async fn echoing_in_stream() -> String {
        echoing(true).await
    }

    async fn echoing(in_stream: bool) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
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
                let key = head
                    .lines()
                    .find_map(|l| l.strip_prefix("x-api-key: ").or_else(|| l.strip_prefix("authorization: Bearer ")))
                    .unwrap_or_default()
                    .to_owned();
                let echoed = agentd_schema::scrub::encodings(&key).join(" ");
                let error = serde_json::json!({ "type": "error", "error": { "type": "invalid_request_error", "message": format!("invalid key {echoed}") } });
                if in_stream {
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nevent: error\ndata: {error}\n\n"
                    );
                    let _ = socket.write_all(reply.as_bytes()).await;
                    continue;
                }
                let body = serde_json::json!({ "error": { "message": format!("invalid key {echoed}") } }).to_string();
                let reply = format!(
                    "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            }
        });
        base
    }

    #[tokio::test]
    async fn provider_errors_never_carry_the_operators_key() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let base = echoing_provider().await;
        let key = "sk-ant-op/erator+key~1";
        let providers: [Box<dyn Provider>; 2] = [
            Box::new(anthropic::Anthropic::new(base.clone(), Some(key.to_owned()))),
            Box::new(openai::OpenAi::new(base.clone(), Some(key.to_owned()))),
        ];
        for provider in providers {
            let Err(error) = provider.stream(ModelRequest::default()).await else { panic!("a 401 is an error") };
            assert!(error.message.contains("[redacted]"), "{}: {}", provider.name(), error.message);
            for encoded in agentd_schema::scrub::encodings(key) {
                assert!(!error.message.contains(&encoded), "{}: {encoded:?} in {}", provider.name(), error.message);
            }
        }
    }

    #[tokio::test]
    async fn in_stream_errors_never_carry_the_operators_key() {
        use futures::StreamExt;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let base = echoing_in_stream().await;
        let key = "sk-ant-op/erator+key~2";
        let providers: [Box<dyn Provider>; 2] = [
            Box::new(anthropic::Anthropic::new(base.clone(), Some(key.to_owned()))),
            Box::new(openai::OpenAi::new(base.clone(), Some(key.to_owned()))),
        ];
        for provider in providers {
            let mut stream = provider.stream(ModelRequest::default()).await.expect("a 200 opens the stream");
            let mut error = None;
            while let Some(item) = stream.next().await {
                if let Err(failed) = item {
                    error = Some(failed);
                    break;
                }
            }
            let error = error.unwrap_or_else(|| panic!("{}: the error event is an error", provider.name()));
            assert!(error.message.contains("[redacted]"), "{}: {}", provider.name(), error.message);
            for encoded in agentd_schema::scrub::encodings(key) {
                assert!(!error.message.contains(&encoded), "{}: {encoded:?} in {}", provider.name(), error.message);
            }
        }
    }

    #[test]
    fn the_catalog_names_the_provider() {
        let path = std::env::temp_dir().join(format!("agentd-catalog-{}.json", agentd_schema::ids::new_id("test")));
        std::fs::write(&path, r#"[{"id":"bench-zero","provider":"scripted"},{"id":"llama-3","provider":"openai"}]"#)
            .unwrap();
        let catalog = agentd_schema::catalog::Catalog::with_file(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        // A production registry: no scripted fallback, only an OpenAI-compatible endpoint
        // (stood in for by a provider we can recognise by identity).
        let openai: Arc<dyn Provider> = Arc::new(scripted::Scripted);
        let registry = Registry {
            anthropic: None,
            openai: Some(openai.clone()),
            scripted: None,
            catalog: None,
            configured: Arc::default(),
        };
        let (provider, name) = registry.route_in(&catalog, "bench-zero").expect("the catalog's scripted model");
        assert_eq!(name, "bench-zero");
        assert!(!Arc::ptr_eq(&provider, &openai), "scripted, not the OpenAI endpoint");
        let (provider, name) = registry.route_in(&catalog, "llama-3").expect("the catalog's openai model");
        assert_eq!(name, "llama-3");
        assert!(Arc::ptr_eq(&provider, &openai), "llama-3 goes to the OpenAI-compatible endpoint");
        let (provider, name) = registry.route_in(&catalog, "openai/gpt-x").expect("openai by prefix");
        assert_eq!(name, "gpt-x");
        assert!(Arc::ptr_eq(&provider, &openai));
        let refused = registry.route_in(&catalog, "claude-sonnet-4-5").err().expect("no Anthropic endpoint");
        assert!(refused.message.contains("ANTHROPIC_API_KEY"), "{}", refused.message);
    }

    #[tokio::test]
    async fn an_unloaded_workspace_routes_nothing() {
        let operator: Arc<dyn Provider> = Arc::new(scripted::Scripted);
        let registry = Registry::only(operator.clone());
        let model = "claude-sonnet-4-5";
        let unloaded = agentd_schema::catalogs::Unloaded { workspace_id: "ws".into() };
        let Err(refused) = registry.bound(Err(unloaded)).route(model).await else {
            panic!("an unloaded workspace must not reach the operator's provider")
        };
        assert!(refused.retryable && refused.message.contains("workspace ws"), "{}", refused.message);
        let catalog = Arc::new(agentd_schema::catalog::Catalog::builtin());
        let (provider, _) = registry.bound(Ok(catalog)).route(model).await.expect("a loaded workspace routes");
        assert!(Arc::ptr_eq(&provider, &operator));
    }
}
