//! MCP tunnels (docs/api/tunnels.md): what gateways, workers and the connector
//! (`agentd tunnel`) share — the tunnel's domain and which tunnel a host belongs to, the
//! connector token's form, and the credential a worker presents to a gateway's tunnel
//! proxy.
//!
//! A tunnel's domain is `tnl-<id>.<base>`; the base is `AGENTD_TUNNEL_DOMAIN`, by default
//! `tunnels.agentd.invalid` (`.invalid` never resolves, RFC 2606, so a tunnel host can
//! only be reached through its tunnel). An MCP server URL whose host is a subdomain of a
//! tunnel's domain is routed through that tunnel.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The default base of tunnel domains.
pub const DEFAULT_BASE_DOMAIN: &str = "tunnels.agentd.invalid";
/// The prefix of connector tokens; the tunnel's id follows, then `.` and the secret.
pub const TOKEN_PREFIX: &str = "sk-agentd-tun-";
/// The label `derive_key` is given for the proxy credential's key.
pub const PROXY_KEY_LABEL: &str = "tunnel-proxy";
/// The resource kinds of tunnels and their certificates.
pub const TUNNEL: &str = "tunnel";
/// See [`TUNNEL`].
pub const CERTIFICATE: &str = "tunnel_certificate";

/// The base of tunnel domains (`AGENTD_TUNNEL_DOMAIN`, lowercased).
pub fn base_domain() -> String {
    std::env::var("AGENTD_TUNNEL_DOMAIN")
        .ok()
        .map(|value| value.trim().trim_matches('.').to_ascii_lowercase())
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| DEFAULT_BASE_DOMAIN.to_owned())
}

/// The domain of tunnel `tunnel_id` (`tnl_…` → `tnl-….<base>`).
pub fn domain_of(tunnel_id: &str) -> String {
    format!("{}.{}", tunnel_id.replacen('_', "-", 1), base_domain())
}

/// The tunnel whose domain `host` is a subdomain of, if any.
pub fn tunnel_of_host(host: &str) -> Option<String> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let inside = host.strip_suffix(&format!(".{}", base_domain()))?;
    let (_, label) = inside.rsplit_once('.')?;
    let id = label.strip_prefix("tnl-").map(|rest| format!("tnl_{rest}"))?;
    crate::ids::TunnelId::parse(&id).ok().map(crate::ids::TunnelId::into_string)
}

/// A new connector token for tunnel `tunnel_id` of `workspace_id`: the prefix, the
/// tunnel's id, `.`, the workspace's id in hex, `.`, 32 random bytes in hex.
pub fn new_token(tunnel_id: &str, workspace_id: &str) -> String {
    let secret: [u8; 32] = rand::random();
    format!("{TOKEN_PREFIX}{tunnel_id}.{}.{}", hex::encode(workspace_id), hex::encode(secret))
}

/// The tunnel and workspace a connector token names (not whether the token is the
/// tunnel's current one: compare [`token_digest`]s for that).
pub fn tunnel_of_token(token: &str) -> Option<(String, String)> {
    let mut parts = token.strip_prefix(TOKEN_PREFIX)?.split('.');
    let (id, workspace, secret) = (parts.next()?, parts.next()?, parts.next()?);
    let workspace = String::from_utf8(hex::decode(workspace).ok()?).ok()?;
    let well_formed = parts.next().is_none() && secret.len() == 64 && crate::ids::TunnelId::parse(id).is_ok();
    well_formed.then(|| (id.to_owned(), workspace))
}

/// The digest a token is stored and compared by (hex SHA-256).
pub fn token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// How long a proxy credential is good for, at most.
pub const PROXY_CREDENTIAL_SECS: i64 = 3600;

fn proxy_mac(key: &[u8; 32], tunnel_id: &str, token_id: &str, expires_s: i64) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(format!("{tunnel_id}\n{token_id}\n{expires_s}").as_bytes());
    mac
}

/// What a worker presents to a gateway's tunnel proxy for `tunnel_id` while its token is
/// `token_id`: `<expiry, unix s>.<HMAC-SHA256 hex>` under the process key's derived key
/// ([`PROXY_KEY_LABEL`]), good for [`PROXY_CREDENTIAL_SECS`]. Only agentd's own processes
/// hold that key; rotating the tunnel's token revokes every credential made before.
pub fn proxy_credential(key: &[u8; 32], tunnel_id: &str, token_id: &str, now_s: i64) -> String {
    let expires = now_s + PROXY_CREDENTIAL_SECS;
    let mac = proxy_mac(key, tunnel_id, token_id, expires);
    format!("{expires}.{}", hex::encode(mac.finalize().into_bytes()))
}

/// Whether `presented` is a proxy credential for `tunnel_id` and `token_id` that has not
/// expired at `now_s` (compared in constant time).
pub fn proxy_credential_holds(key: &[u8; 32], tunnel_id: &str, token_id: &str, presented: &str, now_s: i64) -> bool {
    let Some((expires, mac)) = presented.split_once('.') else { return false };
    let (Ok(expires), Ok(mac)) = (expires.parse::<i64>(), hex::decode(mac)) else { return false };
    if expires < now_s || expires > now_s + PROXY_CREDENTIAL_SECS {
        return false;
    }
    proxy_mac(key, tunnel_id, token_id, expires).verify_slice(&mac).is_ok()
}

/// The certificates a tunnel trusts now: not archived and not expired (`_expires_at_ms`).
pub async fn trusted_certificates(
    store: &dyn crate::Store,
    workspace_id: &str,
    tunnel_id: &str,
    now_ms: i64,
) -> crate::StoreResult<Vec<crate::Resource>> {
    let query = crate::ListQuery { parent_id: Some(tunnel_id.to_owned()), limit: 16, ..crate::ListQuery::default() };
    let listed = store.list_resources(workspace_id, CERTIFICATE, &query).await?;
    Ok(listed.into_iter().filter(|c| c.body["_expires_at_ms"].as_i64().is_none_or(|at| at > now_ms)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_under_a_tunnels_domain_name_the_tunnel() {
        let id = crate::ids::new_id("tnl");
        let domain = domain_of(&id);
        assert!(domain.starts_with("tnl-") && domain.ends_with(".tunnels.agentd.invalid"), "{domain}");
        assert_eq!(tunnel_of_host(&format!("mcp.{domain}")), Some(id.clone()));
        assert_eq!(tunnel_of_host(&format!("a.b.{}", domain.to_uppercase())), Some(id.clone()));
        assert_eq!(tunnel_of_host(&domain), None, "the domain itself is no server's host");
        assert_eq!(tunnel_of_host("mcp.example.com"), None);
        assert_eq!(tunnel_of_host("mcp.tnl-nope.tunnels.agentd.invalid"), None);
        assert_eq!(tunnel_of_host(&format!("mcp.{domain}.evil.example")), None);
    }

    #[test]
    fn tokens_name_their_tunnel_and_credentials_bind_to_it() {
        let id = crate::ids::new_id("tnl");
        let token = new_token(&id, "ws_1");
        assert_eq!(tunnel_of_token(&token), Some((id.clone(), "ws_1".to_owned())));
        assert_ne!(new_token(&id, "ws_1"), token, "each token is fresh");
        assert_eq!(tunnel_of_token("sk-agentd-tun-tnl_x.abc"), None);
        assert_eq!(tunnel_of_token(&format!("{token}.more")), None);
        let key = [7u8; 32];
        let now = 1_800_000_000;
        let credential = proxy_credential(&key, &id, "ttok_1", now);
        assert!(proxy_credential_holds(&key, &id, "ttok_1", &credential, now));
        assert!(proxy_credential_holds(&key, &id, "ttok_1", &credential, now + PROXY_CREDENTIAL_SECS));
        assert!(!proxy_credential_holds(&key, &id, "ttok_1", &credential, now + PROXY_CREDENTIAL_SECS + 1), "expired");
        assert!(!proxy_credential_holds(&key, &id, "ttok_2", &credential, now), "another token: rotated");
        assert!(!proxy_credential_holds(&key, &crate::ids::new_id("tnl"), "ttok_1", &credential, now));
        assert!(!proxy_credential_holds(&[8u8; 32], &id, "ttok_1", &credential, now));
        assert!(!proxy_credential_holds(&key, &id, "ttok_1", "zz", now));
        let far = format!("{}.{}", now + 10 * PROXY_CREDENTIAL_SECS, credential.split_once('.').unwrap().1);
        assert!(!proxy_credential_holds(&key, &id, "ttok_1", &far, now), "no credential for later than allowed");
    }
}
