//! `GET /v1/ext/sessions/{session_id}/sandbox-environment`: the session's vault
//! `environment_variable` credentials, values included, for the hands that run its
//! built-in tools (`agentd runner` puts them in the sandbox shell's environment), and
//! the sandbox execution policy the session pinned, which the hands enforce.
//!
//! This is the one place a credential's secret leaves the gateway, so only the sessions
//! token of the session's own work item reads it: an API key, an environment key or a
//! runner key gets 403, and nothing here is logged. The wire contract leaves the transport
//! open (the SDK's `EnvironmentWorker` ignores unknown keys of the work item's `secret`
//! and reads no variables); a route keeps the secret out of the work item, which
//! `work.retrieve` and `work.list` show to the environment's other credentials.

use agentd_schema::ListQuery;
use agentd_schema::ids::SessionId;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde_json::{Value, json};

use crate::AppState;
use crate::admission::Tenant;
use crate::error::{ApiError, ApiResult};

/// Where a credential's sealed secrets are stored (see `credentials.rs`).
const SEALED: &str = "_sealed";

/// `GET /v1/ext/sessions/{session_id}/sandbox-environment`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SessionId>,
) -> ApiResult<Json<Value>> {
    // Who may read it (only this session's sessions token) is `admission::scope`'s rule.
    let store = state.backends.store.as_ref();
    let session = store
        .get_session(&tenant.workspace_id, &id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("session not found: {id}")))?;
    let vault_ids = session.body["vault_ids"].as_array().cloned().unwrap_or_default();
    let mut variables = Vec::new();
    for vault_id in vault_ids.iter().filter_map(Value::as_str) {
        let Some(vault) = store.get_resource(&tenant.workspace_id, "vault", vault_id).await? else { continue };
        if vault.archived_at_ms.is_some() {
            continue;
        }
        let query = ListQuery { parent_id: Some(vault_id.to_owned()), limit: 500, ..ListQuery::default() };
        for credential in store.list_resources(&tenant.workspace_id, "vault_credential", &query).await? {
            let auth = &credential.body["auth"];
            if auth["type"] != "environment_variable" || credential.archived_at_ms.is_some() {
                continue;
            }
            let sealed = credential.body[SEALED].as_str().unwrap_or_default();
            let opened = state.secrets.open(&credential.id, sealed).map_err(|_| {
                ApiError::Internal(format!("credential {}: its sealed secret does not open", credential.id))
            })?;
            variables.push(json!({
                "name": auth["secret_name"],
                "value": opened["secret_value"],
                "credential_id": credential.id,
                "vault_id": vault_id,
                "networking": auth["networking"],
            }));
        }
    }
    // The sandbox execution policy the session pinned at its creation (`null`: none bound),
    // which the hands enforce or refuse (docs/api/sandbox-policies.md).
    let policy = session.body.get("_sandbox_policy").cloned().unwrap_or(Value::Null);
    Ok(Json(json!({
        "type": "sandbox_environment",
        "session_id": id,
        "variables": variables,
        "sandbox_policy": policy,
    })))
}
