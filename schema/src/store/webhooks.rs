//! Webhook subscriptions and the outbox of their deliveries (docs/api/webhooks.md,
//! migration 0023). Deliveries are written by the store itself, in the transaction of
//! the fact they report (`crate::webhooks`); this trait is how subscriptions are kept
//! and how deliverers — every gateway runs one — claim, settle and show them.
//!
//! Claims are leases: a claimed row is invisible to other deliverers until its lease
//! ends, so a deliverer that dies mid-send leaves a row that is sent again (at least
//! once, under the same `webhook-id`).

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;

/// A subscription as stored (its secret sealed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSubscriptionRow {
    /// The workspace whose events it takes.
    pub workspace_id: String,
    /// Client-chosen (`/v1/config/webhook-subscriptions/{id}`) or `whep_…`.
    pub id: String,
    /// The workspace's organization (`data.organization_id` of its events).
    pub organization_id: String,
    /// Where deliveries go.
    pub url: String,
    /// A short label (organization endpoint API), possibly empty.
    pub name: String,
    /// Notes (organization endpoint API), possibly empty.
    pub description: String,
    /// The event types it takes (each of `crate::webhooks::EVENT_TYPES`), sorted.
    pub event_types: Vec<String>,
    /// The signing secret, sealed for this subscription (`whsec_…` when opened).
    pub sealed_secret: String,
    /// `true` while deliveries are sent.
    pub enabled: bool,
    /// Why agentd disabled it; empty when enabled or disabled by its owner.
    pub disabled_reason: String,
    /// Failed attempts since the last success.
    pub consecutive_failures: i64,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
}

/// How `put_subscription` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookPut {
    /// Insert only; an existing id is a `Conflict`.
    Create,
    /// Replace url, name, description, event types and state of an existing one (its
    /// secret, failures and creation time are kept); a missing id is `NotFound`.
    Replace,
    /// Insert, or replace as [`WebhookPut::Replace`] does.
    Upsert,
}

/// A subscription to write.
#[derive(Debug, Clone)]
pub struct WebhookPutRequest {
    /// The subscription (its times, failures and reason are the store's).
    pub row: WebhookSubscriptionRow,
    /// Insert, replace or either.
    pub mode: WebhookPut,
    /// A replace sets the state from `row.enabled`; otherwise it keeps the stored one.
    pub set_state: bool,
    /// The most subscriptions the workspace may have (`Conflict` past it).
    pub max: usize,
}

/// What `put_subscription` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookPutOutcome {
    /// The subscription as stored now.
    pub row: WebhookSubscriptionRow,
    /// `true` when it was inserted (its secret is the one given).
    pub created: bool,
}

/// A delivery of one event to one subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookDelivery {
    /// `{event_id}.{subscription_id}`.
    pub id: String,
    /// The event's id, the `webhook-id` of every attempt.
    pub event_id: String,
    /// The subscription's workspace.
    pub workspace_id: String,
    /// The subscription.
    pub subscription_id: String,
    /// The workspace's organization.
    pub organization_id: String,
    /// The webhook event type.
    pub event_type: String,
    /// `data.id`.
    pub resource_id: String,
    /// The other `data` fields, if any.
    pub extra: Option<Value>,
    /// When the fact was committed, epoch ms (`created_at`).
    pub occurred_at_ms: i64,
    /// `pending`, `delivered`, `failed` or `canceled`.
    pub state: String,
    /// Attempts made (a claim counts one).
    pub attempts: i64,
    /// When the next attempt is due (pending), epoch ms.
    pub next_attempt_ms: i64,
    /// The receiver's last HTTP status, if it answered.
    pub last_status: Option<i64>,
    /// Why the last attempt failed, if it did.
    pub last_error: Option<String>,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
}

/// How a claimed attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookAttempt {
    /// The receiver answered 2xx: the delivery is done and the subscription's failure
    /// count starts over.
    Delivered {
        /// The status.
        status: i64,
    },
    /// The attempt failed. The delivery is retried at `retry_at_ms`, or, without one,
    /// failed for good. The subscription's failure count goes up by one, and at
    /// `disable_after` consecutive failures it is disabled with a reason.
    Failed {
        /// The status, if the receiver answered.
        status: Option<i64>,
        /// What went wrong (no secrets).
        error: String,
        /// When to try again; `None`: never.
        retry_at_ms: Option<i64>,
        /// The failure count that disables the subscription.
        disable_after: i64,
    },
    /// The subscription is gone or disabled: the delivery is not sent.
    Canceled,
    /// Not attempted after all (the deliverer had enough in flight for its workspace):
    /// pending again from `retry_at_ms`, the claim's attempt not counted.
    Deferred {
        /// When it is due again.
        retry_at_ms: i64,
    },
}

/// Webhook subscriptions and deliveries. Every method is one transaction, committed
/// when it returns.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Writes a subscription with its event types (see [`WebhookPutRequest`]).
    async fn put_subscription(&self, put: WebhookPutRequest) -> StoreResult<WebhookPutOutcome>;

    /// One subscription of the workspace.
    async fn get_subscription(&self, workspace_id: &str, id: &str) -> StoreResult<Option<WebhookSubscriptionRow>>;

    /// The workspace's subscriptions, oldest first.
    async fn list_subscriptions(&self, workspace_id: &str) -> StoreResult<Vec<WebhookSubscriptionRow>>;

    /// Replaces a subscription's sealed secret; `false` when there is none.
    async fn set_subscription_secret(&self, workspace_id: &str, id: &str, sealed: &str) -> StoreResult<bool>;

    /// Deletes a subscription with its pending deliveries; `false` when there was none.
    async fn delete_subscription(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;

    /// A subscription's deliveries, newest first, at most `limit`.
    async fn list_deliveries(
        &self,
        workspace_id: &str,
        subscription_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<WebhookDelivery>>;

    /// Claims up to `limit` pending deliveries that are due, each for `lease_ms`,
    /// counting one attempt each.
    async fn claim_deliveries(&self, lease_ms: i64, limit: i64) -> StoreResult<Vec<WebhookDelivery>>;

    /// Settles a claimed attempt (see [`WebhookAttempt`]).
    async fn settle_delivery(&self, delivery: &WebhookDelivery, result: WebhookAttempt) -> StoreResult<()>;

    /// Removes delivered, failed and canceled deliveries last changed before
    /// `before_ms`, at most `limit`; returns how many.
    async fn purge_deliveries(&self, before_ms: i64, limit: i64) -> StoreResult<u64>;
}
