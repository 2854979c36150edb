//! The `scripted` model: deterministic and offline, so `agentd dev` does something
//! real with no key. It answers by echoing the last user text; if that text names one
//! of the request's tools as `use <tool>`, it calls that tool once (with `{"text": …}`;
//! `use bash: <command>` calls the built-in `bash` with that command), and after a tool
//! result it reports the result. `use <tool> {…}` calls the tool with that JSON object
//! as its input, and every such call in the text is made in the one response (two
//! `use spawn_thread {…}` start two threads at once).
//!
//! A user message that starts with `!` is a script instead ([`super::script`]): it
//! streams chunks over time, asks for input, calls tools and fails on purpose.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};

use super::script::{self, Cue, Step};
use super::{Block, BlockKind, ModelEvent, ModelRequest, ModelStream, Provider, ProviderError, Role, Usage};

/// The scripted provider.
pub struct Scripted;

fn last_user_text(request: &ModelRequest) -> (String, Option<String>) {
    let Some(last) = request.messages.iter().rev().find(|m| m.role == Role::User) else {
        return (String::new(), None);
    };
    let mut text = Vec::new();
    let mut result = None;
    for block in &last.content {
        match block {
            Block::Text(t) => text.push(t.clone()),
            Block::ToolResult { content, .. } => {
                let body = content
                    .as_array()
                    .map(|b| b.iter().filter_map(|x| x["text"].as_str()).collect::<Vec<_>>().join(" "))
                    .unwrap_or_default();
                result = Some(body);
            }
            _ => {}
        }
    }
    (text.join(" "), result)
}

/// The `use <tool> {…}` calls in `text` of tools the request offers, in order.
fn json_calls(text: &str, request: &ModelRequest) -> Vec<(String, Value)> {
    let mut calls = Vec::new();
    let lower = text.to_ascii_lowercase();
    for (at, _) in lower.match_indices("use ") {
        let rest = &text[at + 4..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-').collect();
        let after = rest[name.len()..].trim_start().trim_start_matches(':').trim_start();
        if !after.starts_with('{') || !request.tools.iter().any(|t| t.name == name) {
            continue;
        }
        if let Some(Ok(input @ Value::Object(_))) =
            serde_json::Deserializer::from_str(after).into_iter::<Value>().next()
        {
            calls.push((name, input));
        }
    }
    calls
}

#[async_trait]
impl Provider for Scripted {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        if let Some(cue) = script::cue(&request) {
            return Ok(scripted_stream(&request, cue?));
        }
        let (text, tool_result) = last_user_text(&request);
        let calls = if tool_result.is_none() { json_calls(&text, &request) } else { Vec::new() };
        if !calls.is_empty() {
            return Ok(calls_stream(&request, calls));
        }
        let wanted = text
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .find(|w| w[0].eq_ignore_ascii_case("use"))
            .map(|w| w[1].trim_matches(|c: char| !c.is_alphanumeric() && c != '_' && c != '-').to_owned());
        let tool = wanted.filter(|name| tool_result.is_none() && request.tools.iter().any(|t| &t.name == name));
        let input_tokens = request.messages.len() as u64 * 10;
        let mut events = vec![ModelEvent::Usage(Usage { input_tokens, ..Usage::default() })];
        let (reply, stop) = match (&tool, &tool_result) {
            (Some(name), _) => (format!("Calling {name}."), "tool_use"),
            (None, Some(result)) => (format!("The tool returned: {result}"), "end_turn"),
            (None, None) => (format!("You said: {text}"), "end_turn"),
        };
        events.push(ModelEvent::BlockStart { index: 0, kind: BlockKind::Text });
        for word in reply.split_inclusive(' ') {
            events.push(ModelEvent::TextDelta { index: 0, text: word.to_owned() });
        }
        events.push(ModelEvent::BlockStop { index: 0 });
        if let Some(name) = tool {
            let id = format!("toolu_scripted_{}", uuid::Uuid::new_v4().simple());
            let is_bash = name == "bash";
            events.push(ModelEvent::BlockStart { index: 1, kind: BlockKind::ToolUse { id, name } });
            let input = match text.split_once("use bash") {
                Some((_, command)) if is_bash => json!({ "command": command.trim_start_matches(':').trim() }),
                _ => json!({ "text": text }),
            };
            events.push(ModelEvent::InputDelta { index: 1, json: input.to_string() });
            events.push(ModelEvent::BlockStop { index: 1 });
        }
        let output_tokens = reply.split_whitespace().count() as u64;
        events.push(ModelEvent::Usage(Usage { input_tokens, output_tokens, ..Usage::default() }));
        events.push(ModelEvent::Done { stop_reason: stop.to_owned() });
        Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed())
    }

    fn name(&self) -> &'static str {
        "scripted"
    }
}

/// A response that makes `calls` (name, input), each in its own block.
fn calls_stream(request: &ModelRequest, calls: Vec<(String, Value)>) -> ModelStream {
    let input_tokens = request.messages.len() as u64 * 10;
    let names: Vec<&str> = calls.iter().map(|(name, _)| name.as_str()).collect();
    let reply = format!("Calling {}.", names.join(", "));
    let mut events = vec![
        ModelEvent::Usage(Usage { input_tokens, ..Usage::default() }),
        ModelEvent::BlockStart { index: 0, kind: BlockKind::Text },
        ModelEvent::TextDelta { index: 0, text: reply.clone() },
        ModelEvent::BlockStop { index: 0 },
    ];
    for (i, (name, input)) in calls.into_iter().enumerate() {
        let id = format!("toolu_scripted_{}", uuid::Uuid::new_v4().simple());
        events.push(ModelEvent::BlockStart { index: i + 1, kind: BlockKind::ToolUse { id, name } });
        events.push(ModelEvent::InputDelta { index: i + 1, json: input.to_string() });
        events.push(ModelEvent::BlockStop { index: i + 1 });
    }
    let output_tokens = reply.split_whitespace().count() as u64;
    events.push(ModelEvent::Usage(Usage { input_tokens, output_tokens, ..Usage::default() }));
    events.push(ModelEvent::Done { stop_reason: "tool_use".to_owned() });
    futures::stream::iter(events.into_iter().map(Ok)).boxed()
}

/// The response a script's [`Cue`] asks for: its text steps as deltas (paced as they
/// say), then its calls, each in its own block; a `fail` step ends it with an error.
fn scripted_stream(request: &ModelRequest, cue: Cue) -> ModelStream {
    let input_tokens = request.messages.len() as u64 * 10;
    let mut items: Vec<(Duration, Result<ModelEvent, ProviderError>)> =
        vec![(Duration::ZERO, Ok(ModelEvent::Usage(Usage { input_tokens, ..Usage::default() })))];
    let mut text_open = false;
    let mut output_tokens = 0;
    let mut write = |items: &mut Vec<_>, pause: Duration, text: String| {
        if !text_open {
            items.push((Duration::ZERO, Ok(ModelEvent::BlockStart { index: 0, kind: BlockKind::Text })));
            text_open = true;
        }
        output_tokens += text.split_whitespace().count() as u64;
        items.push((pause, Ok(ModelEvent::TextDelta { index: 0, text })));
    };
    if let Some(result) = cue.result {
        write(&mut items, Duration::ZERO, format!("The tool returned: {result}. "));
    }
    let mut calls = Vec::new();
    let mut failed = false;
    for step in cue.steps {
        match step {
            Step::Say(text) => write(&mut items, Duration::ZERO, format!("{text} ")),
            Step::Chunks { count, every } => {
                for i in 1..=count {
                    write(&mut items, every, format!("chunk {i} "));
                }
            }
            Step::Sleep(pause) => {
                items.push((pause, Ok(ModelEvent::Usage(Usage { input_tokens, ..Usage::default() }))))
            }
            Step::Call { name, input } => calls.push((name, input)),
            Step::Fail(message) => {
                let error = ProviderError { kind: super::ErrorKind::RequestFailed, retryable: false, message };
                items.push((Duration::ZERO, Err(error)));
                failed = true;
                break;
            }
        }
    }
    if !failed {
        let text_blocks = usize::from(text_open);
        if text_open {
            items.push((Duration::ZERO, Ok(ModelEvent::BlockStop { index: 0 })));
        }
        let stop = if calls.is_empty() { "end_turn" } else { "tool_use" };
        for (i, (name, input)) in calls.into_iter().enumerate() {
            let index = text_blocks + i;
            let id = format!("toolu_scripted_{}", uuid::Uuid::new_v4().simple());
            items.push((Duration::ZERO, Ok(ModelEvent::BlockStart { index, kind: BlockKind::ToolUse { id, name } })));
            items.push((Duration::ZERO, Ok(ModelEvent::InputDelta { index, json: input.to_string() })));
            items.push((Duration::ZERO, Ok(ModelEvent::BlockStop { index })));
        }
        items.push((Duration::ZERO, Ok(ModelEvent::Usage(Usage { input_tokens, output_tokens, ..Usage::default() }))));
        items.push((Duration::ZERO, Ok(ModelEvent::Done { stop_reason: stop.to_owned() })));
    }
    futures::stream::iter(items)
        .then(|(pause, item)| async move {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            item
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{Message, ToolSpec};

    fn request(text: &str, tools: &[&str]) -> ModelRequest {
        ModelRequest {
            model: "agentd-test-scripted".into(),
            messages: vec![Message { role: Role::User, content: vec![Block::Text(text.into())] }].into(),
            tools: tools
                .iter()
                .map(|name| ToolSpec { name: (*name).into(), description: String::new(), input_schema: json!({}) })
                .collect(),
            ..ModelRequest::default()
        }
    }

    #[tokio::test]
    async fn use_with_json_calls_each_tool_with_that_input() {
        let text = r#"use spawn_thread {"agent":"self","message":"a"} and use spawn_thread: {"agent":"self","message":"b"} not use other {"x":1}"#;
        let events: Vec<ModelEvent> =
            Scripted.stream(request(text, &["spawn_thread"])).await.unwrap().map(Result::unwrap).collect().await;
        let inputs: Vec<Value> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::InputDelta { json, .. } => serde_json::from_str(json).ok(),
                _ => None,
            })
            .collect();
        assert_eq!(inputs, [json!({"agent":"self","message":"a"}), json!({"agent":"self","message":"b"})]);
        assert_eq!(events.last(), Some(&ModelEvent::Done { stop_reason: "tool_use".into() }));
        // Without JSON, the one call with the text as before.
        let plain: Vec<ModelEvent> =
            Scripted.stream(request("use lookup now", &["lookup"])).await.unwrap().map(Result::unwrap).collect().await;
        assert!(plain.iter().any(|e| matches!(e, ModelEvent::InputDelta { json, .. } if json.contains("\"text\""))));
    }

    #[tokio::test]
    async fn a_script_paces_its_chunks_then_calls() {
        let started = std::time::Instant::now();
        let events: Vec<_> =
            Scripted.stream(request("!chunks 3 20; ask Which?", &["ask"])).await.unwrap().collect().await;
        assert!(started.elapsed() >= Duration::from_millis(60), "three pauses of 20 ms");
        let events: Vec<ModelEvent> = events.into_iter().map(Result::unwrap).collect();
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::TextDelta { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "chunk 1 chunk 2 chunk 3 ");
        assert!(events.contains(&ModelEvent::InputDelta { index: 1, json: r#"{"question":"Which?"}"#.into() }));
        assert_eq!(events.last(), Some(&ModelEvent::Done { stop_reason: "tool_use".into() }));
    }

    #[tokio::test]
    async fn a_script_fails_after_what_it_wrote() {
        let events: Vec<_> =
            Scripted.stream(request("!say partial; fail on purpose", &[])).await.unwrap().collect().await;
        assert!(matches!(events[2], Ok(ModelEvent::TextDelta { ref text, .. }) if text == "partial "));
        let error = events.last().unwrap().as_ref().unwrap_err();
        assert_eq!((error.message.as_str(), error.retryable), ("on purpose", false));
        // A script that does not parse fails the call before it streams.
        assert!(Scripted.stream(request("!ask Why?", &[])).await.is_err());
    }
}
