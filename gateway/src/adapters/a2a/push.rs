//! Push notifications: config CRUD per task, and at-least-once delivery.
//!
//! Delivery is durable and shared by every gateway: a watcher notices tasks with configs
//! whose state changed (WORKING, INPUT_REQUIRED, terminal) and, in one transaction
//! guarded by the previous notified state, records the new state and one delivery row
//! per config (`a2a_push_deliveries`, id = the stable notification id). A deliverer
//! claims due rows under a lease, POSTs them, deletes them on 2xx, otherwise retries
//! with exponential backoff and gives up after [`MAX_ATTEMPTS`] (logged, counted in
//! `agentd_a2a_push_given_up_total`).
//!
//! Each POST carries the `StreamResponse` body the reference server sends
//! (`{"statusUpdate": …}`), `X-A2A-Notification-Token` and `Authorization:
//! <scheme> <credentials>` when configured, and Standard-Webhooks headers
//! (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256 of
//! "id.timestamp.body" keyed by the token>`) when the config has a token (ADR 0010).
//!
//! SSRF: targets must be HTTPS and resolve only to public addresses, checked when a
//! config is created and again at delivery (the connection is pinned to the checked
//! address), unless `AGENTD_A2A_PUSH_ALLOW_PRIVATE=true` (tests).

#[cfg(test)]
use std::net::IpAddr;
use std::time::Duration;

use agentd_schema::egress::{self, Target};
use agentd_schema::{A2aDelivery, A2aPushConfig, A2aTask};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::view::{self, TERMINAL};
use super::{A2aError, A2aResult};
use crate::AppState;
use crate::admission::Tenant;

/// Attempts before a notification is given up.
pub const MAX_ATTEMPTS: i64 = 8;
/// Configs per task.
const MAX_CONFIGS: usize = 10;
const TIMEOUT: Duration = Duration::from_secs(10);

fn owner(task_id: &str, id: &str) -> String {
    format!("a2a-push:{task_id}:{id}")
}

fn render(config: &A2aPushConfig) -> Value {
    let mut out = json!({ "id": config.id, "taskId": config.task_id, "url": config.url });
    if let Some(token) = &config.token {
        out["token"] = json!(token);
    }
    // Credentials are write-only: only the scheme comes back.
    if let Some(scheme) = &config.auth_scheme {
        out["authentication"] = json!({ "scheme": scheme });
    }
    out
}

fn optional_string(value: &Value, field: &str, max: usize) -> A2aResult<Option<String>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        Value::String(s) if s.len() <= max && !s.contains(['\r', '\n', '\0']) => Ok(Some(s.clone())),
        _ => Err(A2aError::params(format!(
            "{field}: a string of at most {max} characters without line breaks is required"
        ))),
    }
}

/// Whether an address is one push notifications must not reach (the shared egress guard).
#[cfg(test)]
fn private(ip: IpAddr) -> bool {
    egress::private(ip)
}

/// Checks a push URL with the shared egress guard: HTTPS, a host that resolves, and
/// only public addresses (unless private targets are allowed, when plain HTTP is
/// accepted too). The refusal names no address; the guard logs host and addresses.
async fn check(state: &AppState, raw: &str) -> Result<Target, String> {
    let rules = egress::Rules { allow_private: state.a2a.push_allow_private, https_only: true };
    egress::check(raw, rules).await.map_err(|refused| {
        tracing::info!(url = %egress::redacted(raw), %refused, "A2A push target refused");
        refused.to_string()
    })
}

/// `CreateTaskPushNotificationConfig`.
pub async fn create(state: &AppState, tenant: &Tenant, params: &Value) -> A2aResult<Value> {
    let task_id =
        params["taskId"].as_str().filter(|s| !s.is_empty()).ok_or_else(|| A2aError::params("taskId: required"))?;
    let task = view::load(state, tenant, task_id).await?;
    Ok(render(&put(state, tenant, &task, params).await?))
}

async fn put(state: &AppState, tenant: &Tenant, task: &A2aTask, params: &Value) -> A2aResult<A2aPushConfig> {
    let url = params["url"].as_str().filter(|s| !s.is_empty()).ok_or_else(|| A2aError::params("url: required"))?;
    if url.len() > 2048 {
        return Err(A2aError::params("url: at most 2048 characters"));
    }
    check(state, url).await.map_err(A2aError::params)?;
    let id = optional_string(&params["id"], "id", 256)?.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let token = optional_string(&params["token"], "token", 4096)?;
    let auth = &params["authentication"];
    let (scheme, credentials) = match auth {
        Value::Null => (None, None),
        Value::Object(_) => {
            let scheme = optional_string(&auth["scheme"], "authentication.scheme", 64)?
                .ok_or_else(|| A2aError::params("authentication.scheme: required with authentication"))?;
            if !scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(A2aError::params("authentication.scheme: letters, digits, '-' and '_' only"));
            }
            let credentials = optional_string(&auth["credentials"], "authentication.credentials", 4096)?;
            (Some(scheme), credentials.map(|c| state.secrets.seal(&owner(&task.id, &id), &json!(c))))
        }
        _ => return Err(A2aError::params("authentication: an object is required")),
    };
    let store = state.backends.store.as_ref();
    let existing = store.a2a_list_push_configs(&task.id).await?;
    if existing.len() >= MAX_CONFIGS && !existing.iter().any(|c| c.id == id) {
        return Err(A2aError::params(format!("task {} already has {MAX_CONFIGS} push notification configs", task.id)));
    }
    let config = A2aPushConfig {
        task_id: task.id.clone(),
        id,
        workspace_id: tenant.workspace_id.clone(),
        url: url.to_owned(),
        token,
        auth_scheme: scheme,
        auth_credentials: credentials,
        created_at_ms: crate::managed::query::now_ms(),
    };
    store.a2a_put_push_config(&config).await?;
    Ok(config)
}

/// A push config given with `SendMessage` (`configuration.taskPushNotificationConfig`).
pub async fn configure_from_send(state: &AppState, tenant: &Tenant, task: &A2aTask, params: &Value) -> A2aResult<()> {
    let config = &params["configuration"]["taskPushNotificationConfig"];
    if config.is_object() {
        put(state, tenant, task, config).await?;
    }
    Ok(())
}

fn ids(params: &Value) -> A2aResult<(&str, &str)> {
    let task =
        params["taskId"].as_str().filter(|s| !s.is_empty()).ok_or_else(|| A2aError::params("taskId: required"))?;
    let id = params["id"].as_str().filter(|s| !s.is_empty()).ok_or_else(|| A2aError::params("id: required"))?;
    Ok((task, id))
}

fn config_not_found(task: &str, id: &str) -> A2aError {
    A2aError::params(format!("push notification config {id} not found on task {task}"))
}

/// `GetTaskPushNotificationConfig`.
pub async fn get(state: &AppState, tenant: &Tenant, params: &Value) -> A2aResult<Value> {
    let (task_id, id) = ids(params)?;
    view::load(state, tenant, task_id).await?;
    let config = state.backends.store.a2a_get_push_config(task_id, id).await?;
    config.as_ref().map(render).ok_or_else(|| config_not_found(task_id, id))
}

/// `ListTaskPushNotificationConfigs`.
pub async fn list(state: &AppState, tenant: &Tenant, params: &Value) -> A2aResult<Value> {
    let task_id =
        params["taskId"].as_str().filter(|s| !s.is_empty()).ok_or_else(|| A2aError::params("taskId: required"))?;
    view::load(state, tenant, task_id).await?;
    let configs = state.backends.store.a2a_list_push_configs(task_id).await?;
    Ok(json!({ "configs": configs.iter().map(render).collect::<Vec<_>>(), "nextPageToken": "" }))
}

/// `DeleteTaskPushNotificationConfig`.
pub async fn delete(state: &AppState, tenant: &Tenant, params: &Value) -> A2aResult<Value> {
    let (task_id, id) = ids(params)?;
    view::load(state, tenant, task_id).await?;
    if !state.backends.store.a2a_delete_push_config(task_id, id).await? {
        return Err(config_not_found(task_id, id));
    }
    Ok(json!({}))
}

/// The Standard-Webhooks signature header value, keyed by the config's token bytes.
pub fn signature(token: &str, id: &str, timestamp: i64, body: &str) -> String {
    crate::domain::webhooks::sign(token.as_bytes(), id, timestamp, body)
}

/// Runs the watcher and the deliverer until `stop`.
pub fn spawn(state: AppState, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(error) = watch(&state).await {
                tracing::warn!(code = error.code(), message = %error.message, "a2a push watcher pass failed");
            }
            if let Err(error) = deliver_due(&state).await {
                tracing::warn!(code = error.code(), message = %error.message, "a2a push delivery pass failed");
            }
        }
    })
}

/// Tasks looked at per watcher pass.
const WATCH_BATCH: i64 = 100;

/// The notified-state key of a task state: the input it answers and the state, so the
/// same state reached again for a later input is a new notification.
fn notified_key(input_seq: i64, state: &str) -> String {
    format!("{input_seq}.{state}")
}

/// Enqueues a notification per config for every task whose state changed. Only tasks
/// whose session committed events since the watcher last looked are derived, least
/// recently looked at first; one task that cannot be derived is logged and skipped.
async fn watch(state: &AppState) -> A2aResult<()> {
    let store = state.backends.store.as_ref();
    for watched in store.a2a_push_watch(TERMINAL, WATCH_BATCH).await? {
        let row = &watched.task;
        match notify(state, row).await {
            Ok(()) => store.a2a_push_watched(&row.id, watched.session_seq).await?,
            Err(error) => {
                tracing::warn!(task = %row.id, code = error.code(), message = %error.message, "a2a push watcher skipped a task");
                // Back of the queue, looked at again on the next pass.
                store.a2a_push_watched(&row.id, 0).await?;
            }
        }
    }
    Ok(())
}

/// Derives one task's state and enqueues its notifications if it changed.
async fn notify(state: &AppState, row: &A2aTask) -> A2aResult<()> {
    let store = state.backends.store.as_ref();
    // A task of an agent A2A no longer exposes notifies nobody (domain::exposure).
    let exposure =
        crate::domain::exposure::of(store, &row.workspace_id, crate::domain::exposure::Protocol::A2a).await?;
    if !view::exposed(state, row, &exposure).await? {
        return Ok(());
    }
    let view = view::view(state, row).await?;
    let key = notified_key(row.input_seq, view.state);
    if view.state == "TASK_STATE_SUBMITTED" || row.notified_state.as_deref() == Some(key.as_str()) {
        return Ok(());
    }
    let payload = json!({ "statusUpdate": { "taskId": row.id, "contextId": row.context_id, "status": view.status } });
    let deliveries = store
        .a2a_list_push_configs(&row.id)
        .await?
        .into_iter()
        .map(|config| A2aDelivery {
            // Stable across retries, distinct per input and state of the task.
            id: format!(
                "{}.{}.{}.{}",
                row.id,
                row.input_seq,
                view.state.trim_start_matches("TASK_STATE_").to_lowercase(),
                config.id
            ),
            task_id: row.id.clone(),
            config_id: config.id,
            payload: payload.to_string(),
            attempts: 0,
        })
        .collect();
    store.a2a_enqueue_push(&row.id, row.notified_state.as_deref(), &key, deliveries).await?;
    Ok(())
}

/// Deliveries claimed, and sent concurrently, per pass.
const DELIVERY_BATCH: usize = 16;
/// The longest one send may take (checking the target included); the whole batch is
/// sent concurrently, so a pass ends well within [`LEASE_MS`].
const SEND_BUDGET: Duration = Duration::from_secs(20);
const LEASE_MS: i64 = 60_000;

/// Why a POST failed.
#[derive(Debug)]
struct Failure {
    reason: String,
    /// The receiver refused the notification for good (a 4xx other than 408/429).
    permanent: bool,
}

impl From<String> for Failure {
    fn from(reason: String) -> Self {
        Self { reason, permanent: false }
    }
}

/// A receiver's answer that is worth retrying: 5xx, 408 and 429 (4xx otherwise is final).
fn retryable(status: reqwest::StatusCode) -> bool {
    status.is_server_error()
        || status == reqwest::StatusCode::REQUEST_TIMEOUT
        || status == reqwest::StatusCode::TOO_MANY_REQUESTS
}

async fn deliver_due(state: &AppState) -> A2aResult<()> {
    use futures::StreamExt;
    let claimed = state.backends.store.a2a_claim_deliveries(LEASE_MS, DELIVERY_BATCH as i64).await?;
    futures::stream::iter(claimed)
        .for_each_concurrent(DELIVERY_BATCH, |delivery| async move {
            if let Err(error) = deliver(state, &delivery).await {
                tracing::warn!(notification = %delivery.id, code = error.code(), message = %error.message, "a2a push delivery failed");
            }
        })
        .await;
    Ok(())
}

/// One claimed delivery: sent, then removed, given up or scheduled again.
async fn deliver(state: &AppState, delivery: &A2aDelivery) -> A2aResult<()> {
    let store = state.backends.store.as_ref();
    let Some(config) = store.a2a_get_push_config(&delivery.task_id, &delivery.config_id).await? else {
        store.a2a_delivery_done(&delivery.id).await?;
        return Ok(());
    };
    let outcome = match tokio::time::timeout(SEND_BUDGET, send(state, &config, delivery)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failure::from(format!("no answer within {}s", SEND_BUDGET.as_secs()))),
    };
    match outcome {
        Ok(()) => {
            metrics::counter!("agentd_a2a_push_delivered_total").increment(1);
            store.a2a_delivery_done(&delivery.id).await?;
        }
        Err(Failure { reason, permanent }) if permanent || delivery.attempts >= MAX_ATTEMPTS => {
            tracing::warn!(notification = %delivery.id, url = %egress::redacted(&config.url), %reason, attempts = delivery.attempts, "a2a push notification given up");
            metrics::counter!("agentd_a2a_push_given_up_total").increment(1);
            store.a2a_delivery_done(&delivery.id).await?;
        }
        Err(Failure { reason, .. }) => {
            tracing::info!(notification = %delivery.id, %reason, attempts = delivery.attempts, "a2a push notification will be retried");
            let backoff = 1_000i64 << (delivery.attempts - 1).clamp(0, 9);
            let next = crate::managed::query::now_ms() + backoff.min(300_000);
            store.a2a_delivery_retry(&delivery.id, next).await?;
        }
    }
    Ok(())
}

/// One POST, to the address checked just now.
async fn send(state: &AppState, config: &A2aPushConfig, delivery: &A2aDelivery) -> Result<(), Failure> {
    let target = check(state, &config.url).await?;
    // Pinned to the checked address, and never through a proxy (it would resolve the host itself).
    let client = target
        .pin(reqwest::Client::builder().timeout(TIMEOUT).redirect(reqwest::redirect::Policy::none()))
        .build()
        .map_err(|e| e.to_string())?;
    let timestamp = crate::managed::query::now_ms() / 1000;
    let mut request = client
        .post(target.url)
        .header("content-type", "application/json")
        .header("webhook-id", &delivery.id)
        .header("webhook-timestamp", timestamp.to_string());
    if let Some(token) = &config.token {
        request = request
            .header("X-A2A-Notification-Token", token)
            .header("webhook-signature", signature(token, &delivery.id, timestamp, &delivery.payload));
    }
    if let (Some(scheme), Some(sealed)) = (&config.auth_scheme, &config.auth_credentials) {
        let credentials = state.secrets.open(&owner(&config.task_id, &config.id), sealed).map_err(|e| e.to_string())?;
        request = request.header("authorization", format!("{scheme} {}", credentials.as_str().unwrap_or_default()));
    }
    let response = request.body(delivery.payload.clone()).send().await.map_err(|e| e.to_string())?;
    match response.status() {
        status if status.is_success() => Ok(()),
        status => Err(Failure { reason: format!("HTTP {status}"), permanent: !retryable(status) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_refused() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
            "100.64.0.1",
        ] {
            assert!(private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "2606:4700::1111"] {
            assert!(!private(ip.parse().unwrap()), "{ip}");
        }
    }
}
