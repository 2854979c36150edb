//! Environments: where sessions' tools run. `cloud` environments are served by the
//! built-in runner, `self_hosted` ones by the customer's worker. `config.type` never
//! changes after creation; archived environments cannot be updated or start sessions.

use agentd_schema::ids::EnvironmentId;
use agentd_schema::{Resource, Store};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::body::{self, as_object, join, tag};
use super::family::{Family, with_lifecycle};
use super::limits::{
    MAX_DESCRIPTION_CHARS, MAX_ENVIRONMENT_HOSTS, MAX_HOST_CHARS, MAX_NAME_CHARS, MAX_PACKAGE_CHARS, MAX_PACKAGES,
};
use super::query::{now_ms, rfc3339};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::environments::{self as domain, CreateEnvironment};
use crate::error::{ApiError, ApiResult};

const KIND: &str = "environment";
const FIELDS: &[&str] = &["name", "description", "config", "metadata", "scope"];
const PACKAGE_MANAGERS: &[&str] = &["apt", "cargo", "gem", "go", "npm", "pip"];

const FAMILY: Family = Family { kind: KIND, noun: "environment", max_page: 100 };

fn render(resource: &Resource) -> Value {
    with_lifecycle(resource)
}

async fn load(store: &dyn Store, tenant: &Tenant, id: &str) -> ApiResult<Resource> {
    FAMILY.load(store, tenant, id, None).await
}

/// Resolves a config request against the stored config (`None` on create): omitted
/// cloud fields keep their stored values; the type cannot change.
fn config(request: Option<&Value>, stored: Option<&Value>) -> ApiResult<Value> {
    let request = match request {
        None | Some(Value::Null) => {
            return Ok(stored.cloned().unwrap_or_else(domain::default_cloud));
        }
        Some(value) => as_object(value, "config")?,
    };
    let kind = tag(request, "config")?;
    if let Some(stored_kind) = stored.and_then(|s| s["type"].as_str()).filter(|stored_kind| *stored_kind != kind) {
        return Err(ApiError::invalid_with_code(
            "invalid_config_type_change",
            format!("config.type: {kind:?} differs from the environment's stored type {stored_kind:?}"),
        ));
    }
    match kind {
        "cloud" => cloud(request, stored),
        "self_hosted" => {
            body::only_known(request, &["type"], "config")?;
            Ok(json!({ "type": "self_hosted" }))
        }
        other => Err(ApiError::invalid(format!("config.type: must be cloud or self_hosted, got {other:?}"))),
    }
}

fn cloud(request: &Map<String, Value>, stored: Option<&Value>) -> ApiResult<Value> {
    body::only_known(request, &["type", "networking", "packages"], "config")?;
    let networking = match request.get("networking") {
        None => stored.map(|s| s["networking"].clone()).unwrap_or_else(|| json!({ "type": "unrestricted" })),
        Some(Value::Null) => json!({ "type": "unrestricted" }),
        Some(value) => {
            let map = as_object(value, "config.networking")?;
            match tag(map, "config.networking")? {
                "unrestricted" => json!({ "type": "unrestricted" }),
                "limited" => {
                    body::only_known(
                        map,
                        &["type", "allow_mcp_servers", "allow_package_managers", "allowed_hosts"],
                        "config.networking",
                    )?;
                    let previous = stored.map(|s| &s["networking"]).filter(|n| n["type"] == "limited");
                    let flag = |key: &str| -> ApiResult<bool> {
                        Ok(body::optional_bool(map.get(key), &format!("config.networking.{key}"))?
                            .or_else(|| previous.and_then(|p| p[key].as_bool()))
                            .unwrap_or(false))
                    };
                    let hosts = match map.get("allowed_hosts") {
                        None => previous.map(|p| p["allowed_hosts"].clone()).unwrap_or_else(|| json!([])),
                        Some(value) => strings(
                            Some(value),
                            "config.networking.allowed_hosts",
                            MAX_ENVIRONMENT_HOSTS,
                            MAX_HOST_CHARS,
                        )?,
                    };
                    json!({
                        "type": "limited",
                        "allow_mcp_servers": flag("allow_mcp_servers")?,
                        "allow_package_managers": flag("allow_package_managers")?,
                        "allowed_hosts": hosts,
                    })
                }
                other => {
                    return Err(ApiError::invalid(format!(
                        "config.networking.type: must be unrestricted or limited, got {other:?}"
                    )));
                }
            }
        }
    };
    let stored_packages = stored.map(|s| &s["packages"]);
    let packages = match request.get("packages") {
        None if stored_packages.is_some_and(|p| p.is_object()) => stored_packages.cloned().unwrap_or_default(),
        None | Some(Value::Null) => packages(&Map::new())?,
        Some(value) => {
            let map = as_object(value, "config.packages")?;
            packages(map)?
        }
    };
    let any_packages = PACKAGE_MANAGERS.iter().any(|m| packages[*m].as_array().is_some_and(|list| !list.is_empty()));
    if any_packages && networking["type"] == "limited" && networking["allow_package_managers"] != true {
        return Err(ApiError::invalid(
            "config.packages: limited networking requires networking.allow_package_managers = true when packages are set",
        ));
    }
    Ok(json!({ "type": "cloud", "networking": networking, "packages": packages }))
}

fn packages(map: &Map<String, Value>) -> ApiResult<Value> {
    let mut allowed = PACKAGE_MANAGERS.to_vec();
    allowed.push("type");
    body::only_known(map, &allowed, "config.packages")?;
    if let Some(kind) = map.get("type").filter(|k| !k.is_null() && **k != json!("packages")) {
        return Err(ApiError::invalid(format!("config.packages.type: must be \"packages\", got {kind}")));
    }
    let mut out = Map::new();
    for manager in PACKAGE_MANAGERS {
        out.insert(
            (*manager).into(),
            strings(map.get(*manager), &format!("config.packages.{manager}"), MAX_PACKAGES, MAX_PACKAGE_CHARS)?,
        );
    }
    out.insert("type".into(), json!("packages"));
    Ok(Value::Object(out))
}

/// A list of at most `max` strings of 1 to `max_chars` characters.
fn strings(value: Option<&Value>, path: &str, max: usize, max_chars: usize) -> ApiResult<Value> {
    let items = body::array(value, path, max)?;
    for (i, item) in items.iter().enumerate() {
        body::string(Some(item), &format!("{path}[{i}]"), 0, max_chars)?;
    }
    Ok(Value::Array(items.to_vec()))
}

fn scope(value: Option<&Value>) -> ApiResult<Value> {
    match value {
        None | Some(Value::Null) => Ok(json!("organization")),
        Some(Value::String(scope)) if scope == "organization" => Ok(json!("organization")),
        Some(Value::String(scope)) if scope == "account" => {
            Err(ApiError::invalid("scope: only \"organization\" is supported; \"account\" is rejected"))
        }
        Some(other) => Err(ApiError::invalid(format!("scope: must be organization or account, got {other}"))),
    }
}

/// `POST /v1/environments`: the wire body parsed into a typed request for the service.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, FIELDS, "")?;
    let metadata = Value::Object(body::optional_metadata(request.get("metadata"))?);
    let create = CreateEnvironment {
        name: body::string(request.get("name"), "name", 1, MAX_NAME_CHARS)?,
        description: match request.get("description") {
            None | Some(Value::Null) => None,
            Some(_) => Some(body::string(request.get("description"), "description", 0, MAX_DESCRIPTION_CHARS)?),
        },
        config: config(request.get("config"), None)?,
        metadata,
        scope: scope(request.get("scope"))?.as_str().unwrap_or("organization").to_owned(),
    };
    let resource = domain::create(&state, &tenant, create).await?;
    Ok(Json(render(&resource)))
}

/// `GET /v1/environments/{environment_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<EnvironmentId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&load(state.backends.store.as_ref(), &tenant, &id).await?)))
}

/// `POST /v1/environments/{environment_id}`: absent keeps, `null` clears where allowed.
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<EnvironmentId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, FIELDS, "")?;
    let store = state.backends.store.as_ref();
    let current = load(store, &tenant, &id).await?;
    if current.archived_at_ms.is_some() {
        return Err(ApiError::invalid_with_code("environment_archived", format!("environment {id} is archived")));
    }
    let mut environment = current.body.as_object().cloned().unwrap_or_default();
    for (field, value) in &request {
        let updated = match field.as_str() {
            "name" if value.is_null() => return Err(ApiError::invalid("name: cannot be cleared")),
            "name" => json!(body::string(Some(value), "name", 1, MAX_NAME_CHARS)?),
            "description" if value.is_null() => Value::Null,
            "description" => json!(body::string(Some(value), "description", 0, MAX_DESCRIPTION_CHARS)?),
            "config" => config(Some(value), current.body.get("config"))?,
            "scope" => scope(Some(value))?,
            "metadata" => {
                // An empty string deletes a key, like null.
                let patch = match value {
                    Value::Object(map) => Value::Object(
                        map.iter()
                            .map(|(k, v)| (k.clone(), if *v == json!("") { Value::Null } else { v.clone() }))
                            .collect(),
                    ),
                    other => other.clone(),
                };
                body::patch_metadata(current.body.get("metadata").unwrap_or(&Value::Null), &patch, "metadata")?
            }
            other => return Err(ApiError::invalid(format!("{}: unknown field", join("", other)))),
        };
        environment.insert(field.clone(), updated);
    }
    environment.insert("updated_at".into(), json!(rfc3339(now_ms())));
    let updated = store
        .update_resource(agentd_schema::ResourceUpdate {
            workspace_id: tenant.workspace_id.clone(),
            kind: KIND.into(),
            id: id.to_string(),
            expected_version: current.version,
            body: Value::Object(environment),
            versioned: false,
        })
        .await?;
    Ok(Json(render(&updated)))
}

/// `GET /v1/environments`: newest first.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    Ok(Json(FAMILY.page(state.backends.store.as_ref(), &tenant, &uri, None, false, render).await?))
}

/// `POST /v1/environments/{environment_id}/archive`.
pub async fn archive(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<EnvironmentId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&FAMILY.archive(state.backends.store.as_ref(), &tenant, &id, None).await?)))
}

/// `DELETE /v1/environments/{environment_id}`.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<EnvironmentId>,
) -> ApiResult<Json<Value>> {
    if !state.backends.store.delete_resource(&tenant.workspace_id, KIND, &id).await? {
        return Err(ApiError::NotFound(format!("environment not found: {id}")));
    }
    Ok(Json(json!({ "id": id, "type": "environment_deleted" })))
}
