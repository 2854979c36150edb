//! Content capture (docs/api/user-profiles.md, "Content capture"): how much of a
//! session's content agentd keeps once a turn is over.
//!
//! Three ordered levels, `off < structured < full`. A session's effective level is the
//! lowest of three bounds: the ceiling of the deployment that launched it (`full` for a
//! session created directly), the level its creator requested, and the consent of its
//! data subject (the user profile it is attributed to). The rule lives here, once; the
//! gateway decides it when the session is created and the worker enforces the decision
//! when each turn settles.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A capture level, ordered `Off < Structured < Full`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// No content is kept once the turn is over: content-bearing events are removed.
    Off,
    /// Event types, timings, usage, tool names and statuses are kept; every content
    /// body is replaced by [`REDACTED`].
    Structured,
    /// Everything is kept: model inputs and outputs, thinking, tool inputs and results.
    Full,
}

impl Level {
    /// Every level, lowest first.
    pub const ALL: [Level; 3] = [Level::Off, Level::Structured, Level::Full];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Off => "off",
            Level::Structured => "structured",
            Level::Full => "full",
        }
    }

    /// Parses a wire name.
    pub fn parse(value: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|level| level.as_str() == value)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A purpose an end user grants or withdraws consent for on the consent page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// Keep the content of my conversations (lets sessions capture at `full`).
    ConversationContent,
    /// Keep a structured record of my activity (withdrawn: sessions capture `off`).
    ActivityRecord,
}

impl Purpose {
    /// Every purpose, in the order the consent page lists them.
    pub const ALL: [Purpose; 2] = [Purpose::ConversationContent, Purpose::ActivityRecord];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::ConversationContent => "conversation_content",
            Purpose::ActivityRecord => "activity_record",
        }
    }

    /// Parses a wire name.
    pub fn parse(value: &str) -> Option<Purpose> {
        Purpose::ALL.into_iter().find(|purpose| purpose.as_str() == value)
    }
}

/// What the data subject has said about each purpose (`None`: never asked or never
/// answered).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Consent {
    /// `conversation_content`: granted (`Some(true)`) or withdrawn (`Some(false)`).
    pub conversation_content: Option<bool>,
    /// `activity_record`: granted or withdrawn.
    pub activity_record: Option<bool>,
}

impl Consent {
    /// The highest level this consent allows: `full` only with `conversation_content`
    /// granted; `off` once `activity_record` is withdrawn (which wins); `structured`
    /// otherwise — without consent nothing above `structured` is kept.
    pub fn bound(self) -> Level {
        if self.activity_record == Some(false) {
            Level::Off
        } else if self.conversation_content == Some(true) {
            Level::Full
        } else {
            Level::Structured
        }
    }

    /// This consent with `purpose` granted or withdrawn.
    pub fn with(mut self, purpose: Purpose, granted: bool) -> Consent {
        match purpose {
            Purpose::ConversationContent => self.conversation_content = Some(granted),
            Purpose::ActivityRecord => self.activity_record = Some(granted),
        }
        self
    }

    /// The answer recorded for `purpose`.
    pub fn get(self, purpose: Purpose) -> Option<bool> {
        match purpose {
            Purpose::ConversationContent => self.conversation_content,
            Purpose::ActivityRecord => self.activity_record,
        }
    }
}

/// Why the effective level is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The effective level is the one requested.
    Ok,
    /// The data subject's consent lowered it.
    NoConsent,
    /// The deployment's ceiling lowered it.
    ClampedByCeiling,
}

impl Reason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Ok => "ok",
            Reason::NoConsent => "no_consent",
            Reason::ClampedByCeiling => "clamped_by_ceiling",
        }
    }
}

/// A session's capture decision, as the session keeps and serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The level the creator asked for.
    pub requested: Level,
    /// The ceiling of the deployment that launched the session (`full` otherwise).
    pub ceiling: Level,
    /// The data subject's consent bound (`None`: the session has no data subject).
    pub consent: Option<Level>,
    /// What agentd keeps: the lowest of the three.
    pub effective: Level,
    /// Why `effective` is lower than `requested`, or `ok`.
    pub reason: Reason,
}

impl Decision {
    /// Decides the effective level. A session without a data subject holds its
    /// operator's own content, so consent does not bound it (ADR 0019).
    pub fn decide(requested: Level, ceiling: Level, consent: Option<Level>) -> Decision {
        let consent_bound = consent.unwrap_or(Level::Full);
        let effective = requested.min(ceiling).min(consent_bound);
        let reason = if effective == requested {
            Reason::Ok
        } else if effective == consent_bound && consent_bound < ceiling {
            Reason::NoConsent
        } else {
            Reason::ClampedByCeiling
        };
        Decision { requested, ceiling, consent, effective, reason }
    }

    /// The wire shape (`content_capture` on a session).
    pub fn to_json(self) -> Value {
        json!({
            "requested": self.requested.as_str(),
            "ceiling": self.ceiling.as_str(),
            "consent": self.consent.map(Level::as_str),
            "effective": self.effective.as_str(),
            "reason": self.reason.as_str(),
        })
    }

    /// Reads the wire shape back (`None` when absent or malformed: a session created
    /// before capture existed keeps everything).
    pub fn from_json(value: &Value) -> Option<Decision> {
        let level = |key: &str| value.get(key).and_then(Value::as_str).and_then(Level::parse);
        let requested = level("requested")?;
        let ceiling = level("ceiling")?;
        let consent = level("consent");
        Some(Decision::decide(requested, ceiling, consent))
    }
}

/// What replaces a content body under `structured` capture.
pub const REDACTED: &str = "[content not retained: content capture is structured]";

/// The event types whose bodies carry content: what a person or a model wrote, what a
/// tool was given or returned.
pub const CONTENT_EVENTS: &[&str] = &[
    "user.message",
    "user.tool_confirmation",
    "user.custom_tool_result",
    "user.tool_result",
    "user.define_outcome",
    "system.message",
    "agent.message",
    "agent.thinking",
    "agent.tool_use",
    "agent.tool_result",
    "agent.mcp_tool_use",
    "agent.mcp_tool_result",
    "agent.custom_tool_use",
    "agent.thread_message_received",
    "agent.thread_message_sent",
    "agent.thread_context_compacted",
    "span.outcome_evaluation_end",
];

/// Fields of a content event that describe its structure, kept under `structured`.
const STRUCTURE_FIELDS: &[&str] = &[
    "type",
    "name",
    "server_name",
    "mcp_server_name",
    "is_error",
    "evaluated_permission",
    "result",
    "stop_reason",
    "usage",
    "iteration",
    "max_iterations",
];

/// Whether `key` links an event to another (`tool_use_id`, `session_thread_id`, …):
/// kept at every level, so history still reads as a whole.
fn is_link(key: &str) -> bool {
    key.ends_with("_id") || key.ends_with("_ids")
}

/// What `level` keeps of an event of type `kind` once its turn is over (`None`: the
/// body is kept as it is). Under `structured` every text becomes [`REDACTED`], each
/// content block a text block saying so, a tool's input `{}`; names, statuses and
/// links stay. Under `off` only the type and the links stay (`content` `[]`, `input`
/// `{}`).
pub fn redact(kind: &str, body: &Value, level: Level) -> Option<Value> {
    if level == Level::Full || !CONTENT_EVENTS.contains(&kind) {
        return None;
    }
    let map = body.as_object()?;
    let mut out = serde_json::Map::new();
    for (key, value) in map {
        let kept = match (key.as_str(), level) {
            ("content", _) if value.is_array() && level == Level::Off => Some(json!([])),
            ("content", _) if value.is_array() => Some(Value::Array(
                value.as_array().into_iter().flatten().map(|_| json!({ "type": "text", "text": REDACTED })).collect(),
            )),
            ("input", _) => Some(json!({})),
            ("rubric", _) if value.is_object() => Some(rubric(value, level)),
            (key, _) if is_link(key) => Some(value.clone()),
            (key, Level::Structured) if STRUCTURE_FIELDS.contains(&key) => Some(value.clone()),
            (_, Level::Structured) if value.is_string() => Some(json!(REDACTED)),
            ("type", Level::Off) => Some(value.clone()),
            _ => None,
        };
        if let Some(kept) = kept {
            out.insert(key.clone(), kept);
        }
    }
    let out = Value::Object(out);
    (out != *body).then_some(out)
}

/// What `level` keeps of an outcome's rubric (`user.define_outcome`): its type and the
/// file it names, so the event keeps its wire shape; under `structured` its text is
/// [`REDACTED`], under `off` it is gone.
fn rubric(value: &Value, level: Level) -> Value {
    let mut out = serde_json::Map::new();
    for (key, field) in value.as_object().into_iter().flatten() {
        let kept = match key.as_str() {
            "type" => field.clone(),
            key if is_link(key) => field.clone(),
            _ if level == Level::Structured && field.is_string() => json!(REDACTED),
            _ => continue,
        };
        out.insert(key.clone(), kept);
    }
    Value::Object(out)
}

/// Whether an event ends a turn: an idle that does not wait for the caller to act
/// (`requires_action` waits; the turn goes on once the caller answers), or the
/// session's termination.
pub fn ends_turn(kind: &str, body: &Value) -> bool {
    (kind == "session.status_idle" && body["stop_reason"]["type"].as_str() != Some("requires_action"))
        || kind == "session.status_terminated"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_is_the_lowest_bound_and_the_reason_names_what_lowered_it() {
        let d = Decision::decide(Level::Full, Level::Full, Some(Level::Structured));
        assert_eq!((d.effective, d.reason), (Level::Structured, Reason::NoConsent));
        let d = Decision::decide(Level::Full, Level::Structured, Some(Level::Full));
        assert_eq!((d.effective, d.reason), (Level::Structured, Reason::ClampedByCeiling));
        let d = Decision::decide(Level::Full, Level::Structured, Some(Level::Structured));
        assert_eq!((d.effective, d.reason), (Level::Structured, Reason::ClampedByCeiling));
        let d = Decision::decide(Level::Full, Level::Structured, Some(Level::Off));
        assert_eq!((d.effective, d.reason), (Level::Off, Reason::NoConsent));
        let d = Decision::decide(Level::Structured, Level::Full, Some(Level::Full));
        assert_eq!((d.effective, d.reason), (Level::Structured, Reason::Ok));
        let d = Decision::decide(Level::Full, Level::Full, None);
        assert_eq!((d.effective, d.reason), (Level::Full, Reason::Ok));
    }

    #[test]
    fn consent_grants_full_only_when_content_is_granted_and_withdrawn_activity_wins() {
        assert_eq!(Consent::default().bound(), Level::Structured);
        let granted = Consent::default().with(Purpose::ConversationContent, true);
        assert_eq!(granted.bound(), Level::Full);
        assert_eq!(granted.with(Purpose::ActivityRecord, false).bound(), Level::Off);
        assert_eq!(granted.with(Purpose::ConversationContent, false).bound(), Level::Structured);
    }

    #[test]
    fn a_decision_round_trips_through_its_wire_shape() {
        for requested in Level::ALL {
            for ceiling in Level::ALL {
                for consent in [None, Some(Level::Off), Some(Level::Structured), Some(Level::Full)] {
                    let d = Decision::decide(requested, ceiling, consent);
                    assert_eq!(Decision::from_json(&d.to_json()), Some(d));
                }
            }
        }
    }

    #[test]
    fn structured_keeps_the_shape_and_off_keeps_only_links() {
        let tool_use = json!({"type":"agent.tool_use","name":"bash","input":{"command":"echo CANARY"},
                              "session_thread_id":"sesn_1","evaluated_permission":"allow"});
        let kept = redact("agent.tool_use", &tool_use, Level::Structured).unwrap();
        assert_eq!(
            kept,
            json!({"type":"agent.tool_use","name":"bash","input":{},"session_thread_id":"sesn_1",
                                "evaluated_permission":"allow"})
        );
        let message = json!({"type":"user.message","content":[{"type":"text","text":"CANARY"},
                             {"type":"image","source":{"type":"base64","data":"CANARY"}}]});
        let kept = redact("user.message", &message, Level::Structured).unwrap();
        assert_eq!(kept["content"], json!([{"type":"text","text":REDACTED},{"type":"text","text":REDACTED}]));
        let result = json!({"type":"agent.tool_result","tool_use_id":"sevt_1","content":[{"type":"text","text":"CANARY"}],
                            "is_error":false});
        assert_eq!(
            redact("agent.tool_result", &result, Level::Off).unwrap(),
            json!({"type":"agent.tool_result","tool_use_id":"sevt_1","content":[]})
        );
        for level in [Level::Structured, Level::Off] {
            for (kind, body) in
                [("agent.tool_use", &tool_use), ("user.message", &message), ("agent.tool_result", &result)]
            {
                assert!(!redact(kind, body, level).unwrap().to_string().contains("CANARY"), "{kind} at {level}");
            }
        }
        let idle = json!({"type":"session.status_idle","stop_reason":{"type":"end_turn"}});
        assert_eq!(redact("session.status_idle", &idle, Level::Off), None, "structure events are kept");
        assert_eq!(redact("user.message", &message, Level::Full), None);
    }

    #[test]
    fn an_outcome_keeps_its_shape_and_none_of_its_text() {
        let text = json!({"type":"user.define_outcome","outcome_id":"outc_1","description":"CANARY task",
                          "rubric":{"type":"text","content":"CANARY rubric"},"max_iterations":3});
        assert_eq!(
            redact("user.define_outcome", &text, Level::Structured).unwrap(),
            json!({"type":"user.define_outcome","outcome_id":"outc_1","description":REDACTED,
                   "rubric":{"type":"text","content":REDACTED},"max_iterations":3})
        );
        let file = json!({"type":"user.define_outcome","outcome_id":"outc_1","description":"CANARY",
                          "rubric":{"type":"file","file_id":"file_1"}});
        assert_eq!(redact("user.define_outcome", &file, Level::Structured).unwrap()["rubric"], file["rubric"]);
        assert_eq!(
            redact("user.define_outcome", &text, Level::Off).unwrap(),
            json!({"type":"user.define_outcome","outcome_id":"outc_1","rubric":{"type":"text"}})
        );
        let end = json!({"type":"span.outcome_evaluation_end","outcome_id":"outc_1","outcome_evaluation_start_id":"sevt_s",
                         "iteration":0,"result":"satisfied","explanation":"CANARY why","usage":{"input_tokens":5}});
        let kept = redact("span.outcome_evaluation_end", &end, Level::Structured).unwrap();
        assert_eq!(
            (&kept["explanation"], &kept["result"], &kept["usage"]),
            (&json!(REDACTED), &end["result"], &end["usage"])
        );
        assert_eq!(redact("span.outcome_evaluation_end", &end, Level::Off).unwrap().get("explanation"), None);
    }

    #[test]
    fn a_turn_ends_at_an_idle_that_does_not_wait_for_the_caller() {
        assert!(ends_turn("session.status_idle", &json!({"stop_reason":{"type":"end_turn"}})));
        assert!(ends_turn("session.status_idle", &json!({"stop_reason":{"type":"retries_exhausted"}})));
        assert!(!ends_turn("session.status_idle", &json!({"stop_reason":{"type":"requires_action","event_ids":[]}})));
        assert!(!ends_turn("session.status_running", &json!({})));
        assert!(ends_turn("session.status_terminated", &json!({})));
    }
}
