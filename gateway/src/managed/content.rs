//! Validation of the content blocks and event bodies clients send. Every failure is a
//! 400 naming the field; accepted bodies are stored as sent (minus unknown keys).

use agentd_schema::EventType;
use serde_json::{Map, Value, json};

use super::body::{self, as_object, join, tag};
use super::limits::{
    MAX_CONTENT_BLOCKS, MAX_DENY_MESSAGE_CHARS, MAX_ID_CHARS, MAX_OUTCOME_CHARS, MAX_SOURCE_CHARS, MAX_TEXT_CHARS,
};
use crate::error::{ApiError, ApiResult};

/// Which block types a field accepts.
#[derive(Debug, Clone, Copy)]
pub enum Blocks {
    /// `user.message`: text, image, document, redacted.
    Message,
    /// Tool results: text, image, document, search_result.
    ToolResult,
    /// `system.message`: text only.
    System,
}

impl Blocks {
    fn allowed(self) -> &'static [&'static str] {
        match self {
            Blocks::Message => &["text", "image", "document", "redacted"],
            Blocks::ToolResult => &["text", "image", "document", "search_result"],
            Blocks::System => &["text"],
        }
    }
}

/// A content array of `kind` blocks; `required` rejects absent or empty arrays.
pub fn blocks(value: Option<&Value>, path: &str, kind: Blocks, required: bool) -> ApiResult<Value> {
    if required && value.is_none_or(|v| v.as_array().is_none_or(|a| a.is_empty())) {
        return Err(ApiError::invalid(format!("{path}: at least one content block is required")));
    }
    let items = body::array(value, path, MAX_CONTENT_BLOCKS)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let bpath = format!("{path}[{i}]");
        let map = as_object(item, &bpath)?;
        let block_type = tag(map, &bpath)?;
        if !kind.allowed().contains(&block_type) {
            return Err(ApiError::invalid(format!(
                "{bpath}.type: {block_type:?} is not allowed here (expected one of {:?})",
                kind.allowed()
            )));
        }
        match block_type {
            "text" => {
                body::only_known(map, &["type", "text"], &bpath)?;
                body::string(map.get("text"), &join(&bpath, "text"), 0, MAX_TEXT_CHARS)?;
            }
            "image" => {
                body::only_known(map, &["type", "source"], &bpath)?;
                source(map.get("source"), &join(&bpath, "source"), &["base64", "url", "file"])?;
            }
            "document" => {
                body::only_known(map, &["type", "source", "title", "context"], &bpath)?;
                source(map.get("source"), &join(&bpath, "source"), &["base64", "text", "url", "file"])?;
            }
            "redacted" => body::only_known(map, &["type"], &bpath)?,
            _ => {
                body::only_known(map, &["type", "source", "title", "content", "citations"], &bpath)?;
                body::string(map.get("source"), &join(&bpath, "source"), 1, 4096)?;
                body::string(map.get("title"), &join(&bpath, "title"), 0, 4096)?;
                blocks(map.get("content"), &join(&bpath, "content"), Blocks::System, false)?;
            }
        }
        out.push(Value::Object(map.clone()));
    }
    Ok(Value::Array(out))
}

fn source(value: Option<&Value>, path: &str, kinds: &[&str]) -> ApiResult<()> {
    let map = as_object(value.unwrap_or(&Value::Null), path)?;
    let kind = tag(map, path)?;
    if !kinds.contains(&kind) {
        return Err(ApiError::invalid(format!("{path}.type: must be one of {kinds:?}, got {kind:?}")));
    }
    let field = match kind {
        "base64" | "text" => "data",
        "url" => "url",
        _ => "file_id",
    };
    body::string(map.get(field), &join(path, field), 1, MAX_SOURCE_CHARS)?;
    Ok(())
}

/// Validates one event a client sends and returns its stored body (without `id`).
pub fn client_event(value: &Value, path: &str) -> ApiResult<Map<String, Value>> {
    let map = as_object(value, path)?;
    let kind = tag(map, path)?;
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    match kind.parse::<EventType>() {
        Ok(EventType::UserMessage) => {
            body::only_known(map, &["type", "content"], path)?;
            out.insert("content".into(), blocks(map.get("content"), &join(path, "content"), Blocks::Message, true)?);
        }
        Ok(EventType::SystemMessage) => {
            body::only_known(map, &["type", "content"], path)?;
            out.insert("content".into(), blocks(map.get("content"), &join(path, "content"), Blocks::System, true)?);
        }
        Ok(EventType::UserInterrupt) => {
            body::only_known(map, &["type", "session_thread_id"], path)?;
            if let Some(thread) =
                body::optional_string(map.get("session_thread_id"), &join(path, "session_thread_id"), 256)?
            {
                out.insert("session_thread_id".into(), json!(thread));
            }
        }
        Ok(EventType::UserToolConfirmation) => {
            body::only_known(map, &["type", "tool_use_id", "result", "deny_message"], path)?;
            out.insert(
                "tool_use_id".into(),
                json!(body::string(map.get("tool_use_id"), &join(path, "tool_use_id"), 1, MAX_ID_CHARS)?),
            );
            let result = body::string(map.get("result"), &join(path, "result"), 1, 8)?;
            if result != "allow" && result != "deny" {
                return Err(ApiError::invalid(format!("{path}.result: must be allow or deny, got {result:?}")));
            }
            let deny_message =
                body::optional_string(map.get("deny_message"), &join(path, "deny_message"), MAX_DENY_MESSAGE_CHARS)?;
            if deny_message.is_some() && result != "deny" {
                return Err(ApiError::invalid(format!("{path}.deny_message: only allowed when result is deny")));
            }
            out.insert("result".into(), json!(result));
            out.insert("deny_message".into(), json!(deny_message));
        }
        Ok(answer @ (EventType::UserCustomToolResult | EventType::UserToolResult)) => {
            let id_field = if answer == EventType::UserCustomToolResult { "custom_tool_use_id" } else { "tool_use_id" };
            body::only_known(map, &["type", id_field, "content", "is_error"], path)?;
            out.insert(
                id_field.into(),
                json!(body::string(map.get(id_field), &join(path, id_field), 1, MAX_ID_CHARS)?),
            );
            out.insert(
                "content".into(),
                blocks(map.get("content"), &join(path, "content"), Blocks::ToolResult, false)?,
            );
            out.insert(
                "is_error".into(),
                json!(body::optional_bool(map.get("is_error"), &join(path, "is_error"))?.unwrap_or(false)),
            );
        }
        Ok(EventType::UserDefineOutcome) => {
            // The outcome's id and its default `max_iterations` are set by the input
            // service (`agentd_schema::events::define_outcomes`, called by `domain::input` and `domain::sessions`), one rule for every surface.
            body::only_known(map, &["type", "description", "rubric", "max_iterations"], path)?;
            let description = body::string(map.get("description"), &join(path, "description"), 1, MAX_OUTCOME_CHARS)?;
            out.insert("description".into(), json!(description));
            let rubric_path = join(path, "rubric");
            let rubric = as_object(map.get("rubric").unwrap_or(&Value::Null), &rubric_path)?;
            match tag(rubric, &rubric_path)? {
                "text" => {
                    body::only_known(rubric, &["type", "content"], &rubric_path)?;
                    let content =
                        body::string(rubric.get("content"), &join(&rubric_path, "content"), 1, MAX_OUTCOME_CHARS)?;
                    out.insert("rubric".into(), json!({ "type": "text", "content": content }));
                }
                "file" => {
                    body::only_known(rubric, &["type", "file_id"], &rubric_path)?;
                    let file_id = body::string(rubric.get("file_id"), &join(&rubric_path, "file_id"), 1, 256)?;
                    out.insert("rubric".into(), json!({ "type": "file", "file_id": file_id }));
                }
                other => {
                    return Err(ApiError::invalid(format!("{rubric_path}.type: must be text or file, got {other:?}")));
                }
            }
            match map.get("max_iterations") {
                None | Some(Value::Null) => {}
                Some(Value::Number(n)) if n.as_i64().is_some_and(|n| (1..=20).contains(&n)) => {
                    out.insert("max_iterations".into(), json!(n.as_i64()));
                }
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "{path}.max_iterations: must be an integer from 1 to 20, got {other}"
                    )));
                }
            }
        }
        _ => {
            return Err(ApiError::invalid(format!(
                "{path}.type: unknown event type {kind:?} (expected user.message, user.interrupt, user.tool_confirmation, \
                 user.custom_tool_result, user.tool_result, user.define_outcome or system.message)"
            )));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::client_event;

    #[test]
    fn only_client_event_types_are_accepted() {
        let body = client_event(&json!({ "type": "user.interrupt" }), "events[0]").expect("a client event");
        assert_eq!(body["type"], "user.interrupt");
        let answer = json!({ "type": "user.custom_tool_result", "custom_tool_use_id": "sevt_1", "content": [] });
        assert_eq!(client_event(&answer, "e").expect("a custom tool result")["custom_tool_use_id"], "sevt_1");
        // An event type agentd writes itself, and one it does not know, are both refused.
        for kind in ["agent.message", "user.from_the_future"] {
            let error = client_event(&json!({ "type": kind }), "events[0]").expect_err(kind).to_string();
            assert!(error.contains(&format!("events[0].type: unknown event type {kind:?}")), "{error}");
        }
    }
}
