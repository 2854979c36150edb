//! What `decide` needs to know about a thread, folded once over its committed history:
//! the open tool calls and where the last input, interrupt, request and status are.
//! Positions are indexes into the history.

use std::collections::HashMap;

use agentd_schema::events::{ActiveOutcome, OutcomeVerdict, ToolCalls, active_outcome_among, is_outcome_kind};
use agentd_schema::{EventType, RetryStatus, StopReason};

use super::conversation::Conversation;
use crate::event::Event;
use crate::threads::{CallRole, thread_call};

/// The fold of a thread's committed history.
#[derive(Debug, Default, Clone)]
pub struct Thread {
    /// The thread the history belongs to.
    pub thread_id: String,
    /// Tool calls and their answers and confirmations.
    pub calls: ToolCalls,
    /// The last `span.model_request_start`.
    pub last_model_start: Option<usize>,
    /// The start of the last request that also ended well: a request cut off by a crash
    /// or failed consumed nothing, and its input is still pending.
    pub last_completed_start: Option<usize>,
    /// The last `span.model_request_end`.
    pub last_model_end: Option<usize>,
    /// The last input: the client's, or a tool result.
    pub last_input: Option<usize>,
    /// The last input from the client: what an interrupt is measured against (results
    /// the worker records for its own calls do not resume an interrupted turn).
    pub last_client_input: Option<usize>,
    /// The last `user.interrupt`.
    pub last_interrupt: Option<usize>,
    /// The last `session.status_idle` and its stop reason.
    pub last_idle: Option<(usize, Option<StopReason>)>,
    /// The last `session.error` that gave up (retries, hands or a remote server exhausted).
    pub last_given_up: Option<usize>,
    /// Whether the last status event is `session.status_running` (or, on a child
    /// thread, `session.thread_status_running`).
    pub running: bool,
    /// The thread calls dispatched to a child thread (their `agent.thread_message_sent`
    /// is committed): call id → the child thread.
    pub dispatched: HashMap<String, String>,
}

impl Thread {
    /// Folds `history`.
    pub fn of(history: &[Event]) -> Self {
        let mut thread = Thread::default();
        thread.extend(history, 0);
        thread
    }

    /// Folds `history[from..]` into a fold of `history[..from]` (a fold is a left fold:
    /// extending it equals folding the whole history again).
    pub fn extend(&mut self, history: &[Event], from: usize) {
        if from == 0
            && let Some(first) = history.first()
        {
            first.thread_id().clone_into(&mut self.thread_id);
        }
        for (at, event) in history.iter().enumerate().skip(from) {
            self.fold(at, event);
        }
    }

    fn fold(&mut self, at: usize, event: &Event) {
        let event = event.stored();
        self.calls.fold(at, &event);
        let Some(kind) = event.event_type() else { return };
        // A child thread's request from its parent is its client's input; a reply to a
        // call is not input (the call's `agent.tool_result` is).
        let request = kind == EventType::AgentThreadMessageReceived
            && thread_call(&event.body).is_some_and(|(_, role)| role == CallRole::Request);
        let client_input = (kind.is_client_input() && kind != EventType::UserInterrupt) || request;
        if client_input {
            self.last_client_input = Some(at);
        }
        if client_input || kind.is_tool_answer() {
            self.last_input = Some(at);
        }
        match kind {
            EventType::UserInterrupt => self.last_interrupt = Some(at),
            EventType::SpanModelRequestStart => self.last_model_start = Some(at),
            EventType::SpanModelRequestEnd => {
                self.last_model_end = Some(at);
                // A request that failed (a provider error, or a cut-off request closed
                // after a crash) consumed nothing: its input is still pending.
                if event.body["is_error"] != true {
                    self.last_completed_start = self.last_model_start;
                }
            }
            // A child thread's statuses are `session.thread_status_*` (`run.rs` rewrites them).
            EventType::SessionStatusIdle | EventType::SessionThreadStatusIdle => {
                self.last_idle = Some((at, StopReason::of(&event.body)));
                self.running = false;
            }
            EventType::SessionStatusRunning | EventType::SessionThreadStatusRunning => self.running = true,
            EventType::AgentThreadMessageSent => {
                if let Some((call, CallRole::Request)) = thread_call(&event.body) {
                    let to = event.body["to_session_thread_id"].as_str().unwrap_or_default();
                    self.dispatched.insert(call.to_owned(), to.to_owned());
                }
            }
            // The grader's feedback on an outcome is input for the agent's next request
            // (not the client's: it does not resume an interrupted turn).
            EventType::SpanOutcomeEvaluationEnd
                if event.body["result"]
                    .as_str()
                    .and_then(OutcomeVerdict::parse)
                    .is_some_and(OutcomeVerdict::revises) =>
            {
                self.last_input = Some(at);
            }
            EventType::SessionError if RetryStatus::of(&event.body) == Some(RetryStatus::Exhausted) => {
                self.last_given_up = Some(at);
            }
            _ => {}
        }
    }

    /// A request whose start was committed but whose end never was (its worker died).
    pub fn orphaned_request(&self) -> Option<usize> {
        self.last_model_start.filter(|start| self.last_model_end.is_none_or(|end| end < *start))
    }

    /// An interrupt came after the client's last input.
    pub fn interrupted(&self) -> bool {
        self.last_interrupt.is_some_and(|interrupt| self.last_client_input.is_none_or(|input| interrupt > input))
    }

    /// The turn was given up on (see `hands::give_up`, `remote.rs`) and has not ended
    /// since, nor has new input arrived.
    pub fn given_up_unended(&self) -> bool {
        self.last_given_up.is_some_and(|error| {
            self.last_idle.as_ref().is_none_or(|(i, _)| *i < error) && self.last_input.is_none_or(|input| input < error)
        })
    }

    /// Input a model request has not consumed: input is consumed by a request only if it
    /// was committed before that request started, and a turn that was given up on
    /// consumed the input before it too.
    pub fn input_pending(&self) -> bool {
        let consumed_up_to = self.last_completed_start.max(self.last_given_up);
        self.last_input.is_some_and(|input| consumed_up_to.is_none_or(|start| input > start))
    }

    /// The session already idled with `stop` and no input came since.
    pub fn idled_with(&self, stop: &StopReason) -> bool {
        self.last_idle
            .as_ref()
            .is_some_and(|(i, reason)| reason.as_ref() == Some(stop) && self.last_input.is_none_or(|input| input < *i))
    }

    /// The last idle came after the last model request and the last interrupt.
    pub fn idle_after_last_step(&self) -> bool {
        self.last_idle.as_ref().is_some_and(|(i, _)| {
            self.last_model_end.is_none_or(|end| *i > end) && self.last_interrupt.is_none_or(|interrupt| *i > interrupt)
        })
    }
}

/// A thread's fold kept in step with its history as the history grows, so a decision
/// folds only the events appended since the last one (its cost no longer grows with
/// the length of the thread): the decision's state, and the model conversation.
#[derive(Debug, Default, Clone)]
pub struct Folded {
    thread: Thread,
    conversation: Conversation,
    /// How many events of the history are folded.
    len: usize,
    /// The id of the last one folded: a history that does not have it at that position
    /// is not the one folded, and is folded again from the start. (The events before it
    /// are then the same too: a commit's events are consecutive in the history.)
    last_event_id: String,
    /// The positions of the outcome events among those folded, so the active outcome
    /// is found without scanning the history ([`Folded::active_outcome`]).
    outcome_events: Vec<usize>,
}

impl Folded {
    /// The fold of `history`.
    pub fn of(history: &[Event]) -> Self {
        let mut folded = Folded::default();
        folded.update(history);
        folded
    }

    /// Brings the fold up to `history`, which normally extends what was folded.
    pub fn update(&mut self, history: &[Event]) {
        let extends = history.len() >= self.len
            && (self.len == 0 || history.get(self.len - 1).is_some_and(|event| event.event_id() == self.last_event_id));
        if !extends {
            *self = Folded::default();
        }
        if history.len() == self.len {
            return;
        }
        self.thread.extend(history, self.len);
        self.conversation.extend(history, self.len);
        let new = history.iter().enumerate().skip(self.len);
        self.outcome_events.extend(new.filter(|(_, event)| is_outcome_kind(event.kind())).map(|(at, _)| at));
        self.len = history.len();
        if let Some(last) = history.last() {
            last.event_id().clone_into(&mut self.last_event_id);
        }
    }

    /// The fold, of the history last given to [`Folded::update`].
    pub fn thread(&self) -> &Thread {
        &self.thread
    }

    /// The conversation, of the history last given to [`Folded::update`].
    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    /// The outcome `history` is working on, if any
    /// ([`agentd_schema::events::active_outcome`]): the fold is brought up to `history`
    /// first, then only its outcome events are read.
    pub fn active_outcome(&mut self, history: &[Event]) -> Option<ActiveOutcome> {
        self.update(history);
        let outcome_events: Vec<_> = self.outcome_events.iter().map(|&at| (at, history[at].stored())).collect();
        active_outcome_among(outcome_events.iter().map(|(at, event)| (*at, event.as_ref())))
    }

    /// The estimated heap bytes the fold holds beyond the history (its conversation,
    /// the outcome events' positions).
    pub fn heap_bytes(&self) -> usize {
        self.conversation.heap_bytes() + self.outcome_events.capacity() * std::mem::size_of::<usize>()
    }

    /// How many events are folded.
    pub fn folded_events(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use agentd_schema::events::{ModelUsage, active_outcome};
    use agentd_schema::{NewEvent, StoredEvent};
    use serde_json::json;

    use super::*;

    /// A thread that defines two outcomes and grades them between plain turns.
    fn thread() -> Vec<StoredEvent> {
        let define = |id: &str| NewEvent {
            body: json!({"type": "user.define_outcome", "outcome_id": id, "description": "a poem",
                         "rubric": {"type": "text", "content": "rhymes"}, "max_iterations": 3}),
            ..NewEvent::user_message("sesn_1", "")
        };
        let end = |id: &str, iteration, verdict| {
            NewEvent::outcome_evaluation_end("sesn_1", id, iteration, verdict, "why", ModelUsage::default())
        };
        let events = [
            NewEvent::user_message("sesn_1", "hello"),
            define("outc_a"),
            NewEvent::agent_message("sesn_1", "a first draft"),
            NewEvent::outcome_evaluation_start("sesn_1", "outc_a", 0),
            end("outc_a", 0, OutcomeVerdict::NeedsRevision),
            NewEvent::agent_message("sesn_1", "a second draft"),
            define("outc_b"),
            NewEvent::outcome_evaluation_start("sesn_1", "outc_a", 1),
            end("outc_a", 1, OutcomeVerdict::Satisfied),
            NewEvent::user_message("sesn_1", "and another"),
            NewEvent::outcome_evaluation_start("sesn_1", "outc_b", 0),
            end("outc_b", 0, OutcomeVerdict::Failed),
            NewEvent::agent_message("sesn_1", "done"),
        ];
        events
            .into_iter()
            .zip(1..)
            .map(|(event, seq)| StoredEvent {
                session_id: "sesn_1".into(),
                seq,
                event_id: format!("sevt_{seq}"),
                thread_id: "sesn_1".into(),
                kind: event.body["type"].as_str().unwrap().to_owned(),
                body: event.body,
                processed_at_ms: 0,
            })
            .collect()
    }

    #[test]
    fn the_folds_active_outcome_is_the_one_a_scan_of_the_history_finds() {
        let stored = thread();
        let events = crate::event::events(stored.clone());
        let mut folded = Folded::default();
        let mut seen = Vec::new();
        // Grown one event at a time, as a worker's history grows.
        for end in 0..=events.len() {
            let found = folded.active_outcome(&events[..end]);
            assert_eq!(found, active_outcome(&stored[..end]), "after {end} events");
            seen.push(found.map(|outcome| (outcome.outcome_id, outcome.iteration, outcome.started)));
        }
        // The history passes through each state: none, then `outc_a`'s cycles, then `outc_b`.
        for state in [None, Some(("outc_a".into(), 0, true)), Some(("outc_a".into(), 1, false))] {
            assert!(seen.contains(&state), "{state:?} in {seen:?}");
        }
        assert!(seen.contains(&Some(("outc_b".into(), 0, false))));
        assert_eq!(seen.last(), Some(&None), "both outcomes are done");

        // Another history (an outcome's end left out): folded again, not extended.
        let mut other = stored.clone();
        other.remove(4);
        let other_events = crate::event::events(other.clone());
        assert_eq!(folded.active_outcome(&other_events), active_outcome(&other));
        assert_eq!(folded.active_outcome(&other_events[..6]).map(|o| o.iteration), Some(0));

        // Packed, as the history cache keeps them: the same outcomes, from their text.
        let mut packed = events.clone();
        packed[..8].iter_mut().for_each(crate::event::Event::pack);
        let mut folded = Folded::default();
        for end in 0..=packed.len() {
            assert_eq!(folded.active_outcome(&packed[..end]), active_outcome(&stored[..end]), "after {end} packed");
        }
    }
}
