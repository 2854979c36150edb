//! Agent cards: the workspace card at `/.well-known/agent-card.json` (interfaces at
//! `/v1/a2a`, one skill per agent) and per-agent cards at `/v1/a2a/agents/{agent_id}`
//! and its `/.well-known/agent-card.json`. URLs are absolute: the configured public URL,
//! or the request's `X-Forwarded-Proto` / `X-Forwarded-Host` / `Host`. Cards carry an
//! `ETag`.
//!
//! Two audiences (docs/api/a2a.md, "Discovery"): a caller with a key gets the full card
//! ([`build`]), here and from `GetExtendedAgentCard`; a caller without one
//! (`admission::auth::Anonymous`) gets the public card ([`public`]) — the interfaces,
//! the bearer scheme and the capabilities, naming no agent of any workspace unless the
//! agent is public (`domain::exposure::public_agent`), and then only its name,
//! description, version and one skill without tool names. A missing agent and a private
//! one get the same public card.

use agentd_schema::ListQuery;
use agentd_schema::ids::AgentId;
use axum::Extension;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{A2aError, A2aResult, Endpoint};
use crate::AppState;
use crate::admission::Tenant;
use crate::admission::auth::Anonymous;
use crate::admission::workspace_path::WorkspacePath;
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
    let description = skill_description(agent, name);
    let mut tags = vec![json!("agent")];
    for tool in agent.body["tools"].as_array().into_iter().flatten() {
        if let Some(tool) = tool["name"].as_str().or(tool["type"].as_str()) {
            tags.push(json!(tool));
        }
    }
    json!({ "id": agent.id, "name": name, "description": description, "tags": tags })
}

/// What differs from card to card; [`Card::render`] adds what every card says.
struct Card {
    name: String,
    description: String,
    version: String,
    url: String,
    skills: Vec<Value>,
}

impl Card {
    fn render(self, base: &str) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "supportedInterfaces": interfaces(&self.url),
            "provider": { "organization": "agentd", "url": base },
            "capabilities": { "streaming": true, "pushNotifications": true, "extendedAgentCard": true },
            "defaultInputModes": ["text/plain", "application/json"],
            "defaultOutputModes": ["text/plain"],
            "skills": self.skills,
            "securitySchemes": { "bearer": { "httpAuthSecurityScheme": {
                "scheme": "Bearer", "description": "An agentd API key.",
            } } },
            "securityRequirements": [{ "schemes": { "bearer": { "list": [] } } }],
        })
    }
}

/// The public card (a caller without a key) of the workspace endpoint (`agent` None) or
/// of one agent's, the workspace named by the `/v1/workspaces/{workspace}/…` path if any.
/// An agent shows only when public; otherwise — missing, private, hidden, archived, or
/// no workspace named — the card is the same and names nothing but the URL asked for.
pub async fn public(
    state: &AppState,
    headers: &HeaderMap,
    workspace: Option<&str>,
    agent: Option<&str>,
) -> A2aResult<Value> {
    let base = base_url(state, headers);
    let version = env!("CARGO_PKG_VERSION").to_owned();
    let Some(id) = agent else {
        let card = Card {
            name: "agentd".to_owned(),
            description: "An agentd A2A server. Call it with an agentd API key (HTTP bearer); its extended card \
                          (GetExtendedAgentCard) lists the agents the key may use."
                .to_owned(),
            version,
            url: format!("{base}/v1/a2a"),
            skills: Vec::new(),
        };
        return Ok(card.render(&base));
    };
    let url = format!("{base}/v1/a2a/agents/{id}");
    let shown = match workspace {
        Some(workspace) => exposure::public_agent(state.backends.store.as_ref(), workspace, id).await?,
        None => None,
    };
    let card = match shown {
        Some(agent) => {
            let name = agent.body["name"].as_str().unwrap_or(id).to_owned();
            let description = description(&agent, &name);
            // One skill, tagged `agent` only: its tools are the full card's.
            let about = skill_description(&agent, &name);
            let skill = json!({ "id": agent.id, "name": name, "description": about, "tags": ["agent"] });
            Card { name, description, version: agent.version.to_string(), url, skills: vec![skill] }
        }
        None => Card {
            name: "agentd agent".to_owned(),
            description: "An agent of an agentd A2A server. Call it with an agentd API key (HTTP bearer); its \
                          extended card (GetExtendedAgentCard) describes it."
                .to_owned(),
            version,
            url,
            skills: Vec::new(),
        },
    };
    Ok(card.render(&base))
}

fn description(agent: &agentd_schema::Resource, name: &str) -> String {
    agent.body["description"]
        .as_str()
        .filter(|d| !d.is_empty())
        .map_or_else(|| format!("The agentd agent {name}."), str::to_owned)
}

fn skill_description(agent: &agentd_schema::Resource, name: &str) -> String {
    agent.body["description"]
        .as_str()
        .filter(|d| !d.is_empty())
        .map_or_else(|| format!("Talk to the agent {name}."), str::to_owned)
}

/// The full card of the workspace (`agent` None) or of one agent, for a caller with a key.
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
            let description = description(&agent, &name);
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
    Ok(Card { name, description, version, url, skills }.render(&base))
}

/// `GetExtendedAgentCard`: the card of the endpoint (the caller is authenticated).
pub async fn extended(state: &AppState, tenant: &Tenant, endpoint: &Endpoint, headers: &HeaderMap) -> A2aResult<Value> {
    build(state, tenant, headers, endpoint.agent.as_deref()).await
}

/// Who asks for a card: a caller admission authenticated, or one without a credential
/// that admission let in on this public route. Anything else is refused (401).
pub enum Caller {
    /// With a key: the full card.
    Tenant(Tenant),
    /// Without one: the public card.
    Anonymous,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Response> {
        if let Some(tenant) = parts.extensions.get::<Tenant>() {
            return Ok(Caller::Tenant(tenant.clone()));
        }
        if parts.extensions.get::<Anonymous>().is_some() {
            return Ok(Caller::Anonymous);
        }
        let error = A2aError::from(ApiError::Unauthenticated("missing API key".to_owned()));
        Err(respond(&HeaderMap::new(), Err(error)))
    }
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
    // The same URL answers the public card without a key and the full one with it.
    response.headers_mut().insert(header::VARY, HeaderValue::from_static("authorization, x-api-key"));
    response
}

/// `GET /.well-known/agent-card.json`.
pub async fn workspace_card(State(state): State<AppState>, caller: Caller, headers: HeaderMap) -> Response {
    let card = match &caller {
        Caller::Tenant(tenant) => build(&state, tenant, &headers, None).await,
        Caller::Anonymous => public(&state, &headers, None, None).await,
    };
    respond(&headers, card)
}

/// `GET /v1/a2a/agents/{agent_id}` and its `/.well-known/agent-card.json` (also under
/// `/v1/workspaces/{workspace}/…`, which names the workspace of a public card).
pub async fn agent_card(
    State(state): State<AppState>,
    caller: Caller,
    workspace: Option<Extension<WorkspacePath>>,
    Path(agent): Path<AgentId>,
    headers: HeaderMap,
) -> Response {
    let card = match &caller {
        Caller::Tenant(tenant) => build(&state, tenant, &headers, Some(&agent)).await,
        Caller::Anonymous => {
            let workspace = workspace.as_ref().map(|Extension(WorkspacePath(named))| named.as_str());
            public(&state, &headers, workspace, Some(&agent)).await
        }
    };
    respond(&headers, card)
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use serde_json::json;

    use super::*;
    use crate::test_rig::{Answer, Rig};

    async fn anonymous(rig: &Rig, method: &str, path: &str) -> Answer {
        rig.send(Request::builder().method(method).uri(path).body(Body::empty()).unwrap()).await
    }

    #[tokio::test]
    async fn without_a_key_a_card_names_only_public_agents() {
        let rig = Rig::new().await;
        let model = agentd_schema::catalog::current().models().first().expect("a model").id.clone();
        let tool =
            json!({"type": "custom", "name": "secret_tool", "description": "d", "input_schema": {"type": "object"}});
        let body = json!({"name": "secret-name", "description": "secret words", "model": model, "tools": [tool]});
        let created = rig.call("POST", "/v1/agents", body).await;
        assert_eq!(created.status, StatusCode::OK, "{}", created.text);
        let id = created.body["id"].as_str().unwrap().to_owned();
        let missing = agentd_schema::ids::new_id("agent");
        let workspace = rig.state.backends.store.find_workspace("default").await.unwrap().unwrap().id;
        let blank = |answer: &Answer, id: &str| answer.text.replace(id, "<id>");

        // The workspace card: interfaces, the bearer scheme, capabilities; no agent.
        let root = anonymous(&rig, "GET", "/.well-known/agent-card.json").await;
        assert_eq!(root.status, StatusCode::OK, "{}", root.text);
        assert_eq!(root.body["capabilities"]["extendedAgentCard"], true);
        assert_eq!(root.body["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"], "Bearer");
        assert_eq!(root.body["supportedInterfaces"][0]["url"], "http://localhost/v1/a2a");
        assert_eq!(root.body["skills"], json!([]));
        assert!(!root.text.contains(&id), "{}", root.text);
        assert_eq!(root.headers[header::VARY], "authorization, x-api-key");
        let full = rig.call("GET", "/.well-known/agent-card.json", json!(null)).await;
        assert_eq!(full.body["skills"][0]["id"], json!(id), "with a key, the full card");

        // A private agent's card is a missing agent's, on every path that names it.
        let paths = |agent: &str| {
            [
                format!("/v1/a2a/agents/{agent}"),
                format!("/v1/a2a/agents/{agent}/.well-known/agent-card.json"),
                format!("/v1/workspaces/{workspace}/a2a/agents/{agent}/.well-known/agent-card.json"),
                format!("/v1/workspaces/default/a2a/agents/{agent}"),
            ]
        };
        for (private, absent) in paths(&id).iter().zip(paths(&missing)) {
            let (private, absent) = (anonymous(&rig, "GET", private).await, anonymous(&rig, "GET", &absent).await);
            assert_eq!((private.status, absent.status), (StatusCode::OK, StatusCode::OK), "{}", private.text);
            assert_eq!(blank(&private, &id), blank(&absent, &missing));
            assert!(!private.text.contains("secret"), "{}", private.text);
            assert_eq!(
                private.body["supportedInterfaces"][1]["url"],
                json!(format!("http://localhost/v1/a2a/agents/{id}"))
            );
        }

        // Published: the workspace's path shows its name, description and one skill (no
        // tool names); the flat path, which names no workspace, still shows nothing.
        let key = exposure::PUBLIC_METADATA_KEY;
        let update =
            rig.call("POST", &format!("/v1/agents/{id}"), json!({"version": 1, "metadata": {key: "true"}})).await;
        assert_eq!(update.status, StatusCode::OK, "{}", update.text);
        for path in [
            format!("/v1/workspaces/{workspace}/a2a/agents/{id}/.well-known/agent-card.json"),
            format!("/v1/workspaces/default/a2a/agents/{id}"),
        ] {
            let card = anonymous(&rig, "GET", &path).await;
            assert_eq!(
                (card.body["name"].as_str(), card.body["description"].as_str()),
                (Some("secret-name"), Some("secret words"))
            );
            assert_eq!(
                card.body["skills"],
                json!([{"id": id, "name": "secret-name", "description": "secret words", "tags": ["agent"]}])
            );
            assert_eq!(card.body["version"], "2");
        }
        let flat = anonymous(&rig, "GET", &format!("/v1/a2a/agents/{id}")).await;
        assert!(!flat.text.contains("secret"), "{}", flat.text);
        let other = anonymous(&rig, "GET", &format!("/v1/workspaces/wrkspc_other/a2a/agents/{id}")).await;
        assert_eq!(
            blank(&other, &id),
            blank(&anonymous(&rig, "GET", &format!("/v1/a2a/agents/{missing}")).await, &missing)
        );
        // Hidden from A2A, it is private again.
        rig.call("PUT", "/v1/config/exposure/a2a", json!({"mode": "none"})).await;
        let hidden = anonymous(&rig, "GET", &format!("/v1/workspaces/{workspace}/a2a/agents/{id}")).await;
        assert!(!hidden.text.contains("secret"), "{}", hidden.text);

        // Every other A2A route, and a card asked for with a bad key, takes a key.
        for (method, path) in [
            ("POST", format!("/v1/a2a/agents/{id}")),
            ("POST", "/v1/a2a".to_owned()),
            ("GET", "/v1/a2a/tasks".to_owned()),
            ("GET", "/v1/a2a/extendedAgentCard".to_owned()),
            ("GET", format!("/v1/a2a/agents/{id}/extendedAgentCard")),
            ("GET", format!("/v1/a2a/agents/{id}/tasks")),
            ("GET", format!("/v1/agents/{id}")),
            ("GET", "/v1/.well-known/agent-card.json".to_owned()),
        ] {
            assert_eq!(anonymous(&rig, method, &path).await.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        }
        let bad_key =
            Request::get("/.well-known/agent-card.json").header("x-api-key", "sk-agentd-wrong").body(Body::empty());
        assert_eq!(rig.send(bad_key.unwrap()).await.status, StatusCode::UNAUTHORIZED);
        let unparsable = anonymous(&rig, "GET", "/v1/a2a/agents/not-an-agent-id").await;
        assert_eq!(unparsable.status, StatusCode::NOT_FOUND, "{}", unparsable.text);
    }
}
