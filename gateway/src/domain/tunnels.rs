//! MCP tunnels (docs/api/tunnels.md): a tunnel gives a workspace a domain under which
//! its private MCP servers are reached through a connector (`agentd tunnel`) that runs
//! in the private network and dials out to a gateway. This module holds the rules of
//! the tunnel and certificate resources; `crate::tunnel` carries the traffic.
//!
//! - A tunnel is created with a fresh domain (from its id: globally unique, never
//!   reused) and a connector token, sealed at rest and shown only by `reveal_token` and
//!   `rotate_token`. Rotating replaces the token: the old one stops authenticating and
//!   every connector holding it is cut.
//! - Archiving is final: the certificates are archived, the token is destroyed (its
//!   connectors cut), and the domain is retired with the tunnel.
//! - Certificates are the CA certificates the tunnel trusts: a worker verifies the MCP
//!   server behind the tunnel against them, end to end. One PEM certificate, no private
//!   key, at most 8 KB, parsed with `x509-parser`; at most two active per tunnel. A
//!   tunnel without an active certificate carries no traffic.

use agentd_schema::ids::{TunnelCertificateId, TunnelId, new_id};
use agentd_schema::tunnels::{self, CERTIFICATE, TUNNEL};
use agentd_schema::{NewResource, Resource, ResourceUpdate, Store, StoreError};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::error::{DomainError, DomainResult};
use crate::AppState;
use crate::admission::Tenant;
use crate::managed::query::{now_ms, rfc3339};

/// The largest certificate PEM taken, in bytes.
pub const MAX_CERTIFICATE_BYTES: usize = 8 * 1024;
/// Certificates a tunnel may have that are not archived.
pub const MAX_ACTIVE_CERTIFICATES: i64 = 2;
/// How often a compare-and-swap on a tunnel is retried before giving up.
const CAS_ATTEMPTS: usize = 8;

/// The wire tunnel (no token, no connection state).
pub fn render(tunnel: &Resource) -> Value {
    let mut out = public(&tunnel.body);
    out["archived_at"] = json!(tunnel.archived_at_ms.map(rfc3339));
    out
}

/// The wire certificate (no PEM).
pub fn render_certificate(certificate: &Resource) -> Value {
    let mut out = public(&certificate.body);
    out["archived_at"] = json!(certificate.archived_at_ms.map(rfc3339));
    out
}

/// A body without its internal (`_`) fields.
fn public(body: &Value) -> Value {
    let mut out = body.clone();
    if let Some(map) = out.as_object_mut() {
        map.retain(|key, _| !key.starts_with('_'));
    }
    out
}

fn not_found(id: &str) -> DomainError {
    DomainError::NotFound(format!("tunnel not found: {id}"))
}

/// A tunnel of the caller's workspace.
pub async fn load(store: &dyn Store, tenant: &Tenant, id: &TunnelId) -> DomainResult<Resource> {
    store.get_resource(&tenant.workspace_id, TUNNEL, id).await?.ok_or_else(|| not_found(id))
}

/// A fresh token's stored form: its id, digest and the sealed token.
fn sealed_token(state: &AppState, tunnel_id: &str, token: &str) -> Value {
    json!({
        "id": new_id("ttok"),
        "sha256": tunnels::token_digest(token),
        "sealed": state.secrets.seal(tunnel_id, &json!({ "token": token })),
    })
}

/// Creates a tunnel with a fresh domain and connector token.
pub async fn create(state: &AppState, tenant: &Tenant, display_name: Option<String>) -> DomainResult<Resource> {
    let id = new_id("tnl");
    let token = tunnels::new_token(&id, &tenant.workspace_id);
    let body = json!({
        "type": "tunnel",
        "id": id,
        "display_name": display_name,
        "domain": tunnels::domain_of(&id),
        "created_at": rfc3339(now_ms()),
        "_token": sealed_token(state, &id, &token),
    });
    let new = NewResource {
        id: id.clone(),
        workspace_id: tenant.workspace_id.clone(),
        kind: TUNNEL.into(),
        parent_id: None,
        body,
        versioned: false,
    };
    Ok(state.backends.store.create_resource(new).await?)
}

/// The tunnel's current connector token (`BetaTunnelToken`).
pub async fn reveal_token(state: &AppState, tenant: &Tenant, id: &TunnelId) -> DomainResult<Value> {
    let tunnel = load(state.backends.store.as_ref(), tenant, id).await?;
    token_of(state, &tunnel)
}

fn token_of(state: &AppState, tunnel: &Resource) -> DomainResult<Value> {
    if tunnel.archived_at_ms.is_some() {
        return Err(DomainError::Conflict(format!("tunnel {} is archived: it has no token", tunnel.id)));
    }
    let stored = &tunnel.body["_token"];
    let opened = state
        .secrets
        .open(&tunnel.id, stored["sealed"].as_str().unwrap_or_default())
        .map_err(|_| DomainError::Internal(format!("tunnel {}: its sealed token does not open", tunnel.id)))?;
    Ok(json!({ "type": "tunnel_token", "id": stored["id"], "tunnel_token": opened["token"] }))
}

/// Replaces the tunnel's token; the old one stops working and its connectors are cut.
pub async fn rotate_token(state: &AppState, tenant: &Tenant, id: &TunnelId) -> DomainResult<Value> {
    let store = state.backends.store.as_ref();
    let rotated = change(store, tenant, id, |tunnel| {
        if tunnel.archived_at_ms.is_some() {
            return Err(DomainError::Conflict(format!("tunnel {id} is archived: its token cannot be rotated")));
        }
        let token = tunnels::new_token(id, &tenant.workspace_id);
        let mut body = tunnel.body.clone();
        body["_token"] = sealed_token(state, id, &token);
        Ok(body)
    })
    .await?;
    state.tunnels.cut(&state.backends, id).await;
    token_of(state, &rotated)
}

/// Archives the tunnel (idempotent): its certificates are archived, its token destroyed
/// and its connectors cut.
pub async fn archive(state: &AppState, tenant: &Tenant, id: &TunnelId) -> DomainResult<Resource> {
    let store = state.backends.store.as_ref();
    let tunnel = load(store, tenant, id).await?;
    if tunnel.archived_at_ms.is_some() {
        return Ok(tunnel);
    }
    for certificate in active_certificates(store, &tenant.workspace_id, id).await? {
        store.archive_resource(&tenant.workspace_id, CERTIFICATE, &certificate.id).await?;
    }
    change(store, tenant, id, |tunnel| {
        let mut body = tunnel.body.clone();
        body["_token"] = Value::Null;
        Ok(body)
    })
    .await?;
    let archived = store.archive_resource(&tenant.workspace_id, TUNNEL, id).await?;
    state.tunnels.cut(&state.backends, id).await;
    Ok(archived)
}

/// Rewrites the tunnel's body by compare-and-swap, retrying when another write won.
async fn change(
    store: &dyn Store,
    tenant: &Tenant,
    id: &TunnelId,
    edit: impl Fn(&Resource) -> DomainResult<Value>,
) -> DomainResult<Resource> {
    for _ in 0..CAS_ATTEMPTS {
        let tunnel = load(store, tenant, id).await?;
        let update = ResourceUpdate {
            workspace_id: tenant.workspace_id.clone(),
            kind: TUNNEL.into(),
            id: id.to_string(),
            expected_version: tunnel.version,
            body: edit(&tunnel)?,
            versioned: false,
        };
        match store.update_resource(update).await {
            Err(StoreError::Conflict(_)) => continue,
            other => return Ok(other?),
        }
    }
    Err(DomainError::Conflict(format!("tunnel {id} kept changing; retry")))
}

/// The tunnel's certificates that are not archived (expired ones included).
async fn active_certificates(store: &dyn Store, workspace_id: &str, id: &str) -> DomainResult<Vec<Resource>> {
    let query = agentd_schema::ListQuery {
        parent_id: Some(id.to_owned()),
        limit: MAX_ACTIVE_CERTIFICATES * 4,
        ..agentd_schema::ListQuery::default()
    };
    Ok(store.list_resources(workspace_id, CERTIFICATE, &query).await?)
}

/// A checked certificate: its DER fingerprint and expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedCertificate {
    /// The PEM as given (trimmed).
    pub pem: String,
    /// Lowercase hex SHA-256 of the DER encoding.
    pub fingerprint: String,
    /// `notAfter`, epoch ms.
    pub expires_at_ms: i64,
}

/// Checks `pem`: at most 8 KB, exactly one `CERTIFICATE` block and nothing else (no
/// private key), a certificate `x509-parser` reads.
pub fn check_certificate(pem: &str) -> DomainResult<CheckedCertificate> {
    let invalid = |why: &str| DomainError::invalid(format!("ca_certificate_pem: {why}"));
    if pem.len() > MAX_CERTIFICATE_BYTES {
        return Err(invalid(&format!("at most {MAX_CERTIFICATE_BYTES} bytes, got {}", pem.len())));
    }
    let mut blocks = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()) {
        blocks.push(block.map_err(|e| invalid(&format!("not PEM: {e}")))?);
    }
    if blocks.iter().any(|block| block.label.contains("PRIVATE KEY")) {
        return Err(invalid("holds a private key; send the CA certificate only"));
    }
    let [block] = blocks.as_slice() else {
        return Err(invalid(&format!("expected exactly one certificate, got {} PEM blocks", blocks.len())));
    };
    if block.label != "CERTIFICATE" {
        return Err(invalid(&format!("expected a CERTIFICATE block, got {:?}", block.label)));
    }
    let certificate = block.parse_x509().map_err(|e| invalid(&format!("not an X.509 certificate: {e}")))?;
    Ok(CheckedCertificate {
        pem: pem.trim().to_owned(),
        fingerprint: hex::encode(Sha256::digest(&block.contents)),
        expires_at_ms: certificate.validity().not_after.timestamp() * 1000,
    })
}

/// Registers a CA certificate with the tunnel (at most two active).
pub async fn add_certificate(state: &AppState, tenant: &Tenant, id: &TunnelId, pem: &str) -> DomainResult<Resource> {
    let checked = check_certificate(pem)?;
    let store = state.backends.store.as_ref();
    let tunnel = load(store, tenant, id).await?;
    if tunnel.archived_at_ms.is_some() {
        return Err(DomainError::Conflict(format!("tunnel {id} is archived")));
    }
    let certificate_id = new_id("tcrt");
    let body = json!({
        "type": "tunnel_certificate",
        "id": certificate_id,
        "tunnel_id": id,
        "fingerprint": checked.fingerprint,
        "expires_at": rfc3339(checked.expires_at_ms),
        "created_at": rfc3339(now_ms()),
        "_pem": checked.pem,
        // What `agentd_schema::tunnels::trusted_certificates` filters on: an expired CA
        // is trusted no more.
        "_expires_at_ms": checked.expires_at_ms,
    });
    let new = NewResource {
        id: certificate_id,
        workspace_id: tenant.workspace_id.clone(),
        kind: CERTIFICATE.into(),
        parent_id: Some(id.to_string()),
        body,
        versioned: false,
    };
    match store.create_capped_child(new, TUNNEL, MAX_ACTIVE_CERTIFICATES).await {
        Err(StoreError::Conflict(_)) => Err(DomainError::Conflict(format!(
            "tunnel {id} already has {MAX_ACTIVE_CERTIFICATES} active certificates; archive one first"
        ))),
        Err(StoreError::NotFound { .. }) => Err(DomainError::Conflict(format!("tunnel {id} is archived"))),
        other => Ok(other?),
    }
}

/// A certificate of the caller's tunnel.
pub async fn load_certificate(
    store: &dyn Store,
    tenant: &Tenant,
    id: &TunnelId,
    certificate: &TunnelCertificateId,
) -> DomainResult<Resource> {
    load(store, tenant, id).await?;
    store
        .get_resource(&tenant.workspace_id, CERTIFICATE, certificate)
        .await?
        .filter(|found| found.parent_id.as_deref() == Some(id.as_str()))
        .ok_or_else(|| DomainError::NotFound(format!("tunnel certificate not found: {certificate}")))
}

/// Archives a certificate (idempotent); archiving the last one is allowed, and leaves
/// the tunnel without traffic until another is added.
pub async fn archive_certificate(
    store: &dyn Store,
    tenant: &Tenant,
    id: &TunnelId,
    certificate: &TunnelCertificateId,
) -> DomainResult<Resource> {
    load_certificate(store, tenant, id, certificate).await?;
    Ok(store.archive_resource(&tenant.workspace_id, CERTIFICATE, certificate).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed CA certificate (generated once for this test; never a secret).
    const CA: &str = include_str!("tunnels_test_ca.pem");

    #[test]
    fn one_pem_certificate_is_taken_with_its_fingerprint_and_expiry() {
        let checked = check_certificate(CA).unwrap();
        assert_eq!(checked.fingerprint.len(), 64);
        assert!(checked.expires_at_ms > 1_700_000_000_000, "{}", checked.expires_at_ms);
    }

    #[test]
    fn anything_else_is_refused() {
        let refused = |pem: &str| match check_certificate(pem) {
            Err(DomainError::Invalid { message, .. }) => message,
            other => panic!("{other:?}"),
        };
        assert!(refused(&format!("{CA}\n{CA}")).contains("exactly one certificate"));
        let key = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";
        assert!(refused(&format!("{CA}\n{key}")).contains("private key"));
        assert!(refused("hello").contains("exactly one certificate, got 0"));
        assert!(refused(&"x".repeat(MAX_CERTIFICATE_BYTES + 1)).contains("at most 8192 bytes"));
        let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(refused(garbage).contains("not an X.509 certificate"));
    }
}
