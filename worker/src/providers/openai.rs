//! OpenAI-compatible Chat Completions with streaming and tools (vLLM, Ollama,
//! LiteLLM, OpenAI itself): `POST {base}/chat/completions`, `stream: true`.

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::sse::frames;
use super::{Block, BlockKind, Message, ModelEvent, ModelRequest, ModelStream, Provider, ProviderError, Role, Usage};

/// The OpenAI-compatible provider.
pub struct OpenAi {
    base_url: String,
    api_key: Option<String>,
    http: reqwest::Client,
}

impl OpenAi {
    /// A provider for `base_url` (e.g. `https://api.openai.com/v1`).
    pub fn new(base_url: String, api_key: Option<String>) -> Self {
        Self::with_client(base_url, api_key, super::http_client())
    }

    /// A provider for `base_url` over `http` (a configured endpoint's own client: its
    /// timeouts, its connection pinned to the address the egress guard checked).
    pub fn with_client(base_url: String, api_key: Option<String>, http: reqwest::Client) -> Self {
        Self { base_url: base_url.trim_end_matches('/').to_owned(), api_key, http }
    }
}

fn text_of(content: &Value) -> String {
    content
        .as_array()
        .map(|blocks| blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

/// A Messages-API content block (image, document) as a Chat Completions content part:
/// images as `image_url` (a data URL for base64 sources), PDFs as a `file` part with
/// `file_data`, text documents as text. `None`: a block with nothing to send.
fn part(raw: &Value) -> Option<Value> {
    let source = &raw["source"];
    let data_url = || {
        format!(
            "data:{};base64,{}",
            source["media_type"].as_str().unwrap_or_default(),
            source["data"].as_str().unwrap_or_default()
        )
    };
    match (raw["type"].as_str(), source["type"].as_str()) {
        (Some("text"), _) => Some(json!({ "type": "text", "text": raw["text"] })),
        (Some("image"), Some("base64")) => Some(json!({ "type": "image_url", "image_url": { "url": data_url() } })),
        (Some("image"), Some("url")) => Some(json!({ "type": "image_url", "image_url": { "url": source["url"] } })),
        (Some("document"), Some("base64")) => Some(json!({
            "type": "file",
            "file": { "filename": raw["title"].as_str().unwrap_or("document.pdf"), "file_data": data_url() },
        })),
        (Some("document"), Some("text")) => Some(json!({ "type": "text", "text": source["data"] })),
        (Some("document"), Some("url")) => Some(
            json!({ "type": "text", "text": format!("[document at {}]", source["url"].as_str().unwrap_or_default()) }),
        ),
        _ => raw["text"].as_str().map(|text| json!({ "type": "text", "text": text })),
    }
}

/// Chat messages: tool calls become `tool_calls`, tool results `role: tool` messages;
/// a message with images or documents carries content parts.
fn messages(request: &ModelRequest) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = &request.system {
        out.push(json!({ "role": "system", "content": system }));
    }
    for Message { role, content } in request.messages.iter() {
        let mut text = Vec::new();
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        for block in content {
            match block {
                Block::Text(t) => {
                    text.push(t.clone());
                    parts.push(json!({ "type": "text", "text": t }));
                }
                Block::Raw(raw) => parts.extend(part(raw)),
                Block::ToolUse { id, name, input } => calls.push(json!({
                    "id": id, "type": "function", "function": { "name": name, "arguments": input.to_string() }
                })),
                Block::ToolResult { tool_use_id, content, .. } => {
                    out.push(json!({ "role": "tool", "tool_call_id": tool_use_id, "content": text_of(content) }));
                }
            }
        }
        let role = match role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let attached = parts.len() > text.len();
        if attached || !text.is_empty() || !calls.is_empty() {
            let content = if attached { Value::Array(parts) } else { json!(text.join("\n")) };
            let mut message = json!({ "role": role, "content": content });
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            out.push(message);
        }
    }
    out
}

/// The request body (public for tests of the wire shape).
pub fn body(request: &ModelRequest) -> Value {
    let mut body = json!({
        "model": request.model,
        "stream": true,
        "stream_options": { "include_usage": true },
        "max_tokens": request.max_tokens,
        "messages": messages(request),
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({ "type": "function", "function": { "name": t.name, "description": t.description, "parameters": t.input_schema } }))
            .collect();
    }
    if let Some(tool) = &request.tool_choice {
        body["tool_choice"] = json!({ "type": "function", "function": { "name": tool } });
    }
    body
}

/// Tracks which response blocks are open: text at 0, tool call `i` at `1 + i`.
#[derive(Default)]
struct Blocks {
    text_open: bool,
    tools: BTreeMap<u64, bool>,
}

#[async_trait]
impl Provider for OpenAi {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let mut http = self.http.post(format!("{}/chat/completions", self.base_url)).json(&body(&request));
        if let Some(key) = &self.api_key {
            http = http.bearer_auth(key);
        }
        let response = http.send().await.map_err(ProviderError::transport)?;
        if !response.status().is_success() {
            return Err(super::status_error(response, self.api_key.as_deref()).await);
        }
        let mut blocks = Blocks::default();
        let mut finish: Option<String> = None;
        // An in-stream error's message reaches tenants: scrub the operator's key from it.
        let scrubber = agentd_schema::scrub::Scrubber::new(self.api_key.as_deref());
        let events = frames(response.bytes_stream().boxed()).flat_map(move |frame| {
            let mut out: Vec<Result<ModelEvent, ProviderError>> = Vec::new();
            match frame {
                Err(error) => out.push(Err(ProviderError::transport(error))),
                Ok(frame) if frame.data.trim() == "[DONE]" => {
                    if blocks.text_open {
                        out.push(Ok(ModelEvent::BlockStop { index: 0 }));
                        blocks.text_open = false;
                    }
                    for (i, open) in blocks.tools.iter_mut() {
                        if *open {
                            out.push(Ok(ModelEvent::BlockStop { index: 1 + *i as usize }));
                            *open = false;
                        }
                    }
                    let reason = match finish.as_deref() {
                        Some("tool_calls") => "tool_use",
                        Some("length") => "max_tokens",
                        _ => "end_turn",
                    };
                    out.push(Ok(ModelEvent::Done { stop_reason: reason.to_owned() }));
                }
                Ok(frame) => {
                    let data: Value = serde_json::from_str(&frame.data).unwrap_or(Value::Null);
                    if let Some(error) = data.get("error") {
                        let message = scrubber.scrub(error["message"].as_str().unwrap_or("stream error"));
                        out.push(Err(ProviderError::from_status(500, &message)));
                    }
                    if let Some(u) = data.get("usage").filter(|u| u.is_object()) {
                        let cached = u["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0);
                        out.push(Ok(ModelEvent::Usage(Usage {
                            input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0).saturating_sub(cached),
                            output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
                            cache_read_input_tokens: cached,
                            cache_creation_input_tokens: 0,
                        })));
                    }
                    let choice = &data["choices"][0];
                    if let Some(reason) = choice["finish_reason"].as_str() {
                        finish = Some(reason.to_owned());
                    }
                    let delta = &choice["delta"];
                    if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                        if !blocks.text_open {
                            blocks.text_open = true;
                            out.push(Ok(ModelEvent::BlockStart { index: 0, kind: BlockKind::Text }));
                        }
                        out.push(Ok(ModelEvent::TextDelta { index: 0, text: text.to_owned() }));
                    }
                    for call in delta["tool_calls"].as_array().into_iter().flatten() {
                        let i = call["index"].as_u64().unwrap_or(0);
                        let index = 1 + i as usize;
                        if let std::collections::btree_map::Entry::Vacant(slot) = blocks.tools.entry(i) {
                            slot.insert(true);
                            out.push(Ok(ModelEvent::BlockStart {
                                index,
                                kind: BlockKind::ToolUse {
                                    id: call["id"].as_str().unwrap_or_default().to_owned(),
                                    name: call["function"]["name"].as_str().unwrap_or_default().to_owned(),
                                },
                            }));
                        }
                        if let Some(args) = call["function"]["arguments"].as_str().filter(|a| !a.is_empty()) {
                            out.push(Ok(ModelEvent::InputDelta { index, json: args.to_owned() }));
                        }
                    }
                }
            }
            futures::stream::iter(out)
        });
        Ok(events.boxed())
    }

    fn name(&self) -> &'static str {
        "openai"
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::providers::{Block, Message, ModelRequest, Role};

    fn request(blocks: Vec<Block>) -> ModelRequest {
        ModelRequest { messages: vec![Message { role: Role::User, content: blocks }].into(), ..ModelRequest::default() }
    }

    #[test]
    fn text_only_messages_stay_strings() {
        let body = body(&request(vec![Block::Text("hi".into())]));
        assert_eq!(body["messages"][0]["content"], "hi");
    }

    #[test]
    fn images_and_documents_become_content_parts() {
        let blocks = vec![
            Block::Text("look".into()),
            Block::Raw(
                json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}),
            ),
            Block::Raw(
                json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}),
            ),
            Block::Raw(
                json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}}),
            ),
        ];
        let body = body(&request(blocks));
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                {"type": "file", "file": {"filename": "document.pdf", "file_data": "data:application/pdf;base64,JVBE"}},
                {"type": "text", "text": "notes"},
            ])
        );
    }
}
