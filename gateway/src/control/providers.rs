//! `/v1/config/providers`, `offerings`, `model-attributes`, `catalog`, `credentials`,
//! `credential-pools` and `inference-profiles` (docs/api/config.md "Providers, models
//! and credentials"): parse → `domain::providers` → render. RFC 9457 errors.
//!
//! `PUT` creates (201) or replaces (200) what its path names; the path id is
//! authoritative. Every response that changed something carries the workspace's new
//! `config_revision`. A credential's secret is accepted and never returned.

use agentd_schema::catalog::{Catalog, Model, Prices, ProviderKind};
use agentd_schema::ids::ProviderCredentialId;
use agentd_schema::store::{
    CredentialPoolRow, CredentialRef, EndpointRow, InferenceProfileRow, ModelAttributesRow, OfferingRow,
    ProviderCredentialRow, Written,
};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::problem::{self, Problem, ProblemResult};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::providers::{
    self as domain, NewCredential, ProviderView, PutAttributes, PutEndpoint, PutOffering, PutPool, PutProvider, time,
};

fn string(map: &Map<String, Value>, field: &str) -> ProblemResult<Option<String>> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.clone())),
        Some(_) => Err(Problem::invalid(format!("{field}: a string is required"))),
    }
}

fn required(map: &Map<String, Value>, field: &str) -> ProblemResult<String> {
    string(map, field)?.ok_or_else(|| Problem::invalid(format!("{field}: required")))
}

fn integer(map: &Map<String, Value>, field: &str) -> ProblemResult<Option<i64>> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            value.as_i64().map(Some).ok_or_else(|| Problem::invalid(format!("{field}: an integer is required")))
        }
    }
}

fn strings(map: &Map<String, Value>, field: &str) -> ProblemResult<Vec<String>> {
    let Some(Value::Array(items)) = map.get(field) else {
        return Err(Problem::invalid(format!("{field}: an array of strings is required")));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_str()
                .map(str::to_owned)
                .ok_or_else(|| Problem::invalid(format!("{field}[{i}]: a string is required")))
        })
        .collect()
}

/// 201 for a new resource, 200 for a replaced one.
fn written<T>(written: &Written<T>, body: Value) -> Response {
    let status = if written.created { StatusCode::CREATED } else { StatusCode::OK };
    let mut body = body;
    body["config_revision"] = json!(written.revision);
    (status, Json(body)).into_response()
}

fn render_endpoint(row: &EndpointRow) -> Value {
    let (credential_id, pool_id) = match &row.credential {
        Some(CredentialRef::Credential(id)) => (Some(id.as_str()), None),
        Some(CredentialRef::Pool(id)) => (None, Some(id.as_str())),
        None => (None, None),
    };
    json!({
        "object": "provider_endpoint",
        "id": row.id,
        "provider_id": row.provider_id,
        "base_url": row.base_url,
        "credential_id": credential_id,
        "credential_pool_id": pool_id,
        "priority": row.priority,
        "connect_timeout_ms": row.connect_timeout_ms,
        "request_timeout_ms": row.request_timeout_ms,
        "created_at": time(row.created_at_ms),
        "updated_at": time(row.updated_at_ms),
    })
}

fn render_provider(view: &ProviderView) -> Value {
    let row = &view.provider;
    json!({
        "object": "model_provider",
        "id": row.id,
        "kind": row.kind.as_str(),
        "display_name": row.display_name,
        "endpoints": view.endpoints.iter().map(render_endpoint).collect::<Vec<_>>(),
        "created_at": time(row.created_at_ms),
        "updated_at": time(row.updated_at_ms),
    })
}

fn render_offering(row: &OfferingRow) -> Value {
    json!({
        "object": "model_offering",
        "model_id": row.model_id,
        "provider_id": row.provider_id,
        "provider_model": row.provider_model,
        "created_at": time(row.created_at_ms),
        "updated_at": time(row.updated_at_ms),
    })
}

fn render_prices(prices: &Option<Prices>) -> Value {
    prices.map_or(Value::Null, |p| json!(p))
}

fn render_attributes(row: &ModelAttributesRow) -> Value {
    json!({
        "object": "model_attributes",
        "model_id": row.model_id,
        "display_name": row.display_name,
        "max_input_tokens": row.max_input_tokens,
        "max_tokens": row.max_tokens,
        "prices": render_prices(&row.prices),
        "created_at": time(row.created_at_ms),
        "updated_at": time(row.updated_at_ms),
    })
}

/// A credential: never its secret.
fn render_credential(row: &ProviderCredentialRow) -> Value {
    json!({
        "object": "provider_credential",
        "id": row.id,
        "name": row.name,
        "status": if row.archived_at_ms.is_some() { "archived" } else { "active" },
        "created_at": time(row.created_at_ms),
        "archived_at": row.archived_at_ms.map(time),
    })
}

fn render_pool(row: &CredentialPoolRow, members: &[ProviderCredentialRow]) -> Value {
    let credentials: Vec<Value> = row
        .credential_ids
        .iter()
        .map(|id| {
            let status = match members.iter().find(|m| &m.id == id) {
                Some(m) if m.archived_at_ms.is_none() => "active",
                Some(_) => "archived",
                None => "missing",
            };
            json!({ "credential_id": id, "status": status })
        })
        .collect();
    json!({
        "object": "credential_pool",
        "id": row.id,
        "credential_ids": row.credential_ids,
        "credentials": credentials,
        "cooldown_ms": row.cooldown_ms,
        "created_at": time(row.created_at_ms),
        "updated_at": time(row.updated_at_ms),
    })
}

fn render_profile(row: &InferenceProfileRow) -> Value {
    json!({
        "object": "inference_profile",
        "id": row.id,
        "candidates": row.candidates,
        "created_at": time(row.created_at_ms),
        "updated_at": time(row.updated_at_ms),
    })
}

fn render_model(model: &Model) -> Value {
    let route = model.route.as_ref();
    json!({
        "object": "catalog_model",
        "id": model.id,
        "display_name": model.display_name,
        "source": if route.is_some() { "configured" } else { "bootstrap" },
        "provider": match route {
            Some(route) => json!({ "id": route.provider_id, "kind": route.kind.as_str() }),
            None => json!({ "id": model.provider, "kind": model.provider }),
        },
        "provider_model": route.map(|r| r.provider_model.as_str()),
        "endpoint_id": route.and_then(|r| r.endpoint.as_ref()).map(|e| e.id.as_str()),
        "max_input_tokens": model.max_input_tokens,
        "max_tokens": model.max_tokens,
        "prices": render_prices(&model.prices),
    })
}

fn render_catalog(catalog: &Catalog) -> Value {
    json!({
        "object": "model_catalog",
        "config_revision": catalog.revision(),
        "data": catalog.models().iter().map(render_model).collect::<Vec<_>>(),
    })
}

/// `PUT /v1/config/providers/{provider_id}`: `{kind, display_name?}`.
pub async fn put_provider(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> ProblemResult<Response> {
    let map = problem::object(&bytes, &["kind", "display_name"])?;
    let kind = required(&map, "kind")?;
    let kind = ProviderKind::parse(&kind).ok_or_else(|| {
        Problem::invalid(format!("kind: must be \"anthropic\" or \"openai_compatible\", got {kind:?}"))
    })?;
    let display_name = string(&map, "display_name")?;
    if display_name.as_ref().is_some_and(|name| name.chars().count() > 256) {
        return Err(Problem::invalid("display_name: at most 256 characters"));
    }
    let done = domain::put_provider(&state, &tenant, &id, PutProvider { kind, display_name }).await?;
    Ok(written(&done, render_provider(&done.row)))
}

/// `GET /v1/config/providers/{provider_id}`: the provider with its endpoints.
pub async fn get_provider(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
) -> ProblemResult<Json<Value>> {
    Ok(Json(render_provider(&domain::get_provider(&state, &tenant, &id).await?)))
}

/// `PUT /v1/config/providers/{provider_id}/endpoints/{endpoint_id}`.
pub async fn put_endpoint(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((provider_id, id)): Path<(String, String)>,
    bytes: Bytes,
) -> ProblemResult<Response> {
    const FIELDS: &[&str] =
        &["base_url", "credential_id", "credential_pool_id", "priority", "connect_timeout_ms", "request_timeout_ms"];
    let map = problem::object(&bytes, FIELDS)?;
    let credential = match (string(&map, "credential_id")?, string(&map, "credential_pool_id")?) {
        (Some(_), Some(_)) => {
            return Err(Problem::invalid("credential_pool_id: give credential_id or credential_pool_id, not both"));
        }
        (Some(id), None) => {
            ProviderCredentialId::parse(&id)
                .map_err(|_| Problem::invalid(format!("credential_id: not a credential id: {id:?}")))?;
            Some(CredentialRef::Credential(id))
        }
        (None, Some(pool)) => Some(CredentialRef::Pool(pool)),
        (None, None) => None,
    };
    let put = PutEndpoint {
        base_url: required(&map, "base_url")?,
        credential,
        priority: integer(&map, "priority")?.unwrap_or(0),
        connect_timeout_ms: integer(&map, "connect_timeout_ms")?,
        request_timeout_ms: integer(&map, "request_timeout_ms")?,
    };
    let done = domain::put_endpoint(&state, &tenant, &provider_id, &id, put).await?;
    Ok(written(&done, render_endpoint(&done.row)))
}

/// `GET /v1/config/providers/{provider_id}/endpoints/{endpoint_id}`.
pub async fn get_endpoint(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((provider_id, id)): Path<(String, String)>,
) -> ProblemResult<Json<Value>> {
    Ok(Json(render_endpoint(&domain::get_endpoint(&state, &tenant, &provider_id, &id).await?)))
}

/// `POST /v1/config/offerings`: `{model_id, provider_id, provider_model?}`; 201 when the
/// model had no offering, 200 when this one replaced it.
pub async fn post_offering(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ProblemResult<Response> {
    let map = problem::object(&bytes, &["model_id", "provider_id", "provider_model"])?;
    let put = PutOffering {
        model_id: required(&map, "model_id")?,
        provider_id: required(&map, "provider_id")?,
        provider_model: string(&map, "provider_model")?,
    };
    let done = domain::put_offering(&state, &tenant, put).await?;
    Ok(written(&done, render_offering(&done.row)))
}

fn prices(map: &Map<String, Value>) -> ProblemResult<Option<Prices>> {
    const FIELDS: &[&str] =
        &["input", "output", "cache_read", "cache_write", "web_search_per_request", "web_fetch_per_request"];
    let prices = match map.get("prices") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(prices)) => prices,
        Some(_) => return Err(Problem::invalid("prices: an object of micro-USD amounts is required")),
    };
    if let Some(unknown) = prices.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(Problem::invalid(format!("prices.{unknown}: unknown field")));
    }
    let amount = |field: &str, needed: bool| -> ProblemResult<u64> {
        match prices.get(field) {
            None | Some(Value::Null) if !needed => Ok(0),
            None | Some(Value::Null) => Err(Problem::invalid(format!("prices.{field}: required"))),
            Some(value) => value.as_u64().filter(|n| *n <= 1_000_000_000_000).ok_or_else(|| {
                Problem::invalid(format!("prices.{field}: a non-negative integer (micro-USD) is required"))
            }),
        }
    };
    Ok(Some(Prices {
        input: amount("input", true)?,
        output: amount("output", true)?,
        cache_read: amount("cache_read", false)?,
        cache_write: amount("cache_write", false)?,
        web_search_per_request: amount("web_search_per_request", false)?,
        web_fetch_per_request: amount("web_fetch_per_request", false)?,
    }))
}

/// `PUT /v1/config/model-attributes/{model_id}`.
pub async fn put_model_attributes(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(model_id): Path<String>,
    bytes: Bytes,
) -> ProblemResult<Response> {
    let map = problem::object(&bytes, &["display_name", "max_input_tokens", "max_tokens", "prices"])?;
    let display_name = string(&map, "display_name")?;
    if display_name.as_ref().is_some_and(|name| name.is_empty() || name.chars().count() > 256) {
        return Err(Problem::invalid("display_name: 1 to 256 characters"));
    }
    let put = PutAttributes {
        display_name,
        max_input_tokens: integer(&map, "max_input_tokens")?,
        max_tokens: integer(&map, "max_tokens")?,
        prices: prices(&map)?,
    };
    let done = domain::put_model_attributes(&state, &tenant, &model_id, put).await?;
    Ok(written(&done, render_attributes(&done.row)))
}

/// `GET /v1/config/catalog`: the workspace's effective catalog.
pub async fn get_catalog(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
) -> ProblemResult<Json<Value>> {
    let catalog = domain::catalog(&state, &tenant).await?;
    Ok(Json(render_catalog(&catalog)))
}

/// `POST /v1/config/credentials`: `{name, secret}` → 201, without the secret.
pub async fn create_credential(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ProblemResult<Response> {
    let map = problem::object(&bytes, &["name", "secret"])?;
    let new = NewCredential { name: required(&map, "name")?, secret: required(&map, "secret")? };
    let done = domain::create_credential(&state, &tenant, new).await?;
    Ok(written(&done, render_credential(&done.row)))
}

/// `GET /v1/config/credentials`.
pub async fn list_credentials(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
) -> ProblemResult<Json<Value>> {
    let rows = domain::list_credentials(&state, &tenant).await?;
    Ok(Json(json!({ "data": rows.iter().map(render_credential).collect::<Vec<_>>() })))
}

/// `GET /v1/config/credentials/{provider_credential_id}`.
pub async fn get_credential(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<ProviderCredentialId>,
) -> ProblemResult<Json<Value>> {
    Ok(Json(render_credential(&domain::get_credential(&state, &tenant, id.as_str()).await?)))
}

/// `POST /v1/config/credentials/{provider_credential_id}/archive`.
pub async fn archive_credential(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<ProviderCredentialId>,
) -> ProblemResult<Response> {
    let done = domain::archive_credential(&state, &tenant, id.as_str()).await?;
    Ok(written(&done, render_credential(&done.row)))
}

/// `PUT /v1/config/credential-pools/{credential_pool_id}`: `{credential_ids, cooldown_ms?}`.
pub async fn put_pool(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> ProblemResult<Response> {
    let map = problem::object(&bytes, &["credential_ids", "cooldown_ms"])?;
    let put = PutPool { credential_ids: strings(&map, "credential_ids")?, cooldown_ms: integer(&map, "cooldown_ms")? };
    let done = domain::put_pool(&state, &tenant, &id, put).await?;
    let (pool, members) = domain::get_pool(&state, &tenant, &id).await?;
    Ok(written(&done, render_pool(&pool, &members)))
}

/// `GET /v1/config/credential-pools/{credential_pool_id}`.
pub async fn get_pool(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
) -> ProblemResult<Json<Value>> {
    let (pool, members) = domain::get_pool(&state, &tenant, &id).await?;
    Ok(Json(render_pool(&pool, &members)))
}

/// `PUT /v1/config/inference-profiles/{inference_profile_id}`: `{candidates}`.
pub async fn put_profile(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> ProblemResult<Response> {
    let map = problem::object(&bytes, &["candidates"])?;
    let done = domain::put_profile(&state, &tenant, &id, strings(&map, "candidates")?).await?;
    Ok(written(&done, render_profile(&done.row)))
}

/// `GET /v1/config/inference-profiles/{inference_profile_id}`.
pub async fn get_profile(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
) -> ProblemResult<Json<Value>> {
    Ok(Json(render_profile(&domain::get_profile(&state, &tenant, &id).await?)))
}

/// `POST /v1/config/inference-profiles/{inference_profile_id}/resolve`: the candidate a
/// request would use now; 404 `model_unresolved` when none can serve.
pub async fn resolve_profile(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
) -> ProblemResult<Json<Value>> {
    let resolution = domain::resolve_profile(&state, &tenant, &id).await?;
    let candidates: Vec<Value> = resolution
        .candidates
        .iter()
        .map(|c| json!({ "model_id": c.model_id, "eligible": c.unusable.is_none(), "reason": c.unusable }))
        .collect();
    let Some(model_id) = resolution.model_id else {
        let reasons: Vec<&str> = resolution.candidates.iter().filter_map(|c| c.unusable.as_deref()).collect();
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "model_unresolved",
            format!("inference profile {id}: no candidate can serve ({})", reasons.join("; ")),
        ));
    };
    Ok(Json(json!({
        "object": "inference_resolution",
        "profile_id": resolution.profile.id,
        "model_id": model_id,
        "provider_id": resolution.provider_id,
        "endpoint_id": resolution.endpoint_id,
        "candidates": candidates,
    })))
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::StatusCode;
    use serde_json::json;

    use crate::test_rig::{Answer, Rig};

    fn problem(answer: &Answer, status: StatusCode, code: &str, fragment: &str) {
        assert_eq!(answer.status, status, "{}", answer.text);
        let content_type = answer.headers["content-type"].to_str().unwrap();
        assert!(content_type.starts_with("application/problem+json"), "{content_type}");
        assert_eq!(answer.body["code"], code, "{}", answer.text);
        assert!(answer.body["detail"].as_str().unwrap().contains(fragment), "{fragment} in {}", answer.text);
    }

    #[tokio::test]
    async fn a_body_that_is_not_a_json_object_is_a_400_everywhere() {
        let rig = Rig::new().await;
        for (method, path) in [
            ("PUT", "/v1/config/providers/p1"),
            ("PUT", "/v1/config/providers/p1/endpoints/e1"),
            ("POST", "/v1/config/offerings"),
            ("PUT", "/v1/config/model-attributes/m1"),
            ("POST", "/v1/config/credentials"),
            ("PUT", "/v1/config/credential-pools/pool1"),
            ("PUT", "/v1/config/inference-profiles/fast"),
        ] {
            for body in ["{not json", "[1, 2]", "\"text\""] {
                let answer = rig.send(rig.request(method, path, Body::from(body))).await;
                problem(&answer, StatusCode::BAD_REQUEST, "invalid_request", "body");
            }
        }
        // An unknown field is the field's 422.
        let unknown = rig.call("PUT", "/v1/config/providers/p1", json!({"kind": "anthropic", "surprise": 1})).await;
        problem(&unknown, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed", "surprise: unknown field");
    }

    #[tokio::test]
    async fn free_text_with_control_characters_is_refused_naming_the_field() {
        let rig = Rig::new().await;
        let provider =
            rig.call("PUT", "/v1/config/providers/p1", json!({"kind": "anthropic", "display_name": "a\u{0}b"})).await;
        problem(&provider, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed", "display_name");
        let credential =
            rig.call("POST", "/v1/config/credentials", json!({"name": "key\u{0}", "secret": "sk-1"})).await;
        problem(&credential, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed", "name");
        let model = agentd_schema::catalog::current().models()[0].id.clone();
        let attributes = rig
            .call("PUT", &format!("/v1/config/model-attributes/{model}"), json!({"display_name": "x\u{1b}[31m"}))
            .await;
        problem(&attributes, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed", "display_name");

        let fine = rig
            .call("PUT", "/v1/config/providers/p1", json!({"kind": "anthropic", "display_name": "Ünïcode ok"}))
            .await;
        assert_eq!(fine.status, StatusCode::CREATED, "{}", fine.text);
    }
}
