//! The model conversation built from committed history.

use std::sync::Arc;

use agentd_schema::events::OutcomeVerdict;
use agentd_schema::{EventType, StoredEvent};
use serde_json::{Value, json};

use crate::event::Event;
use crate::heap;
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
    let messages = Arc::make_mut(&mut request.messages);
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.extend(blocks),
        _ => messages.push(Message { role: Role::User, content: blocks }),
    }
}

/// Builds the model conversation from committed history. Input committed while a
/// model request was running (mid-turn messages, early tool results) is placed after
/// that request's output, where the model will read it.
pub fn conversation(agent: &Value, history: &[Event]) -> (Option<String>, Vec<Message>) {
    let mut fold = Conversation::default();
    fold.extend(history, 0);
    let (system, messages) = fold.build(agent, history);
    drop(fold); // so the messages are the caller's alone, taken without a copy
    (system, Arc::unwrap_or_clone(messages))
}

/// The model conversation folded from a thread's history, kept with the thread's fold
/// (`state::Folded`) so each request folds only the events appended since the last one,
/// instead of reading every event's body again. The messages are shared with the
/// requests built from them: a request costs a reference, and the next event folded
/// copies them only if a request still holds them (`Arc::make_mut`).
#[derive(Debug, Default, Clone)]
pub struct Conversation {
    /// The texts of `system.message` events, in order.
    system: Vec<String>,
    messages: Arc<Vec<Message>>,
    /// Input committed while the current model request runs (positions in the history):
    /// it joins the conversation after the request's output, when its end is committed.
    deferred: Vec<usize>,
    in_request: bool,
    /// The estimated heap bytes of `system` and `messages` (`crate::heap`).
    bytes: usize,
}

impl Conversation {
    /// Folds `history[from..]` into a fold of `history[..from]`.
    pub fn extend(&mut self, history: &[Event], from: usize) {
        for (at, event) in history.iter().enumerate().skip(from) {
            let Some(kind) = event.event_type() else { continue };
            let event = event.stored();
            match kind {
                EventType::SpanModelRequestStart => self.in_request = true,
                EventType::SpanModelRequestEnd => {
                    self.in_request = false;
                    for held in std::mem::take(&mut self.deferred) {
                        self.add(&history[held].stored());
                    }
                }
                kind if self.in_request && (kind.is_client_input() || is_request(&event)) => self.deferred.push(at),
                _ => self.add(&event),
            }
        }
    }

    /// The system prompt and messages of a request made now, with input still held for
    /// a request that never ended (its worker died) at the end. `history` is the one
    /// folded.
    pub fn build(&self, agent: &Value, history: &[Event]) -> (Option<String>, Arc<Vec<Message>>) {
        let mut now =
            Conversation { system: self.system.clone(), messages: self.messages.clone(), ..Default::default() };
        for &held in &self.deferred {
            now.add(&history[held].stored());
        }
        let agent_system = agent["system"].as_str().filter(|s| !s.is_empty());
        let system: Vec<&str> = agent_system.into_iter().chain(now.system.iter().map(String::as_str)).collect();
        ((!system.is_empty()).then(|| system.join("\n\n")), now.messages)
    }

    /// The estimated heap bytes it holds.
    pub fn heap_bytes(&self) -> usize {
        self.bytes + self.deferred.capacity() * std::mem::size_of::<usize>()
    }

    fn push(&mut self, role: Role, blocks: Vec<Block>) {
        if blocks.is_empty() {
            return;
        }
        self.bytes += heap::blocks_bytes(&blocks);
        let messages = Arc::make_mut(&mut self.messages);
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => {
                self.bytes += heap::MESSAGE_BYTES;
                messages.push(Message { role, content: blocks });
            }
        }
    }

    fn add(&mut self, event: &StoredEvent) {
        let body = &event.body;
        let Some(kind) = event.event_type() else { return };
        match kind {
            EventType::UserMessage => self.push(Role::User, text_blocks(&body["content"])),
            // A child thread's request from its parent is its user's message.
            EventType::AgentThreadMessageReceived if is_request(event) => {
                self.push(Role::User, text_blocks(&body["content"]))
            }
            EventType::SystemMessage => {
                for block in text_blocks(&body["content"]) {
                    if let Block::Text(text) = block {
                        self.bytes += heap::allocation(text.capacity()) + std::mem::size_of::<String>();
                        self.system.push(text);
                    }
                }
            }
            EventType::UserDefineOutcome => self.push(Role::User, vec![Block::Text(outcome_text(body))]),
            EventType::SpanOutcomeEvaluationEnd => {
                if let Some(feedback) = feedback_text(body) {
                    self.push(Role::User, vec![Block::Text(feedback)]);
                }
            }
            EventType::AgentMessage => self.push(Role::Assistant, text_blocks(&body["content"])),
            kind if kind.is_tool_use() => match event.str_field("name") {
                Ok(name) => self.push(
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
                    Some(block) => self.push(Role::User, vec![block]),
                    None => {
                        tracing::warn!(event = %event.event_id, %kind, "tool result names no call; left out of the conversation")
                    }
                }
            }
            _ => {}
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn turns(texts: &[&str]) -> Vec<Event> {
        texts
            .iter()
            .zip(1..)
            .map(|(text, seq)| {
                let kind = if seq % 2 == 1 { "user.message" } else { "agent.message" };
                StoredEvent {
                    session_id: "sesn_1".into(),
                    seq,
                    event_id: format!("sevt_{seq}"),
                    thread_id: "sesn_1".into(),
                    kind: kind.into(),
                    body: json!({"type": kind, "content": [{"type": "text", "text": text}]}),
                    processed_at_ms: 0,
                }
                .into()
            })
            .collect()
    }

    #[test]
    fn a_request_shares_the_folds_messages_and_the_fold_grows_in_place_once_it_is_gone() {
        let history = turns(&["one", "two", "three", "four"]);
        let mut fold = Conversation::default();
        fold.extend(&history[..2], 0);
        let (_, first) = fold.build(&json!({}), &history[..2]);
        let (_, again) = fold.build(&json!({}), &history[..2]);
        assert!(Arc::ptr_eq(&first, &again), "two requests of the same fold share its messages");
        let shared = Arc::as_ptr(&first) as usize;

        // Held by a request while the fold grows: the fold copies, the request keeps its own.
        fold.extend(&history[..3], 2);
        let (_, grown) = fold.build(&json!({}), &history[..3]);
        assert_eq!((first.len(), grown.len()), (2, 3));
        assert_ne!(Arc::as_ptr(&grown) as usize, shared);

        // Once the requests are gone, folding the next event changes the fold's own.
        let copied = Arc::as_ptr(&grown) as usize;
        drop((first, again, grown));
        fold.extend(&history, 3);
        let (_, last) = fold.build(&json!({}), &history);
        assert_eq!(Arc::as_ptr(&last) as usize, copied, "extended where it was, not copied");
        assert_eq!(last.len(), 4);
    }
}
