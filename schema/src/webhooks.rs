//! Webhook events (docs/api/webhooks.md): which lifecycle facts become which webhook
//! event, and the `BetaWebhookEvent` envelope a delivery carries.
//!
//! A fact is written to the outbox (`webhook_deliveries`, one row per subscriber) by the
//! store in the transaction that commits it: `sql/sessions.rs` for a session's
//! lifecycle and the status events of its turns, `sql/resources.rs` for agents,
//! environments, vaults and credentials, `sql/deployments.rs` and `sql/memory.rs` for
//! theirs. The names are the webhook names, not the stream names (`session.status_idle`
//! on the stream is `session.status_idled` here).

use serde_json::{Value, json};

use crate::store::WebhookDelivery;

/// Every event type agentd delivers; a subscription may name only these. Types of the
/// SDK's union that agentd never produces (session threads, enforcement actions,
/// external keys, credential refresh failures) are refused rather than accepted and
/// never sent.
pub const EVENT_TYPES: &[&str] = &[
    "session.created",
    "session.updated",
    "session.archived",
    "session.deleted",
    "session.status_run_started",
    "session.status_idled",
    "session.status_rescheduled",
    "session.status_terminated",
    "session.requires_action",
    "session.budget_reached",
    "session.outcome_evaluation_ended",
    "agent.created",
    "agent.updated",
    "agent.archived",
    "environment.created",
    "environment.updated",
    "environment.archived",
    "environment.deleted",
    "vault.created",
    "vault.archived",
    "vault.deleted",
    "vault_credential.created",
    "vault_credential.archived",
    "vault_credential.deleted",
    "deployment.created",
    "deployment.updated",
    "deployment.paused",
    "deployment.unpaused",
    "deployment.archived",
    "deployment_run.started",
    "deployment_run.succeeded",
    "deployment_run.failed",
    "memory_store.created",
    "memory_store.archived",
    "memory_store.deleted",
];

/// The owner a subscription's signing secret is sealed to (`secrets.rs`): a sealed
/// secret opens only for its own subscription.
pub fn secret_owner(workspace_id: &str, id: &str) -> String {
    format!("webhook:{workspace_id}:{id}")
}

/// Whether agentd delivers `event_type`.
pub fn known(event_type: &str) -> bool {
    EVENT_TYPES.contains(&event_type)
}

/// A lifecycle fact to report: written by the store, inside the fact's transaction, to
/// every enabled subscription of the workspace that takes its type.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// The workspace the fact happened in.
    pub workspace_id: String,
    /// One of [`EVENT_TYPES`].
    pub event_type: &'static str,
    /// The resource's id (`data.id`).
    pub resource_id: String,
    /// The event's other `data` fields (`vault_id` of a credential event), if any.
    pub extra: Option<Value>,
}

impl Fact {
    /// A fact about `resource_id`.
    pub fn new(workspace_id: &str, event_type: &'static str, resource_id: &str) -> Self {
        debug_assert!(known(event_type), "{event_type} is not a webhook event type");
        Self { workspace_id: workspace_id.to_owned(), event_type, resource_id: resource_id.to_owned(), extra: None }
    }
}

/// The webhook events one committed session event reports. Only the primary thread's
/// status is the session's; `body` is the event's body (an idle's `stop_reason`).
pub fn of_session_event(kind: &str, primary: bool, body: &Value) -> &'static [&'static str] {
    match kind {
        "session.status_running" if primary => &["session.status_run_started"],
        "session.status_idle" if primary && body["stop_reason"]["type"] == "requires_action" => {
            &["session.status_idled", "session.requires_action"]
        }
        "session.status_idle" if primary => &["session.status_idled"],
        "session.status_rescheduled" if primary => &["session.status_rescheduled"],
        "session.status_terminated" if primary => &["session.status_terminated"],
        "session.budget_reached" => &["session.budget_reached"],
        "span.outcome_evaluation_end" => &["session.outcome_evaluation_ended"],
        _ => &[],
    }
}

/// What happened to a resource of the generic resource store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Created.
    Created,
    /// A new version or a changed body.
    Updated,
    /// Archived (the first time).
    Archived,
    /// Deleted.
    Deleted,
}

/// The webhook event of an action on a resource of `kind` (`agent`, `environment`,
/// `vault`, `vault_credential`), if there is one.
pub fn of_resource(kind: &str, action: Action) -> Option<&'static str> {
    Some(match (kind, action) {
        ("agent", Action::Created) => "agent.created",
        ("agent", Action::Updated) => "agent.updated",
        ("agent", Action::Archived) => "agent.archived",
        ("environment", Action::Created) => "environment.created",
        ("environment", Action::Updated) => "environment.updated",
        ("environment", Action::Archived) => "environment.archived",
        ("environment", Action::Deleted) => "environment.deleted",
        ("vault", Action::Created) => "vault.created",
        ("vault", Action::Archived) => "vault.archived",
        ("vault", Action::Deleted) => "vault.deleted",
        ("vault_credential", Action::Created) => "vault_credential.created",
        ("vault_credential", Action::Archived) => "vault_credential.archived",
        ("vault_credential", Action::Deleted) => "vault_credential.deleted",
        _ => return None,
    })
}

/// A delivery's event as the receiver gets it: the `BetaWebhookEvent` envelope, thin
/// (ids only; receivers fetch the resource). The same row always renders the same bytes,
/// so every attempt carries the same body under the same `webhook-id`.
pub fn envelope(delivery: &WebhookDelivery) -> String {
    let mut data = json!({
        "type": delivery.event_type,
        "id": delivery.resource_id,
        "organization_id": delivery.organization_id,
        "workspace_id": delivery.workspace_id,
    });
    if let (Some(Value::Object(extra)), Some(map)) = (&delivery.extra, data.as_object_mut()) {
        for (key, value) in extra {
            map.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    json!({
        "type": "event",
        "id": delivery.event_id,
        "created_at": crate::live::rfc3339(delivery.occurred_at_ms),
        "data": data,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mapped_type_is_known() {
        let kinds = ["agent", "environment", "vault", "vault_credential", "session", "deployment"];
        let actions = [Action::Created, Action::Updated, Action::Archived, Action::Deleted];
        for kind in kinds {
            for action in actions {
                if let Some(event_type) = of_resource(kind, action) {
                    assert!(known(event_type), "{event_type}");
                }
            }
        }
        let idle = json!({"stop_reason": {"type": "requires_action"}});
        for kind in ["session.status_running", "session.status_idle", "session.budget_reached"] {
            for event_type in of_session_event(kind, true, &idle) {
                assert!(known(event_type), "{event_type}");
            }
        }
    }

    #[test]
    fn only_the_primary_threads_status_is_reported() {
        let body = json!({"stop_reason": {"type": "end_turn"}});
        assert_eq!(of_session_event("session.status_idle", true, &body), &["session.status_idled"]);
        assert!(of_session_event("session.status_idle", false, &body).is_empty());
        assert!(of_session_event("agent.message", true, &body).is_empty());
    }
}
