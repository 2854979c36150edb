//! The model conversation built from committed history.

use agentd_schema::events::OutcomeVerdict;
use agentd_schema::{EventType, StoredEvent};
use serde_json::{Value, json};

use crate::providers::{Block, Message, ModelRequest, Role};
use crate::threads::{CallRole, thread_call};

fn text_blocks(content: &Value) -> Vec<Block> {
    content
        .as_array()
        .into_iter()
        .flatten()
        .map(|block| match (block["type"].as_str(), block["text"].as_str()) {
            (Some("text"), Some(text)) => Block::Text(text.to_owned()),
            _ => Block::Raw(block.clone()),
        })
        .collect()
}

fn result_content(content: &Value) -> Value {
    match content.as_array() {
        Some(blocks) if !blocks.is_empty() => content.clone(),
        _ => json!([{ "type": "text", "text": "(no output)" }]),
    }
}

/// Adds user content delivered after the request was built (the live inbox) to its end.
pub fn append_user_input(request: &mut ModelRequest, content: &Value) {
    let blocks = text_blocks(content);
    match request.messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.extend(blocks),
        _ => request.messages.push(Message { role: Role::User, content: blocks }),
    }
}

/// Builds the model conversation from committed history. Input committed while a
/// model request was running (mid-turn messages, early tool results) is placed after
/// that request's output, where the model will read it.
pub fn conversation(agent: &Value, history: &[StoredEvent]) -> (Option<String>, Vec<Message>) {
    let mut system: Vec<String> =
        agent["system"].as_str().filter(|s| !s.is_empty()).map(str::to_owned).into_iter().collect();
    let mut messages: Vec<Message> = Vec::new();
    let mut deferred: Vec<&StoredEvent> = Vec::new();
    let mut in_request = false;
    for event in history {
        let Some(kind) = event.event_type() else { continue };
        match kind {
            EventType::SpanModelRequestStart => in_request = true,
            EventType::SpanModelRequestEnd => {
                in_request = false;
                for held in deferred.drain(..) {
                    add(&mut messages, &mut system, held);
                }
            }
            kind if in_request && (kind.is_client_input() || is_request(event)) => deferred.push(event),
            _ => add(&mut messages, &mut system, event),
        }
    }
    for held in deferred {
        add(&mut messages, &mut system, held);
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    (system, messages)
}

/// A parent's request delivered to a child thread (not a reply: its tool result is the
/// input).
fn is_request(event: &StoredEvent) -> bool {
    event.is(EventType::AgentThreadMessageReceived)
        && thread_call(&event.body).is_some_and(|(_, role)| role == CallRole::Request)
}

/// A request's tool-result block for a result event (`answers_key` names the call).
pub(super) fn tool_result_block(kind: EventType, body: &Value, is_error: bool) -> Option<Block> {
    let tool_use_id = body[kind.answers_key()?].as_str()?.to_owned();
    Some(Block::ToolResult { tool_use_id, content: result_content(&body["content"]), is_error })
}

fn add(messages: &mut Vec<Message>, system: &mut Vec<String>, event: &StoredEvent) {
    let mut push = |role: Role, blocks: Vec<Block>| {
        if blocks.is_empty() {
            return;
        }
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(Message { role, content: blocks }),
        }
    };
    let body = &event.body;
    let Some(kind) = event.event_type() else { return };
    match kind {
        EventType::UserMessage => push(Role::User, text_blocks(&body["content"])),
        // A child thread's request from its parent is its user's message.
        EventType::AgentThreadMessageReceived if is_request(event) => push(Role::User, text_blocks(&body["content"])),
        EventType::SystemMessage => {
            system.extend(text_blocks(&body["content"]).into_iter().filter_map(|b| match b {
                Block::Text(t) => Some(t),
                _ => None,
            }));
        }
        EventType::UserDefineOutcome => push(Role::User, vec![Block::Text(outcome_text(body))]),
        EventType::SpanOutcomeEvaluationEnd => {
            if let Some(feedback) = feedback_text(body) {
                push(Role::User, vec![Block::Text(feedback)]);
            }
        }
        EventType::AgentMessage => push(Role::Assistant, text_blocks(&body["content"])),
        kind if kind.is_tool_use() => match event.str_field("name") {
            Ok(name) => push(
                Role::Assistant,
                vec![Block::ToolUse {
                    id: event.event_id.clone(),
                    name: name.to_owned(),
                    input: if body["input"].is_object() { body["input"].clone() } else { json!({}) },
                }],
            ),
            Err(error) => tracing::warn!(%error, "tool call left out of the conversation"),
        },
        kind if kind.is_tool_answer() => {
            let is_error = body["is_error"].as_bool().unwrap_or(false);
            match tool_result_block(kind, body, is_error) {
                Some(block) => push(Role::User, vec![block]),
                None => {
                    tracing::warn!(event = %event.event_id, %kind, "tool result names no call; left out of the conversation")
                }
            }
        }
        _ => {}
    }
}

/// What the agent reads of a `user.define_outcome` (docs/api/outcomes.md): the task and,
/// for a text rubric, the rubric it will be graded against.
fn outcome_text(body: &Value) -> String {
    let description = body["description"].as_str().unwrap_or_default();
    let rubric = match (body["rubric"]["type"].as_str(), body["rubric"]["content"].as_str()) {
        (Some("text"), Some(rubric)) => format!("<rubric>\n{rubric}\n</rubric>"),
        _ => "(The rubric was given as a file; the grader reads it.)".to_owned(),
    };
    format!(
        "Produce this outcome. When you finish, a grader evaluates your result against the rubric and may \
         ask for revisions.\n<outcome>\n{description}\n</outcome>\n{rubric}"
    )
}

/// The grader's feedback an evaluation gives back to the agent (`needs_revision`, or
/// `max_iterations_reached` for one final turn); none for the other verdicts.
fn feedback_text(body: &Value) -> Option<String> {
    let explanation = body["explanation"].as_str().unwrap_or_default();
    let iteration = body["iteration"].as_i64().unwrap_or(0);
    match body["result"].as_str().and_then(OutcomeVerdict::parse)? {
        OutcomeVerdict::NeedsRevision => Some(format!(
            "The grader evaluated your result (iteration {iteration}) against the rubric: it needs revision.\n\
             <grader_feedback>\n{explanation}\n</grader_feedback>\nRevise your work to meet the rubric."
        )),
        OutcomeVerdict::MaxIterationsReached => Some(format!(
            "The grader evaluated your result (iteration {iteration}) against the rubric: it still does not meet \
             it, and no evaluation cycles remain.\n<grader_feedback>\n{explanation}\n</grader_feedback>\n\
             Briefly tell the user what is still missing; this answer is not graded."
        )),
        _ => None,
    }
}
