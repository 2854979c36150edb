//! One model request of an attempt: mark it started, stream it with previews on the
//! bus, commit what it produced with its closed span and the usage snapshot; retry a
//! retryable provider failure a few times.

use std::collections::BTreeMap;
use std::time::Duration;

use agentd_schema::events::ModelUsage;
use agentd_schema::{
    EventType, NewEvent, Permission, RetryStatus, RunStatus, SessionError, StopReason, StoredEvent, live,
};
use futures::{FutureExt, StreamExt};
use serde_json::{Value, json};

use super::{Attempt, Stop};
use crate::agent_loop::{self, ToolClass};
use crate::budget::Reconcile;
use crate::providers::{BlockKind, ModelEvent, ModelRequest, ProviderError, Usage};
use crate::remote::Remote;

/// Retries of a retryable provider failure before the turn ends.
const PROVIDER_RETRIES: u32 = 3;

/// The state of one streamed content block.
struct OpenBlock {
    kind: BlockKind,
    event_id: String,
    text: String,
    json: String,
}

/// Why a model stream stopped early.
enum Cut {
    Interrupted,
    Failed(ProviderError),
}

/// What one streamed response produced.
#[derive(Default)]
struct Streamed {
    /// Events for the completed blocks.
    outputs: Vec<NewEvent>,
    /// Token usage.
    usage: Usage,
    /// Why it stopped early, if it did.
    cut: Option<Cut>,
    /// The model refused: the turn ends with a `refusal` stop reason.
    refused: bool,
}

/// The `session.error` of a provider failure.
fn provider_error(error: &ProviderError, retry: RetryStatus) -> SessionError {
    SessionError::new(error.kind.error_type(), error.message.clone(), retry)
}

impl Attempt<'_> {
    /// Commits `before` with the request's start, streams the request, and commits its
    /// outputs with its end. `take_inbox`: the session's live inbox may hold messages
    /// to deliver with this request. `Some` when the outputs ended the turn and were
    /// committed with its idle, settling the run (`Attempt::turn_ends_with`).
    pub(super) async fn model_request(
        &mut self,
        before: Vec<NewEvent>,
        mut request: ModelRequest,
        reconcile: Reconcile,
        take_inbox: bool,
    ) -> Result<Option<RunStatus>, Stop> {
        let thread = self.claim.thread_id.clone();
        let mut opening = before;
        let mut retries = 0;
        loop {
            let start = NewEvent::model_request_start(&thread);
            let start_id = start.event_id.clone();
            opening.push(start);
            let started = if take_inbox {
                // Live-inbox messages are committed ahead of this request and sent with it.
                let stored = self.commit_with_inbox(std::mem::take(&mut opening)).await?;
                for delivered in stored.iter().filter(|e| e.is(EventType::UserMessage)) {
                    agent_loop::append_user_input(&mut request, &delivered.body["content"]);
                }
                stored
            } else {
                self.commit(std::mem::take(&mut opening)).await?
            };
            let start_seq = started.last().map_or(0, |e: &StoredEvent| e.seq);
            let started_at = std::time::Instant::now();
            let Streamed { outputs, mut usage, cut, refused } = self.stream_model(&request, start_seq).await?;
            metrics::histogram!("agentd_model_request_duration_seconds").record(started_at.elapsed().as_secs_f64());
            let mut closing = outputs;
            // `auto` tool uses are judged before they are committed, under this claim; the
            // judge's tokens count in this request's usage (`judge.rs`). A budget this
            // response reached leaves them unjudged, and denied.
            let budget_reached = reconcile.standing(&usage).reached();
            let judged =
                self.judge_auto_calls(&mut closing, &request, cut.is_none(), start_seq, budget_reached).await?;
            super::judge::add(&mut usage, &judged);
            let failed = matches!(cut, Some(Cut::Failed(_)));
            let model_usage = ModelUsage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cache_read_input_tokens: usage.cache_read_input_tokens,
                cache_creation_input_tokens: usage.cache_creation_input_tokens,
            };
            let mut end = NewEvent::model_request_end(&thread, &start_id, failed, model_usage);
            if let Some(model) = self.span_model() {
                end.body[agentd_schema::events::MODEL_KEY] = json!(model);
            }
            closing.push(end);
            // Whether the failed response produced anything, before usage is appended.
            let produced = closing.len() > 1;
            closing.push(reconcile.snapshot(&thread, &usage));
            // A complete answer that needs nothing more may end the turn in this commit.
            let may_end_turn = cut.is_none() && !refused && !take_inbox && !budget_reached;
            let Some(Cut::Failed(error)) = cut else {
                // Not sent again: its conversation, shared with the fold, is the fold's
                // alone again, so folding the outputs extends it instead of copying it.
                drop(request);
                if refused {
                    closing.push(NewEvent::status_idle(&thread, StopReason::Refusal));
                }
                self.remote.note_released(&closing);
                if may_end_turn && let Some(idle) = self.turn_ends_with(&closing) {
                    let mut ending = closing.clone();
                    ending.push(idle);
                    if let Some(settled) = self.settle_if_current(ending).await? {
                        return Ok(Some(settled));
                    }
                    // Input arrived meanwhile: the answer alone, and the next step reads it.
                }
                self.commit(closing).await?;
                return Ok(None);
            };
            if error.retryable && !produced && retries < PROVIDER_RETRIES {
                retries += 1;
                closing.push(NewEvent::session_error(&thread, &provider_error(&error, RetryStatus::Retrying)));
                closing.push(NewEvent::status_rescheduled(&thread));
                self.commit(closing).await?;
                let backoff =
                    Duration::from_millis(250 * 2u64.pow(retries)) + Duration::from_millis(rand::random_range(0..250));
                let interrupted_during_wait = tokio::select! {
                    () = self.cancel.cancelled() => return Err(Stop::Fenced),
                    () = tokio::time::sleep(backoff) => false,
                    // `wake` cuts the backoff short: retry now.
                    () = self.control.woken() => false,
                    () = self.interrupts.after(start_seq) => true,
                };
                if interrupted_during_wait {
                    // The next decision sees the interrupt and ends the turn.
                    return Ok(None);
                }
                opening.push(NewEvent::status_running(&thread));
                continue;
            }
            tracing::warn!(run = %self.claim.run_id, error = %error, "model request failed; ending the turn");
            closing.push(NewEvent::session_error(&thread, &provider_error(&error, RetryStatus::Exhausted)));
            closing.push(NewEvent::status_idle(&thread, StopReason::RetriesExhausted));
            self.commit(closing).await?;
            return Ok(None);
        }
    }

    /// Streams one model response, publishing previews as it goes. An interrupt
    /// committed after `start_seq` cuts it (dropping the stream closes the connection).
    async fn stream_model(&self, request: &ModelRequest, start_seq: i64) -> Result<Streamed, Stop> {
        let mut out = Streamed::default();
        let (provider, model) = match self.providers().route(&request.model).await {
            Ok(route) => route,
            Err(error) => return Ok(Streamed { cut: Some(Cut::Failed(error)), ..out }),
        };
        let mut request = request.clone();
        request.model = model;
        let resolved = {
            let mut cache = self.attachments.lock().await;
            let (store, blobs) = (self.ctx.store.as_ref(), &self.ctx.blobs);
            crate::attachments::resolve(store, blobs, &self.workspace_id, &mut request, &mut cache).await
        };
        if let Err(error) = resolved {
            return Ok(Streamed { cut: Some(Cut::Failed(error)), ..out });
        }
        let interrupted = self.interrupts.after(start_seq);
        tokio::pin!(interrupted);
        // Race the connection against an interrupt, so a slow or failing provider cannot
        // hold an interrupted turn.
        let connected = tokio::select! {
            () = self.cancel.cancelled() => return Err(Stop::Fenced),
            connected = provider.stream(request) => connected,
            () = &mut interrupted => return Ok(Streamed { cut: Some(Cut::Interrupted), ..out }),
        };
        let mut stream = match connected {
            Ok(stream) => stream,
            Err(error) => return Ok(Streamed { cut: Some(Cut::Failed(error)), ..out }),
        };
        let mut blocks: BTreeMap<usize, OpenBlock> = BTreeMap::new();
        let mut finished = false;
        let mut previews = Previews::default();
        loop {
            // Frames gathered while the response came faster than this loop: they go on
            // the bus as one message as soon as the response would make it wait.
            let ready = if previews.gathering() { stream.next().now_or_never() } else { None };
            let item = match ready {
                Some(item) => item,
                None => {
                    self.publish(&mut previews).await;
                    tokio::select! {
                        () = self.cancel.cancelled() => return Err(Stop::Fenced),
                        () = &mut interrupted => {
                            out.cut = Some(Cut::Interrupted);
                            return Ok(out);
                        }
                        item = stream.next() => item,
                    }
                }
            };
            let event = match item {
                None if finished => break,
                // A response that stops without its end marker was cut off: not a success.
                None => {
                    out.cut = Some(Cut::Failed(ProviderError::transport("the response ended before it was complete")));
                    break;
                }
                Some(Err(error)) => {
                    out.cut = Some(Cut::Failed(error));
                    break;
                }
                Some(Ok(event)) => event,
            };
            match event {
                ModelEvent::BlockStart { index, kind } => {
                    let event_id = agentd_schema::ids::new_id("sevt");
                    let preview = match kind {
                        BlockKind::Text => Some(EventType::AgentMessage),
                        BlockKind::Thinking => Some(EventType::AgentThinking),
                        BlockKind::ToolUse { .. } => None,
                    };
                    if let Some(preview) = preview {
                        let frame =
                            json!({ "type": EventType::EventStart, "event": { "type": preview, "id": event_id } });
                        previews.push(preview, frame);
                    }
                    blocks.insert(index, OpenBlock { kind, event_id, text: String::new(), json: String::new() });
                }
                ModelEvent::TextDelta { index, text } => {
                    if let Some(block) = blocks.get_mut(&index).filter(|b| b.kind == BlockKind::Text) {
                        block.text.push_str(&text);
                        let frame = json!({
                            "type": EventType::EventDelta,
                            "event_id": block.event_id,
                            "delta": { "type": "content_delta", "index": 0, "content": { "type": "text", "text": text } },
                        });
                        previews.push(EventType::AgentMessage, frame);
                    }
                }
                ModelEvent::InputDelta { index, json } => {
                    if let Some(block) = blocks.get_mut(&index) {
                        block.json.push_str(&json);
                    }
                }
                ModelEvent::BlockStop { index } => {
                    if let Some(block) = blocks.remove(&index) {
                        out.outputs.extend(finish_block(&self.agent, &self.remote, &self.claim.thread_id, block));
                    }
                }
                ModelEvent::Usage(latest) => out.usage = latest,
                ModelEvent::Done { stop_reason } => {
                    finished = true;
                    for (_, block) in std::mem::take(&mut blocks) {
                        out.outputs.extend(finish_block(&self.agent, &self.remote, &self.claim.thread_id, block));
                    }
                    out.refused = stop_reason == "refusal";
                }
            }
        }
        // Every preview is on the bus before the events it previews are committed.
        self.publish(&mut previews).await;
        Ok(out)
    }

    /// Publishes the gathered preview frames as one message.
    async fn publish(&self, previews: &mut Previews) {
        if previews.frames.is_empty() {
            return;
        }
        let claim = self.claim;
        let taken =
            live::publish_previews(self.ctx.bus.as_ref(), &claim.session_id, &claim.thread_id, &previews.frames).await;
        previews.frames.clear();
        // Previews are best-effort: after the bus refuses them, the rest of this response
        // is committed without previews rather than waiting on a bus that is down.
        previews.off |= !taken;
    }
}

/// A response's preview frames not yet on the bus.
#[derive(Default)]
struct Previews {
    frames: Vec<(EventType, Value)>,
    /// The bus refused a publish of this response.
    off: bool,
}

impl Previews {
    /// At most this many frames wait for one publish (and the checks for a cancel or an
    /// interrupt wait no longer than this many ready events).
    const GATHER: usize = 64;

    fn push(&mut self, kind: EventType, frame: Value) {
        if !self.off {
            self.frames.push((kind, frame));
        }
    }

    /// Whether frames wait for the response to pause.
    fn gathering(&self) -> bool {
        !self.frames.is_empty() && self.frames.len() < Self::GATHER
    }
}

/// The committed events of a completed block; their ids are the ones previews promised.
fn finish_block(agent: &Value, remote: &Remote, thread: &str, block: OpenBlock) -> Vec<NewEvent> {
    let id = block.event_id;
    match block.kind {
        BlockKind::Text if block.text.is_empty() => Vec::new(),
        BlockKind::Text => vec![NewEvent::agent_message(thread, &block.text).with_id(id)],
        BlockKind::Thinking => vec![NewEvent::agent_thinking(thread).with_id(id)],
        BlockKind::ToolUse { name, .. } => {
            let input: Value = if block.json.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(&block.json).unwrap_or_else(|_| json!({ "_unparsed": block.json }))
            };
            match agent_loop::classify(agent, &name) {
                ToolClass::Custom => vec![NewEvent::custom_tool_use(thread, &name, input).with_id(id)],
                // The worker's own tools are always allowed and never judged.
                ToolClass::Memory | ToolClass::Thread(_) | ToolClass::Advisor => {
                    vec![NewEvent::tool_use(thread, &name, input, Permission::of_policy("always_allow")).with_id(id)]
                }
                ToolClass::Builtin { policy } | ToolClass::A2a { policy } | ToolClass::Web { policy, .. } => {
                    vec![NewEvent::tool_use(thread, &name, input, Permission::of_policy(&policy)).with_id(id)]
                }
                ToolClass::Unknown if let Some(tool) = remote.mcp_tool(&name) => {
                    let permission = Permission::of_policy(&tool.policy);
                    vec![NewEvent::mcp_tool_use(thread, &tool.server, &name, input, permission).with_id(id)]
                }
                ToolClass::Unknown => {
                    let why = format!("tool {name} is not available to this agent");
                    vec![
                        NewEvent::tool_use(thread, &name, input, Permission::Deny).with_id(id.clone()),
                        NewEvent::synthetic_result(thread, EventType::AgentToolUse, &id, &why),
                    ]
                }
            }
        }
    }
}
