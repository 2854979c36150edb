//! Agent cards: the workspace card at `/.well-known/agent-card.json` (interfaces at
//! `/v1/a2a`, one skill per agent) and per-agent cards at `/v1/a2a/agents/{agent_id}`
//! and its `/.well-known/agent-card.json`. URLs are absolute: the configured public URL,
//! or the request's `X-Forwarded-Proto` / `X-Forwarded-Host` / `Host`. Cards need the
//! same API key as the rest of `/v1` (declared as a bearer security scheme) and carry an
//! `ETag`.

use agentd_schema::ListQuery;
use agentd_schema::ids::AgentId;
use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{A2aResult, Endpoint};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::exposure::{self, Protocol};
use crate::error::ApiError;

/// The agents a workspace card lists as skills.
const MAX_SKILLS: i64 = 100;

/// The public base URL (scheme and authority, no trailing slash).
pub fn base_url(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.a2a.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let header = |name: &str| {
        headers.get(name).and_then(|v| v.to_str().ok()).map(|v| v.split(',').next().unwrap_or("").trim().to_owned())
    };
    let proto = header("x-forwarded-proto").filter(|p| p == "http" || p == "https").unwrap_or_else(|| "http".into());
    let host = header("x-forwarded-host")
        .or_else(|| header("host"))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{proto}://{host}")
}

fn interfaces(url: &str) -> Value {
    json!([
        { "url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0" },
        { "url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0" },
    ])
}

fn skill(agent: &agentd_schema::Resource) -> Value {
    let name = agent.body["name"].as_str().unwrap_or(&agent.id);
    let description = agent.body["description"]
        .as_str()
        .filter(|d| !d.is_empty())
        .map_or_else(|| format!("Talk to the agent {name}."), str::to_owned);
    let mut tags = vec![json!("agent")];
    for tool in agent.body["tools"].as_array().into_iter().flatten() {
        if let Some(tool) = tool["name"].as_str().or(tool["type"].as_str()) {
            tags.push(json!(tool));
        }
    }
    json!({ "id": agent.id, "name": name, "description": description, "tags": tags })
}

/// The card of the workspace (`agent` None) or of one agent.
pub async fn build(state: &AppState, tenant: &Tenant, headers: &HeaderMap, agent: Option<&str>) -> A2aResult<Value> {
    let store = state.backends.store.as_ref();
    let base = base_url(state, headers);
    // Only the agents A2A exposes (domain::exposure): another is missing here.
    let exposure = exposure::of(store, &tenant.workspace_id, Protocol::A2a).await?;
    let (name, description, version, url, skills) = match agent {
        Some(id) => {
            let Some(agent) = store
                .get_resource(&tenant.workspace_id, "agent", id)
                .await?
                .filter(|a| a.archived_at_ms.is_none() && exposure.exposes(&a.id))
            else {
                return Err(ApiError::NotFound(format!("agent not found: {id}")).into());
            };
            let name = agent.body["name"].as_str().unwrap_or(id).to_owned();
            let description = agent.body["description"]
                .as_str()
                .filter(|d| !d.is_empty())
                .map_or_else(|| format!("The agentd agent {name}."), str::to_owned);
            (name, description, agent.version.to_string(), format!("{base}/v1/a2a/agents/{id}"), vec![skill(&agent)])
        }
        None => {
            let agents = match exposure.listed() {
                // The listed agents themselves, not the newest page filtered.
                Some(listed) => {
                    let mut agents = Vec::new();
                    for id in listed.iter().take(MAX_SKILLS as usize) {
                        agents.extend(store.get_resource(&tenant.workspace_id, "agent", id).await?);
                    }
                    agents.sort_by(|a, b| b.id.cmp(&a.id));
                    agents
                }
                None if exposure.is_all() => {
                    let query = ListQuery { limit: MAX_SKILLS, ..ListQuery::default() };
                    store.list_resources(&tenant.workspace_id, "agent", &query).await?
                }
                None => Vec::new(),
            };
            let skills = agents.iter().filter(|a| a.archived_at_ms.is_none()).map(skill).collect();
            (
                "agentd".to_owned(),
                "The agents of this agentd workspace. A new context starts with the agent named by message.metadata.agent, the x-agentd-agent header, or the gateway's default agent.".to_owned(),
                env!("CARGO_PKG_VERSION").to_owned(),
                format!("{base}/v1/a2a"),
                skills,
            )
        }
    };
    Ok(json!({
        "name": name,
        "description": description,
        "version": version,
        "supportedInterfaces": interfaces(&url),
        "provider": { "organization": "agentd", "url": base },
        "capabilities": { "streaming": true, "pushNotifications": true, "extendedAgentCard": true },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
        "securitySchemes": { "bearer": { "httpAuthSecurityScheme": {
            "scheme": "Bearer", "description": "An agentd API key.",
        } } },
        "securityRequirements": [{ "schemes": { "bearer": { "list": [] } } }],
    }))
}

/// `GetExtendedAgentCard`: the card of the endpoint (the caller is authenticated).
pub async fn extended(state: &AppState, tenant: &Tenant, endpoint: &Endpoint, headers: &HeaderMap) -> A2aResult<Value> {
    build(state, tenant, headers, endpoint.agent.as_deref()).await
}

fn respond(headers: &HeaderMap, card: A2aResult<Value>) -> Response {
    let card = match card {
        Ok(card) => card,
        Err(error) => {
            let (status, body) = error.to_rest();
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return error.decorate((status, axum::Json(body)).into_response());
        }
    };
    let body = card.to_string();
    let etag = format!(
        "\"{}\"",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&Sha256::digest(body.as_bytes())[..16])
    );
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    };
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=60"));
    response
}

/// `GET /.well-known/agent-card.json`.
pub async fn workspace_card(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    headers: HeaderMap,
) -> Response {
    respond(&headers, build(&state, &tenant, &headers, None).await)
}

/// `GET /v1/a2a/agents/{agent_id}` and its `/.well-known/agent-card.json`.
pub async fn agent_card(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent): Path<AgentId>,
    headers: HeaderMap,
) -> Response {
    respond(&headers, build(&state, &tenant, &headers, Some(&agent)).await)
}
