//! Webhook subscriptions and deliveries (`webhook_subscriptions`,
//! `webhook_subscription_events`, `webhook_deliveries`; migration 0023), and
//! [`record`], which the other areas call to write a fact to the outbox inside the
//! fact's own transaction.

use async_trait::async_trait;
use serde_json::Value;
use sqlx::{FromRow, Row};

use super::{JsonText, SqlStore, Tx};
use crate::error::{StoreError, StoreResult};
use crate::ids::new_id;
use crate::store::{
    WebhookAttempt, WebhookDelivery, WebhookPut, WebhookPutOutcome, WebhookPutRequest, WebhookStore,
    WebhookSubscriptionRow,
};
use crate::webhooks::Fact;

const SUBSCRIPTION_COLUMNS: &str = "workspace_id, id, organization_id, url, name, description, secret, state, \
                                    disabled_reason, consecutive_failures, created_at_ms, updated_at_ms";

const DELIVERY_COLUMNS: &str = "id, event_id, workspace_id, subscription_id, organization_id, event_type, resource_id, \
                                extra, occurred_at_ms, state, attempts, next_attempt_ms, last_status, last_error, \
                                updated_at_ms";

/// Writes `facts` to the outbox inside `tx`: one statement per fact, which inserts a
/// delivery per subscriber and nothing when there is none.
pub(super) async fn record(tx: &mut Tx, facts: &[Fact], now_ms: i64) -> StoreResult<()> {
    for fact in facts {
        let extra = fact.extra.as_ref().map(Value::to_string);
        sqlx::query(include_str!("../../queries/webhooks/insert_deliveries.sql"))
            .bind(new_id("event"))
            .bind(&fact.workspace_id)
            .bind(fact.event_type)
            .bind(&fact.resource_id)
            .bind(extra)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// A `webhook_subscriptions` row as stored.
#[derive(Debug, FromRow)]
struct SubscriptionDbRow {
    workspace_id: String,
    id: String,
    organization_id: String,
    url: String,
    name: String,
    description: String,
    secret: String,
    state: String,
    disabled_reason: String,
    consecutive_failures: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl SubscriptionDbRow {
    fn into_row(self, event_types: Vec<String>) -> WebhookSubscriptionRow {
        WebhookSubscriptionRow {
            enabled: self.state == "enabled",
            workspace_id: self.workspace_id,
            id: self.id,
            organization_id: self.organization_id,
            url: self.url,
            name: self.name,
            description: self.description,
            event_types,
            sealed_secret: self.secret,
            disabled_reason: self.disabled_reason,
            consecutive_failures: self.consecutive_failures,
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
        }
    }
}

/// A `webhook_deliveries` row as stored.
#[derive(Debug, FromRow)]
struct DeliveryDbRow {
    id: String,
    event_id: String,
    workspace_id: String,
    subscription_id: String,
    organization_id: String,
    event_type: String,
    resource_id: String,
    extra: Option<String>,
    occurred_at_ms: i64,
    state: String,
    attempts: i64,
    next_attempt_ms: i64,
    last_status: Option<i64>,
    last_error: Option<String>,
    updated_at_ms: i64,
}

impl TryFrom<DeliveryDbRow> for WebhookDelivery {
    type Error = StoreError;

    fn try_from(row: DeliveryDbRow) -> StoreResult<Self> {
        Ok(WebhookDelivery {
            extra: row.extra.map(JsonText::try_from).transpose()?.map(|text| text.0),
            id: row.id,
            event_id: row.event_id,
            workspace_id: row.workspace_id,
            subscription_id: row.subscription_id,
            organization_id: row.organization_id,
            event_type: row.event_type,
            resource_id: row.resource_id,
            occurred_at_ms: row.occurred_at_ms,
            state: row.state,
            attempts: row.attempts,
            next_attempt_ms: row.next_attempt_ms,
            last_status: row.last_status,
            last_error: row.last_error,
            updated_at_ms: row.updated_at_ms,
        })
    }
}

/// The event types of the workspace's subscriptions (of one, when `id` is given), by
/// subscription id.
async fn event_types<'e, E>(
    executor: E,
    workspace_id: &str,
    id: Option<&str>,
) -> StoreResult<std::collections::HashMap<String, Vec<String>>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT subscription_id, event_type FROM webhook_subscription_events \
         WHERE workspace_id = $1 AND ($2 IS NULL OR subscription_id = $2) ORDER BY subscription_id, event_type",
    )
    .bind(workspace_id)
    .bind(id)
    .fetch_all(executor)
    .await?;
    let mut by_id = std::collections::HashMap::<String, Vec<String>>::new();
    for (subscription, event_type) in rows {
        by_id.entry(subscription).or_default().push(event_type);
    }
    Ok(by_id)
}

/// Cancels the pending deliveries of a subscription that is disabled now (by its owner
/// or by its failures), inside the transaction that disabled it: they are never sent,
/// even if it is enabled again before they fall due.
async fn cancel_if_disabled(tx: &mut Tx, workspace_id: &str, id: &str, now_ms: i64) -> StoreResult<()> {
    sqlx::query(
        "UPDATE webhook_deliveries SET state = 'canceled', lease_until_ms = NULL, updated_at_ms = $3 \
         WHERE workspace_id = $1 AND subscription_id = $2 AND state = 'pending' \
         AND EXISTS (SELECT 1 FROM webhook_subscriptions s \
                     WHERE s.workspace_id = $1 AND s.id = $2 AND s.state = 'disabled')",
    )
    .bind(workspace_id)
    .bind(id)
    .bind(now_ms)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

async fn replace_event_types(tx: &mut Tx, row: &WebhookSubscriptionRow) -> StoreResult<()> {
    sqlx::query("DELETE FROM webhook_subscription_events WHERE workspace_id = $1 AND subscription_id = $2")
        .bind(&row.workspace_id)
        .bind(&row.id)
        .execute(&mut *tx)
        .await?;
    let mut types = row.event_types.clone();
    types.sort();
    types.dedup();
    for event_type in types {
        sqlx::query(
            "INSERT INTO webhook_subscription_events (workspace_id, subscription_id, event_type) VALUES ($1, $2, $3)",
        )
        .bind(&row.workspace_id)
        .bind(&row.id)
        .bind(event_type)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

fn state(enabled: bool) -> &'static str {
    if enabled { "enabled" } else { "disabled" }
}

#[async_trait]
impl WebhookStore for SqlStore {
    async fn put_subscription(&self, put: WebhookPutRequest) -> StoreResult<WebhookPutOutcome> {
        let WebhookPutRequest { row, mode, set_state, max } = put;
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        // The limit is checked inside the transaction; it is a guard against runaway
        // creation, not an invariant two concurrent creations could not both pass.
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM webhook_subscriptions WHERE workspace_id = $1")
            .bind(&row.workspace_id)
            .fetch_one(&mut tx)
            .await?;
        // A re-enable clears the reason and starts the failure count over.
        let replaced = if mode == WebhookPut::Create {
            None
        } else {
            sqlx::query_as::<_, SubscriptionDbRow>(&format!(
                "UPDATE webhook_subscriptions SET url = $3, name = $4, description = $5, state = COALESCE($6, state), \
                 disabled_reason = CASE WHEN $6 IS NULL THEN disabled_reason ELSE '' END, \
                 consecutive_failures = CASE WHEN $6 = 'enabled' AND state = 'disabled' THEN 0 ELSE consecutive_failures END, \
                 updated_at_ms = $7 \
                 WHERE workspace_id = $1 AND id = $2 RETURNING {SUBSCRIPTION_COLUMNS}"
            ))
            .bind(&row.workspace_id)
            .bind(&row.id)
            .bind(&row.url)
            .bind(&row.name)
            .bind(&row.description)
            .bind(set_state.then(|| state(row.enabled)))
            .bind(now)
            .fetch_optional(&mut tx)
            .await?
        };
        let (stored, created) = match replaced {
            Some(stored) => (stored, false),
            None if mode == WebhookPut::Replace => {
                return Err(StoreError::NotFound { what: "webhook subscription", id: row.id });
            }
            None => {
                if count >= max as i64 {
                    return Err(StoreError::Conflict(format!(
                        "the workspace already has {max} webhook subscriptions, the most it may have"
                    )));
                }
                let inserted = sqlx::query_as::<_, SubscriptionDbRow>(&format!(
                    "INSERT INTO webhook_subscriptions ({SUBSCRIPTION_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, '', 0, $9, $9) \
                     ON CONFLICT (workspace_id, id) DO NOTHING RETURNING {SUBSCRIPTION_COLUMNS}"
                ))
                .bind(&row.workspace_id)
                .bind(&row.id)
                .bind(&row.organization_id)
                .bind(&row.url)
                .bind(&row.name)
                .bind(&row.description)
                .bind(&row.sealed_secret)
                .bind(state(row.enabled))
                .bind(now)
                .fetch_optional(&mut tx)
                .await?;
                match inserted {
                    Some(inserted) => (inserted, true),
                    None => return Err(StoreError::Conflict(format!("webhook subscription {} exists", row.id))),
                }
            }
        };
        replace_event_types(&mut tx, &row).await?;
        if stored.state != "enabled" {
            cancel_if_disabled(&mut tx, &row.workspace_id, &row.id, now).await?;
        }
        tx.commit().await?;
        let mut event_types = row.event_types;
        event_types.sort();
        event_types.dedup();
        Ok(WebhookPutOutcome { row: stored.into_row(event_types), created })
    }

    async fn get_subscription(&self, workspace_id: &str, id: &str) -> StoreResult<Option<WebhookSubscriptionRow>> {
        let row = sqlx::query_as::<_, SubscriptionDbRow>(&format!(
            "SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE workspace_id = $1 AND id = $2"
        ))
        .bind(workspace_id)
        .bind(id)
        .fetch_optional(&self.readers)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mut types = event_types(&self.readers, workspace_id, Some(id)).await?;
        Ok(Some(row.into_row(types.remove(id).unwrap_or_default())))
    }

    async fn list_subscriptions(&self, workspace_id: &str) -> StoreResult<Vec<WebhookSubscriptionRow>> {
        let rows = sqlx::query_as::<_, SubscriptionDbRow>(&format!(
            "SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE workspace_id = $1 \
             ORDER BY created_at_ms, id"
        ))
        .bind(workspace_id)
        .fetch_all(&self.readers)
        .await?;
        let mut types = event_types(&self.readers, workspace_id, None).await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let id = row.id.clone();
                row.into_row(types.remove(&id).unwrap_or_default())
            })
            .collect())
    }

    async fn set_subscription_secret(&self, workspace_id: &str, id: &str, sealed: &str) -> StoreResult<bool> {
        let updated = sqlx::query(
            "UPDATE webhook_subscriptions SET secret = $3, updated_at_ms = $4 WHERE workspace_id = $1 AND id = $2",
        )
        .bind(workspace_id)
        .bind(id)
        .bind(sealed)
        .bind(self.now())
        .execute(&self.primary)
        .await?;
        Ok(updated.rows_affected() == 1)
    }

    async fn delete_subscription(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        let mut tx = self.primary.begin().await?;
        let deleted = sqlx::query("DELETE FROM webhook_subscriptions WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .execute(&mut tx)
            .await?
            .rows_affected();
        for statement in [
            "DELETE FROM webhook_subscription_events WHERE workspace_id = $1 AND subscription_id = $2",
            "DELETE FROM webhook_deliveries WHERE workspace_id = $1 AND subscription_id = $2",
        ] {
            sqlx::query(statement).bind(workspace_id).bind(id).execute(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(deleted == 1)
    }

    async fn list_deliveries(
        &self,
        workspace_id: &str,
        subscription_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        let rows = sqlx::query_as::<_, DeliveryDbRow>(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE workspace_id = $1 AND subscription_id = $2 \
             ORDER BY occurred_at_ms DESC, id DESC LIMIT $3"
        ))
        .bind(workspace_id)
        .bind(subscription_id)
        .bind(limit)
        .fetch_all(&self.readers)
        .await?;
        rows.into_iter().map(WebhookDelivery::try_from).collect()
    }

    async fn claim_deliveries(&self, lease_ms: i64, limit: i64) -> StoreResult<Vec<WebhookDelivery>> {
        let now = self.now();
        let rows = sqlx::query_as::<_, DeliveryDbRow>(include_str!("../../queries/webhooks/claim_deliveries.sql"))
            .bind(now)
            .bind(now + lease_ms)
            .bind(limit)
            .fetch_all(&self.primary)
            .await?;
        let mut claimed: Vec<WebhookDelivery> =
            rows.into_iter().map(WebhookDelivery::try_from).collect::<StoreResult<_>>()?;
        // Oldest facts first: a receiver sees a resource's events in the order they happened.
        claimed.sort_by(|a, b| (a.occurred_at_ms, &a.event_id).cmp(&(b.occurred_at_ms, &b.event_id)));
        Ok(claimed)
    }

    async fn settle_delivery(&self, delivery: &WebhookDelivery, result: WebhookAttempt) -> StoreResult<()> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let settle = |state: &'static str, next: i64, status: Option<i64>, error: Option<String>| {
            sqlx::query(
                "UPDATE webhook_deliveries SET state = $2, next_attempt_ms = $3, lease_until_ms = NULL, \
                 last_status = $4, last_error = $5, updated_at_ms = $6 \
                 WHERE id = $1 AND NOT ($2 = 'pending' AND state = 'canceled')",
            )
            .bind(&delivery.id)
            .bind(state)
            .bind(next)
            .bind(status)
            .bind(error)
            .bind(now)
        };
        match result {
            WebhookAttempt::Delivered { status } => {
                settle("delivered", delivery.next_attempt_ms, Some(status), None).execute(&mut tx).await?;
                sqlx::query(
                    "UPDATE webhook_subscriptions SET consecutive_failures = 0 \
                     WHERE workspace_id = $1 AND id = $2 AND consecutive_failures <> 0",
                )
                .bind(&delivery.workspace_id)
                .bind(&delivery.subscription_id)
                .execute(&mut tx)
                .await?;
            }
            WebhookAttempt::Failed { status, error, retry_at_ms, disable_after } => {
                let (state, next) = match retry_at_ms {
                    Some(at) => ("pending", at),
                    None => ("failed", delivery.next_attempt_ms),
                };
                settle(state, next, status, Some(error)).execute(&mut tx).await?;
                let counted = sqlx::query(include_str!("../../queries/webhooks/count_failure.sql"))
                    .bind(&delivery.workspace_id)
                    .bind(&delivery.subscription_id)
                    .bind(now)
                    .bind(disable_after)
                    .fetch_optional(&mut tx)
                    .await?;
                let failures: Option<i64> = counted.map(|row| row.try_get("consecutive_failures")).transpose()?;
                if failures.is_some_and(|failures| failures >= disable_after) {
                    cancel_if_disabled(&mut tx, &delivery.workspace_id, &delivery.subscription_id, now).await?;
                }
            }
            WebhookAttempt::Canceled => {
                settle("canceled", delivery.next_attempt_ms, None, None).execute(&mut tx).await?;
            }
            WebhookAttempt::Deferred { retry_at_ms } => {
                sqlx::query(
                    "UPDATE webhook_deliveries SET next_attempt_ms = $2, lease_until_ms = NULL, \
                     attempts = attempts - 1, updated_at_ms = $3 WHERE id = $1 AND state = 'pending'",
                )
                .bind(&delivery.id)
                .bind(retry_at_ms)
                .bind(now)
                .execute(&mut tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn purge_deliveries(&self, before_ms: i64, limit: i64) -> StoreResult<u64> {
        let deleted = sqlx::query(
            "DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries \
             WHERE state <> 'pending' AND updated_at_ms < $1 LIMIT $2)",
        )
        .bind(before_ms)
        .bind(limit)
        .execute(&self.primary)
        .await?;
        Ok(deleted.rows_affected())
    }
}
