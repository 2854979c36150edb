//! MCP and A2A configuration (docs/api/config.md "MCP and A2A configuration"): the
//! exposure gates of the A2A server and the MCP endpoint (`domain::exposure`), the
//! workspace's MCP server registry and each agent's MCP servers (`domain::mcp_config`).
//! Parse → call the domain → render; every error a [`Problem`].

use agentd_schema::ids::AgentId;
use agentd_schema::{ExposedProtocol, ExposureRow, McpServerRow};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::problem::{self, Problem, ProblemResult};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::exposure::{self, Mode, Setting};
use crate::domain::mcp_config::{self, AgentMcp, PutServer};
use crate::managed::agents::render as render_agent;
use crate::managed::query::{ChunkedPage, Query, decode_cursor, rfc3339};

/// The path's protocol (`scope` admitted only `a2a` and `mcp`).
fn protocol(name: &str) -> ProblemResult<ExposedProtocol> {
    ExposedProtocol::parse(name).ok_or_else(|| Problem::not_found(format!("protocol not found: {name}")))
}

fn render_exposure(protocol: ExposedProtocol, row: Option<&ExposureRow>) -> Value {
    json!({
        "object": "protocol_exposure",
        "protocol": protocol.as_str(),
        "mode": row.map_or(Mode::All, |r| r.mode).as_str(),
        "agent_ids": row.map(|r| r.agent_ids.clone()).unwrap_or_default(),
        "updated_at": row.map(|r| rfc3339(r.updated_at_ms)),
    })
}

/// `GET /v1/config/exposure`: both protocols' exposure, `{"data": [a2a, mcp]}`.
pub async fn list_exposure(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
) -> ProblemResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    let mut data = Vec::new();
    for protocol in ExposedProtocol::ALL {
        let row = exposure::get(store, &tenant.workspace_id, protocol).await?;
        data.push(render_exposure(protocol, row.as_ref()));
    }
    Ok(Json(json!({ "data": data })))
}

/// `GET /v1/config/exposure/{protocol}` (`a2a` | `mcp`).
pub async fn get_exposure(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
) -> ProblemResult<Json<Value>> {
    let protocol = protocol(&name)?;
    let row = exposure::get(state.backends.store.as_ref(), &tenant.workspace_id, protocol).await?;
    Ok(Json(render_exposure(protocol, row.as_ref())))
}

/// `PUT /v1/config/exposure/{protocol}` — `{"mode": "all" | "none" | "listed",
/// "agent_ids"?: [...] (listed only)}`: replaces the protocol's exposure → 200.
pub async fn put_exposure(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> ProblemResult<Json<Value>> {
    let protocol = protocol(&name)?;
    let map = problem::object(&bytes, &["mode", "agent_ids"])?;
    let mode = match map.get("mode") {
        Some(Value::String(mode)) => Mode::parse(mode)
            .ok_or_else(|| Problem::invalid(format!("mode: expected \"all\", \"none\" or \"listed\", got {mode:?}")))?,
        Some(_) => return Err(Problem::invalid("mode: a string is required")),
        None => return Err(Problem::invalid("mode: required")),
    };
    let agent_ids = match map.get("agent_ids") {
        None | Some(Value::Null) if mode == Mode::Listed => {
            return Err(Problem::invalid("agent_ids: required with mode \"listed\""));
        }
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Problem::invalid(format!("agent_ids[{i}]: a string is required")))
            })
            .collect::<ProblemResult<Vec<String>>>()?,
        Some(_) => return Err(Problem::invalid("agent_ids: an array of agent ids is required")),
    };
    let store = state.backends.store.as_ref();
    let row = exposure::set(store, &tenant.workspace_id, protocol, Setting { mode, agent_ids }).await?;
    Ok(Json(render_exposure(protocol, Some(&row))))
}

fn render_server(row: &McpServerRow) -> Value {
    json!({
        "object": "mcp_server",
        "id": row.id,
        "name": row.name,
        "url": row.url,
        "description": row.description,
        "created_at": rfc3339(row.created_at_ms),
        "updated_at": rfc3339(row.updated_at_ms),
    })
}

/// `GET /v1/config/mcp-servers`: the workspace's MCP servers by id; `limit` (1–100,
/// default 20) and the `page` cursor of the previous page's `next_page`.
pub async fn list_servers(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ProblemResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, 100)?.unwrap_or(20);
    let after = query.string("page").map(decode_cursor).transpose()?;
    let store = state.backends.store.as_ref();
    let mut page = ChunkedPage::new(after, limit, limit);
    while let Some((after, n)) = page.next_fetch() {
        let rows = mcp_config::list_servers(store, &tenant.workspace_id, after.as_deref(), n).await?;
        page.take(&rows, |row| row.id.clone(), render_server);
    }
    Ok(Json(page.finish()))
}

/// `GET /v1/config/mcp-servers/{mcp_server_id}`.
pub async fn get_server(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
) -> ProblemResult<Json<Value>> {
    let row = mcp_config::get_server(state.backends.store.as_ref(), &tenant.workspace_id, &id).await?;
    Ok(Json(render_server(&row)))
}

/// `PUT /v1/config/mcp-servers/{mcp_server_id}` — `{"name", "url", "description"?}`:
/// 201 created, 200 replaced. The URL passes the egress guard.
pub async fn put_server(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> ProblemResult<Response> {
    let map = problem::object(&bytes, &["name", "url", "description"])?;
    let text = |field: &str, required: bool| -> ProblemResult<Option<String>> {
        match map.get(field) {
            None | Some(Value::Null) if required => Err(Problem::invalid(format!("{field}: required"))),
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(value)) => Ok(Some(value.clone())),
            Some(_) => Err(Problem::invalid(format!("{field}: a string is required"))),
        }
    };
    let put = PutServer {
        name: text("name", true)?.unwrap_or_default(),
        url: text("url", true)?.unwrap_or_default(),
        description: text("description", false)?,
    };
    let store = state.backends.store.as_ref();
    let row = mcp_config::put_server(store, &tenant.workspace_id, &id, put, state.remote_allow_private).await?;
    let status = if row.revision == 1 { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(render_server(&row))).into_response())
}

/// `DELETE /v1/config/mcp-servers/{mcp_server_id}` → 204; 409 while an agent's MCP
/// configuration names it.
pub async fn delete_server(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<String>,
) -> ProblemResult<StatusCode> {
    mcp_config::delete_server(state.backends.store.as_ref(), &tenant.workspace_id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn render_agent_mcp(found: &AgentMcp) -> Value {
    json!({
        "object": "agent_mcp_config",
        "agent_id": found.agent.id,
        "servers": found.servers(),
        "agent_version": found.config.as_ref().map(|c| c.agent_version),
        "updated_at": found.config.as_ref().map(|c| rfc3339(c.updated_at_ms)),
        "agent": render_agent(&found.agent),
    })
}

/// `GET /v1/config/agents/{agent_id}/mcp`: the registered servers the agent uses, as
/// last written (`servers: []`, `updated_at: null` when never), and the agent.
pub async fn get_agent(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent_id): Path<AgentId>,
) -> ProblemResult<Json<Value>> {
    let found = mcp_config::get_agent(state.backends.store.as_ref(), &tenant.workspace_id, &agent_id).await?;
    Ok(Json(render_agent_mcp(&found)))
}

/// `PUT /v1/config/agents/{agent_id}/mcp` — `{"servers": [{"server_id", "tools"?,
/// "permission_policy"?}]}`: the agent's next version with those servers → 200.
pub async fn put_agent(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent_id): Path<AgentId>,
    bytes: Bytes,
) -> ProblemResult<Json<Value>> {
    let map = problem::object(&bytes, &["servers"])?;
    let catalog = state.catalogs.of(&tenant.workspace_id)?;
    let store = state.backends.store.as_ref();
    let servers = map.get("servers").cloned().unwrap_or(Value::Null);
    let found = mcp_config::put_agent(store, &catalog, &tenant.workspace_id, &agent_id, &servers).await?;
    Ok(Json(render_agent_mcp(&found)))
}

/// `POST /v1/config/agents/{agent_id}/mcp/resolve` — empty, `{}` or `{"servers": […]}`:
/// the agent's effective `mcp_servers` and `mcp_toolset` tools with the configuration
/// last written (or the one given), from the registry as it is now. Writes nothing.
pub async fn resolve_agent(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent_id): Path<AgentId>,
    bytes: Bytes,
) -> ProblemResult<Json<Value>> {
    let map = problem::object(&bytes, &["servers"])?;
    let catalog = state.catalogs.of(&tenant.workspace_id)?;
    let store = state.backends.store.as_ref();
    let resolved = mcp_config::resolve(store, &catalog, &tenant.workspace_id, &agent_id, map.get("servers")).await?;
    Ok(Json(json!({
        "object": "agent_mcp_resolution",
        "agent_id": agent_id.as_str(),
        "mcp_servers": resolved.mcp_servers,
        "tools": resolved.tools,
        "agent_version": resolved.agent_version,
        "current": resolved.current,
    })))
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::{Value, json};

    use crate::test_rig::Rig;

    fn model() -> String {
        agentd_schema::catalog::current().models().first().expect("a model in the catalog").id.clone()
    }

    async fn agent(rig: &Rig, name: &str) -> String {
        let created = rig.call("POST", "/v1/agents", json!({"name": name, "model": model()})).await;
        assert_eq!(created.status, StatusCode::OK, "{}", created.text);
        created.body["id"].as_str().unwrap().to_owned()
    }

    fn rpc(method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    }

    #[tokio::test]
    async fn exposure_gates_every_a2a_entry_point() {
        let rig = Rig::new().await;
        let (shown, hidden) = (agent(&rig, "shown").await, agent(&rig, "hidden").await);
        let settings = rig.call("GET", "/v1/config/exposure", json!(null)).await;
        assert_eq!(
            settings.body["data"][0],
            json!({"object": "protocol_exposure", "protocol": "a2a", "mode": "all", "agent_ids": [], "updated_at": null})
        );
        assert_eq!(rig.call("GET", &format!("/v1/a2a/agents/{hidden}"), json!(null)).await.status, StatusCode::OK);

        let put = rig.call("PUT", "/v1/config/exposure/a2a", json!({"mode": "listed", "agent_ids": [shown]})).await;
        assert_eq!(put.status, StatusCode::OK, "{}", put.text);
        assert_eq!((put.body["mode"].as_str(), put.body["agent_ids"].clone()), (Some("listed"), json!([shown])));
        // The hidden agent's card, endpoint and new contexts answer as a missing agent's.
        let missing = agentd_schema::ids::new_id("agent");
        for id in [&hidden, &missing] {
            let card = rig.call("GET", &format!("/v1/a2a/agents/{id}"), json!(null)).await;
            assert_eq!(
                (card.status, card.body["error"]["message"].clone()),
                (StatusCode::NOT_FOUND, json!(format!("agent not found: {id}")))
            );
            let task = rig.call("POST", &format!("/v1/a2a/agents/{id}"), rpc("GetTask", json!({"id": "x"}))).await;
            assert_eq!(task.body["error"]["data"][0]["reason"], "NOT_FOUND", "{}", task.text);
            let rest = rig.call("GET", &format!("/v1/a2a/agents/{id}/tasks"), json!(null)).await;
            assert_eq!(rest.status, StatusCode::NOT_FOUND, "{}", rest.text);
            let message = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], "metadata": {"agent": id}}});
            let sent = rig.call("POST", "/v1/a2a", rpc("SendMessage", message)).await;
            assert_eq!(
                sent.body["error"]["message"],
                json!(format!("agent: no agent {id} in this workspace")),
                "{}",
                sent.text
            );
        }
        let card = rig.call("GET", &format!("/v1/a2a/agents/{shown}/.well-known/agent-card.json"), json!(null)).await;
        assert_eq!(card.status, StatusCode::OK);
        let root = rig.call("GET", "/.well-known/agent-card.json", json!(null)).await;
        let skills: Vec<&str> =
            root.body["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
        assert_eq!(skills, [shown.as_str()]);

        rig.call("PUT", "/v1/config/exposure/a2a", json!({"mode": "none"})).await;
        let root = rig.call("GET", "/.well-known/agent-card.json", json!(null)).await;
        assert_eq!(root.body["skills"], json!([]));
        assert_eq!(
            rig.call("GET", &format!("/v1/a2a/agents/{shown}"), json!(null)).await.status,
            StatusCode::NOT_FOUND
        );
        rig.call("PUT", "/v1/config/exposure/a2a", json!({"mode": "all"})).await;
        assert_eq!(rig.call("GET", &format!("/v1/a2a/agents/{hidden}"), json!(null)).await.status, StatusCode::OK);

        // Refusals are problems naming the field.
        for (body, field) in [
            (json!({"mode": "some"}), "mode"),
            (json!({"mode": "listed"}), "agent_ids"),
            (json!({"mode": "all", "agent_ids": [shown]}), "agent_ids"),
            (json!({"mode": "listed", "agent_ids": [missing]}), "agent_ids[0]"),
            (json!({"mode": "listed", "agent_ids": [shown, shown]}), "agent_ids[1]"),
        ] {
            let refused = rig.call("PUT", "/v1/config/exposure/mcp", body.clone()).await;
            assert_eq!(
                (refused.status, refused.body["code"].as_str()),
                (StatusCode::UNPROCESSABLE_ENTITY, Some("validation_failed")),
                "{body}"
            );
            assert!(refused.body["detail"].as_str().unwrap().starts_with(field), "{body}: {}", refused.text);
        }
        let unknown = rig.call("GET", "/v1/config/exposure/grpc", json!(null)).await;
        assert_eq!(
            (unknown.status, unknown.headers["content-type"].to_str().unwrap()),
            (StatusCode::NOT_FOUND, "application/problem+json")
        );
    }

    #[tokio::test]
    async fn registered_servers_become_an_agents_mcp_servers() {
        let rig = Rig::new().await;
        let id = agent(&rig, "tooled").await;
        let server = rig
            .call("PUT", "/v1/config/mcp-servers/docs", json!({"name": "docs", "url": "http://127.0.0.1:9/mcp"}))
            .await;
        assert_eq!(
            (server.status, server.body["name"].as_str()),
            (StatusCode::CREATED, Some("docs")),
            "{}",
            server.text
        );
        let other = rig
            .call(
                "PUT",
                "/v1/config/mcp-servers/calc",
                json!({"name": "calc", "url": "http://127.0.0.1:10/mcp", "description": "sums"}),
            )
            .await;
        assert_eq!(other.status, StatusCode::CREATED);
        let taken = rig
            .call("PUT", "/v1/config/mcp-servers/calc2", json!({"name": "calc", "url": "http://127.0.0.1:10/mcp"}))
            .await;
        assert_eq!(
            (taken.status, taken.body["code"].as_str()),
            (StatusCode::CONFLICT, Some("name_taken")),
            "{}",
            taken.text
        );
        let listed = rig.call("GET", "/v1/config/mcp-servers?limit=1", json!(null)).await;
        assert_eq!(listed.body["data"][0]["id"], "calc", "{}", listed.text);
        assert!(listed.body["next_page"].is_string(), "{}", listed.text);

        let empty = rig.call("GET", &format!("/v1/config/agents/{id}/mcp"), json!(null)).await;
        assert_eq!(
            (empty.body["servers"].clone(), empty.body["updated_at"].clone()),
            (json!([]), Value::Null),
            "{}",
            empty.text
        );
        let body = json!({"servers": [{"server_id": "docs"}, {"server_id": "calc", "tools": ["add"], "permission_policy": {"type": "always_allow"}}]});
        let resolved = rig.call("POST", &format!("/v1/config/agents/{id}/mcp/resolve"), body.clone()).await;
        assert_eq!(
            (resolved.status, resolved.body["current"].as_bool()),
            (StatusCode::OK, Some(false)),
            "{}",
            resolved.text
        );
        let put = rig.call("PUT", &format!("/v1/config/agents/{id}/mcp"), body).await;
        assert_eq!(put.status, StatusCode::OK, "{}", put.text);
        assert_eq!(put.body["agent"]["version"], 2);
        assert_eq!(put.body["agent"]["mcp_servers"], resolved.body["mcp_servers"]);
        let tools = put.body["agent"]["tools"].as_array().unwrap();
        assert_eq!(
            tools[1]["configs"],
            json!([{"name": "add", "enabled": true, "permission_policy": {"type": "always_allow"}}])
        );
        assert_eq!(tools[1]["default_config"]["enabled"], false);
        let again = rig
            .send(rig.request("POST", &format!("/v1/config/agents/{id}/mcp/resolve"), axum::body::Body::empty()))
            .await;
        assert_eq!(again.body["current"], true, "{}", again.text);
        // A registered server's change is not written to the agent until the next PUT.
        rig.call("PUT", "/v1/config/mcp-servers/docs", json!({"name": "docs", "url": "http://127.0.0.1:11/mcp"})).await;
        let stale = rig.call("POST", &format!("/v1/config/agents/{id}/mcp/resolve"), json!({})).await;
        assert_eq!(
            (stale.body["current"].as_bool(), stale.body["mcp_servers"][0]["url"].as_str()),
            (Some(false), Some("http://127.0.0.1:11/mcp"))
        );

        let in_use = rig.call("DELETE", "/v1/config/mcp-servers/docs", json!(null)).await;
        assert_eq!(in_use.status, StatusCode::CONFLICT, "{}", in_use.text);
        let unknown =
            rig.call("PUT", &format!("/v1/config/agents/{id}/mcp"), json!({"servers": [{"server_id": "nope"}]})).await;
        assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", unknown.text);
        let cleared = rig.call("PUT", &format!("/v1/config/agents/{id}/mcp"), json!({"servers": []})).await;
        assert_eq!(
            (cleared.body["agent"]["version"].as_i64(), cleared.body["agent"]["mcp_servers"].clone()),
            (Some(3), json!([]))
        );
        assert_eq!(rig.call("DELETE", "/v1/config/mcp-servers/docs", json!(null)).await.status, StatusCode::NO_CONTENT);
        assert_eq!(rig.call("GET", "/v1/config/mcp-servers/docs", json!(null)).await.status, StatusCode::NOT_FOUND);
        let missing = agentd_schema::ids::new_id("agent");
        assert_eq!(
            rig.call("PUT", &format!("/v1/config/agents/{missing}/mcp"), json!({})).await.status,
            StatusCode::NOT_FOUND
        );
    }
}
