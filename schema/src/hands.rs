//! When a session needs hands: a work item on its environment's queue, announced on
//! the bus so long-polls wake at once. Sessions whose agent has no built-in toolset
//! never need hands and never queue work.

use agentd_proto::Bus;
use bytes::Bytes;
use serde_json::Value;

use crate::error::StoreResult;
use crate::events::{ErrorType, EventType, RetryStatus, SessionError};
use crate::store::{NewEvent, Store, WorkItem};

/// The bus channel that wakes pollers of one environment.
pub fn environment_channel(environment_id: &str) -> String {
    format!("work.env.{environment_id}")
}

/// The bus channel that wakes runners of a workspace's `cloud` environments.
pub fn cloud_channel(workspace_id: &str) -> String {
    format!("work.cloud.{workspace_id}")
}

/// Whether an agent (snapshot) has tools that run in the environment.
pub fn needs_hands(agent: &Value) -> bool {
    agent["tools"].as_array().into_iter().flatten().any(|tool| tool["type"] == "agent_toolset_20260401")
}

/// `cloud` or `self_hosted`, from an environment body.
pub fn hands_of(environment: &Value) -> &'static str {
    if environment["config"]["type"] == "self_hosted" { "self_hosted" } else { "cloud" }
}

/// Queues a work item for the session unless one is open, and wakes pollers.
pub async fn ensure(
    store: &dyn Store,
    bus: &dyn Bus,
    workspace_id: &str,
    environment_id: &str,
    session_id: &str,
    hands: &str,
) -> StoreResult<Option<WorkItem>> {
    let created = store.ensure_work_item(workspace_id, environment_id, session_id, hands).await?;
    if let Some(item) = &created {
        announce(bus, item).await;
    }
    Ok(created)
}

/// Wakes the pollers that may take `item` (best effort: polls also re-check on a timer).
pub async fn announce(bus: &dyn Bus, item: &WorkItem) {
    let payload = Bytes::from(item.id.clone());
    let mut channels = vec![environment_channel(&item.environment_id)];
    if item.hands == "cloud" {
        channels.push(cloud_channel(&item.workspace_id));
    }
    for channel in channels {
        if let Err(error) = bus.publish(&channel, payload.clone()).await {
            tracing::debug!(%error, %channel, "could not announce work; pollers find it on their next check");
        }
    }
}

/// Lost leases a work item may have before its hands are given up on.
pub const MAX_LOST_LEASES: i64 = 3;

/// Expires work leases (see [`Store::expire_work_leases`]) and gives up on the hands of
/// items that lost too many: each unanswered built-in call of the session gets an error
/// result and the session a `session.error` (retries exhausted) that ends the turn.
/// These are input to the session's run, committed with a submission, so the worker
/// idles the session exactly once. Returns how many sessions were given up on.
pub async fn expire(store: &dyn Store, queue: &dyn agentd_proto::Queue) -> StoreResult<usize> {
    let lost = store.expire_work_leases(MAX_LOST_LEASES).await?;
    for hands in &lost {
        tracing::warn!(work = %hands.work_id, session = %hands.session_id, lost_leases = hands.lost_leases,
            "hands lost too many leases; failing the session's open tool calls");
        let events = give_up_events(store, &hands.session_id, hands.lost_leases).await?;
        let submitted = store
            .submit(crate::store::Submission {
                session_id: hands.session_id.clone(),
                thread_id: hands.session_id.clone(),
                events,
                max_attempts: 5,
                trace_context: Vec::new(),
            })
            .await?;
        if let Err(error) = crate::outbox::publish(store, queue, &submitted.outbox).await {
            tracing::warn!(%error, "hands give-up submission deferred to the outbox relay");
        }
        metrics::counter!("agentd_hands_given_up_total").increment(1);
    }
    Ok(lost.len())
}

async fn give_up_events(store: &dyn Store, session_id: &str, lost_leases: i64) -> StoreResult<Vec<NewEvent>> {
    let query = crate::store::EventQuery {
        types: [EventType::AgentToolUse, EventType::AgentToolResult, EventType::UserToolResult]
            .map(|kind| kind.to_string())
            .to_vec(),
        limit: 100_000,
        ..Default::default()
    };
    let history = store.query_events(session_id, &query).await?;
    let message = format!("the environment's hands were lost {lost_leases} times; the tool call was abandoned");
    let calls = crate::events::ToolCalls::of(&history);
    let mut events: Vec<_> = calls
        .open()
        .iter()
        .filter(|call| call.kind == EventType::AgentToolUse)
        .map(|call| NewEvent::synthetic_result(session_id, call.kind, &call.id, &message))
        .collect();
    let error = SessionError::new(ErrorType::UnknownError, message, RetryStatus::Exhausted);
    events.push(NewEvent::session_error(session_id, &error));
    Ok(events)
}
