//! Hands that refuse a session (docs/api/sandbox-policies.md, "When the runner cannot
//! meet the policy"): a runner that cannot provide what the session's pinned sandbox
//! execution policy asks refuses the work item instead of running anything with weaker
//! confinement.
//!
//! The item is stopped first, so it is never offered again and a sandbox call committed
//! from then on queues a new item (which the hands refuse in turn, with that call open).
//! Then the session's open sandbox calls, if any, are answered as when hands are lost
//! (`agentd_schema::hands::give_up`): each gets an error result naming the reason, and
//! each thread that had one a `session.error` that ends its turn. A refusal while no
//! sandbox call is open (the item queued when the session started, or when a message
//! arrived) commits nothing: a turn that needs no sandbox tool goes on unharmed, and the
//! session is told when one of its calls cannot run.

use agentd_schema::WorkItem;

use super::commit::submit_to_threads;
use super::error::{DomainError, DomainResult};
use crate::AppState;

/// The longest reason a refusal may carry, in characters.
pub const MAX_REASON_CHARS: usize = 2_000;

/// Refuses `item` for `reason` (what the hands cannot provide; never a secret): stops the
/// item, then answers the session's open sandbox calls with the reason. An item already
/// stopped is a conflict and commits nothing.
pub async fn refuse(state: &AppState, item: &WorkItem, reason: &str) -> DomainResult<WorkItem> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(DomainError::invalid("reason: required, a non-empty string"));
    }
    if reason.chars().count() > MAX_REASON_CHARS {
        return Err(DomainError::invalid(format!("reason: at most {MAX_REASON_CHARS} characters")));
    }
    if reason.chars().any(|c| c.is_control() && c != '\n') {
        return Err(DomainError::invalid("reason: control characters are not allowed"));
    }
    let store = state.backends.store.as_ref();
    let already = || DomainError::Conflict(format!("work {} is already stopped", item.id));
    let stopped = match store.stop_work(&item.environment_id, &item.id, true).await? {
        Some(Ok(stopped)) => stopped,
        Some(Err(_)) => return Err(already()),
        None => return Err(DomainError::NotFound(format!("work not found: {}", item.id))),
    };
    tracing::warn!(work = %item.id, session = %item.session_id, %reason, "the session's hands refused it");
    metrics::counter!("agentd_work_refused_total").increment(1);
    let open = store.open_tool_calls(&item.session_id).await?;
    if open.iter().any(agentd_schema::hands::runs_in_hands) {
        let message = format!("the environment's hands refused this session: {reason}");
        let given_up = agentd_schema::hands::give_up(&item.session_id, &open, &message);
        submit_to_threads(state, &item.session_id, &given_up.thread_id, given_up.also_wake, given_up.events).await?;
    }
    Ok(stopped)
}
