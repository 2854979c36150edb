//! Vault credentials for remote tools. A session names its vaults (`vault_ids`); a
//! credential there authenticates toward the server whose URL it was made for
//! (`auth.mcp_server_url`), and is handed out only for a URL of the same origin
//! (scheme, host and port). Secrets are opened with the process's
//! [`SecretBox`] and never leave this module except as the bearer token of a request
//! to that origin.

use std::sync::Arc;

use agentd_schema::oauth::{self, Refreshed};
use agentd_schema::secrets::SecretBox;
use agentd_schema::{ListQuery, Resource, Session, Store, StoreError};
use serde_json::{Map, Value, json};

/// The stored field holding a credential's sealed secrets (see the gateway's
/// `credentials.rs`).
const SEALED: &str = "_sealed";
const KIND: &str = "vault_credential";

/// `scheme://host:port` of a URL, the unit a credential is bound to.
pub fn origin(url: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    Some(format!("{}://{}:{}", url.scheme(), url.host_str()?, url.port_or_known_default()?))
}

/// How a worker reaches an MCP server behind an MCP tunnel (docs/api/tunnels.md):
/// `CONNECT` through the gateway holding the tunnel's connector, TLS verified against
/// the tunnel's active CA certificates only.
#[derive(Clone)]
pub struct TunnelRoute {
    /// The gateway that holds the connector (its advertised URL).
    pub gateway: String,
    /// The proxy credential for the tunnel (`agentd_schema::tunnels::proxy_credential`).
    pub credential: String,
    /// The PEMs of the tunnel's active CA certificates (never empty).
    pub roots: Vec<String>,
}

/// A bearer token for one origin, and where it came from.
#[derive(Clone)]
pub struct Bearer {
    /// The token. Never logged, never committed.
    pub token: String,
    /// The credential it came from (for refresh and error messages).
    pub credential_id: String,
    /// The credential's vault.
    pub vault_id: String,
    /// Whether the credential can be refreshed (an `mcp_oauth` with a refresh config).
    pub refreshable: bool,
}

impl Bearer {
    /// The scrubber of upstream text for a server this token was sent to.
    pub fn scrubber(&self) -> agentd_schema::scrub::Scrubber {
        agentd_schema::scrub::Scrubber::new([self.token.as_str()])
    }
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bearer").field("credential_id", &self.credential_id).finish_non_exhaustive()
    }
}

/// Why no usable credential could be produced.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The store could not be read.
    #[error("vault credentials could not be read: {0}")]
    Store(#[from] StoreError),
    /// The process has no secret key, or the sealed secrets do not open with it.
    #[error("credential {0}: its secrets cannot be opened (is AGENTD_SECRET_KEY the gateway's?)")]
    Unopenable(String),
    /// The OAuth refresh failed.
    #[error("credential {credential_id}: the OAuth token refresh failed: {message}")]
    Refresh {
        /// The credential.
        credential_id: String,
        /// What the token endpoint said (never containing a secret).
        message: String,
    },
}

/// The credentials of one session, read on first use within an attempt.
pub struct Credentials {
    store: Arc<dyn Store>,
    secrets: Option<Arc<SecretBox>>,
    workspace_id: String,
    vault_ids: Vec<String>,
    loaded: Option<Vec<Resource>>,
    /// Token endpoints may be on private addresses (`AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`).
    allow_private: bool,
}

impl Credentials {
    /// The route to `url` through an MCP tunnel of the session's workspace, when its host
    /// is on a tunnel's domain (`Ok(None)` otherwise). A tunnel that cannot carry the
    /// traffic — another workspace's or missing, archived, its connector never
    /// connected, no active CA certificate — is an error saying so.
    pub async fn tunnel_route(&self, url: &str) -> Result<Option<TunnelRoute>, String> {
        use agentd_schema::tunnels::{self, TUNNEL};
        let Ok(parsed) = reqwest::Url::parse(url) else { return Ok(None) };
        let Some(tunnel_id) = parsed.host_str().and_then(tunnels::tunnel_of_host) else { return Ok(None) };
        if parsed.scheme() != "https" {
            return Err("an MCP server behind a tunnel is reached over https (TLS runs end to end)".into());
        }
        let unreadable = |e: StoreError| format!("tunnel {tunnel_id} cannot be read: {e}");
        let tunnel = self.store.get_resource(&self.workspace_id, TUNNEL, &tunnel_id).await.map_err(unreadable)?;
        let tunnel = tunnel.ok_or_else(|| format!("no tunnel {tunnel_id} in this workspace"))?;
        if tunnel.archived_at_ms.is_some() {
            return Err(format!("tunnel {tunnel_id} is archived"));
        }
        let gateway = tunnel.body["_connected"]["gateway"].as_str().map(str::to_owned);
        let gateway = gateway.ok_or_else(|| format!("tunnel {tunnel_id}'s connector is not connected"))?;
        let now_ms = chrono::Utc::now().timestamp_millis();
        let certificates = tunnels::trusted_certificates(self.store.as_ref(), &self.workspace_id, &tunnel_id, now_ms)
            .await
            .map_err(unreadable)?;
        let roots: Vec<String> =
            certificates.iter().filter_map(|c| c.body["_pem"].as_str()).map(str::to_owned).collect();
        if roots.is_empty() {
            return Err(format!("tunnel {tunnel_id} has no active CA certificate: it carries no traffic"));
        }
        let secrets = self.secrets.as_ref().ok_or("this worker has no AGENTD_SECRET_KEY for tunnel credentials")?;
        let token_id = tunnel.body["_token"]["id"].as_str().unwrap_or_default();
        let key = secrets.derive_key(tunnels::PROXY_KEY_LABEL);
        let credential = tunnels::proxy_credential(&key, &tunnel_id, token_id, now_ms / 1000);
        Ok(Some(TunnelRoute { gateway, credential, roots }))
    }

    /// The credentials of `session`'s vaults (nothing is read yet).
    pub fn of(store: Arc<dyn Store>, secrets: Option<Arc<SecretBox>>, session: &Session, allow_private: bool) -> Self {
        let vault_ids = session.body["vault_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        Self { store, secrets, workspace_id: session.workspace_id.clone(), vault_ids, loaded: None, allow_private }
    }

    async fn all(&mut self) -> Result<&[Resource], StoreError> {
        if self.loaded.is_none() {
            let mut found = Vec::new();
            for vault_id in &self.vault_ids {
                let Some(vault) = self.store.get_resource(&self.workspace_id, "vault", vault_id).await? else {
                    continue;
                };
                if vault.archived_at_ms.is_some() {
                    continue;
                }
                let query = ListQuery { parent_id: Some(vault_id.clone()), limit: 500, ..ListQuery::default() };
                found.extend(self.store.list_resources(&self.workspace_id, KIND, &query).await?);
            }
            self.loaded = Some(found);
        }
        Ok(self.loaded.as_deref().unwrap_or_default())
    }

    /// The credential for `url`'s origin: the first `static_bearer` or `mcp_oauth`
    /// credential (in vault order) whose `mcp_server_url` has the same origin.
    pub async fn bearer_for(&mut self, url: &str) -> Result<Option<Bearer>, CredentialError> {
        let Some(wanted) = origin(url) else { return Ok(None) };
        let secrets = self.secrets.clone();
        let Some(credential) = self.all().await?.iter().find(|c| {
            let auth = &c.body["auth"];
            matches!(auth["type"].as_str(), Some("static_bearer" | "mcp_oauth"))
                && auth["mcp_server_url"].as_str().and_then(origin).as_deref() == Some(wanted.as_str())
        }) else {
            return Ok(None);
        };
        let opened = open(secrets.as_deref(), credential)?;
        let token = opened.get("access_token").or_else(|| opened.get("token")).and_then(Value::as_str);
        Ok(Some(Bearer {
            token: token.unwrap_or_default().to_owned(),
            credential_id: credential.id.clone(),
            vault_id: credential.parent_id.clone().unwrap_or_default(),
            refreshable: credential.body["auth"]["type"] == "mcp_oauth"
                && credential.body["auth"]["refresh"].is_object()
                && opened.contains_key("refresh_token"),
        }))
    }

    /// The credential `id` as stored now (not the copy read earlier in the attempt).
    async fn reread(&mut self, id: &str) -> Result<Resource, CredentialError> {
        let current = self
            .store
            .get_resource(&self.workspace_id, KIND, id)
            .await?
            .filter(|c| c.archived_at_ms.is_none())
            .ok_or_else(|| CredentialError::Unopenable(id.to_owned()))?;
        if let Some(loaded) = self.loaded.as_mut()
            && let Some(slot) = loaded.iter_mut().find(|c| c.id == current.id)
        {
            *slot = current.clone();
        }
        Ok(current)
    }

    /// Refreshes an `mcp_oauth` credential with its refresh-token grant and writes the
    /// new tokens back (sealed), so later calls and other workers reuse them.
    ///
    /// Concurrency with other workers: the credential is re-read first (another worker
    /// may already have a newer token: it is used as is); a refresh refused with
    /// `invalid_grant` is retried once with the stored refresh token (another worker
    /// may have rotated it); a write-back that loses the version race uses the token the
    /// winner stored. Other store errors are errors.
    pub async fn refresh(&mut self, bearer: &Bearer) -> Result<Bearer, CredentialError> {
        let secrets = self.secrets.clone();
        let failed = |id: &str, message: String| CredentialError::Refresh { credential_id: id.to_owned(), message };
        let mut credential = self.reread(&bearer.credential_id).await?;
        let mut opened = open(secrets.as_deref(), &credential)?;
        let stored = access_token(&opened);
        if !stored.is_empty() && stored != bearer.token && !expired(&credential) {
            return Ok(Bearer { token: stored, ..bearer.clone() });
        }
        let refreshed = match oauth::refresh_grant(&credential.body["auth"]["refresh"], &opened, self.allow_private)
            .await
        {
            Ok(refreshed) => refreshed,
            Err(failure) if failure.invalid_grant() => {
                let again = self.reread(&credential.id).await?;
                let reopened = open(secrets.as_deref(), &again)?;
                if reopened.get("refresh_token") == opened.get("refresh_token") {
                    return Err(failed(&credential.id, failure.describe()));
                }
                tracing::info!(credential = %credential.id, "refresh token rotated by another worker; retrying with it");
                let retried = oauth::refresh_grant(&again.body["auth"]["refresh"], &reopened, self.allow_private)
                    .await
                    .map_err(|failure| failed(&again.id, failure.describe()))?;
                (credential, opened) = (again, reopened);
                retried
            }
            Err(failure) => return Err(failed(&credential.id, failure.describe())),
        };
        let Refreshed { access_token: token, refresh_token, expires_in } = refreshed;
        opened.insert("access_token".into(), json!(token));
        if let Some(refresh_token) = refresh_token {
            opened.insert("refresh_token".into(), json!(refresh_token));
        }
        let mut body = credential.body.clone();
        body["updated_at"] = json!(oauth::rfc3339(oauth::now_ms()));
        // The new token's expiry, or none known (an old, passed expiry must not stay).
        body["auth"]["expires_at"] =
            expires_in.map_or(Value::Null, |seconds| json!(oauth::rfc3339(oauth::expiry_ms(oauth::now_ms(), seconds))));
        if let Some(secrets) = secrets.as_deref() {
            body[SEALED] = json!(secrets.seal(&credential.id, &Value::Object(opened)));
        }
        let updated = self
            .store
            .update_resource(agentd_schema::ResourceUpdate {
                workspace_id: self.workspace_id.clone(),
                kind: KIND.into(),
                id: credential.id.clone(),
                expected_version: credential.version,
                body,
                versioned: false,
            })
            .await;
        match updated {
            Ok(resource) => {
                if let Some(loaded) = self.loaded.as_mut()
                    && let Some(slot) = loaded.iter_mut().find(|c| c.id == resource.id)
                {
                    *slot = resource;
                }
                Ok(Bearer { token, ..bearer.clone() })
            }
            // Another worker wrote the credential meanwhile: what it stored is what every
            // worker uses from now on (a rotated refresh token of ours would be lost).
            Err(StoreError::Conflict(_)) => {
                let winner = self.reread(&credential.id).await?;
                let token = access_token(&open(secrets.as_deref(), &winner)?);
                tracing::info!(credential = %credential.id, "another worker refreshed the token first; using theirs");
                Ok(Bearer { token, ..bearer.clone() })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Whether `bearer`'s credential records an expiry that has passed.
    pub async fn expired(&mut self, bearer: &Bearer) -> bool {
        let Ok(all) = self.all().await else { return false };
        all.iter()
            .find(|c| c.id == bearer.credential_id)
            .and_then(|c| c.body["auth"]["expires_at"].as_str().and_then(oauth::parse_rfc3339))
            .is_some_and(|at| at <= oauth::now_ms())
    }
}

/// The access token among a credential's opened secrets.
fn access_token(opened: &Map<String, Value>) -> String {
    opened.get("access_token").or_else(|| opened.get("token")).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// Whether a credential records an expiry that has passed.
fn expired(credential: &Resource) -> bool {
    credential.body["auth"]["expires_at"]
        .as_str()
        .and_then(oauth::parse_rfc3339)
        .is_some_and(|at| at <= oauth::now_ms())
}

fn open(secrets: Option<&SecretBox>, credential: &Resource) -> Result<Map<String, Value>, CredentialError> {
    let sealed = credential.body[SEALED].as_str().unwrap_or_default();
    match secrets.map(|s| s.open(&credential.id, sealed)) {
        Some(Ok(Value::Object(map))) => Ok(map),
        _ => Err(CredentialError::Unopenable(credential.id.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::origin;

    #[test]
    fn origins_compare_scheme_host_and_effective_port() {
        assert_eq!(origin("https://mcp.example.com/sse").as_deref(), Some("https://mcp.example.com:443"));
        assert_eq!(origin("https://mcp.example.com:443/x"), origin("https://MCP.example.com/y"));
        assert_ne!(origin("http://127.0.0.1:8001/mcp"), origin("http://127.0.0.1:8002/mcp"));
        assert_ne!(origin("http://a.example/mcp"), origin("https://a.example/mcp"));
        assert_eq!(origin("not a url"), None);
    }
}
