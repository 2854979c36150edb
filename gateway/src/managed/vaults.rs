//! Vaults: named groups of credentials that sessions use to reach MCP servers and
//! outbound APIs. See `credentials.rs` for the credentials themselves.

use agentd_schema::ids::VaultId;
use agentd_schema::{Resource, Store};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::body::{self};
use super::family::{Family, with_lifecycle};
use super::limits::MAX_DISPLAY_NAME_CHARS;
use super::query::{now_ms, rfc3339};
use crate::AppState;
use crate::admission::Tenant;
use crate::error::{ApiError, ApiResult};

pub(super) const KIND: &str = "vault";

const FAMILY: Family = Family { kind: KIND, noun: "vault", max_page: 100 };

fn render(resource: &Resource) -> Value {
    with_lifecycle(resource)
}

/// Loads a vault of the caller's workspace or answers 404.
pub(super) async fn load(store: &dyn Store, tenant: &Tenant, id: &str) -> ApiResult<Resource> {
    FAMILY.load(store, tenant, id, None).await
}

/// `POST /v1/vaults`.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["display_name", "metadata"], "")?;
    let metadata = body::optional_metadata(request.get("metadata"))?;
    let id = agentd_schema::ids::new_id("vlt");
    let now = rfc3339(now_ms());
    let vault = json!({
        "type": "vault",
        "id": id,
        "display_name": body::string(request.get("display_name"), "display_name", 1, MAX_DISPLAY_NAME_CHARS)?,
        "metadata": metadata,
        "created_at": now,
        "updated_at": now,
        "archived_at": null,
    });
    let resource = FAMILY.create(state.backends.store.as_ref(), &tenant, id, None, vault, false).await?;
    Ok(Json(render(&resource)))
}

/// `GET /v1/vaults/{vault_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<VaultId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&load(state.backends.store.as_ref(), &tenant, &id).await?)))
}

/// `POST /v1/vaults/{vault_id}`.
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<VaultId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["display_name", "metadata"], "")?;
    let store = state.backends.store.as_ref();
    let current = load(store, &tenant, &id).await?;
    if current.archived_at_ms.is_some() {
        return Err(ApiError::invalid(format!("vault {id} is archived")));
    }
    let mut vault = current.body.as_object().cloned().unwrap_or_default();
    match request.get("display_name") {
        None | Some(Value::Null) => {}
        value => {
            vault.insert("display_name".into(), json!(body::string(value, "display_name", 1, MAX_DISPLAY_NAME_CHARS)?));
        }
    }
    if let Some(patch) = request.get("metadata") {
        let merged = body::patch_metadata(current.body.get("metadata").unwrap_or(&Value::Null), patch, "metadata")?;
        vault.insert("metadata".into(), merged);
    }
    vault.insert("updated_at".into(), json!(rfc3339(now_ms())));
    let updated = store
        .update_resource(agentd_schema::ResourceUpdate {
            workspace_id: tenant.workspace_id.clone(),
            kind: KIND.into(),
            id: id.to_string(),
            expected_version: current.version,
            body: Value::Object(vault),
            versioned: false,
        })
        .await?;
    Ok(Json(render(&updated)))
}

/// `GET /v1/vaults`: newest first.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    Ok(Json(FAMILY.page(state.backends.store.as_ref(), &tenant, &uri, None, false, render).await?))
}

/// `POST /v1/vaults/{vault_id}/archive`.
pub async fn archive(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<VaultId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&FAMILY.archive(state.backends.store.as_ref(), &tenant, &id, None).await?)))
}

/// `DELETE /v1/vaults/{vault_id}`: the vault and every credential in it.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<VaultId>,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    load(store, &tenant, &id).await?;
    super::credentials::delete_all(store, &tenant, &id).await?;
    store.delete_resource(&tenant.workspace_id, KIND, &id).await?;
    Ok(Json(json!({ "id": id, "type": "vault_deleted" })))
}
