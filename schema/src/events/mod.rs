//! Session events as types: every event type on the wire (`EventType`), the closed sets
//! their bodies use (stop reasons, retry statuses, error types), and one constructor per
//! event agentd itself commits. Bodies stay JSON (they are stored and served as they
//! are); what is typed is which event it is and the fields agentd fills in, so no
//! caller builds an event from a string literal.

mod body;
mod calls;
mod kind;
mod new;
mod outcomes;
#[cfg(test)]
mod tests;
pub mod threads;

pub use body::{AutoJudgement, AutoVerdict, ErrorType, ModelUsage, Permission, RetryStatus, SessionError, StopReason};
pub use calls::{Confirmation, OpenCall, ToolCalls};
pub use kind::{EventType, MissingField, UnknownEventType};
pub use outcomes::{
    ActiveOutcome, DEFAULT_MAX_ITERATIONS, OutcomeVerdict, active_outcome, active_outcome_among, define_outcomes,
    is_outcome_kind,
};
pub use threads::{
    CROSS_POSTED, MAX_REPLY_CHARS, MODEL_KEY, MODEL_USAGE_KEY, MODELS_KEY, THREAD_CALL_KEY, call_event_id,
    cross_posted, cut_reply, for_thread, thread_id_for,
};

/// The session's `outcome_evaluations` projection (`sql/sessions.rs`).
pub mod outcome_projection {
    pub use super::outcomes::{PENDING_MARK, begin_work, project, projected};
}
