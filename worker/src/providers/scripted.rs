//! The `scripted` model: deterministic and offline, so `agentd dev` does something
//! real with no key. It answers by echoing the last user text; if that text names one
//! of the request's tools as `use <tool>`, it calls that tool once (with `{"text": …}`;
//! `use bash: <command>` calls the built-in `bash` with that command), and after a tool
//! result it reports the result.

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;

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

#[async_trait]
impl Provider for Scripted {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let (text, tool_result) = last_user_text(&request);
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
