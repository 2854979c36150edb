//! Remote tools of one attempt: MCP toolsets (`mcp.rs`), A2A agents (`a2a.rs`) and
//! the built-in toolset's web tools (`web/`), with the session's vault credentials
//! (`credentials.rs`; the web tools send none). The agent loop decides
//! which calls run (`Decision::CallRemote`); this module makes them and returns the
//! events that record their outcome.
//!
//! Crash rule (ADR 0009): a call is made at most once unless it is safe to repeat.
//! A call this attempt released (it committed the call with an `allow` permission, or
//! committed the `session.status_running` that follows the allowing confirmation) is
//! made. A call released earlier may have been started by an attempt that died; it is
//! made again only when the MCP server marks the tool read-only or idempotent (the
//! web tools and the dream's memory tool always are), and otherwise recorded as an
//! error saying it may or may not have taken effect.

use std::collections::HashSet;
use std::sync::Arc;

use agentd_schema::secrets::SecretBox;
use agentd_schema::{EventType, NewEvent, Session, Store};
use serde_json::{Value, json};

use crate::agent_loop::{RemoteCall, RemoteTarget};
use crate::credentials::Credentials;
use crate::dream_memory::DreamMemory;
use crate::mcp::{McpFailure, McpTools, OfferedTool};
use crate::providers::ModelRequest;
use crate::{a2a, mcp};

/// What an interrupted MCP call that is not safe to repeat reports.
const INTERRUPTED: &str = "this tool call was interrupted (the worker running it stopped) and may or may not have taken effect; it was not repeated because the tool is not marked read-only or idempotent";
/// What an interrupted A2A call reports (`SendMessage` is never repeated).
const INTERRUPTED_A2A: &str = "this tool call was interrupted (the worker running it stopped) and may or may not have taken effect; it was not repeated because an A2A message is not idempotent";

/// The remote-tool state of one attempt. Nothing connects until a step needs it.
pub struct Remote {
    session_id: String,
    credentials: Credentials,
    mcp: McpTools,
    /// Calls this attempt committed with an `allow` permission (so it released them).
    released: HashSet<String>,
    /// Remote tools may reach private addresses (`AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`).
    allow_private: bool,
    /// The memory tool of a dream's session.
    dream: Option<DreamMemory>,
}

/// The events recording one call, and whether its server failed (the turn ends).
pub struct Outcome {
    /// The result event, then a `session.error` when the server failed.
    pub events: Vec<NewEvent>,
    /// The server could not be used.
    pub failed: bool,
}

impl Remote {
    /// The remote-tool state for an attempt on `session`.
    pub fn new(store: Arc<dyn Store>, secrets: Option<Arc<SecretBox>>, session: &Session, allow_private: bool) -> Self {
        Self {
            session_id: session.id.clone(),
            dream: DreamMemory::of(store.clone(), session),
            credentials: Credentials::of(store, secrets, session, allow_private),
            mcp: McpTools::new(allow_private),
            released: HashSet::new(),
            allow_private,
        }
    }

    /// Adds the agent's MCP tools to `request` (connecting to its servers on first use).
    pub async fn offer(&mut self, agent: &Value, request: &mut ModelRequest) -> Result<(), McpFailure> {
        if !McpTools::wanted(agent) {
            return Ok(());
        }
        let taken = request.tools.iter().map(|t| t.name.clone()).collect();
        self.mcp.open(agent, &mut self.credentials, &taken).await?;
        request.tools.extend(self.mcp.offered().iter().map(|t| t.spec.clone()));
        Ok(())
    }

    /// The MCP tool the model calls `name`, if one was offered.
    pub fn mcp_tool(&self, name: &str) -> Option<&OfferedTool> {
        self.mcp.find(name)
    }

    /// Notes the calls among `events` that this attempt commits as allowed.
    pub fn note_released(&mut self, events: &[NewEvent]) {
        for event in events {
            let remote_kind = matches!(event.event_type(), Some(EventType::AgentMcpToolUse | EventType::AgentToolUse));
            if remote_kind && event.body["evaluated_permission"] == "allow" {
                self.released.insert(event.event_id.clone());
            }
        }
    }

    /// Makes `call` (or records why it is not made) and returns its events.
    pub async fn run(&mut self, agent: &Value, call: &RemoteCall) -> Outcome {
        let released = call.released_now || self.released.contains(&call.id);
        match &call.target {
            RemoteTarget::Mcp { server, tool } => self.run_mcp(agent, call, server, tool, released).await,
            // Every memory command is safe to repeat (`dream_memory.rs`), so a call an
            // earlier attempt may have made is made again.
            RemoteTarget::Memory => {
                let answer = match &self.dream {
                    Some(dream) => dream.run(&call.input).await,
                    None => crate::dream_memory::Answer {
                        text: "the memory tool runs only in a dream's session".into(),
                        is_error: true,
                    },
                };
                Outcome {
                    events: vec![NewEvent::tool_result(
                        &self.session_id,
                        &call.id,
                        text_content(&answer.text),
                        answer.is_error,
                    )],
                    failed: false,
                }
            }
            // A fetch or a search only reads: made again after a crash, like memory.
            RemoteTarget::Web(tool) => {
                let answer = crate::web::run(*tool, agent, &call.input, self.allow_private).await;
                let (id, session) = (call.id.as_str(), self.session_id.as_str());
                let event = if answer.made_request {
                    NewEvent::web_tool_result(session, id, *tool, answer.content, answer.is_error)
                } else {
                    NewEvent::tool_result(session, id, answer.content, answer.is_error)
                };
                Outcome { events: vec![event], failed: false }
            }
            // The advisor is asked by the attempt (`run/advisor.rs`), with its providers.
            RemoteTarget::Advisor => Outcome {
                events: vec![NewEvent::tool_result(
                    &self.session_id,
                    &call.id,
                    text_content("the advisor is not reachable from here"),
                    true,
                )],
                failed: false,
            },
            RemoteTarget::A2a { tool } => {
                let text_result = |text: String, is_error: bool| Outcome {
                    events: vec![NewEvent::tool_result(&self.session_id, &call.id, text_content(&text), is_error)],
                    failed: false,
                };
                // SendMessage is not idempotent: an interrupted call is never sent again.
                if !released {
                    return text_result(INTERRUPTED_A2A.to_owned(), true);
                }
                let config = agent["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|t| t["type"] == "a2a_agent" && t["name"] == tool.as_str());
                let Some(url) = config.and_then(|t| t["url"].as_str()) else {
                    return text_result(format!("the agent has no a2a_agent tool named {tool:?} any more"), true);
                };
                let bearer = match self.credentials.bearer_for(url).await {
                    Ok(bearer) => bearer,
                    Err(error) => return text_result(error.to_string(), true),
                };
                let Some(message) = call.input["message"].as_str() else {
                    return text_result("the input needs a \"message\" string".into(), true);
                };
                let context = a2a::context_id(&self.session_id, tool, url);
                let answer = a2a::call(url, bearer, &context, message, self.allow_private).await;
                text_result(answer.text, answer.is_error)
            }
        }
    }

    async fn run_mcp(&mut self, agent: &Value, call: &RemoteCall, server: &str, tool: &str, released: bool) -> Outcome {
        // Events are on the session's thread until the attempt commits them on its own.
        let thread = self.session_id.clone();
        let result = |content: Value, is_error: bool| NewEvent::mcp_tool_result(&thread, &call.id, content, is_error);
        let error = |failure: &McpFailure| NewEvent::session_error(&thread, &failure.session_error());
        let text = text_content;
        if !released {
            // Whether the tool is safe to repeat is the server's to say: list its tools.
            let mut probe = ModelRequest::default();
            if let Err(failure) = self.offer(agent, &mut probe).await {
                return Outcome { events: vec![result(text(INTERRUPTED), true), error(&failure)], failed: true };
            }
            let rerunnable = self.mcp.find(tool).is_some_and(|t| t.server == server && t.rerunnable);
            if !rerunnable {
                return Outcome { events: vec![result(text(INTERRUPTED), true)], failed: false };
            }
            tracing::info!(call = %call.id, %server, %tool, "repeating an interrupted read-only/idempotent MCP call");
        }
        match self.mcp.call(agent, &mut self.credentials, server, tool, &call.input).await {
            // What the server answered goes to the model and the event log: never with
            // the token we sent it, however the server spelled it.
            Ok(outcome) => Outcome {
                events: vec![result(
                    self.mcp.scrubber(server).scrub_json(&mcp::result_content(&outcome)),
                    outcome.is_error == Some(true),
                )],
                failed: false,
            },
            Err(failure) => {
                let message = format!("the MCP server {server:?} failed: {}", failure.message);
                Outcome { events: vec![result(text(&message), true), error(&failure)], failed: true }
            }
        }
    }

    /// Closes the attempt's connections.
    pub async fn close(self) {
        self.mcp.close().await;
    }
}

/// One text block.
fn text_content(text: &str) -> Value {
    json!([{ "type": "text", "text": text }])
}
