//! The script language of the `scripted` model: a user message that starts with `!`
//! drives the turn step by step, so tests and demos can put a session (and every
//! protocol's task over it) in each state on purpose. Steps are separated by `;`:
//!
//! | step | what the model does |
//! |---|---|
//! | `say <text>` | writes `<text>` |
//! | `chunks <n> <ms>` | writes `chunk 1 ` … `chunk <n> `, one every `<ms>` ms (the turn stays running meanwhile; each chunk is one delta) |
//! | `sleep <ms>` | stays working `<ms>` ms without output |
//! | `ask <question>` | asks for input: calls the tool `ask` (a custom tool the agent declares) with `{"question": …}` |
//! | `use <tool> {json}` | calls an offered tool with that input |
//! | `fail <message>` | the model call fails with `<message>` (not retryable) |
//!
//! Consecutive calls are made in one response, which ends there (`tool_use`); once their
//! results are in, the next response carries on with the steps after them, starting
//! with `The tool returned: <result>. `. Example: `!chunks 3 100; ask Which colour?;
//! say Thanks.` streams three chunks, asks, and after the answer says
//! `The tool returned: blue. Thanks.`

use std::time::Duration;

use serde_json::{Value, json};

use super::{Block, ModelRequest, ProviderError, Role};

/// At most this many chunks, and this long a pause, per step.
const MAX_CHUNKS: u64 = 10_000;
const MAX_MS: u64 = 600_000;

/// One step of a script.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Step {
    Say(String),
    Chunks { count: u64, every: Duration },
    Sleep(Duration),
    Call { name: String, input: Value },
    Fail(String),
}

impl Step {
    fn is_call(&self) -> bool {
        matches!(self, Step::Call { .. })
    }
}

/// Where a scripted turn stands: the steps of the response to give now, and the result
/// of the calls the previous response made (if it made any).
#[derive(Debug, PartialEq)]
pub(super) struct Cue {
    pub steps: Vec<Step>,
    pub result: Option<String>,
}

/// The script of the conversation's latest user text, if it is one, at the response the
/// conversation has reached. `Err` names what is wrong with the script.
pub(super) fn cue(request: &ModelRequest) -> Option<Result<Cue, ProviderError>> {
    let at = request.messages.iter().rposition(|m| m.role == Role::User && !has_result(&m.content))?;
    let text: String = request.messages[at]
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let script = text.trim_start().strip_prefix('!')?;
    let later = &request.messages[at + 1..];
    let round = later.iter().filter(|m| m.role == Role::User && has_result(&m.content)).count();
    let result = later.iter().rev().find(|m| m.role == Role::User).map(|m| result_text(&m.content));
    Some(parse(script, request).map(|steps| Cue { steps: response(steps, round), result }))
}

fn has_result(content: &[Block]) -> bool {
    content.iter().any(|b| matches!(b, Block::ToolResult { .. }))
}

fn result_text(content: &[Block]) -> String {
    let mut texts = Vec::new();
    for block in content {
        if let Block::ToolResult { content, .. } = block {
            match content {
                Value::String(s) => texts.push(s.clone()),
                Value::Array(blocks) => {
                    texts.extend(blocks.iter().filter_map(|b| b["text"].as_str().map(str::to_owned)))
                }
                _ => {}
            }
        }
    }
    texts.join(" ")
}

/// The steps of response `round`: each response is a run of steps that write, then
/// the run of calls that ends it.
fn response(steps: Vec<Step>, round: usize) -> Vec<Step> {
    let mut responses = vec![Vec::new()];
    let mut calling = false;
    for step in steps {
        if step.is_call() {
            calling = true;
        } else if calling {
            responses.push(Vec::new());
            calling = false;
        }
        responses.last_mut().expect("one response at least").push(step);
    }
    responses.into_iter().nth(round).unwrap_or_default()
}

fn invalid(message: String) -> ProviderError {
    ProviderError { kind: super::ErrorKind::RequestFailed, retryable: false, message: format!("script: {message}") }
}

fn number(word: Option<&str>, what: &str, max: u64, step: usize) -> Result<u64, ProviderError> {
    word.and_then(|w| w.parse::<u64>().ok())
        .filter(|n| *n <= max)
        .ok_or_else(|| invalid(format!("step {step}: {what} must be a whole number up to {max}")))
}

/// The steps of `script` (the text after `!`).
fn parse(script: &str, request: &ModelRequest) -> Result<Vec<Step>, ProviderError> {
    let mut steps = Vec::new();
    for (i, raw) in script.split(';').map(str::trim).enumerate() {
        let n = i + 1;
        if raw.is_empty() {
            continue;
        }
        let (verb, rest) = raw.split_once(char::is_whitespace).unwrap_or((raw, ""));
        let rest = rest.trim();
        let mut words = rest.split_whitespace();
        let step = match verb.to_ascii_lowercase().as_str() {
            "say" => Step::Say(rest.to_owned()),
            "chunks" => {
                let count = number(words.next(), "the chunk count", MAX_CHUNKS, n)?;
                let every = Duration::from_millis(number(words.next(), "the pause in ms", MAX_MS, n)?);
                Step::Chunks { count, every }
            }
            "sleep" => Step::Sleep(Duration::from_millis(number(words.next(), "the pause in ms", MAX_MS, n)?)),
            "ask" => Step::Call { name: "ask".to_owned(), input: json!({ "question": rest }) },
            "use" => {
                let (name, input) = rest.split_once(char::is_whitespace).unwrap_or((rest, "{}"));
                let input = serde_json::from_str::<Value>(input.trim())
                    .ok()
                    .filter(Value::is_object)
                    .ok_or_else(|| invalid(format!("step {n}: `use {name}` takes a JSON object")))?;
                Step::Call { name: name.to_owned(), input }
            }
            "fail" => {
                Step::Fail(if rest.is_empty() { "the script failed the turn".to_owned() } else { rest.to_owned() })
            }
            other => {
                return Err(invalid(format!("step {n}: unknown step `{other}` (say, chunks, sleep, ask, use, fail)")));
            }
        };
        if let Step::Call { name, .. } = &step
            && !request.tools.iter().any(|t| &t.name == name)
        {
            return Err(invalid(format!("step {n}: the agent offers no tool `{name}`")));
        }
        steps.push(step);
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{Message, ToolSpec};

    fn request(messages: Vec<Message>, tools: &[&str]) -> ModelRequest {
        ModelRequest {
            model: "scripted".into(),
            messages: messages.into(),
            tools: tools
                .iter()
                .map(|name| ToolSpec { name: (*name).into(), description: String::new(), input_schema: json!({}) })
                .collect(),
            ..ModelRequest::default()
        }
    }

    fn user(text: &str) -> Message {
        Message { role: Role::User, content: vec![Block::Text(text.into())] }
    }

    fn answered(result: &str) -> Vec<Message> {
        vec![
            Message {
                role: Role::Assistant,
                content: vec![Block::ToolUse { id: "t".into(), name: "ask".into(), input: json!({}) }],
            },
            Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    tool_use_id: "t".into(),
                    content: json!([{ "type": "text", "text": result }]),
                    is_error: false,
                }],
            },
        ]
    }

    #[test]
    fn plain_text_is_no_script() {
        assert!(cue(&request(vec![user("hello !x")], &[])).is_none());
    }

    #[test]
    fn responses_split_after_each_run_of_calls() {
        let script = "!chunks 2 5; ask Which?; use ask {\"question\":\"again\"}; say done; fail boom";
        let first = cue(&request(vec![user(script)], &["ask"])).unwrap().unwrap();
        assert_eq!(first.result, None);
        assert_eq!(first.steps.len(), 3);
        assert_eq!(first.steps[0], Step::Chunks { count: 2, every: Duration::from_millis(5) });
        assert_eq!(first.steps[1], Step::Call { name: "ask".into(), input: json!({ "question": "Which?" }) });

        let mut messages = vec![user(script)];
        messages.extend(answered("blue"));
        let second = cue(&request(messages, &["ask"])).unwrap().unwrap();
        assert_eq!(second.result.as_deref(), Some("blue"));
        assert_eq!(second.steps, [Step::Say("done".into()), Step::Fail("boom".into())]);
    }

    #[test]
    fn bad_scripts_are_named() {
        for (script, says) in [
            ("!dance", "unknown step `dance`"),
            ("!chunks x 5", "step 1: the chunk count"),
            ("!say a; ask Why?", "step 2: the agent offers no tool `ask`"),
            ("!use ask [1]", "takes a JSON object"),
        ] {
            let error = cue(&request(vec![user(script)], &[])).unwrap().unwrap_err();
            assert!(error.message.contains(says), "{script}: {}", error.message);
            assert!(!error.retryable);
        }
    }
}
