//! When a session needs hands: a work item on its environment's queue, announced on
//! the bus so long-polls wake at once. Sessions whose agent has no sandbox tool of the
//! built-in toolset never need hands and never queue work.

use agentd_proto::Bus;
use bytes::Bytes;
use serde_json::Value;

use crate::error::StoreResult;
use crate::events::{ErrorType, EventType, RetryStatus, SessionError};
#[cfg(doc)]
use crate::store::WorkStore;
use crate::store::{NewEvent, OutboxMessage, Store, Submission, ToolUseKind, WorkItem};

/// The bus channel that wakes pollers of one environment.
pub fn environment_channel(environment_id: &str) -> String {
    format!("work.env.{environment_id}")
}

/// The bus channel that wakes runners of a workspace's `cloud` environments.
pub fn cloud_channel(workspace_id: &str) -> String {
    format!("work.cloud.{workspace_id}")
}

/// The tools of `agent_toolset_20260401` that run in the environment's sandbox (its
/// `web_fetch` and `web_search` run in the worker).
pub const SANDBOX_TOOLS: [&str; 6] = ["bash", "read", "write", "edit", "glob", "grep"];

/// Whether an agent (snapshot) has tools that run in the environment: a built-in
/// toolset that leaves one of its sandbox tools enabled.
pub fn needs_hands(agent: &Value) -> bool {
    agent["tools"].as_array().into_iter().flatten().filter(|tool| tool["type"] == "agent_toolset_20260401").any(
        |toolset| {
            let default = toolset["default_config"]["enabled"].as_bool().unwrap_or(true);
            let configs = toolset["configs"].as_array().map(Vec::as_slice).unwrap_or_default();
            SANDBOX_TOOLS.iter().any(|name| {
                let config = configs.iter().find(|c| c["name"] == *name);
                config.and_then(|c| c["enabled"].as_bool()).unwrap_or(default)
            })
        },
    )
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

/// Expires work leases (see [`WorkStore::expire_work_leases`]) and gives up on the hands
/// of items that lost too many: each unanswered built-in call of the session gets an
/// error result and the session a `session.error` (retries exhausted) that ends the turn.
/// These are input to the session's run, committed with a submission, so the worker
/// idles the session exactly once. Returns the submissions' queue messages, for the
/// caller to publish (the outbox relay does; a row it cannot publish stays for the next
/// pass).
pub async fn expire(store: &dyn Store) -> StoreResult<Vec<OutboxMessage>> {
    let lost = store.expire_work_leases(MAX_LOST_LEASES).await?;
    let mut messages = Vec::with_capacity(lost.len());
    for hands in &lost {
        tracing::warn!(work = %hands.work_id, session = %hands.session_id, lost_leases = hands.lost_leases,
            "hands lost too many leases; failing the session's open tool calls");
        let events = give_up_events(store, &hands.session_id, hands.lost_leases).await?;
        let submitted = store
            .submit(Submission {
                session_id: hands.session_id.clone(),
                thread_id: hands.session_id.clone(),
                events,
                max_attempts: 5,
                trace_context: Vec::new(),
                also_wake: Vec::new(),
            })
            .await?;
        messages.push(submitted.outbox);
        metrics::counter!("agentd_hands_given_up_total").increment(1);
    }
    Ok(messages)
}

/// An error result for each open built-in call of the session (from the tool-call
/// ledger) and the `session.error` that ends the turn.
async fn give_up_events(store: &dyn Store, session_id: &str, lost_leases: i64) -> StoreResult<Vec<NewEvent>> {
    let open = store.open_tool_calls(session_id).await?;
    let message = format!("the environment's hands were lost {lost_leases} times; the tool call was abandoned");
    let mut events: Vec<_> = open
        .iter()
        .filter(|call| call.use_kind == ToolUseKind::Builtin)
        .map(|call| NewEvent::synthetic_result(session_id, EventType::AgentToolUse, &call.tool_use_id, &message))
        .collect();
    let error = SessionError::new(ErrorType::UnknownError, message, RetryStatus::Exhausted);
    events.push(NewEvent::session_error(session_id, &error));
    Ok(events)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_an_enabled_sandbox_tool_needs_hands() {
        let toolset = |default: bool, configs: Value| json!({ "tools": [{ "type": "agent_toolset_20260401", "default_config": { "enabled": default }, "configs": configs }] });
        assert!(needs_hands(&toolset(true, json!([]))));
        assert!(needs_hands(&json!({ "tools": [{ "type": "agent_toolset_20260401" }] })));
        assert!(needs_hands(&toolset(false, json!([{ "name": "bash", "enabled": true }]))));
        assert!(!needs_hands(&toolset(false, json!([{ "name": "web_fetch", "enabled": true }]))));
        let all_off: Vec<Value> = SANDBOX_TOOLS.iter().map(|name| json!({ "name": name, "enabled": false })).collect();
        assert!(!needs_hands(&toolset(true, Value::Array(all_off))));
        assert!(!needs_hands(&json!({ "tools": [{ "type": "custom", "name": "x" }] })));
    }
}
