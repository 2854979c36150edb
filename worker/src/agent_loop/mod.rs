//! The agent loop as a state machine: committed history in, the next action out.
//! No IO happens here; `run.rs` performs the actions and feeds the results back as
//! committed history. Because the input is only committed history, a replay after a
//! crash decides the same thing again and never repeats a committed step.
//!
//! `decide` is a fold of the history into a small typed state (`state::Thread`: the
//! open tool calls, where the last input, interrupt, request and status are) followed
//! by a few rules, each a function of that state.

mod conversation;
mod state;
#[cfg(test)]
mod tests;
mod tools;

use std::sync::Arc;

use agentd_schema::events::OpenCall;
use agentd_schema::web::WebTool;
use agentd_schema::{EventType, NewEvent, StopReason};
use serde_json::Value;

use crate::event::Event;
use crate::providers::{Message, ModelRequest, Role};
use crate::threads::ThreadTool;
pub use crate::threads::{ThreadCall, Waiting};
pub use conversation::{Conversation, append_user_input, conversation};
pub use state::Folded;
use state::Thread;
pub use tools::{ToolClass, classify, is_builtin, tool_specs};

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Commit `before`, then run a model request.
    CallModel {
        /// Events to commit first (status changes, synthetic tool results).
        before: Vec<NewEvent>,
        /// The request.
        request: ModelRequest,
    },
    /// Commit these events (ending with `session.status_idle`) and park the run.
    Idle {
        /// The events.
        events: Vec<NewEvent>,
    },
    /// Built-in tool calls are out with the environment's hands (our runner on `cloud`,
    /// the customer's worker on `self_hosted`): park without committing; the session
    /// stays `running` and their results make the run runnable again.
    AwaitHands {
        /// Events to commit first (a closed span, synthetic results of denied calls).
        events: Vec<NewEvent>,
    },
    /// Commit `before`, then make these calls to remote tools (MCP servers, A2A agents,
    /// the web tools) and commit their results (`run.rs` and `remote.rs` do the IO).
    CallRemote {
        /// Events to commit first (a status change, synthetic results of denied calls).
        before: Vec<NewEvent>,
        /// The calls, in the order the model made them.
        calls: Vec<RemoteCall>,
    },
    /// Commit `before`, then dispatch these thread calls to child threads in one
    /// handoff (`run/threads.rs`): spawn or message each, or refuse it.
    CallThreads {
        /// Events to commit first (a status change, synthetic results of refused calls).
        before: Vec<NewEvent>,
        /// The calls, in the order the model made them.
        calls: Vec<ThreadCall>,
    },
    /// Dispatched thread calls wait for their children's replies: park (the session
    /// stays `running`; a reply wakes the run), or idle `requires_action` when every
    /// awaited child waits on the client (`run/threads.rs`).
    AwaitThreads {
        /// Events to commit first (a status change, a closed span).
        events: Vec<NewEvent>,
        /// The calls waited on, in the order the model made them.
        waiting: Vec<Waiting>,
    },
    /// Nothing to do: park the run without committing.
    Park,
}

impl Decision {
    /// An idle that ends the turn normally (`end_turn`).
    pub fn ends_turn(&self) -> bool {
        match self {
            Decision::Idle { events } => {
                events.last().is_some_and(|e| StopReason::of(&e.body) == Some(StopReason::EndTurn))
            }
            _ => false,
        }
    }
}

/// A committed remote tool call that has no result yet and may run.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteCall {
    /// The id of its `agent.mcp_tool_use` / `agent.tool_use` event.
    pub id: String,
    /// Which remote tool.
    pub target: RemoteTarget,
    /// The model's input.
    pub input: Value,
    /// Whether this decision is what releases the call (`before` starts the session
    /// running after a confirmation). A call released earlier may have been started by
    /// an attempt that died: see ADR 0009 for how `run.rs` treats it.
    pub released_now: bool,
}

impl RemoteCall {
    /// The type of the call's event.
    pub fn kind(&self) -> EventType {
        match self.target {
            RemoteTarget::Mcp { .. } => EventType::AgentMcpToolUse,
            RemoteTarget::A2a { .. } | RemoteTarget::Memory | RemoteTarget::Web(_) | RemoteTarget::Advisor => {
                EventType::AgentToolUse
            }
        }
    }
}

/// Where a remote call goes.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteTarget {
    /// A tool of the agent's MCP server `server`.
    Mcp {
        /// The `mcp_servers` entry's name.
        server: String,
        /// The MCP tool's name.
        tool: String,
    },
    /// An `a2a_agent` tool of the agent (named `tool`).
    A2a {
        /// The tool's name in the agent's `tools`.
        tool: String,
    },
    /// The dream agent's `memory` tool (its session's dream stores and transcripts).
    Memory,
    /// `web_fetch` or `web_search` of the built-in toolset (`web/`).
    Web(agentd_schema::web::WebTool),
    /// `consult_advisor` of the primary thread (`run/advisor.rs`).
    Advisor,
}

/// The result of a remote call the user interrupted before it was made (the live
/// attempt knows it did not make it).
pub const NOT_MADE_INTERRUPTED: &str = "not made: the user interrupted the turn";

/// The result of a released remote call that history shows interrupted but not
/// answered: the attempt that released it may have died while making it, so the
/// decision cannot say it was not made.
pub const INTERRUPTED_UNANSWERED: &str = "not completed: the user interrupted the turn; if the worker running this call stopped, it may or may not have taken effect";

/// Decides the next step of a thread from its committed history.
pub fn decide(agent: &Value, history: &[Event]) -> Decision {
    decide_on(agent, history, &Folded::of(history))
}

/// [`decide`] with the history's fold kept up to date in `folded` (only the events
/// appended since its last update are folded).
pub fn decide_folded(agent: &Value, history: &[Event], folded: &mut Folded) -> Decision {
    folded.update(history);
    decide_on(agent, history, folded)
}

/// [`decide`] given `folded`, the fold of `history`.
fn decide_on(agent: &Value, history: &[Event], folded: &Folded) -> Decision {
    let thread = folded.thread();
    let id = thread.thread_id.as_str();
    let mut before = Vec::new();
    // Close the span of a request whose worker died, so the history reads cleanly; the
    // input it had is still pending.
    if let Some(start) = thread.orphaned_request() {
        before.push(NewEvent::model_request_abandoned(id, history[start].event_id()));
    }
    let routed = route_calls(agent, history, thread);
    before.extend(routed.refused);
    if thread.given_up_unended() {
        before.push(NewEvent::status_idle(id, StopReason::RetriesExhausted));
        return Decision::Idle { events: before };
    }
    // Remote calls run here and now, before the turn waits on anything else.
    if !routed.remote.is_empty() {
        let mut calls = routed.remote;
        // A confirmation that released a call resumes an idle session; that commit is
        // also the durable mark that the call is being started.
        if resume(thread, &mut before) {
            calls.iter_mut().for_each(|call| call.released_now = true);
        }
        return Decision::CallRemote { before, calls };
    }
    // Thread calls are dispatched next, before the turn waits on the client: a response
    // mixing them with custom tools starts its children first.
    if !routed.threads.is_empty() {
        resume(thread, &mut before);
        return Decision::CallThreads { before, calls: routed.threads };
    }
    if !routed.blocking.is_empty() {
        let stop = StopReason::RequiresAction { event_ids: routed.blocking };
        if thread.idled_with(&stop) && before.is_empty() {
            return Decision::Park;
        }
        before.push(NewEvent::status_idle(id, stop));
        return Decision::Idle { events: before };
    }
    if routed.with_hands {
        resume(thread, &mut before);
        return Decision::AwaitHands { events: before };
    }
    // Replies are awaited unless the user interrupted the turn: then it ends (and
    // `run.rs` closes the waits with error results).
    if !routed.waiting.is_empty() && !thread.interrupted() {
        resume(thread, &mut before);
        return Decision::AwaitThreads { events: before, waiting: routed.waiting };
    }
    let synthetic_results = before.iter().any(|e| e.event_type().is_some_and(EventType::is_tool_answer));
    if (synthetic_results || thread.input_pending()) && !thread.interrupted() {
        resume(thread, &mut before);
        let request = model_request(agent, history, folded.conversation(), &before);
        return Decision::CallModel { before, request };
    }
    if ends_turn(thread) {
        before.push(NewEvent::status_idle(id, StopReason::EndTurn));
        return Decision::Idle { events: before };
    }
    Decision::Park
}

/// The dispatched thread calls of a primary thread's history still waiting for a reply.
pub fn awaiting(history: &[Event]) -> Vec<Waiting> {
    let thread = Thread::of(history);
    let waiting = thread.calls.open().iter().filter_map(|call| {
        let thread_id = thread.dispatched.get(&call.id)?;
        Some(Waiting { call_id: call.id.clone(), thread_id: thread_id.clone() })
    });
    waiting.collect()
}

/// Whether the thread already idled with `stop` and no input came since.
pub fn idled_with(history: &[Event], stop: &StopReason) -> bool {
    Thread::of(history).idled_with(stop)
}

/// Marks an idle session running again first; whether it was idle.
fn resume(thread: &Thread, before: &mut Vec<NewEvent>) -> bool {
    if thread.running {
        return false;
    }
    before.insert(0, NewEvent::status_running(&thread.thread_id));
    true
}

/// A turn that is running, or whose last request (or an interrupt) was not followed
/// by an idle, ends now.
fn ends_turn(thread: &Thread) -> bool {
    thread.running || (!thread.idle_after_last_step() && (thread.last_model_end.is_some() || thread.interrupted()))
}

/// The open calls sorted by who answers them next.
#[derive(Default)]
struct Routed {
    /// Waiting on the client (custom tools, confirmations): the session idles.
    blocking: Vec<String>,
    /// Out with the environment's hands.
    with_hands: bool,
    /// Made by the worker now.
    remote: Vec<RemoteCall>,
    /// Thread calls to dispatch now.
    threads: Vec<ThreadCall>,
    /// Dispatched thread calls waiting for a reply.
    waiting: Vec<Waiting>,
    /// Calls that will not run, with their synthetic error results.
    refused: Vec<NewEvent>,
}

/// Where one open call goes.
enum Route {
    Blocking,
    Hands,
    Remote(RemoteTarget),
    Thread(ThreadTool),
    Waiting(String),
    Refused(String),
}

fn route_calls(agent: &Value, history: &[Event], thread: &Thread) -> Routed {
    let mut routed = Routed::default();
    for call in thread.calls.open() {
        match route(agent, history, thread, call) {
            Route::Blocking => routed.blocking.push(call.id.clone()),
            Route::Hands => routed.with_hands = true,
            Route::Remote(target) => routed.remote.push(RemoteCall {
                id: call.id.clone(),
                target,
                input: call.input.clone(),
                released_now: false,
            }),
            Route::Thread(tool) => {
                routed.threads.push(ThreadCall { id: call.id.clone(), tool, input: call.input.clone() })
            }
            Route::Waiting(thread_id) => routed.waiting.push(Waiting { call_id: call.id.clone(), thread_id }),
            Route::Refused(why) => {
                routed.refused.push(NewEvent::synthetic_result(&thread.thread_id, call.kind, &call.id, &why));
            }
        }
    }
    routed
}

fn route(agent: &Value, history: &[Event], thread: &Thread, call: &OpenCall) -> Route {
    if call.kind == EventType::AgentCustomToolUse {
        return Route::Blocking;
    }
    let confirmation = thread.calls.confirmation(&call.id);
    if call.permission.as_deref() == Some("ask") {
        match confirmation {
            None => return Route::Blocking,
            Some(denied) if !denied.allowed => {
                let why = denied.deny_message.as_deref().unwrap_or("The user denied this tool call.");
                return Route::Refused(why.to_owned());
            }
            Some(_) => {}
        }
    }
    let name = call.name.as_str();
    let class = classify(agent, name);
    let a2a = matches!(class, ToolClass::A2a { .. });
    let memory = class == ToolClass::Memory;
    let advisor = class == ToolClass::Advisor;
    // A thread call waits for its child once dispatched; until then it is made like a
    // remote call (an interrupt since it was made means it is not).
    if let Some(thread_id) = thread.dispatched.get(&call.id) {
        return Route::Waiting(thread_id.clone());
    }
    if let ToolClass::Thread(tool) = class {
        if thread.last_interrupt.is_some_and(|interrupt| interrupt > call.at) {
            return Route::Refused(NOT_MADE_INTERRUPTED.to_owned());
        }
        return Route::Thread(tool);
    }
    let web = match class {
        ToolClass::Web { tool, .. } if call.kind == EventType::AgentToolUse => Some(tool),
        _ => None,
    };
    // A remote call is made by the worker after this decision: a user interrupt
    // committed since it was released (its use, or the confirmation allowing it) means
    // it is not made.
    let released = confirmation.map_or(call.at, |c| c.at).max(call.at);
    let remote = call.kind == EventType::AgentMcpToolUse || a2a || memory || advisor || web.is_some();
    if remote && thread.last_interrupt.is_some_and(|interrupt| interrupt > released) {
        return Route::Refused(INTERRUPTED_UNANSWERED.to_owned());
    }
    match call.kind {
        EventType::AgentMcpToolUse => match &call.mcp_server_name {
            Some(server) => Route::Remote(RemoteTarget::Mcp { server: server.clone(), tool: name.to_owned() }),
            None => Route::Refused("the call names no MCP server".to_owned()),
        },
        _ if a2a => Route::Remote(RemoteTarget::A2a { tool: name.to_owned() }),
        _ if memory => Route::Remote(RemoteTarget::Memory),
        _ if advisor => Route::Remote(RemoteTarget::Advisor),
        // A URL to fetch must have appeared in the conversation before the call.
        _ if let Some(tool) = web => match tool {
            WebTool::Fetch if let Some(why) = crate::web::refuse_fetch(agent, history, call.at, &call.input) => {
                Route::Refused(why)
            }
            _ => Route::Remote(RemoteTarget::Web(tool)),
        },
        // Hands run only the sandbox's tools; an A2A tool removed from the agent since
        // its call was made has no one to run it.
        _ if !is_builtin(name) => Route::Refused(format!("tool {name} is no longer available to this agent")),
        _ => Route::Hands,
    }
}

/// The model request for the conversation so far (`conversation`, the fold of
/// `history`), with the synthetic results this step commits first.
fn model_request(agent: &Value, history: &[Event], conversation: &Conversation, before: &[NewEvent]) -> ModelRequest {
    let (system, messages) = conversation.build(agent, history);
    let mut request = ModelRequest {
        model: agent["model"]["id"].as_str().unwrap_or_default().to_owned(),
        system,
        messages,
        tools: tool_specs(agent),
        max_tokens: 8192,
        tool_choice: None,
    };
    for event in before {
        let Some(kind) = event.event_type() else { continue };
        if let Some(block) = conversation::tool_result_block(kind, &event.body, true) {
            Arc::make_mut(&mut request.messages).push(Message { role: Role::User, content: vec![block] });
        }
    }
    request
}
