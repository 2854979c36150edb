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

use crate::store::{StoredEvent, WebhookDelivery};

/// Every event type agentd delivers; a subscription may name only these. Types of the
/// SDK's union that agentd never produces (enforcement actions, external keys,
/// credential refresh failures) are refused rather than accepted and never sent.
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
    "session.thread_created",
    "session.thread_idled",
    "session.thread_terminated",
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
/// status is the session's (and only while it has no child threads: then the session's
/// status is their aggregate, see [`session_facts`]); a budget is reached once for the
/// session, by its primary thread. `body` is the event's body (an idle's `stop_reason`).
pub fn of_session_event(kind: &str, primary: bool, threaded: bool, body: &Value) -> &'static [&'static str] {
    let status = primary && !threaded;
    match kind {
        "session.status_running" if status => &["session.status_run_started"],
        "session.status_idle" if status && requires_action(body) => {
            &["session.status_idled", "session.requires_action"]
        }
        "session.status_idle" if status => &["session.status_idled"],
        "session.status_rescheduled" if status => &["session.status_rescheduled"],
        "session.status_terminated" if status => &["session.status_terminated"],
        "session.budget_reached" if primary => &["session.budget_reached"],
        "span.outcome_evaluation_end" => &["session.outcome_evaluation_ended"],
        _ => &[],
    }
}

fn requires_action(body: &Value) -> bool {
    body["stop_reason"]["type"] == "requires_action"
}

/// The facts an append of `events` to a session reports (ADR 0022 §6). In a session with
/// child threads the session's status is the aggregate of its threads' (`aggregate`:
/// the projected status when the append changed it), so the status webhooks follow it,
/// not the primary's events; and its threads' own lifecycle is reported as
/// `session.thread_*`, each naming the thread.
pub fn session_facts(
    workspace_id: &str,
    session_id: &str,
    events: &[StoredEvent],
    threaded: bool,
    aggregate: Option<&str>,
) -> Vec<Fact> {
    let mut facts = Vec::new();
    for event in events {
        let primary = event.thread_id == session_id;
        for event_type in of_session_event(&event.kind, primary, threaded, &event.body) {
            facts.push(Fact::new(workspace_id, event_type, session_id));
        }
        let thread = match event.kind.as_str() {
            "session.thread_created" => {
                event.body["session_thread_id"].as_str().map(|id| ("session.thread_created", id))
            }
            "session.thread_status_idle" => Some(("session.thread_idled", event.thread_id.as_str())),
            "session.thread_status_terminated" => Some(("session.thread_terminated", event.thread_id.as_str())),
            _ => None,
        };
        if let Some((event_type, thread_id)) = thread {
            let mut fact = Fact::new(workspace_id, event_type, session_id);
            fact.extra = Some(json!({ "session_thread_id": thread_id }));
            facts.push(fact);
        }
    }
    let status_types: &[&str] = match aggregate {
        Some("running") => &["session.status_run_started"],
        // Idle waiting for the client: the primary, or the thread whose idle made the
        // session idle, stopped for it.
        Some("idle")
            if events.iter().any(|e| {
                matches!(e.kind.as_str(), "session.status_idle" | "session.thread_status_idle")
                    && requires_action(&e.body)
            }) =>
        {
            &["session.status_idled", "session.requires_action"]
        }
        Some("idle") => &["session.status_idled"],
        Some("rescheduling") => &["session.status_rescheduled"],
        Some("terminated") => &["session.status_terminated"],
        _ => &[],
    };
    for event_type in status_types {
        facts.push(Fact::new(workspace_id, event_type, session_id));
    }
    facts
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
            for event_type in of_session_event(kind, true, false, &idle) {
                assert!(known(event_type), "{event_type}");
            }
        }
    }

    #[test]
    fn only_the_primary_threads_status_is_reported() {
        let body = json!({"stop_reason": {"type": "end_turn"}});
        assert_eq!(of_session_event("session.status_idle", true, false, &body), &["session.status_idled"]);
        assert!(of_session_event("session.status_idle", false, false, &body).is_empty());
        assert!(of_session_event("session.status_idle", true, true, &body).is_empty(), "threaded: the aggregate's");
        assert!(of_session_event("agent.message", true, false, &body).is_empty());
        assert!(of_session_event("session.budget_reached", false, true, &body).is_empty(), "once, by the primary");
        assert_eq!(of_session_event("session.budget_reached", true, true, &body), &["session.budget_reached"]);
    }

    fn event(thread_id: &str, body: Value) -> StoredEvent {
        StoredEvent {
            session_id: "sesn_1".into(),
            seq: 1,
            event_id: "sevt_1".into(),
            thread_id: thread_id.into(),
            kind: body["type"].as_str().unwrap().into(),
            body,
            processed_at_ms: 0,
        }
    }

    fn types(facts: &[Fact]) -> Vec<(&str, Option<&Value>)> {
        facts.iter().map(|f| (f.event_type, f.extra.as_ref().map(|e| &e["session_thread_id"]))).collect()
    }

    #[test]
    fn a_threaded_sessions_status_follows_the_aggregate_and_threads_are_named() {
        let primary_idle = event("sesn_1", json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}));
        // The primary idles while a child still runs: no session status fact.
        let facts = session_facts("wrkspc_1", "sesn_1", std::slice::from_ref(&primary_idle), true, None);
        assert!(facts.is_empty(), "{facts:?}");
        // The aggregate went idle: the session idled.
        let facts = session_facts("wrkspc_1", "sesn_1", std::slice::from_ref(&primary_idle), true, Some("idle"));
        assert_eq!(types(&facts), [("session.status_idled", None)]);

        let created = event("sesn_1", json!({"type": "session.thread_created", "session_thread_id": "sthr_a"}));
        let child_idle =
            event("sthr_a", json!({"type": "session.thread_status_idle", "stop_reason": {"type": "end_turn"}}));
        let archived = event("sthr_a", json!({"type": "session.thread_status_terminated"}));
        let facts = session_facts("wrkspc_1", "sesn_1", &[created, child_idle, archived], true, None);
        let thread = json!("sthr_a");
        assert_eq!(
            types(&facts),
            [
                ("session.thread_created", Some(&thread)),
                ("session.thread_idled", Some(&thread)),
                ("session.thread_terminated", Some(&thread))
            ]
        );
        assert!(facts.iter().all(|f| f.resource_id == "sesn_1" && known(f.event_type)));
        // A child waiting for the client made the session idle: it requires action.
        let asks =
            event("sthr_a", json!({"type": "session.thread_status_idle", "stop_reason": {"type": "requires_action"}}));
        let facts = session_facts("wrkspc_1", "sesn_1", std::slice::from_ref(&asks), true, Some("idle"));
        assert!(types(&facts).contains(&("session.requires_action", None)), "{facts:?}");
        // A single-agent session reports its primary's statuses as before.
        let facts = session_facts("wrkspc_1", "sesn_1", std::slice::from_ref(&primary_idle), false, None);
        assert_eq!(types(&facts), [("session.status_idled", None)]);
    }
}
