//! The Anthropic Messages API with streaming (`POST /v1/messages`, `stream: true`).

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};

use super::sse::frames;
use super::{
    Block, BlockKind, ErrorKind, Message, ModelEvent, ModelRequest, ModelStream, Provider, ProviderError, Role, Usage,
};

/// The Anthropic provider.
pub struct Anthropic {
    base_url: String,
    api_key: Option<String>,
    http: reqwest::Client,
}

impl Anthropic {
    /// A provider for `base_url` (e.g. `https://api.anthropic.com`).
    pub fn new(base_url: String, api_key: Option<String>) -> Self {
        Self::with_client(base_url, api_key, super::http_client())
    }

    /// A provider for `base_url` over `http` (a configured endpoint's own client: its
    /// timeouts, its connection pinned to the address the egress guard checked).
    pub fn with_client(base_url: String, api_key: Option<String>, http: reqwest::Client) -> Self {
        Self { base_url: base_url.trim_end_matches('/').to_owned(), api_key, http }
    }
}

fn block(block: &Block) -> Value {
    match block {
        Block::Text(text) => json!({ "type": "text", "text": text }),
        Block::Raw(raw) => raw.clone(),
        Block::ToolUse { id, name, input } => json!({ "type": "tool_use", "id": id, "name": name, "input": input }),
        Block::ToolResult { tool_use_id, content, is_error } => {
            json!({ "type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error })
        }
    }
}

fn message(message: &Message) -> Value {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    json!({ "role": role, "content": message.content.iter().map(block).collect::<Vec<_>>() })
}

/// The request body (public for tests of the wire shape).
pub fn body(request: &ModelRequest) -> Value {
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": true,
        "messages": request.messages.iter().map(message).collect::<Vec<_>>(),
    });
    if let Some(system) = &request.system {
        body["system"] = json!(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.input_schema }))
            .collect();
    }
    if let Some(tool) = &request.tool_choice {
        body["tool_choice"] = json!({ "type": "tool", "name": tool });
    }
    body
}

fn usage(value: &Value, into: &mut Usage) {
    let get = |key: &str| value[key].as_u64();
    if let Some(n) = get("input_tokens") {
        into.input_tokens = n;
    }
    if let Some(n) = get("output_tokens") {
        into.output_tokens = n;
    }
    if let Some(n) = get("cache_read_input_tokens") {
        into.cache_read_input_tokens = n;
    }
    if let Some(n) = get("cache_creation_input_tokens") {
        into.cache_creation_input_tokens = n;
    }
}

/// An `error` event inside the stream. Its message reaches tenants like a status error's,
/// so the operator's key is scrubbed from it the same way.
fn stream_error(data: &Value, scrubber: &agentd_schema::scrub::Scrubber) -> ProviderError {
    let kind = data["error"]["type"].as_str().unwrap_or_default();
    let message = scrubber.scrub(data["error"]["message"].as_str().unwrap_or("stream error"));
    let (kind, retryable) = match kind {
        "overloaded_error" => (ErrorKind::Overloaded, true),
        "rate_limit_error" => (ErrorKind::RateLimited, true),
        "api_error" => (ErrorKind::RequestFailed, true),
        _ => (ErrorKind::RequestFailed, false),
    };
    ProviderError { kind, retryable, message: format!("model stream error: {message}") }
}

#[async_trait]
impl Provider for Anthropic {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let mut http = self
            .http
            .post(format!("{}/v1/messages", self.base_url))
            .header("anthropic-version", "2023-06-01")
            .header("accept", "text/event-stream")
            .json(&body(&request));
        if let Some(key) = &self.api_key {
            http = http.header("x-api-key", key);
        }
        let response = http.send().await.map_err(ProviderError::transport)?;
        if !response.status().is_success() {
            return Err(super::status_error(response, self.api_key.as_deref()).await);
        }
        let mut totals = Usage::default();
        let scrubber = agentd_schema::scrub::Scrubber::new(self.api_key.as_deref());
        let events = frames(response.bytes_stream().boxed()).flat_map(move |frame| {
            let out: Vec<Result<ModelEvent, ProviderError>> = match frame {
                Err(error) => vec![Err(ProviderError::transport(error))],
                Ok(frame) => {
                    let data: Value = serde_json::from_str(&frame.data).unwrap_or(Value::Null);
                    match data["type"].as_str().or(frame.event.as_deref()).unwrap_or_default() {
                        "message_start" => {
                            usage(&data["message"]["usage"], &mut totals);
                            vec![Ok(ModelEvent::Usage(totals))]
                        }
                        "content_block_start" => {
                            let index = data["index"].as_u64().unwrap_or(0) as usize;
                            let block = &data["content_block"];
                            let kind = match block["type"].as_str().unwrap_or_default() {
                                "tool_use" => BlockKind::ToolUse {
                                    id: block["id"].as_str().unwrap_or_default().to_owned(),
                                    name: block["name"].as_str().unwrap_or_default().to_owned(),
                                },
                                "thinking" | "redacted_thinking" => BlockKind::Thinking,
                                _ => BlockKind::Text,
                            };
                            let mut events = vec![Ok(ModelEvent::BlockStart { index, kind })];
                            if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                                events.push(Ok(ModelEvent::TextDelta { index, text: text.to_owned() }));
                            }
                            events
                        }
                        "content_block_delta" => {
                            let index = data["index"].as_u64().unwrap_or(0) as usize;
                            let delta = &data["delta"];
                            match delta["type"].as_str().unwrap_or_default() {
                                "text_delta" => vec![Ok(ModelEvent::TextDelta {
                                    index,
                                    text: delta["text"].as_str().unwrap_or_default().to_owned(),
                                })],
                                "input_json_delta" => vec![Ok(ModelEvent::InputDelta {
                                    index,
                                    json: delta["partial_json"].as_str().unwrap_or_default().to_owned(),
                                })],
                                _ => vec![],
                            }
                        }
                        "content_block_stop" => {
                            vec![Ok(ModelEvent::BlockStop { index: data["index"].as_u64().unwrap_or(0) as usize })]
                        }
                        "message_delta" => {
                            usage(&data["usage"], &mut totals);
                            let mut events = vec![Ok(ModelEvent::Usage(totals))];
                            if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                                events.push(Ok(ModelEvent::Done { stop_reason: reason.to_owned() }));
                            }
                            events
                        }
                        "error" => vec![Err(stream_error(&data, &scrubber))],
                        _ => vec![],
                    }
                }
            };
            futures::stream::iter(out)
        });
        Ok(events.boxed())
    }

    fn name(&self) -> &'static str {
        "anthropic"
    }
}
