//! Webhook subscriptions and their delivery (docs/api/webhooks.md).
//!
//! Two APIs write the same subscriptions through this service: the control plane's
//! `/v1/config/webhook-subscriptions` and the SDK's organization endpoint API
//! `/v1/organizations/webhooks`. The rules live here once: HTTPS URLs to public
//! addresses only (the shared egress guard, checked again at every delivery), event
//! types from the set agentd delivers, at most [`MAX_SUBSCRIPTIONS`] per workspace, a
//! `whsec_` secret shown once and sealed at rest.
//!
//! Facts reach the outbox (`webhook_deliveries`) from the store, in the transaction of
//! the fact (`agentd_schema::webhooks`). [`spawn_deliverer`], run by every gateway,
//! claims due deliveries under a lease and POSTs each as a Standard Webhooks message:
//! `webhook-id` (the event id, the same on every attempt), `webhook-timestamp`,
//! `webhook-signature` (`v1,` base64 HMAC-SHA256 of `id.timestamp.body`, keyed by the
//! base64-decoded secret). A 2xx delivers; 408, 425, 429, 5xx and network errors are
//! retried with backoff up to [`MAX_ATTEMPTS`]; any other status fails the delivery for
//! good. Every failed attempt counts against the subscription, and [`DISABLE_AFTER`]
//! consecutive ones disable it; a success starts the count over.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_schema::egress::{self, Target};
use agentd_schema::ids::{WebhookSubscriptionId, new_id};
use agentd_schema::webhooks as facts;
use agentd_schema::{WebhookAttempt, WebhookDelivery, WebhookPut, WebhookPutRequest, WebhookSubscriptionRow};
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde_json::json;
use sha2::Sha256;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::error::{DomainError, DomainResult};
use crate::AppState;
use crate::admission::Tenant;

/// Subscriptions per workspace (the SDK's organization endpoint limit).
pub const MAX_SUBSCRIPTIONS: usize = 32;
/// Consecutive failed attempts that disable a subscription.
pub const DISABLE_AFTER: i64 = 20;
/// Attempts of one delivery before it is failed for good.
pub const MAX_ATTEMPTS: i64 = 6;
/// The longest URL a subscription takes.
pub const MAX_URL: usize = 2048;
/// How many deliveries of a subscription the API shows.
pub const DELIVERIES_SHOWN: i64 = 100;
/// Finished deliveries are kept this long for the API, then purged.
const RETENTION_MS: i64 = 3 * 24 * 3_600_000;
/// The lease of a claimed delivery: longer than a send.
const LEASE_MS: i64 = 60_000;
/// Deliveries claimed per pass, at most.
const BATCH: usize = 32;
/// Sends in flight per gateway.
const IN_FLIGHT: usize = 64;
/// Sends in flight per workspace and gateway: one workspace's slow receivers leave the
/// other slots to the others (its extra deliveries wait a second, not counted as attempts).
const PER_WORKSPACE: usize = 8;
/// One send (the address check included).
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the deliverer looks for due deliveries while it finds some.
const POLL: Duration = Duration::from_millis(250);
/// The longest wait between looks while none are due: each empty look doubles the wait
/// from [`POLL`] up to this, so an idle gateway costs the database one statement per
/// this interval, and a new fact is delivered within it.
const IDLE_POLL: Duration = Duration::from_secs(2);

/// Delivery settings (`AGENTD_WEBHOOKS_ALLOW_PRIVATE`, `AGENTD_WEBHOOK_RETRY_BASE`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Private and loopback targets and plain `http` are allowed (tests, closed networks).
    pub allow_private: bool,
    /// The first retry's delay; each later one is 6 times the one before, capped at an hour.
    pub retry_base: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self { allow_private: false, retry_base: Duration::from_secs(5) }
    }
}

/// What a caller asks a subscription to be.
#[derive(Debug, Clone)]
pub struct SubscriptionSpec {
    /// Its id (minted `whep_…` when `None`).
    pub id: Option<String>,
    /// Where deliveries go.
    pub url: String,
    /// The event types it takes.
    pub event_types: Vec<String>,
    /// A short label.
    pub name: String,
    /// Notes.
    pub description: String,
    /// Whether deliveries are sent: a new subscription is enabled unless this says
    /// otherwise; a replaced one keeps its state unless this names one.
    pub enabled: Option<bool>,
}

/// A subscription written, with its secret when it was created now.
#[derive(Debug)]
pub struct Written {
    /// As stored.
    pub row: WebhookSubscriptionRow,
    /// `whsec_…`, only when it was created by this call.
    pub secret: Option<String>,
}

/// A new signing secret: `whsec_` and the base64 of 24 random bytes.
fn mint_secret() -> String {
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The event types a subscription takes: at least one, each one agentd delivers.
pub fn check_event_types(field: &str, types: &[String]) -> DomainResult<Vec<String>> {
    if types.is_empty() {
        return Err(DomainError::invalid(format!("{field}: name at least one event type")));
    }
    if let Some(unknown) = types.iter().find(|t| !facts::known(t)) {
        return Err(DomainError::invalid(format!(
            "{field}: agentd does not deliver {unknown:?}; it delivers {}",
            facts::EVENT_TYPES.join(", ")
        )));
    }
    let mut types = types.to_vec();
    types.sort();
    types.dedup();
    Ok(types)
}

fn rules(state: &AppState) -> egress::Rules {
    egress::Rules { allow_private: state.webhooks.allow_private, https_only: true }
}

/// Checks a target URL with the shared egress guard: HTTPS and only public addresses
/// (unless private targets are allowed). The refusal names no address.
pub async fn check_url(state: &AppState, field: &str, url: &str) -> DomainResult<Target> {
    if url.is_empty() || url.len() > MAX_URL || url.contains(char::is_control) {
        return Err(DomainError::invalid(format!("{field}: a URL of 1 to {MAX_URL} characters is required")));
    }
    egress::check(url, rules(state)).await.map_err(|refused| {
        tracing::info!(url = %egress::redacted(url), %refused, "webhook target refused");
        // The guard names the field `url`; say it as the caller's field.
        let reason = refused.0.strip_prefix("url: ").unwrap_or(&refused.0);
        DomainError::invalid(format!("{field}: {reason}"))
    })
}

/// Creates (`WebhookPut::Create`), replaces or upserts a subscription of the tenant's
/// workspace. A new one gets a secret, returned here only.
pub async fn put(state: &AppState, tenant: &Tenant, spec: SubscriptionSpec, mode: WebhookPut) -> DomainResult<Written> {
    let event_types = check_event_types("event_types", &spec.event_types)?;
    let id = spec.id.unwrap_or_else(|| new_id("whep"));
    if WebhookSubscriptionId::parse(&id).is_err() {
        return Err(DomainError::invalid("id: 1 to 64 letters, digits, '_' or '-'"));
    }
    // Last: it resolves the host.
    check_url(state, "url", &spec.url).await?;
    let secret = mint_secret();
    let row = WebhookSubscriptionRow {
        sealed_secret: state.secrets.seal(&facts::secret_owner(&tenant.workspace_id, &id), &json!(secret)),
        workspace_id: tenant.workspace_id.clone(),
        id,
        organization_id: tenant.organization_id.clone(),
        url: spec.url,
        name: spec.name,
        description: spec.description,
        event_types,
        enabled: spec.enabled.unwrap_or(true),
        disabled_reason: String::new(),
        consecutive_failures: 0,
        created_at_ms: 0,
        updated_at_ms: 0,
    };
    let put = WebhookPutRequest { row, mode, set_state: spec.enabled.is_some(), max: MAX_SUBSCRIPTIONS };
    let outcome = state.backends.store.put_subscription(put).await?;
    Ok(Written { secret: outcome.created.then_some(secret), row: outcome.row })
}

/// One subscription of the tenant's workspace.
pub async fn get(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<WebhookSubscriptionRow> {
    state
        .backends
        .store
        .get_subscription(&tenant.workspace_id, id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("webhook subscription {id} not found")))
}

/// The workspace's subscriptions, oldest first.
pub async fn list(state: &AppState, tenant: &Tenant) -> DomainResult<Vec<WebhookSubscriptionRow>> {
    Ok(state.backends.store.list_subscriptions(&tenant.workspace_id).await?)
}

/// Deletes a subscription and its pending deliveries.
pub async fn delete(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<()> {
    if state.backends.store.delete_subscription(&tenant.workspace_id, id).await? {
        Ok(())
    } else {
        Err(DomainError::NotFound(format!("webhook subscription {id} not found")))
    }
}

/// Gives a subscription a new secret and returns it (shown only here); deliveries are
/// signed with it from now on.
pub async fn regenerate_secret(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<String> {
    let secret = mint_secret();
    let sealed = state.secrets.seal(&facts::secret_owner(&tenant.workspace_id, id), &json!(secret));
    if state.backends.store.set_subscription_secret(&tenant.workspace_id, id, &sealed).await? {
        Ok(secret)
    } else {
        Err(DomainError::NotFound(format!("webhook subscription {id} not found")))
    }
}

/// A subscription's latest deliveries, newest first.
pub async fn deliveries(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<Vec<WebhookDelivery>> {
    get(state, tenant, id).await?;
    Ok(state.backends.store.list_deliveries(&tenant.workspace_id, id, DELIVERIES_SHOWN).await?)
}

/// The Standard Webhooks signature header value of one message: `v1,` and the base64
/// HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed by `key`.
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

/// The HMAC key of a `whsec_` secret: the base64 after the prefix.
fn signing_key(secret: &str) -> Result<Vec<u8>, String> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|_| "the signing secret is corrupt".to_owned())
}

/// The delay before attempt `attempts + 1` (after `attempts` failed ones).
fn backoff(base: Duration, attempts: i64) -> Duration {
    let factor = 6u32.saturating_pow((attempts - 1).clamp(0, 8) as u32);
    base.saturating_mul(factor).min(Duration::from_secs(3600))
}

/// Whether a receiver's status is worth another attempt.
fn retryable(status: u16) -> bool {
    matches!(status, 408 | 425 | 429) || (500..600).contains(&status)
}

/// Runs the deliverer until `stop`: claims due deliveries whenever a send slot is free,
/// sends each on its own task (a slow receiver holds one slot, not a batch), and now and
/// then purges finished ones past their retention.
pub fn spawn_deliverer(state: AppState, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let flights = Flights::default();
        let mut wait = POLL;
        let mut passes: u64 = 0;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            passes += 1;
            wait = match start_due(&state, &flights).await {
                // Every free slot filled: more may be due; go again without waiting.
                Ok(Pass::Full) => Duration::ZERO,
                Ok(Pass::Some) => POLL,
                Ok(Pass::Empty) => (wait * 2).clamp(POLL, IDLE_POLL),
                Err(error) => {
                    tracing::warn!(%error, "webhook delivery pass failed");
                    IDLE_POLL
                }
            };
            if passes.is_multiple_of(120) {
                let before = crate::managed::query::now_ms() - RETENTION_MS;
                if let Err(error) = state.backends.store.purge_deliveries(before, 1000).await {
                    tracing::warn!(%error, "webhook delivery purge failed");
                }
            }
        }
    })
}

/// The sends in flight: slots of this gateway, and how many each workspace holds, so one
/// workspace's slow receivers cannot take every slot.
#[derive(Clone)]
struct Flights {
    slots: Arc<Semaphore>,
    by_workspace: Arc<Mutex<HashMap<String, usize>>>,
}

impl Default for Flights {
    fn default() -> Self {
        Self { slots: Arc::new(Semaphore::new(IN_FLIGHT)), by_workspace: Arc::default() }
    }
}

impl Flights {
    /// Takes a place for `workspace`, unless it already holds its share.
    fn enter(&self, workspace: &str) -> bool {
        let mut held = self.by_workspace.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = held.entry(workspace.to_owned()).or_default();
        if *count >= PER_WORKSPACE {
            return false;
        }
        *count += 1;
        true
    }

    fn leave(&self, workspace: &str) {
        let mut held = self.by_workspace.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = held.get_mut(workspace) {
            *count -= 1;
            if *count == 0 {
                held.remove(workspace);
            }
        }
    }
}

/// Claims as many due deliveries as there are free slots (at most a batch) and starts
/// each; `true` when it filled every slot it asked for.
/// What one pass of the deliverer found.
enum Pass {
    /// Every free send slot was filled: more may be due.
    Full,
    /// Some deliveries were due (or every slot was busy).
    Some,
    /// None were due.
    Empty,
}

async fn start_due(state: &AppState, flights: &Flights) -> DomainResult<Pass> {
    let wanted = flights.slots.available_permits().min(BATCH);
    if wanted == 0 {
        return Ok(Pass::Some);
    }
    let store = state.backends.store.as_ref();
    let claimed = store.claim_deliveries(LEASE_MS, wanted as i64).await?;
    if claimed.is_empty() {
        return Ok(Pass::Empty);
    }
    // Only sends started count: a pass that deferred a saturated workspace's rows waits
    // for the next tick instead of claiming them again at once.
    let mut started = 0;
    let full = claimed.len() == wanted;
    for delivery in claimed {
        if !flights.enter(&delivery.workspace_id) {
            let retry_at_ms = crate::managed::query::now_ms() + 1_000;
            store.settle_delivery(&delivery, WebhookAttempt::Deferred { retry_at_ms }).await?;
            continue;
        }
        started += 1;
        let Ok(slot) = flights.slots.clone().acquire_owned().await else { return Ok(Pass::Some) };
        let (state, flights) = (state.clone(), flights.clone());
        tokio::spawn(async move {
            if let Err(error) = deliver(&state, &delivery).await {
                tracing::warn!(delivery = %delivery.id, %error, "webhook delivery could not be settled");
            }
            flights.leave(&delivery.workspace_id);
            drop(slot);
        });
    }
    Ok(if full && started == wanted { Pass::Full } else { Pass::Some })
}

/// One claimed delivery: sent, then settled.
async fn deliver(state: &AppState, delivery: &WebhookDelivery) -> DomainResult<()> {
    let store = state.backends.store.as_ref();
    let subscription = store.get_subscription(&delivery.workspace_id, &delivery.subscription_id).await?;
    let Some(subscription) = subscription.filter(|s| s.enabled) else {
        return Ok(store.settle_delivery(delivery, WebhookAttempt::Canceled).await?);
    };
    let outcome = match tokio::time::timeout(SEND_TIMEOUT, send(state, &subscription, delivery)).await {
        Ok(outcome) => outcome,
        Err(_) => Err((None, format!("no answer within {}s", SEND_TIMEOUT.as_secs()))),
    };
    let result = match outcome {
        Ok(status) => {
            metrics::counter!("agentd_webhook_deliveries_total", "outcome" => "delivered").increment(1);
            WebhookAttempt::Delivered { status: i64::from(status) }
        }
        Err((status, error)) => {
            let again = status.is_none_or(retryable) && delivery.attempts < MAX_ATTEMPTS;
            let retry_at_ms = again.then(|| {
                let delay = backoff(state.webhooks.retry_base, delivery.attempts);
                crate::managed::query::now_ms() + delay.as_millis() as i64
            });
            let outcome = if again { "retried" } else { "failed" };
            metrics::counter!("agentd_webhook_deliveries_total", "outcome" => outcome).increment(1);
            tracing::info!(
                delivery = %delivery.id, url = %egress::redacted(&subscription.url), %error,
                attempts = delivery.attempts, retry = again, "webhook delivery attempt failed"
            );
            WebhookAttempt::Failed { status: status.map(i64::from), error, retry_at_ms, disable_after: DISABLE_AFTER }
        }
    };
    Ok(store.settle_delivery(delivery, result).await?)
}

/// One POST to the address checked just now; the receiver's 2xx status, or the status
/// (if it answered) and what went wrong.
async fn send(
    state: &AppState,
    subscription: &WebhookSubscriptionRow,
    delivery: &WebhookDelivery,
) -> Result<u16, (Option<u16>, String)> {
    let fail = |error: String| (None, error);
    let target = egress::check(&subscription.url, rules(state)).await.map_err(|refused| fail(refused.to_string()))?;
    let secret = state
        .secrets
        .open(&facts::secret_owner(&subscription.workspace_id, &subscription.id), &subscription.sealed_secret)
        .map_err(|_| fail("the signing secret cannot be opened with the current keys".to_owned()))?;
    let key = signing_key(secret.as_str().unwrap_or_default()).map_err(fail)?;
    let body = facts::envelope(delivery);
    let timestamp = crate::managed::query::now_ms() / 1000;
    // Pinned to the checked address, never through a proxy, no redirects followed.
    let client = target
        .pin(reqwest::Client::builder().timeout(SEND_TIMEOUT).redirect(reqwest::redirect::Policy::none()))
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let response = client
        .post(target.url)
        .header("content-type", "application/json")
        .header("user-agent", concat!("agentd-webhooks/", env!("CARGO_PKG_VERSION")))
        .header("webhook-id", &delivery.event_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", sign(&key, &delivery.event_id, timestamp, &body))
        .body(body)
        .send()
        .await
        .map_err(|e| fail(format!("the request failed: {}", e.without_url())))?;
    let status = response.status().as_u16();
    if response.status().is_success() {
        Ok(status)
    } else {
        Err((Some(status), format!("the receiver answered HTTP {status}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_follow_standard_webhooks() {
        // The Standard Webhooks reference vector (its libraries' tests).
        let key = signing_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn retries_back_off_and_stop_on_permanent_refusals() {
        let base = Duration::from_secs(5);
        assert_eq!(backoff(base, 1), Duration::from_secs(5));
        assert_eq!(backoff(base, 2), Duration::from_secs(30));
        assert_eq!(backoff(base, 9), Duration::from_secs(3600));
        for status in [408, 425, 429, 500, 503] {
            assert!(retryable(status), "{status}");
        }
        for status in [400, 401, 404, 410, 413] {
            assert!(!retryable(status), "{status}");
        }
    }

    #[test]
    fn ids_and_event_types_are_checked() {
        assert!(WebhookSubscriptionId::parse("orders-hook_1").is_ok());
        for bad in ["", "a/b", &"x".repeat(65)] {
            assert!(WebhookSubscriptionId::parse(bad).is_err(), "{bad}");
        }
        assert!(check_event_types("event_types", &[]).is_err());
        assert!(check_event_types("event_types", &["external_key.failed".into()]).is_err());
        let types = check_event_types("event_types", &["agent.created".into(), "agent.created".into()]).unwrap();
        assert_eq!(types, vec!["agent.created".to_owned()]);
    }
}
