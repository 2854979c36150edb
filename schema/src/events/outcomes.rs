//! Outcomes (docs/api/outcomes.md): a `user.define_outcome` names what the agent should
//! produce and the rubric it is graded against; each time the agent's turn ends, the
//! worker grades the result and commits one evaluation cycle, `span.outcome_evaluation_start`,
//! a `span.outcome_evaluation_ongoing` heartbeat every interval the grader takes, then
//! `span.outcome_evaluation_end`. Here: the verdicts, the span constructors (with ids
//! derived from the outcome, the iteration and the heartbeat's number, so a retried
//! attempt finds what an earlier one committed), the fold that says which outcome is being
//! worked on, and the session's `outcome_evaluations` projection the store keeps from the
//! same events.

use serde_json::{Value, json};

use super::body::ModelUsage;
use super::kind::EventType;
use crate::store::{NewEvent, StoredEvent};

/// `max_iterations` when the outcome does not say.
pub const DEFAULT_MAX_ITERATIONS: i64 = 3;

/// The verdict of one evaluation cycle (`span.outcome_evaluation_end.result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeVerdict {
    /// The rubric is met: the outcome is done.
    Satisfied,
    /// Not met; the grader's explanation goes back to the agent for another cycle.
    NeedsRevision,
    /// Not met at the last cycle `max_iterations` allows: the agent is told, and gets one
    /// final turn, which is not graded.
    MaxIterationsReached,
    /// The evaluation could not be made (the grader failed, the rubric file could not be
    /// read, the budget is reached).
    Failed,
    /// The user interrupted the turn or the evaluation.
    Interrupted,
}

impl OutcomeVerdict {
    /// The wire value.
    pub const fn wire(self) -> &'static str {
        match self {
            OutcomeVerdict::Satisfied => "satisfied",
            OutcomeVerdict::NeedsRevision => "needs_revision",
            OutcomeVerdict::MaxIterationsReached => "max_iterations_reached",
            OutcomeVerdict::Failed => "failed",
            OutcomeVerdict::Interrupted => "interrupted",
        }
    }

    /// Parses a wire value.
    pub fn parse(text: &str) -> Option<Self> {
        [
            OutcomeVerdict::Satisfied,
            OutcomeVerdict::NeedsRevision,
            OutcomeVerdict::MaxIterationsReached,
            OutcomeVerdict::Failed,
            OutcomeVerdict::Interrupted,
        ]
        .into_iter()
        .find(|verdict| verdict.wire() == text)
    }

    /// No further evaluation cycle follows.
    pub const fn terminal(self) -> bool {
        !matches!(self, OutcomeVerdict::NeedsRevision)
    }

    /// The grader's explanation goes back to the agent as input for another turn.
    pub const fn revises(self) -> bool {
        matches!(self, OutcomeVerdict::NeedsRevision | OutcomeVerdict::MaxIterationsReached)
    }
}

/// The id of the evaluation span event `kind` (`start`, `end`, or `ongoing` with the
/// heartbeat's number) of `outcome_id`'s cycle `iteration`: derived, so a retried attempt
/// commits the same event, never a second one.
fn span_id(kind: &str, outcome_id: &str, iteration: i64) -> String {
    let suffix = outcome_id.split_once('_').map_or(outcome_id, |(_, suffix)| suffix);
    format!("sevt_outc{kind}_{suffix}_{iteration}")
}

impl NewEvent {
    /// `span.outcome_evaluation_start` of `outcome_id`'s cycle `iteration`.
    pub fn outcome_evaluation_start(thread_id: &str, outcome_id: &str, iteration: i64) -> Self {
        NewEvent {
            event_id: span_id("start", outcome_id, iteration),
            thread_id: thread_id.to_owned(),
            kind: EventType::SpanOutcomeEvaluationStart.to_string(),
            body: json!({
                "type": EventType::SpanOutcomeEvaluationStart.as_str(),
                "outcome_id": outcome_id,
                "iteration": iteration,
            }),
        }
    }

    /// `span.outcome_evaluation_ongoing` number `beat` (1, 2, …) of `outcome_id`'s cycle
    /// `iteration`: a heartbeat while the grader is asked. A retried attempt numbers its
    /// heartbeats on from those committed before it ([`ActiveOutcome::last_heartbeat`]).
    pub fn outcome_evaluation_ongoing(thread_id: &str, outcome_id: &str, iteration: i64, beat: i64) -> Self {
        NewEvent {
            event_id: format!("{}_{beat}", span_id("ongoing", outcome_id, iteration)),
            thread_id: thread_id.to_owned(),
            kind: EventType::SpanOutcomeEvaluationOngoing.to_string(),
            body: json!({
                "type": EventType::SpanOutcomeEvaluationOngoing.as_str(),
                "outcome_id": outcome_id,
                "iteration": iteration,
            }),
        }
    }

    /// `span.outcome_evaluation_end` of `outcome_id`'s cycle `iteration`, with the
    /// grader's usage over the cycle.
    pub fn outcome_evaluation_end(
        thread_id: &str,
        outcome_id: &str,
        iteration: i64,
        verdict: OutcomeVerdict,
        explanation: &str,
        usage: ModelUsage,
    ) -> Self {
        NewEvent {
            event_id: span_id("end", outcome_id, iteration),
            thread_id: thread_id.to_owned(),
            kind: EventType::SpanOutcomeEvaluationEnd.to_string(),
            body: json!({
                "type": EventType::SpanOutcomeEvaluationEnd.as_str(),
                "outcome_id": outcome_id,
                "iteration": iteration,
                "outcome_evaluation_start_id": span_id("start", outcome_id, iteration),
                "result": verdict.wire(),
                "explanation": explanation,
                "usage": {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "cache_read_input_tokens": usage.cache_read_input_tokens,
                    "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                },
            }),
        }
    }
}

/// The outcome a thread is working on: the oldest one defined that has no terminal
/// verdict, and the cycle it is on.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveOutcome {
    /// `outc_…`
    pub outcome_id: String,
    /// The `user.define_outcome` body (description, rubric, max_iterations).
    pub definition: Value,
    /// The cycle to evaluate next (0-indexed).
    pub iteration: i64,
    /// Cycle `iteration`'s start is committed (an earlier attempt started it).
    pub started: bool,
    /// The highest number of a heartbeat of cycle `iteration` committed so far (by an
    /// earlier attempt, when it is started; 0: none): the next one is number
    /// `last_heartbeat + 1`. The highest, not a count, so a number skipped by a heartbeat
    /// that could not be committed is never used twice.
    pub last_heartbeat: i64,
    /// The index in the history of its `user.define_outcome`.
    pub defined_at: usize,
}

impl ActiveOutcome {
    /// The outcome's `max_iterations` (its default when it says none).
    pub fn max_iterations(&self) -> i64 {
        self.definition["max_iterations"].as_i64().unwrap_or(DEFAULT_MAX_ITERATIONS)
    }
}

/// The kinds of event [`active_outcome`] reads.
const OUTCOME_KINDS: [EventType; 4] = [
    EventType::UserDefineOutcome,
    EventType::SpanOutcomeEvaluationStart,
    EventType::SpanOutcomeEvaluationOngoing,
    EventType::SpanOutcomeEvaluationEnd,
];

/// The outcome `history` (one thread's) is working on, if any.
pub fn active_outcome(history: &[StoredEvent]) -> Option<ActiveOutcome> {
    active_outcome_among(history.iter().enumerate())
}

/// Whether [`active_outcome`] reads events of type `kind` (as stored): a fold that keeps
/// the positions of these finds the active outcome without scanning the whole history
/// ([`active_outcome_among`]).
pub fn is_outcome_kind(kind: &str) -> bool {
    OUTCOME_KINDS.iter().any(|outcome| outcome.as_str() == kind)
}

fn outcome_kind(event: &StoredEvent) -> Option<EventType> {
    OUTCOME_KINDS.iter().copied().find(|kind| event.is(*kind))
}

/// [`active_outcome`] of a history given as `(position, event)` in order, of which
/// only the outcome events ([`is_outcome_kind`]) need be given.
pub fn active_outcome_among<'a>(history: impl IntoIterator<Item = (usize, &'a StoredEvent)>) -> Option<ActiveOutcome> {
    let mut outcomes: Vec<ActiveOutcome> = Vec::new();
    let mut done: Vec<String> = Vec::new();
    for (at, event) in history {
        // Most of a history is not about outcomes: its kind decides before its body is read.
        let Some(kind) = outcome_kind(event) else { continue };
        let outcome_id = event.body["outcome_id"].as_str().unwrap_or_default();
        match kind {
            EventType::UserDefineOutcome if !outcome_id.is_empty() => outcomes.push(ActiveOutcome {
                outcome_id: outcome_id.to_owned(),
                definition: event.body.clone(),
                iteration: 0,
                started: false,
                last_heartbeat: 0,
                defined_at: at,
            }),
            EventType::SpanOutcomeEvaluationStart => {
                if let Some(outcome) = outcomes.iter_mut().find(|o| o.outcome_id == outcome_id) {
                    outcome.started = true;
                }
            }
            EventType::SpanOutcomeEvaluationOngoing => {
                if let Some(outcome) = outcomes.iter_mut().find(|o| o.outcome_id == outcome_id)
                    && event.body["iteration"].as_i64() == Some(outcome.iteration)
                {
                    let number = event.event_id.rsplit_once('_').and_then(|(_, n)| n.parse().ok());
                    outcome.last_heartbeat = outcome.last_heartbeat.max(number.unwrap_or(outcome.last_heartbeat + 1));
                }
            }
            EventType::SpanOutcomeEvaluationEnd => {
                let verdict = event.body["result"].as_str().and_then(OutcomeVerdict::parse);
                if verdict.is_none_or(OutcomeVerdict::terminal) {
                    done.push(outcome_id.to_owned());
                } else if let Some(outcome) = outcomes.iter_mut().find(|o| o.outcome_id == outcome_id) {
                    outcome.iteration = event.body["iteration"].as_i64().unwrap_or(outcome.iteration) + 1;
                    outcome.started = false;
                    outcome.last_heartbeat = 0;
                }
            }
            _ => {}
        }
    }
    outcomes.into_iter().find(|outcome| !done.contains(&outcome.outcome_id))
}

/// Applies `event` to a session's `outcome_evaluations` (an array); whether it changed.
/// A define adds a `pending` entry (once per outcome); the agent beginning work makes it
/// `running` ([`begin_work`]); a cycle's start makes it `evaluating` at that iteration;
/// its end records the verdict and explanation — a `needs_revision` is `running` at the
/// next iteration, a terminal verdict is the result with `completed_at`.
pub fn project(evaluations: &mut Value, event: &StoredEvent, processed_at: &str) -> bool {
    let Some(list) = evaluations.as_array_mut() else { return false };
    let body = &event.body;
    let outcome_id = body["outcome_id"].as_str().unwrap_or_default();
    if outcome_id.is_empty() {
        return false;
    }
    let entry = list.iter().position(|e| e["outcome_id"] == outcome_id);
    match (event.event_type(), entry) {
        (Some(EventType::UserDefineOutcome), None) => {
            list.push(json!({
                "type": "outcome_evaluation",
                "outcome_id": outcome_id,
                "description": body["description"],
                "iteration": 0,
                "result": "pending",
                "explanation": null,
                "completed_at": null,
            }));
            true
        }
        (Some(EventType::SpanOutcomeEvaluationStart), Some(at)) => {
            list[at]["result"] = json!("evaluating");
            list[at]["iteration"] = body["iteration"].clone();
            true
        }
        (Some(EventType::SpanOutcomeEvaluationEnd), Some(at)) => {
            let verdict = body["result"].as_str().and_then(OutcomeVerdict::parse).unwrap_or(OutcomeVerdict::Failed);
            let iteration = body["iteration"].as_i64().unwrap_or(0);
            let entry = &mut list[at];
            entry["explanation"] = body["explanation"].clone();
            if verdict.terminal() {
                entry["result"] = json!(verdict.wire());
                entry["iteration"] = json!(iteration);
                entry["completed_at"] = json!(processed_at);
            } else {
                entry["result"] = json!("running");
                entry["iteration"] = json!(iteration + 1);
            }
            true
        }
        _ => false,
    }
}

/// Whether the agent begins work on the outcomes waiting for it with `event`: a turn
/// starts on the primary thread (`session.status_running`; outcomes are defined there),
/// or an outcome is defined while the session runs (`running`: the agent reads it at its
/// next request, in the turn under way). Then every `pending` entry of
/// `outcome_evaluations` becomes `running` at its iteration; whether one did.
pub fn begin_work(evaluations: &mut Value, event: &StoredEvent, running: bool) -> bool {
    let begins = match event.event_type() {
        Some(EventType::SessionStatusRunning) => event.thread_id == event.session_id,
        Some(EventType::UserDefineOutcome) => running,
        _ => false,
    };
    let Some(list) = evaluations.as_array_mut().filter(|_| begins) else { return false };
    let mut changed = false;
    for entry in list.iter_mut().filter(|entry| entry["result"] == "pending") {
        entry["result"] = json!("running");
        changed = true;
    }
    changed
}

/// The text by which a stored session body shows an entry still `pending` (the store
/// projects a turn's start only for a body that has one; a false match costs a read,
/// never a missed entry).
pub const PENDING_MARK: &str = r#""result":"pending""#;

/// Whether an event of `kind` changes `outcome_evaluations` (the store reads the session's
/// body in an append only when one is among its events, or the append starts a turn of a
/// session whose body has a `pending` entry).
pub fn projected(kind: &str) -> bool {
    [EventType::UserDefineOutcome, EventType::SpanOutcomeEvaluationStart, EventType::SpanOutcomeEvaluationEnd]
        .iter()
        .any(|k| k.as_str() == kind)
}

/// Makes each `user.define_outcome` among `events` an outcome (docs/api/outcomes.md): its
/// `outcome_id` (`outc_…`) is derived from its event's id, so an idempotent repeat of the
/// request names the same outcome, and `max_iterations` is filled in when absent. The
/// store adds it to the session's `outcome_evaluations` in the same commit; the worker
/// grades it when the agent's turn ends.
pub fn define_outcomes(events: &mut [NewEvent]) {
    for event in events.iter_mut().filter(|e| e.kind == EventType::UserDefineOutcome.as_str()) {
        event.body["outcome_id"] = json!(crate::ids::derived_id(&event.event_id, "outc"));
        if event.body["max_iterations"].as_i64().is_none() {
            event.body["max_iterations"] = json!(DEFAULT_MAX_ITERATIONS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(seq: i64, body: Value) -> StoredEvent {
        StoredEvent {
            session_id: "sesn_1".into(),
            seq,
            event_id: format!("sevt_{seq}"),
            thread_id: "sesn_1".into(),
            kind: body["type"].as_str().unwrap().to_owned(),
            body,
            processed_at_ms: 0,
        }
    }

    fn committed(seq: i64, event: NewEvent) -> StoredEvent {
        stored(seq, event.body)
    }

    fn define(seq: i64, id: &str) -> StoredEvent {
        stored(
            seq,
            json!({ "type": "user.define_outcome", "outcome_id": id, "description": "a poem",
                    "rubric": { "type": "text", "content": "rhymes" }, "max_iterations": 2 }),
        )
    }

    fn end(seq: i64, id: &str, iteration: i64, verdict: OutcomeVerdict) -> StoredEvent {
        committed(seq, NewEvent::outcome_evaluation_end("sesn_1", id, iteration, verdict, "why", ModelUsage::default()))
    }

    #[test]
    fn the_active_outcome_follows_the_cycles() {
        let mut history = vec![define(1, "outc_a")];
        let active = active_outcome(&history).unwrap();
        assert_eq!((active.outcome_id.as_str(), active.iteration, active.started), ("outc_a", 0, false));
        assert_eq!(active.max_iterations(), 2);
        history.push(committed(2, NewEvent::outcome_evaluation_start("sesn_1", "outc_a", 0)));
        assert!(active_outcome(&history).unwrap().started, "a started cycle is finished, not started again");
        history.push(end(3, "outc_a", 0, OutcomeVerdict::NeedsRevision));
        let active = active_outcome(&history).unwrap();
        assert_eq!((active.iteration, active.started), (1, false));
        history.push(define(4, "outc_b"));
        history.push(end(5, "outc_a", 1, OutcomeVerdict::Satisfied));
        assert_eq!(active_outcome(&history).unwrap().outcome_id, "outc_b", "the next outcome once one is done");
        history.push(end(6, "outc_b", 0, OutcomeVerdict::Failed));
        assert_eq!(active_outcome(&history), None);
    }

    #[test]
    fn the_active_outcome_knows_the_last_heartbeat_of_its_cycle() {
        let ongoing = |seq, iteration, beat| {
            let event = NewEvent::outcome_evaluation_ongoing("sesn_1", "outc_a", iteration, beat);
            StoredEvent { event_id: event.event_id.clone(), ..committed(seq, event) }
        };
        let mut history = vec![define(1, "outc_a")];
        history.push(committed(2, NewEvent::outcome_evaluation_start("sesn_1", "outc_a", 0)));
        history.push(ongoing(3, 0, 1));
        history.push(ongoing(4, 0, 3));
        let active = active_outcome(&history).unwrap();
        assert_eq!((active.started, active.last_heartbeat), (true, 3), "a retried attempt goes on at number 4");
        history.push(end(5, "outc_a", 0, OutcomeVerdict::NeedsRevision));
        assert_eq!(active_outcome(&history).unwrap().last_heartbeat, 0, "each cycle numbers its own");
        history.push(ongoing(6, 0, 4));
        assert_eq!(active_outcome(&history).unwrap().last_heartbeat, 0, "another cycle's heartbeat does not count");
    }

    #[test]
    fn heartbeat_ids_are_derived_from_the_outcome_the_cycle_and_the_number() {
        let beat = NewEvent::outcome_evaluation_ongoing("sesn_1", "outc_abc", 1, 2);
        assert_eq!(beat.event_id, "sevt_outcongoing_abc_1_2");
        assert_eq!(beat.event_id, NewEvent::outcome_evaluation_ongoing("sesn_1", "outc_abc", 1, 2).event_id);
        let others = [
            NewEvent::outcome_evaluation_ongoing("sesn_1", "outc_abc", 1, 3).event_id,
            NewEvent::outcome_evaluation_ongoing("sesn_1", "outc_abc", 2, 2).event_id,
            NewEvent::outcome_evaluation_start("sesn_1", "outc_abc", 1).event_id,
        ];
        assert!(!others.contains(&beat.event_id));
        assert_eq!(beat.kind, "span.outcome_evaluation_ongoing");
        assert_eq!(
            beat.body,
            json!({ "type": "span.outcome_evaluation_ongoing", "outcome_id": "outc_abc", "iteration": 1 })
        );
    }

    #[test]
    fn the_agent_beginning_work_makes_waiting_outcomes_running() {
        let running = |thread: &str| {
            let mut event = stored(9, json!({ "type": "session.status_running" }));
            event.thread_id = thread.to_owned();
            event
        };
        let mut list = json!([]);
        project(&mut list, &define(1, "outc_a"), "t0");
        assert!(!begin_work(&mut list, &define(1, "outc_a"), false), "defined while idle: it waits");
        assert!(list.to_string().contains(PENDING_MARK), "the store finds a waiting entry by {PENDING_MARK}");
        assert!(!begin_work(&mut list, &running("sthr_child"), false), "a child thread's turn is not the agent's");
        assert!(begin_work(&mut list, &running("sesn_1"), false));
        assert_eq!((list[0]["result"].as_str(), list[0]["iteration"].as_i64()), (Some("running"), Some(0)));
        assert!(!list.to_string().contains(PENDING_MARK));
        // Defined while the session runs: the turn under way takes it up.
        project(&mut list, &define(2, "outc_b"), "t1");
        assert!(begin_work(&mut list, &define(2, "outc_b"), true));
        assert_eq!(list[1]["result"], "running");
        // Only waiting entries: an evaluated or finished one keeps its state.
        project(&mut list, &committed(3, NewEvent::outcome_evaluation_start("sesn_1", "outc_a", 0)), "t2");
        project(&mut list, &end(4, "outc_b", 0, OutcomeVerdict::Satisfied), "t3");
        assert!(!begin_work(&mut list, &running("sesn_1"), false));
        assert_eq!((list[0]["result"].as_str(), list[1]["result"].as_str()), (Some("evaluating"), Some("satisfied")));
    }

    #[test]
    fn span_ids_are_derived_from_the_outcome_and_the_cycle() {
        let start = NewEvent::outcome_evaluation_start("sesn_1", "outc_abc", 1);
        assert_eq!(start.event_id, NewEvent::outcome_evaluation_start("sesn_1", "outc_abc", 1).event_id);
        assert_ne!(start.event_id, NewEvent::outcome_evaluation_start("sesn_1", "outc_abc", 2).event_id);
        let end = NewEvent::outcome_evaluation_end(
            "sesn_1",
            "outc_abc",
            1,
            OutcomeVerdict::Satisfied,
            "ok",
            ModelUsage::default(),
        );
        assert_eq!(end.body["outcome_evaluation_start_id"], json!(start.event_id));
        assert_ne!(end.event_id, start.event_id);
    }

    #[test]
    fn the_projection_records_each_cycle() {
        let mut list = json!([]);
        assert!(project(&mut list, &define(1, "outc_a"), "t0"));
        assert!(!project(&mut list, &define(1, "outc_a"), "t0"), "one entry per outcome");
        assert_eq!(list[0]["result"], "pending");
        project(&mut list, &committed(2, NewEvent::outcome_evaluation_start("sesn_1", "outc_a", 0)), "t1");
        assert_eq!((list[0]["result"].as_str(), list[0]["iteration"].as_i64()), (Some("evaluating"), Some(0)));
        project(&mut list, &end(3, "outc_a", 0, OutcomeVerdict::NeedsRevision), "t2");
        assert_eq!((list[0]["result"].as_str(), list[0]["iteration"].as_i64()), (Some("running"), Some(1)));
        assert_eq!(list[0]["completed_at"], Value::Null);
        project(&mut list, &end(4, "outc_a", 1, OutcomeVerdict::Satisfied), "t3");
        assert_eq!(list[0]["result"], "satisfied");
        assert_eq!((list[0]["iteration"].as_i64(), list[0]["completed_at"].as_str()), (Some(1), Some("t3")));
        assert_eq!(list[0]["explanation"], "why");
    }
}
