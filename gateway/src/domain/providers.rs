//! Model providers, the model catalog and provider credentials (docs/api/config.md
//! "Providers, models and credentials"): the rules of `/v1/config/providers`,
//! `offerings`, `model-attributes`, `catalog`, `credentials`, `credential-pools` and
//! `inference-profiles`, once.
//!
//! Everything is scoped to the caller's workspace. Every change is committed with the
//! workspace's `config_revision` bumped in the same transaction, then installed in this
//! gateway's catalogs and announced on the bus, so every gateway and worker uses it
//! within a second (`agentd_schema::catalogs`). A credential's secret is sealed with the
//! process key for the credential's id before it is stored, and never returned.

use std::sync::Arc;

use agentd_schema::catalog::{Catalog, Prices, ProviderKind};
use agentd_schema::store::{
    CredentialPoolRow, CredentialRef, EndpointRow, InferenceProfileRow, ModelAttributesRow, OfferingRow,
    ProviderCredentialRow, ProviderRow, Written,
};
use agentd_schema::{StoreError, egress, live};
use serde_json::json;

use super::{DomainError, DomainResult};
use crate::AppState;
use crate::admission::Tenant;

/// The longest caller-chosen id (providers, endpoints, pools, profiles).
pub const MAX_NAME_CHARS: usize = 64;
/// The longest model id.
pub const MAX_MODEL_ID_CHARS: usize = 128;
/// The most candidates of an inference profile and credentials of a pool.
pub const MAX_LIST_ITEMS: usize = 16;
/// The longest base URL.
pub const MAX_URL_CHARS: usize = 2_048;
/// The longest secret.
pub const MAX_SECRET_CHARS: usize = 4_096;
/// The longest timeout, ms (10 minutes).
pub const MAX_TIMEOUT_MS: i64 = 600_000;
/// The longest pool cooldown, ms (1 hour); the default is a minute.
pub const MAX_COOLDOWN_MS: i64 = 3_600_000;
/// A pool's cooldown when the body names none.
pub const DEFAULT_COOLDOWN_MS: i64 = 60_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Whether `value` is a caller-chosen id: 1 to 64 ASCII letters, digits, `.`, `_`, `-`,
/// starting with a letter or digit.
pub fn is_name(value: &str) -> bool {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    (1..=MAX_NAME_CHARS).contains(&value.len())
        && value.bytes().all(allowed)
        && value.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// A caller-chosen id from the path: one that cannot exist is the route's 404.
fn path_name(value: &str, kind: &str) -> DomainResult<()> {
    if is_name(value) {
        Ok(())
    } else {
        let shown: String = value.chars().take(64).collect();
        Err(DomainError::NotFound(format!("{kind} not found: {shown}")))
    }
}

/// Free text (a display name, a credential's name) carries no control character: NUL
/// cannot be stored in a PostgreSQL `text` column, and the others are not labels.
fn no_control(value: &str, field: &str) -> DomainResult<()> {
    if value.contains(char::is_control) {
        return Err(DomainError::invalid(format!("{field}: must not contain control characters")));
    }
    Ok(())
}

/// A caller-chosen id from a body field.
fn field_name(value: &str, field: &str) -> DomainResult<()> {
    if is_name(value) {
        Ok(())
    } else {
        Err(DomainError::invalid(format!(
            "{field}: 1 to {MAX_NAME_CHARS} letters, digits, '.', '_' or '-', starting with a letter or digit"
        )))
    }
}

/// A model id: 1 to 128 printable ASCII characters without spaces.
fn model_id(value: &str, field: &str) -> DomainResult<()> {
    if (1..=MAX_MODEL_ID_CHARS).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(DomainError::invalid(format!(
            "{field}: 1 to {MAX_MODEL_ID_CHARS} printable ASCII characters without spaces"
        )))
    }
}

/// A store `NotFound` for something a body refers to: the field at fault.
fn refers(error: StoreError, field: impl Fn(&str) -> String) -> DomainError {
    match error {
        StoreError::NotFound { what, id } => {
            DomainError::invalid(format!("{}: no {what} {id} in this workspace", field(what)))
        }
        other => other.into(),
    }
}

/// After a committed change: this gateway's catalog first (read-your-writes), then every
/// other process through the bus (each also polls).
async fn changed(state: &AppState, workspace_id: &str) {
    let store = state.backends.store.as_ref();
    if let Err(error) = state.catalogs.reload(store, workspace_id).await {
        tracing::warn!(%error, workspace_id, "cannot reload the provider configuration after a change");
    }
    if let Some(bus) = &state.backends.bus {
        agentd_schema::catalogs::announce(bus.as_ref(), workspace_id).await;
    }
}

/// A provider to create or replace.
#[derive(Debug, Clone)]
pub struct PutProvider {
    /// Its protocol.
    pub kind: ProviderKind,
    /// A label.
    pub display_name: Option<String>,
}

/// A provider with its endpoints.
#[derive(Debug, Clone)]
pub struct ProviderView {
    /// The provider.
    pub provider: ProviderRow,
    /// Its endpoints, the serving one first.
    pub endpoints: Vec<EndpointRow>,
}

/// Creates or replaces a provider (the path id is authoritative).
pub async fn put_provider(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
    put: PutProvider,
) -> DomainResult<Written<ProviderView>> {
    path_name(id, "provider")?;
    if let Some(name) = &put.display_name {
        no_control(name, "display_name")?;
    }
    let now = now_ms();
    let row = ProviderRow {
        id: id.to_owned(),
        workspace_id: tenant.workspace_id.clone(),
        kind: put.kind,
        display_name: put.display_name,
        created_at_ms: now,
        updated_at_ms: now,
    };
    let store = state.backends.store.as_ref();
    let written = store.put_provider(row).await?;
    changed(state, &tenant.workspace_id).await;
    let endpoints = store.list_endpoints(&tenant.workspace_id, id).await?;
    Ok(Written {
        row: ProviderView { provider: written.row, endpoints },
        created: written.created,
        revision: written.revision,
    })
}

/// A provider of the workspace with its endpoints.
pub async fn get_provider(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<ProviderView> {
    path_name(id, "provider")?;
    let store = state.backends.store.as_ref();
    let provider = store
        .get_provider(&tenant.workspace_id, id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("provider not found: {id}")))?;
    let endpoints = store.list_endpoints(&tenant.workspace_id, id).await?;
    Ok(ProviderView { provider, endpoints })
}

/// An endpoint to create or replace.
#[derive(Debug, Clone)]
pub struct PutEndpoint {
    /// `http(s)://…`, without credentials, query or fragment.
    pub base_url: String,
    /// `credential_id` or `credential_pool_id` (at most one).
    pub credential: Option<CredentialRef>,
    /// The lowest serves.
    pub priority: i64,
    /// Connection timeout, ms.
    pub connect_timeout_ms: Option<i64>,
    /// Whole-request timeout, ms.
    pub request_timeout_ms: Option<i64>,
}

/// A base URL: syntax first, then the egress guard (the one the worker applies again
/// when it connects): HTTPS to a public address, unless the gateway allows private
/// targets (`AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`, for local model servers). A loopback,
/// private or metadata address is refused here, not first at a turn.
async fn check_url(allow_private: bool, raw: &str) -> DomainResult<()> {
    if raw.len() > MAX_URL_CHARS {
        return Err(DomainError::invalid(format!("base_url: at most {MAX_URL_CHARS} characters")));
    }
    let url = reqwest::Url::parse(raw).map_err(|e| DomainError::invalid(format!("base_url: not a valid URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(DomainError::invalid("base_url: an http or https URL with a host is required"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(DomainError::invalid("base_url: must not carry credentials (use credential_id)"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(DomainError::invalid("base_url: must not have a query or a fragment"));
    }
    let rules = egress::Rules { allow_private, https_only: true };
    egress::check(raw, rules).await.map_err(|refused| {
        tracing::info!(url = %egress::redacted(raw), %refused, "provider endpoint refused");
        let reason = refused.0.strip_prefix("url: ").unwrap_or(&refused.0);
        DomainError::invalid(format!("base_url: {reason}"))
    })?;
    Ok(())
}

fn check_timeout(value: Option<i64>, field: &str) -> DomainResult<()> {
    match value {
        Some(ms) if !(1..=MAX_TIMEOUT_MS).contains(&ms) => {
            Err(DomainError::invalid(format!("{field}: between 1 and {MAX_TIMEOUT_MS} ms, got {ms}")))
        }
        _ => Ok(()),
    }
}

/// Creates or replaces an endpoint of a provider of the workspace.
pub async fn put_endpoint(
    state: &AppState,
    tenant: &Tenant,
    provider_id: &str,
    id: &str,
    put: PutEndpoint,
) -> DomainResult<Written<EndpointRow>> {
    path_name(provider_id, "provider")?;
    path_name(id, "endpoint")?;
    check_timeout(put.connect_timeout_ms, "connect_timeout_ms")?;
    check_timeout(put.request_timeout_ms, "request_timeout_ms")?;
    // Last: it resolves the host.
    check_url(state.remote_allow_private, &put.base_url).await?;
    let now = now_ms();
    let row = EndpointRow {
        id: id.to_owned(),
        workspace_id: tenant.workspace_id.clone(),
        provider_id: provider_id.to_owned(),
        base_url: put.base_url,
        credential: put.credential,
        priority: put.priority,
        connect_timeout_ms: put.connect_timeout_ms,
        request_timeout_ms: put.request_timeout_ms,
        created_at_ms: now,
        updated_at_ms: now,
    };
    let written =
        match state.backends.store.put_endpoint(row).await {
            // The provider is the path's: a missing one is the route's 404.
            Err(StoreError::NotFound { what: "provider", id }) => {
                return Err(DomainError::NotFound(format!("provider not found: {id}")));
            }
            other => other.map_err(|error| {
                refers(error, |what| {
                    if what == "credential pool" { "credential_pool_id".into() } else { "credential_id".into() }
                })
            })?,
        };
    changed(state, &tenant.workspace_id).await;
    Ok(written)
}

/// An endpoint of a provider of the workspace.
pub async fn get_endpoint(state: &AppState, tenant: &Tenant, provider_id: &str, id: &str) -> DomainResult<EndpointRow> {
    let view = get_provider(state, tenant, provider_id).await?;
    path_name(id, "endpoint")?;
    view.endpoints
        .into_iter()
        .find(|e| e.id == id)
        .ok_or_else(|| DomainError::NotFound(format!("endpoint not found: {id}")))
}

/// An offering: `model_id` served by `provider_id` under `provider_model`.
#[derive(Debug, Clone)]
pub struct PutOffering {
    /// The model id clients name.
    pub model_id: String,
    /// A provider of the workspace.
    pub provider_id: String,
    /// The name at the provider (default: `model_id`).
    pub provider_model: Option<String>,
}

/// Creates or replaces the offering of a model id.
pub async fn put_offering(state: &AppState, tenant: &Tenant, put: PutOffering) -> DomainResult<Written<OfferingRow>> {
    model_id(&put.model_id, "model_id")?;
    field_name(&put.provider_id, "provider_id")?;
    let provider_model = put.provider_model.unwrap_or_else(|| put.model_id.clone());
    model_id(&provider_model, "provider_model")?;
    let now = now_ms();
    let row = OfferingRow {
        model_id: put.model_id,
        workspace_id: tenant.workspace_id.clone(),
        provider_id: put.provider_id,
        provider_model,
        created_at_ms: now,
        updated_at_ms: now,
    };
    let written = state.backends.store.put_offering(row).await.map_err(|e| refers(e, |_| "provider_id".into()))?;
    changed(state, &tenant.workspace_id).await;
    Ok(written)
}

/// A model's attributes; `None` keeps the bootstrap catalog's value.
#[derive(Debug, Clone, Default)]
pub struct PutAttributes {
    /// Human-readable name.
    pub display_name: Option<String>,
    /// Context window.
    pub max_input_tokens: Option<i64>,
    /// Maximum `max_tokens`.
    pub max_tokens: Option<i64>,
    /// List prices, micro-USD per million tokens (per request for web tools).
    pub prices: Option<Prices>,
}

/// Creates or replaces a model's attributes. A price change reaches sessions created
/// after it: a session's prices are frozen at its creation.
pub async fn put_model_attributes(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
    put: PutAttributes,
) -> DomainResult<Written<ModelAttributesRow>> {
    model_id(id, "model_id").map_err(|_| DomainError::NotFound(format!("model not found: {id}")))?;
    if let Some(name) = &put.display_name {
        no_control(name, "display_name")?;
    }
    for (field, value) in [("max_input_tokens", put.max_input_tokens), ("max_tokens", put.max_tokens)] {
        if let Some(tokens) = value
            && !(1..=100_000_000).contains(&tokens)
        {
            return Err(DomainError::invalid(format!("{field}: between 1 and 100000000, got {tokens}")));
        }
    }
    let now = now_ms();
    let row = ModelAttributesRow {
        model_id: id.to_owned(),
        workspace_id: tenant.workspace_id.clone(),
        display_name: put.display_name,
        max_input_tokens: put.max_input_tokens,
        max_tokens: put.max_tokens,
        prices: put.prices,
        created_at_ms: now,
        updated_at_ms: now,
    };
    let written = state.backends.store.put_model_attributes(row).await?;
    changed(state, &tenant.workspace_id).await;
    Ok(written)
}

/// The workspace's effective catalog, as of the store now.
pub async fn catalog(state: &AppState, tenant: &Tenant) -> DomainResult<Arc<Catalog>> {
    Ok(state.catalogs.reload(state.backends.store.as_ref(), &tenant.workspace_id).await?)
}

/// A credential to store.
#[derive(Debug, Clone)]
pub struct NewCredential {
    /// A label.
    pub name: String,
    /// The API key (write-only).
    pub secret: String,
}

/// Stores a credential, its secret sealed for its id.
pub async fn create_credential(
    state: &AppState,
    tenant: &Tenant,
    new: NewCredential,
) -> DomainResult<Written<ProviderCredentialRow>> {
    if new.name.is_empty() || new.name.chars().count() > 256 {
        return Err(DomainError::invalid("name: 1 to 256 characters"));
    }
    no_control(&new.name, "name")?;
    if new.secret.is_empty() || new.secret.len() > MAX_SECRET_CHARS || new.secret.chars().any(char::is_control) {
        return Err(DomainError::invalid(format!(
            "secret: 1 to {MAX_SECRET_CHARS} characters without control characters"
        )));
    }
    let id = agentd_schema::ids::new_id("pcrd");
    let row = ProviderCredentialRow {
        sealed: state.secrets.seal(&id, &json!({ "api_key": new.secret })),
        id,
        workspace_id: tenant.workspace_id.clone(),
        name: new.name,
        created_at_ms: now_ms(),
        archived_at_ms: None,
    };
    let written = state.backends.store.insert_provider_credential(row).await?;
    changed(state, &tenant.workspace_id).await;
    Ok(written)
}

/// A credential of the workspace (never its secret: callers render only its metadata).
pub async fn get_credential(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<ProviderCredentialRow> {
    state
        .backends
        .store
        .get_provider_credential(&tenant.workspace_id, id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("credential not found: {id}")))
}

/// The workspace's credentials by id.
pub async fn list_credentials(state: &AppState, tenant: &Tenant) -> DomainResult<Vec<ProviderCredentialRow>> {
    Ok(state.backends.store.list_provider_credentials(&tenant.workspace_id).await?)
}

/// Archives a credential: from the next request on, no endpoint uses it (a pool moves
/// to its next one). Archiving again changes nothing.
pub async fn archive_credential(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
) -> DomainResult<Written<ProviderCredentialRow>> {
    let written = state.backends.store.archive_provider_credential(&tenant.workspace_id, id, now_ms()).await?;
    changed(state, &tenant.workspace_id).await;
    Ok(written)
}

/// A pool to create or replace.
#[derive(Debug, Clone)]
pub struct PutPool {
    /// Credential ids, in the order they are tried.
    pub credential_ids: Vec<String>,
    /// How long a refused credential is passed over, ms.
    pub cooldown_ms: Option<i64>,
}

/// Creates or replaces a credential pool.
pub async fn put_pool(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
    put: PutPool,
) -> DomainResult<Written<CredentialPoolRow>> {
    path_name(id, "credential pool")?;
    if put.credential_ids.is_empty() || put.credential_ids.len() > MAX_LIST_ITEMS {
        return Err(DomainError::invalid(format!("credential_ids: 1 to {MAX_LIST_ITEMS} credential ids")));
    }
    for (i, credential) in put.credential_ids.iter().enumerate() {
        if put.credential_ids[..i].contains(credential) {
            return Err(DomainError::invalid(format!("credential_ids[{i}]: {credential} is listed twice")));
        }
    }
    let cooldown_ms = put.cooldown_ms.unwrap_or(DEFAULT_COOLDOWN_MS);
    if !(0..=MAX_COOLDOWN_MS).contains(&cooldown_ms) {
        return Err(DomainError::invalid(format!("cooldown_ms: between 0 and {MAX_COOLDOWN_MS}, got {cooldown_ms}")));
    }
    let now = now_ms();
    let ids = put.credential_ids.clone();
    let row = CredentialPoolRow {
        id: id.to_owned(),
        workspace_id: tenant.workspace_id.clone(),
        credential_ids: put.credential_ids,
        cooldown_ms,
        created_at_ms: now,
        updated_at_ms: now,
    };
    let written = state.backends.store.put_credential_pool(row).await.map_err(|error| match error {
        StoreError::NotFound { what, id } => {
            let index = ids.iter().position(|c| *c == id).unwrap_or(0);
            DomainError::invalid(format!("credential_ids[{index}]: no {what} {id} in this workspace"))
        }
        other => other.into(),
    })?;
    changed(state, &tenant.workspace_id).await;
    Ok(written)
}

/// A pool of the workspace, and each of its credentials' state.
pub async fn get_pool(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
) -> DomainResult<(CredentialPoolRow, Vec<ProviderCredentialRow>)> {
    path_name(id, "credential pool")?;
    let store = state.backends.store.as_ref();
    let pool = store
        .get_credential_pool(&tenant.workspace_id, id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("credential pool not found: {id}")))?;
    let all = store.list_provider_credentials(&tenant.workspace_id).await?;
    let members = pool.credential_ids.iter().filter_map(|c| all.iter().find(|row| &row.id == c).cloned()).collect();
    Ok((pool, members))
}

/// Creates or replaces an inference profile: candidate model ids in order.
pub async fn put_profile(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
    candidates: Vec<String>,
) -> DomainResult<Written<InferenceProfileRow>> {
    path_name(id, "inference profile")?;
    if candidates.is_empty() || candidates.len() > MAX_LIST_ITEMS {
        return Err(DomainError::invalid(format!("candidates: 1 to {MAX_LIST_ITEMS} model ids")));
    }
    for (i, candidate) in candidates.iter().enumerate() {
        model_id(candidate, &format!("candidates[{i}]"))?;
    }
    let now = now_ms();
    let row = InferenceProfileRow {
        id: id.to_owned(),
        workspace_id: tenant.workspace_id.clone(),
        candidates,
        created_at_ms: now,
        updated_at_ms: now,
    };
    let written = state.backends.store.put_inference_profile(row).await?;
    changed(state, &tenant.workspace_id).await;
    Ok(written)
}

/// An inference profile of the workspace.
pub async fn get_profile(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<InferenceProfileRow> {
    path_name(id, "inference profile")?;
    state
        .backends
        .store
        .get_inference_profile(&tenant.workspace_id, id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("inference profile not found: {id}")))
}

/// How one candidate of a profile fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The model id.
    pub model_id: String,
    /// Why it cannot serve now (`None`: it can).
    pub unusable: Option<String>,
}

/// What `resolve` found: the first candidate that can serve, and every candidate's state.
#[derive(Debug, Clone)]
pub struct Resolution {
    /// The profile.
    pub profile: InferenceProfileRow,
    /// The model a request would use now (`None`: no candidate can serve).
    pub model_id: Option<String>,
    /// The configured provider that serves it (`None`: the environment's providers).
    pub provider_id: Option<String>,
    /// Its endpoint.
    pub endpoint_id: Option<String>,
    /// Every candidate, in order.
    pub candidates: Vec<Candidate>,
}

/// Why `model` cannot serve in `catalog` now, if it cannot.
fn unusable(catalog: &Catalog, model: &str) -> Option<String> {
    if catalog.provider_of(model).is_none() {
        return Some(format!("model {model} is not in the catalog"));
    }
    let route = catalog.find(model).and_then(|m| m.route.as_ref())?;
    let Some(endpoint) = &route.endpoint else {
        return Some(format!("provider {} has no endpoint", route.provider_id));
    };
    if endpoint.authenticated && endpoint.credentials.is_empty() {
        return Some(format!("endpoint {} has no active credential", endpoint.id));
    }
    None
}

/// Resolves an inference profile against the workspace's effective catalog now: the
/// first candidate that is in the catalog and whose provider has an endpoint with an
/// active credential (when it takes one).
pub async fn resolve_profile(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<Resolution> {
    let profile = get_profile(state, tenant, id).await?;
    let catalog = catalog(state, tenant).await?;
    let candidates: Vec<Candidate> = profile
        .candidates
        .iter()
        .map(|model| Candidate { model_id: model.clone(), unusable: unusable(&catalog, model) })
        .collect();
    let chosen = candidates.iter().find(|c| c.unusable.is_none()).map(|c| c.model_id.clone());
    let route = chosen.as_deref().and_then(|m| catalog.find(m)).and_then(|m| m.route.clone());
    Ok(Resolution {
        profile,
        model_id: chosen,
        provider_id: route.as_ref().map(|r| r.provider_id.clone()),
        endpoint_id: route.and_then(|r| r.endpoint.map(|e| e.id)),
        candidates,
    })
}

/// RFC 3339 of an epoch-ms time, for renderers.
pub fn time(ms: i64) -> String {
    live::rfc3339(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(result: DomainResult<()>) -> String {
        match result {
            Err(DomainError::Invalid { message, .. }) => message,
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_base_url_passes_the_egress_guard() {
        for url in ["https://127.0.0.1:8443/v1", "https://169.254.169.254/latest", "https://[::1]/", "https://10.0.0.7"]
        {
            let message = refusal(check_url(false, url).await);
            assert_eq!(message, "base_url: must resolve only to public addresses", "{url}");
        }
        let message = refusal(check_url(false, "http://203.0.113.9/v1").await);
        assert_eq!(message, "base_url: must use https");
        // A gateway that allows private targets (dev, local model servers) takes them.
        check_url(true, "http://127.0.0.1:8080/v1").await.unwrap();
        check_url(true, "https://10.0.0.7").await.unwrap();
        assert!(refusal(check_url(true, "http://127.0.0.1:8080/v1?key=1").await).contains("query"));
    }
}
