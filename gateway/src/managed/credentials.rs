//! Vault credentials. Secret fields (`access_token`, `refresh_token`, `client_secret`,
//! `token`, `secret_value`) are write-only: they are sealed with the process's
//! [`SecretBox`](agentd_schema::secrets::SecretBox) into the stored row under
//! [`SEALED`] and never rendered, logged or echoed in an error.

use agentd_schema::ids::{CredentialId, VaultId};
use agentd_schema::{ListQuery, Resource, Store};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::body::{self, as_object, join, tag};
use super::family::{Family, with_lifecycle};
use super::limits::{MAX_ALLOWED_HOSTS, MAX_DISPLAY_NAME_CHARS, MAX_SECRET_BYTES, MAX_URL_CHARS};
use super::query::{now_ms, rfc3339};
use crate::AppState;
use crate::admission::Tenant;
use crate::error::{ApiError, ApiResult};

/// The parent family (read here without depending on the vaults handlers).
const VAULTS: super::family::Family = super::family::Family { kind: "vault", noun: "vault", max_page: 100 };
const KIND: &str = "vault_credential";
/// The stored field holding the sealed secrets; stripped from every response.
const SEALED: &str = "_sealed";

const FAMILY: Family = Family { kind: KIND, noun: "credential", max_page: 100 };

fn render(resource: &Resource) -> Value {
    let mut credential = with_lifecycle(resource);
    if let Some(map) = credential.as_object_mut() {
        map.remove(SEALED);
    }
    credential
}

async fn load(store: &dyn Store, tenant: &Tenant, vault_id: &str, id: &str) -> ApiResult<Resource> {
    FAMILY.load(store, tenant, id, Some(vault_id)).await
}

/// A required secret string; its value never appears in an error message.
fn secret(map: &Map<String, Value>, key: &str, path: &str) -> ApiResult<String> {
    match map.get(key) {
        Some(Value::String(text)) if !text.is_empty() && text.len() <= MAX_SECRET_BYTES => Ok(text.clone()),
        Some(Value::String(_)) => {
            Err(ApiError::invalid(format!("{}: must be 1 to {MAX_SECRET_BYTES} bytes", join(path, key))))
        }
        None | Some(Value::Null) => Err(ApiError::invalid(format!("{}: required", join(path, key)))),
        Some(other) => {
            Err(ApiError::invalid(format!("{}: expected a string, got {}", join(path, key), body::kind(other))))
        }
    }
}

fn url(map: &Map<String, Value>, key: &str, path: &str) -> ApiResult<String> {
    let url = body::string(map.get(key), &join(path, key), 1, MAX_URL_CHARS)?;
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(ApiError::invalid(format!("{}: must be an http(s) URL", join(path, key))));
    }
    Ok(url)
}

fn future_datetime(value: Option<&Value>, path: &str) -> ApiResult<Value> {
    match value {
        None | Some(Value::Null) => Ok(Value::Null),
        Some(Value::String(raw)) => {
            let at = chrono::DateTime::parse_from_rfc3339(raw)
                .map_err(|_| ApiError::invalid(format!("{path}: expected an RFC 3339 datetime, got {raw:?}")))?;
            if at.timestamp_millis() <= now_ms() {
                return Err(ApiError::invalid(format!("{path}: must be in the future")));
            }
            Ok(json!(rfc3339(at.timestamp_millis())))
        }
        Some(other) => Err(ApiError::invalid(format!("{path}: expected a string, got {}", body::kind(other)))),
    }
}

fn networking(value: Option<&Value>, path: &str) -> ApiResult<Value> {
    let map = as_object(value.unwrap_or(&Value::Null), path)?;
    match tag(map, path)? {
        "unrestricted" => Ok(json!({ "type": "unrestricted" })),
        "limited" => {
            body::only_known(map, &["type", "allowed_hosts"], path)?;
            let hosts_path = join(path, "allowed_hosts");
            let hosts = body::array(map.get("allowed_hosts"), &hosts_path, MAX_ALLOWED_HOSTS)?;
            for (i, host) in hosts.iter().enumerate() {
                let host =
                    host.as_str().ok_or_else(|| ApiError::invalid(format!("{hosts_path}[{i}]: expected a string")))?;
                let bare = host.strip_prefix("*.").unwrap_or(host);
                let valid = !bare.is_empty()
                    && bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                    && !bare.starts_with('.')
                    && !bare.ends_with('.');
                if !valid {
                    return Err(ApiError::invalid(format!(
                        "{hosts_path}[{i}]: {host:?} is not a bare hostname, IPv4 address or *. wildcard"
                    )));
                }
            }
            Ok(json!({ "type": "limited", "allowed_hosts": hosts }))
        }
        other => Err(ApiError::invalid(format!("{path}.type: must be unrestricted or limited, got {other:?}"))),
    }
}

fn injection_location(value: Option<&Value>, stored: Option<&Value>, path: &str) -> ApiResult<Value> {
    let map = match value {
        None | Some(Value::Null) => Map::new(),
        Some(value) => as_object(value, path)?.clone(),
    };
    body::only_known(&map, &["body", "header"], path)?;
    let pick = |key: &str| -> ApiResult<bool> {
        Ok(body::optional_bool(map.get(key), &join(path, key))?
            .or_else(|| stored.and_then(|s| s[key].as_bool()))
            .unwrap_or(true))
    };
    let (in_body, in_header) = (pick("body")?, pick("header")?);
    if !in_body && !in_header {
        return Err(ApiError::invalid(format!("{path}: at least one of body and header must be enabled")));
    }
    Ok(json!({ "body": in_body, "header": in_header }))
}

/// Splits a create `auth` into its public form and its secrets.
fn create_auth(value: Option<&Value>) -> ApiResult<(Value, Map<String, Value>)> {
    let auth = as_object(value.unwrap_or(&Value::Null), "auth")?;
    let mut secrets = Map::new();
    let public = match tag(auth, "auth")? {
        "mcp_oauth" => {
            body::only_known(auth, &["type", "access_token", "mcp_server_url", "expires_at", "refresh"], "auth")?;
            secrets.insert("access_token".into(), json!(secret(auth, "access_token", "auth")?));
            let refresh = match auth.get("refresh") {
                None | Some(Value::Null) => Value::Null,
                Some(value) => {
                    let refresh = as_object(value, "auth.refresh")?;
                    body::only_known(
                        refresh,
                        &["client_id", "refresh_token", "token_endpoint", "token_endpoint_auth", "resource", "scope"],
                        "auth.refresh",
                    )?;
                    secrets.insert("refresh_token".into(), json!(secret(refresh, "refresh_token", "auth.refresh")?));
                    let endpoint_auth = as_object(
                        refresh.get("token_endpoint_auth").unwrap_or(&Value::Null),
                        "auth.refresh.token_endpoint_auth",
                    )?;
                    let auth_type = tag(endpoint_auth, "auth.refresh.token_endpoint_auth")?;
                    match auth_type {
                        "none" => body::only_known(endpoint_auth, &["type"], "auth.refresh.token_endpoint_auth")?,
                        "client_secret_basic" | "client_secret_post" => {
                            body::only_known(
                                endpoint_auth,
                                &["type", "client_secret"],
                                "auth.refresh.token_endpoint_auth",
                            )?;
                            secrets.insert(
                                "client_secret".into(),
                                json!(secret(endpoint_auth, "client_secret", "auth.refresh.token_endpoint_auth")?),
                            );
                        }
                        other => {
                            return Err(ApiError::invalid(format!(
                                "auth.refresh.token_endpoint_auth.type: must be none, client_secret_basic or client_secret_post, got {other:?}"
                            )));
                        }
                    }
                    json!({
                        "client_id": body::string(refresh.get("client_id"), "auth.refresh.client_id", 1, 1024)?,
                        "token_endpoint": url(refresh, "token_endpoint", "auth.refresh")?,
                        "token_endpoint_auth": { "type": auth_type },
                        "resource": body::optional_string(refresh.get("resource"), "auth.refresh.resource", 2048)?,
                        "scope": body::optional_string(refresh.get("scope"), "auth.refresh.scope", 2048)?,
                    })
                }
            };
            json!({
                "type": "mcp_oauth",
                "mcp_server_url": url(auth, "mcp_server_url", "auth")?,
                "expires_at": future_datetime(auth.get("expires_at"), "auth.expires_at")?,
                "refresh": refresh,
            })
        }
        "static_bearer" => {
            body::only_known(auth, &["type", "token", "mcp_server_url"], "auth")?;
            secrets.insert("token".into(), json!(secret(auth, "token", "auth")?));
            json!({ "type": "static_bearer", "mcp_server_url": url(auth, "mcp_server_url", "auth")? })
        }
        "environment_variable" => {
            body::only_known(
                auth,
                &["type", "networking", "secret_name", "secret_value", "injection_location"],
                "auth",
            )?;
            let name = body::string(auth.get("secret_name"), "auth.secret_name", 1, 255)?;
            let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(ApiError::invalid(
                    "auth.secret_name: must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                ));
            }
            secrets.insert("secret_value".into(), json!(secret(auth, "secret_value", "auth")?));
            json!({
                "type": "environment_variable",
                "secret_name": name,
                "networking": networking(auth.get("networking"), "auth.networking")?,
                "injection_location": injection_location(auth.get("injection_location"), None, "auth.injection_location")?,
            })
        }
        other => {
            return Err(ApiError::invalid(format!(
                "auth.type: must be mcp_oauth, static_bearer or environment_variable, got {other:?}"
            )));
        }
    };
    Ok((public, secrets))
}

/// Applies an update `auth` to the stored public form and secrets (same type only).
fn update_auth(value: &Value, public: &Value, secrets: &mut Map<String, Value>) -> ApiResult<Value> {
    let auth = as_object(value, "auth")?;
    let kind = tag(auth, "auth")?;
    let stored_kind = public["type"].as_str().unwrap_or_default();
    if kind != stored_kind {
        return Err(ApiError::invalid(format!(
            "auth.type: {kind:?} does not match the credential's type {stored_kind:?}, which can't be changed"
        )));
    }
    let mut public = public.clone();
    let mut replace_secret = |map: &Map<String, Value>, key: &str, path: &str| -> ApiResult<()> {
        if map.get(key).is_some_and(|v| !v.is_null()) {
            secrets.insert(key.into(), json!(secret(map, key, path)?));
        }
        Ok(())
    };
    match kind {
        "mcp_oauth" => {
            body::only_known(auth, &["type", "access_token", "expires_at", "refresh"], "auth")?;
            replace_secret(auth, "access_token", "auth")?;
            if auth.contains_key("expires_at") {
                public["expires_at"] = future_datetime(auth.get("expires_at"), "auth.expires_at")?;
            }
            match auth.get("refresh") {
                None => {}
                Some(Value::Null) => {
                    public["refresh"] = Value::Null;
                    secrets.remove("refresh_token");
                    secrets.remove("client_secret");
                }
                Some(value) => {
                    let refresh = as_object(value, "auth.refresh")?;
                    body::only_known(refresh, &["refresh_token", "scope", "token_endpoint_auth"], "auth.refresh")?;
                    if public["refresh"].is_null() {
                        return Err(ApiError::invalid(
                            "auth.refresh: the credential has no refresh configuration to update",
                        ));
                    }
                    replace_secret(refresh, "refresh_token", "auth.refresh")?;
                    if let Some(scope) = refresh.get("scope") {
                        public["refresh"]["scope"] =
                            json!(body::optional_string(Some(scope), "auth.refresh.scope", 2048)?);
                    }
                    if let Some(endpoint_auth) = refresh.get("token_endpoint_auth").filter(|v| !v.is_null()) {
                        let endpoint_auth = as_object(endpoint_auth, "auth.refresh.token_endpoint_auth")?;
                        let stored_type = public["refresh"]["token_endpoint_auth"]["type"].as_str().unwrap_or("none");
                        if stored_type == "none" {
                            return Err(ApiError::invalid(
                                "auth.refresh.token_endpoint_auth: the credential does not use a client secret",
                            ));
                        }
                        replace_secret(endpoint_auth, "client_secret", "auth.refresh.token_endpoint_auth")?;
                    }
                }
            }
        }
        "static_bearer" => {
            body::only_known(auth, &["type", "token"], "auth")?;
            replace_secret(auth, "token", "auth")?;
        }
        _ => {
            body::only_known(auth, &["type", "injection_location", "networking", "secret_value"], "auth")?;
            replace_secret(auth, "secret_value", "auth")?;
            if let Some(value) = auth.get("networking").filter(|v| !v.is_null()) {
                public["networking"] = networking(Some(value), "auth.networking")?;
            }
            if let Some(value) = auth.get("injection_location") {
                let stored = public["injection_location"].clone();
                public["injection_location"] =
                    injection_location(Some(value), Some(&stored), "auth.injection_location")?;
            }
        }
    }
    Ok(public)
}

fn display_name(value: Option<&Value>) -> ApiResult<Value> {
    Ok(json!(body::optional_string(value, "display_name", MAX_DISPLAY_NAME_CHARS)?))
}

/// `POST /v1/vaults/{vault_id}/credentials`.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(vault_id): Path<VaultId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["auth", "display_name", "metadata"], "")?;
    let store = state.backends.store.as_ref();
    let vault = VAULTS.load(store, &tenant, &vault_id, None).await?;
    if vault.archived_at_ms.is_some() {
        return Err(ApiError::invalid(format!("vault {vault_id} is archived")));
    }
    let (auth, secrets) = create_auth(request.get("auth"))?;
    let metadata = body::optional_metadata(request.get("metadata"))?;
    let id = agentd_schema::ids::new_id("vcrd");
    let now = rfc3339(now_ms());
    let credential = json!({
        "type": "vault_credential",
        "id": id,
        "vault_id": vault_id,
        "display_name": display_name(request.get("display_name"))?,
        "auth": auth,
        "metadata": metadata,
        "created_at": now,
        "updated_at": now,
        "archived_at": null,
        SEALED: state.secrets.seal(&id, &Value::Object(secrets)),
    });
    let resource = FAMILY.create(store, &tenant, id, Some(vault_id.into()), credential, false).await?;
    Ok(Json(render(&resource)))
}

/// `GET /v1/vaults/{vault_id}/credentials/{credential_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((vault_id, id)): Path<(VaultId, CredentialId)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&load(state.backends.store.as_ref(), &tenant, &vault_id, &id).await?)))
}

/// `POST /v1/vaults/{vault_id}/credentials/{credential_id}`.
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((vault_id, id)): Path<(VaultId, CredentialId)>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["auth", "display_name", "metadata"], "")?;
    let store = state.backends.store.as_ref();
    let current = load(store, &tenant, &vault_id, &id).await?;
    if current.archived_at_ms.is_some() {
        return Err(ApiError::invalid(format!("credential {id} is archived")));
    }
    let mut credential = current.body.as_object().cloned().unwrap_or_default();
    if let Some(auth) = request.get("auth").filter(|v| !v.is_null()) {
        let sealed = current.body[SEALED].as_str().unwrap_or_default();
        let mut secrets = match state.secrets.open(&id, sealed) {
            Ok(Value::Object(secrets)) => secrets,
            _ => return Err(ApiError::Internal(format!("credential {id}: stored secrets cannot be opened"))),
        };
        let public = update_auth(auth, &current.body["auth"], &mut secrets)?;
        credential.insert("auth".into(), public);
        credential.insert(SEALED.into(), json!(state.secrets.seal(&id, &Value::Object(secrets))));
    }
    if let Some(name) = request.get("display_name") {
        credential.insert("display_name".into(), display_name(Some(name))?);
    }
    if let Some(patch) = request.get("metadata") {
        let merged = body::patch_metadata(current.body.get("metadata").unwrap_or(&Value::Null), patch, "metadata")?;
        credential.insert("metadata".into(), merged);
    }
    credential.insert("updated_at".into(), json!(rfc3339(now_ms())));
    let updated = store
        .update_resource(agentd_schema::ResourceUpdate {
            workspace_id: tenant.workspace_id.clone(),
            kind: KIND.into(),
            id: id.to_string(),
            expected_version: current.version,
            body: Value::Object(credential),
            versioned: false,
        })
        .await?;
    Ok(Json(render(&updated)))
}

/// `GET /v1/vaults/{vault_id}/credentials`: newest first.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(vault_id): Path<VaultId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    VAULTS.load(store, &tenant, &vault_id, None).await?;
    Ok(Json(FAMILY.page(store, &tenant, &uri, Some(vault_id.into()), false, render).await?))
}

/// `POST /v1/vaults/{vault_id}/credentials/{credential_id}/archive`.
pub async fn archive(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((vault_id, id)): Path<(VaultId, CredentialId)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&FAMILY.archive(state.backends.store.as_ref(), &tenant, &id, Some(&vault_id)).await?)))
}

/// `DELETE /v1/vaults/{vault_id}/credentials/{credential_id}`.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((vault_id, id)): Path<(VaultId, CredentialId)>,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    load(store, &tenant, &vault_id, &id).await?;
    store.delete_resource(&tenant.workspace_id, KIND, &id).await?;
    Ok(Json(json!({ "id": id, "type": "vault_credential_deleted" })))
}

/// Deletes every credential of a vault (with the vault).
pub(super) async fn delete_all(store: &dyn Store, tenant: &Tenant, vault_id: &str) -> ApiResult<()> {
    loop {
        let page = store
            .list_resources(
                &tenant.workspace_id,
                KIND,
                &ListQuery {
                    parent_id: Some(vault_id.to_owned()),
                    limit: 100,
                    include_archived: true,
                    ..ListQuery::default()
                },
            )
            .await?;
        if page.is_empty() {
            return Ok(());
        }
        for credential in page {
            store.delete_resource(&tenant.workspace_id, KIND, &credential.id).await?;
        }
    }
}

/// Writes the tokens of a refresh made by validation back to `credential` (sealed),
/// so a rotated refresh token is not lost. If the credential changed meanwhile, ours
/// are written over it only while it still holds the refresh token we used; otherwise
/// someone else refreshed (or replaced the secrets), and theirs stand.
async fn write_back(
    state: &AppState,
    tenant: &Tenant,
    credential: &Resource,
    used: &Map<String, Value>,
    refreshed: agentd_schema::oauth::Refreshed,
) -> ApiResult<()> {
    let store = state.backends.store.as_ref();
    let mut current = credential.clone();
    for _ in 0..3 {
        let mut secrets = match state.secrets.open(&current.id, current.body[SEALED].as_str().unwrap_or_default()) {
            Ok(Value::Object(secrets)) => secrets,
            _ => return Err(ApiError::Internal(format!("credential {}: stored secrets cannot be opened", current.id))),
        };
        if secrets.get("refresh_token") != used.get("refresh_token") {
            tracing::info!(credential = %current.id, "validation refresh not written back: the credential was refreshed meanwhile");
            return Ok(());
        }
        secrets.insert("access_token".into(), json!(refreshed.access_token));
        if let Some(refresh_token) = &refreshed.refresh_token {
            secrets.insert("refresh_token".into(), json!(refresh_token));
        }
        let mut body = current.body.clone();
        body["updated_at"] = json!(rfc3339(now_ms()));
        body["auth"]["expires_at"] = refreshed
            .expires_in
            .map_or(Value::Null, |seconds| json!(rfc3339(agentd_schema::oauth::expiry_ms(now_ms(), seconds))));
        body[SEALED] = json!(state.secrets.seal(&current.id, &Value::Object(secrets)));
        match store
            .update_resource(agentd_schema::ResourceUpdate {
                workspace_id: tenant.workspace_id.clone(),
                kind: KIND.into(),
                id: current.id.clone(),
                expected_version: current.version,
                body,
                versioned: false,
            })
            .await
        {
            Ok(_) => return Ok(()),
            Err(agentd_schema::StoreError::Conflict(_)) => {
                current = store
                    .get_resource(&tenant.workspace_id, KIND, &current.id)
                    .await?
                    .ok_or_else(|| ApiError::Internal(format!("credential {} vanished", current.id)))?;
            }
            Err(error) => return Err(error.into()),
        }
    }
    Err(ApiError::Internal(format!("credential {}: the refreshed token could not be written back", credential.id)))
}

/// `POST /v1/vaults/{vault_id}/credentials/{credential_id}/mcp_oauth_validate`: probes
/// the MCP server with the stored token (an MCP `initialize`), and on a 401 tries the
/// refresh-token exchange, writing the new tokens back (see [`write_back`]). Nothing
/// secret is ever returned.
pub async fn mcp_oauth_validate(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((vault_id, id)): Path<(VaultId, CredentialId)>,
) -> ApiResult<Json<Value>> {
    let credential = load(state.backends.store.as_ref(), &tenant, &vault_id, &id).await?;
    let auth = &credential.body["auth"];
    let kind = auth["type"].as_str().unwrap_or_default();
    if kind != "mcp_oauth" && kind != "static_bearer" {
        return Err(ApiError::invalid(format!("credential {id} is {kind:?}, not an MCP credential")));
    }
    let secrets = match state.secrets.open(&id, credential.body[SEALED].as_str().unwrap_or_default()) {
        Ok(Value::Object(secrets)) => secrets,
        _ => return Err(ApiError::Internal(format!("credential {id}: stored secrets cannot be opened"))),
    };
    let token =
        secrets.get("access_token").or_else(|| secrets.get("token")).and_then(Value::as_str).unwrap_or_default();
    let server = auth["mcp_server_url"].as_str().unwrap_or_default();
    let has_refresh = secrets.contains_key("refresh_token");
    let probe = super::mcp_probe::initialize(server, token, state.remote_allow_private).await;
    let (status, mcp_probe, refresh) = match probe {
        super::mcp_probe::Outcome::Ok => ("valid", Value::Null, Value::Null),
        super::mcp_probe::Outcome::Rejected { http_response, unauthorized } => {
            let refresh = if unauthorized && has_refresh {
                let (report, refreshed) =
                    super::mcp_probe::refresh(&auth["refresh"], &secrets, state.remote_allow_private).await;
                if let Some(refreshed) = refreshed {
                    write_back(&state, &tenant, &credential, &secrets, refreshed).await?;
                }
                report
            } else if unauthorized {
                json!({ "status": "no_refresh_token", "http_response": null })
            } else {
                Value::Null
            };
            let status = if refresh["status"] == "succeeded" { "valid" } else { "invalid" };
            (status, json!({ "method": "initialize", "http_response": http_response }), refresh)
        }
        super::mcp_probe::Outcome::Refused(reason) => {
            let reason = reason.strip_prefix("url: ").unwrap_or(&reason);
            return Err(ApiError::invalid(format!("auth.mcp_server_url: {reason}")));
        }
        super::mcp_probe::Outcome::Unreachable => {
            ("unknown", json!({ "method": "initialize", "http_response": null }), Value::Null)
        }
    };
    Ok(Json(json!({
        "type": "vault_credential_validation",
        "credential_id": id,
        "vault_id": vault_id,
        "status": status,
        "has_refresh_token": has_refresh,
        "mcp_probe": mcp_probe,
        "refresh": refresh,
        "validated_at": rfc3339(now_ms()),
    })))
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use serde_json::{Value, json};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use crate::test_rig::Rig;

    /// An MCP server and token endpoint on 127.0.0.1 that refuse everything and echo
    /// every secret they received (bearer, refresh token, client secret, Basic pair) in
    /// every encoding the scrubber promises to catch. Returns the base URL.
    async fn echoing_server() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let (head, body) = loop {
                        let read = socket.read(&mut chunk).await.unwrap_or(0);
                        buffer.extend_from_slice(&chunk[..read]);
                        let text = String::from_utf8_lossy(&buffer).to_string();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let length = text[..end]
                                .lines()
                                .find_map(|l| {
                                    l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
                                })
                                .and_then(|v| v.parse::<usize>().ok())
                                .unwrap_or(0);
                            if buffer.len() >= end + 4 + length || read == 0 {
                                break (text[..end].to_owned(), text[end + 4..].to_owned());
                            }
                        } else if read == 0 {
                            break (text, String::new());
                        }
                    };
                    let mut received = Vec::new();
                    for line in head.lines() {
                        if let Some(token) = line.strip_prefix("authorization: Bearer ") {
                            received.push(token.to_owned());
                        }
                        if let Some(basic) = line.strip_prefix("authorization: Basic ") {
                            let pair = base64::engine::general_purpose::STANDARD.decode(basic).unwrap_or_default();
                            let pair = String::from_utf8_lossy(&pair).to_string();
                            received.push(pair.clone());
                            received.extend(pair.split_once(':').map(|(_, secret)| secret.to_owned()));
                        }
                    }
                    for (key, value) in form_urlencoded::parse(body.as_bytes()) {
                        if key == "refresh_token" || key == "client_secret" {
                            received.push(value.into_owned());
                        }
                    }
                    let echoed: Vec<String> =
                        received.iter().flat_map(|secret| agentd_schema::scrub::encodings(secret)).collect();
                    let reply =
                        json!({ "error": "invalid_grant", "error_description": echoed.join(" "), "echo": echoed })
                            .to_string();
                    let status = if head.starts_with("POST /mcp") { "401 Unauthorized" } else { "400 Bad Request" };
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                        reply.len()
                    );
                    let _ = socket.write_all(response.as_bytes()).await;
                });
            }
        });
        base
    }

    #[tokio::test]
    async fn validation_never_returns_a_secret_the_servers_echo_in_any_encoding() {
        let rig = Rig::new().await;
        let base = echoing_server().await;
        let vault = rig.call("POST", "/v1/vaults", json!({ "display_name": "v" })).await;
        assert_eq!(vault.status, 200, "{}", vault.text);
        let vault_id = vault.body["id"].as_str().unwrap().to_owned();
        // Spaces, `+`, `/`, `&`, quotes and `~`: every encoding differs from the raw.
        let (access, refresh, client_secret) = ("acc/ess+tok en~1", "ref&resh \"tok/en\"+2", "cli ent/se+cret~\"3\"");
        for endpoint_auth in ["client_secret_post", "client_secret_basic"] {
            let credential = rig
                .call(
                    "POST",
                    &format!("/v1/vaults/{vault_id}/credentials"),
                    json!({ "auth": {
                        "type": "mcp_oauth",
                        "access_token": access,
                        "mcp_server_url": format!("{base}/mcp"),
                        "refresh": {
                            "client_id": "client-1",
                            "refresh_token": refresh,
                            "token_endpoint": format!("{base}/token"),
                            "token_endpoint_auth": { "type": endpoint_auth, "client_secret": client_secret },
                        },
                    } }),
                )
                .await;
            assert_eq!(credential.status, 200, "{}", credential.text);
            let id = credential.body["id"].as_str().unwrap();
            let answer = rig
                .call("POST", &format!("/v1/vaults/{vault_id}/credentials/{id}/mcp_oauth_validate"), json!({}))
                .await;
            assert_eq!(answer.status, 200, "{}", answer.text);
            assert_eq!(answer.body["status"], "invalid", "{}", answer.text);
            assert_eq!(answer.body["refresh"]["status"], "failed", "{}", answer.text);
            // The captured bodies are there, scrubbed.
            let probe = answer.body["mcp_probe"]["http_response"]["body"].as_str().unwrap();
            let refresh_body = answer.body["refresh"]["http_response"]["body"].as_str().unwrap();
            assert!(probe.contains("[redacted]") && refresh_body.contains("[redacted]"), "{}", answer.text);
            let basic = format!("client-1:{client_secret}");
            for secret in [access, refresh, client_secret, basic.as_str()] {
                for encoded in agentd_schema::scrub::encodings(secret) {
                    // Look in the text as sent and in every string value decoded.
                    assert!(!answer.text.contains(&encoded), "{endpoint_auth}: {encoded:?} in {}", answer.text);
                    let strings = strings(&answer.body);
                    assert!(
                        !strings.iter().any(|s| s.contains(&encoded)),
                        "{endpoint_auth}: {encoded:?} in {strings:?}"
                    );
                }
            }
        }
    }

    fn strings(value: &Value) -> Vec<String> {
        match value {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) => items.iter().flat_map(strings).collect(),
            Value::Object(map) => map.values().flat_map(strings).collect(),
            _ => Vec::new(),
        }
    }
}
