//! MCP toolsets of an agent: connections to its `mcp_servers` (rmcp, streamable HTTP),
//! the tools they offer the model under the toolsets' configs, and tool calls.
//!
//! Connections live for one attempt of a run (see `remote.rs`): made on the first step
//! that needs them, closed when the attempt settles. A worker serving thousands of
//! idle sessions holds no MCP connection for any of them.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use agentd_schema::egress;
use agentd_schema::scrub::Scrubber;
use agentd_schema::{ErrorType, RetryStatus, SessionError};
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransportConfig, StreamableHttpError};
use rmcp::{ServiceExt, model::ClientConfig};
use serde_json::{Value, json};

use crate::credentials::{Bearer, Credentials, TunnelRoute};
use crate::providers::ToolSpec;

/// Connecting and listing tools must finish within this.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// One tool call must finish within this.
const CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// A tool the model is offered, and how its calls are handled.
#[derive(Debug, Clone)]
pub struct OfferedTool {
    /// The `mcp_servers` entry it comes from.
    pub server: String,
    /// The resolved permission policy: `always_allow`, `always_ask` or `auto`.
    pub policy: String,
    /// Safe to run again after an interrupted call: the server marks it read-only or
    /// idempotent.
    pub rerunnable: bool,
    /// What the model sees.
    pub spec: ToolSpec,
}

/// Why an MCP server could not be used.
#[derive(Debug, Clone)]
pub struct McpFailure {
    /// The `mcp_servers` entry.
    pub server: String,
    /// The server refused our credentials (401/403) rather than failing.
    pub authentication: bool,
    /// What happened (never containing a token).
    pub message: String,
}

impl McpFailure {
    /// The `session.error` reporting it; the turn ends (ADR 0009).
    pub fn session_error(&self) -> SessionError {
        let kind = if self.authentication {
            ErrorType::McpAuthenticationFailedError
        } else {
            ErrorType::McpConnectionFailedError
        };
        SessionError {
            mcp_server_name: Some(self.server.clone()),
            ..SessionError::new(kind, self.message.clone(), RetryStatus::Exhausted)
        }
    }
}

struct Connection {
    service: RunningService<RoleClient, ClientConfig>,
    tools: Vec<Tool>,
    /// The credential it was opened with (its token is scrubbed from error messages).
    bearer: Option<Bearer>,
}

/// The MCP connections of one attempt.
pub struct McpTools {
    connections: HashMap<String, Connection>,
    offered: Vec<OfferedTool>,
    opened: bool,
    /// Servers may be on private addresses (`AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`).
    allow_private: bool,
}

/// The `mcp_servers` entries referenced by an enabled-or-not `mcp_toolset`.
pub fn servers(agent: &Value) -> Vec<(String, String)> {
    let referenced: HashSet<&str> = agent["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "mcp_toolset")
        .filter_map(|t| t["mcp_server_name"].as_str())
        .collect();
    agent["mcp_servers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s["name"].as_str()?.to_owned(), s["url"].as_str()?.to_owned())))
        .filter(|(name, _)| referenced.contains(name.as_str()))
        .collect()
}

/// Whether `tool` of `server` is enabled, and its policy, under the agent's toolset.
fn configured(agent: &Value, server: &str, tool: &str) -> Option<String> {
    let toolset = agent["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["type"] == "mcp_toolset" && t["mcp_server_name"] == server)?;
    let config = toolset["configs"].as_array().into_iter().flatten().find(|c| c["name"] == tool);
    let enabled =
        config.and_then(|c| c["enabled"].as_bool()).or(toolset["default_config"]["enabled"].as_bool()).unwrap_or(true);
    let policy = config
        .and_then(|c| c["permission_policy"]["type"].as_str())
        .or(toolset["default_config"]["permission_policy"]["type"].as_str())
        .unwrap_or("always_ask");
    enabled.then(|| policy.to_owned())
}

impl McpTools {
    /// No connection yet; servers on private addresses are refused unless `allow_private`.
    pub fn new(allow_private: bool) -> Self {
        Self { connections: HashMap::new(), offered: Vec::new(), opened: false, allow_private }
    }

    /// Whether the agent has any MCP toolset.
    pub fn wanted(agent: &Value) -> bool {
        !servers(agent).is_empty()
    }

    /// Connects to every server of the agent's toolsets and lists their tools (once per
    /// attempt). The first server that fails is reported; the others stay connected.
    pub async fn open(
        &mut self,
        agent: &Value,
        credentials: &mut Credentials,
        taken: &HashSet<String>,
    ) -> Result<(), McpFailure> {
        if self.opened {
            return Ok(());
        }
        let mut names = taken.clone();
        for (server, url) in servers(agent) {
            if !self.connections.contains_key(&server) {
                let connection = connect(&server, &url, credentials, self.allow_private).await?;
                self.connections.insert(server.clone(), connection);
            }
            let connection = &self.connections[&server];
            for tool in &connection.tools {
                let Some(policy) = configured(agent, &server, &tool.name) else { continue };
                // Names are what the model calls: the first tool to claim one keeps it.
                if !names.insert(tool.name.to_string()) {
                    tracing::info!(%server, tool = %tool.name, "MCP tool hidden: its name is already taken");
                    continue;
                }
                let hints = tool.annotations.as_ref();
                let rerunnable =
                    hints.is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true));
                self.offered.push(OfferedTool {
                    server: server.clone(),
                    policy,
                    rerunnable,
                    spec: ToolSpec {
                        name: tool.name.to_string(),
                        description: tool.description.as_deref().unwrap_or_default().to_owned(),
                        input_schema: Value::Object((*tool.input_schema).clone()),
                    },
                });
            }
        }
        self.opened = true;
        Ok(())
    }

    /// The tools offered to the model.
    pub fn offered(&self) -> &[OfferedTool] {
        &self.offered
    }

    /// The offered tool the model calls `name`.
    pub fn find(&self, name: &str) -> Option<&OfferedTool> {
        self.offered.iter().find(|t| t.spec.name == name)
    }

    /// Calls `tool` on `server` (connecting first if this attempt has not). A call the
    /// server refused for its credentials (it did not run) is made once more on a new
    /// connection, which refreshes an OAuth token.
    pub async fn call(
        &mut self,
        agent: &Value,
        credentials: &mut Credentials,
        server: &str,
        tool: &str,
        input: &Value,
    ) -> Result<CallToolResult, McpFailure> {
        let Some(url) = servers(agent).into_iter().find(|(name, _)| name == server).map(|(_, url)| url) else {
            return Err(McpFailure {
                server: server.to_owned(),
                authentication: false,
                message: format!("the agent has no MCP server named {server:?} any more"),
            });
        };
        let mut refused_once = false;
        loop {
            if !self.connections.contains_key(server) {
                let connection = connect(server, &url, credentials, self.allow_private).await?;
                self.connections.insert(server.to_owned(), connection);
            }
            match self.call_once(server, tool, input).await {
                Err(failure) if failure.authentication && !refused_once => {
                    refused_once = true;
                    if let Some(stale) = self.connections.remove(server) {
                        let _ = stale.service.cancel().await;
                    }
                }
                outcome => return outcome,
            }
        }
    }

    async fn call_once(&self, server: &str, tool: &str, input: &Value) -> Result<CallToolResult, McpFailure> {
        let connection = &self.connections[server];
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = input.as_object().cloned();
        match tokio::time::timeout(CALL_TIMEOUT, connection.service.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(rmcp::ServiceError::McpError(error))) => {
                // A JSON-RPC error from the server is the tool's failure, not the connection's.
                Ok(CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
                    "MCP error {}: {}",
                    error.code.0,
                    scrubber(connection.bearer.as_ref()).scrub(&error.message)
                ))]))
            }
            Ok(Err(error)) => Err(failure(server, &error, connection.bearer.as_ref())),
            Err(_) => Err(McpFailure {
                server: server.to_owned(),
                authentication: false,
                message: format!("the tool call did not finish within {} s", CALL_TIMEOUT.as_secs()),
            }),
        }
    }

    /// The scrubber of what `server` says: every spelling of the token sent to it.
    pub fn scrubber(&self, server: &str) -> Scrubber {
        scrubber(self.connections.get(server).and_then(|c| c.bearer.as_ref()))
    }

    /// Closes every connection (the MCP session is deleted where the server supports it).
    pub async fn close(self) {
        for (_, connection) in self.connections {
            let _ = connection.service.cancel().await;
        }
    }
}

/// Connects to one server with its origin's credential, refreshing an OAuth token that
/// expired or was refused once.
async fn connect(
    server: &str,
    url: &str,
    credentials: &mut Credentials,
    allow_private: bool,
) -> Result<Connection, McpFailure> {
    let fail =
        |authentication: bool, message: String| McpFailure { server: server.to_owned(), authentication, message };
    // A server behind an MCP tunnel is reached through its gateway, wherever it is; any
    // other passes the egress guard first: no credential is looked up (or refreshed) for
    // a refused target.
    let http = match credentials.tunnel_route(url).await.map_err(|why| fail(false, why))? {
        Some(route) => through_tunnel(&route),
        None => {
            let target = egress::check(url, egress::Rules { allow_private, https_only: false })
                .await
                .map_err(|refused| fail(false, refused.to_string()))?;
            // No redirect is followed: a token is only ever sent to the URL it was made
            // for. The connection goes to the address the egress guard checked, never
            // through a proxy.
            target
                .pin(
                    reqwest::Client::builder()
                        .redirect(reqwest::redirect::Policy::none())
                        .connect_timeout(Duration::from_secs(10)),
                )
                .build()
                .map_err(|e| e.to_string())
        }
    }
    .map_err(|message| fail(false, message))?;
    let mut bearer = credentials.bearer_for(url).await.map_err(|e| fail(false, e.to_string()))?;
    if let Some(current) = bearer.as_ref().filter(|b| b.refreshable)
        && credentials.expired(current).await
    {
        bearer = Some(credentials.refresh(current).await.map_err(|e| fail(true, e.to_string()))?);
    }
    match connect_once(server, url, http.clone(), bearer.as_ref()).await {
        Err(failure) if failure.authentication && bearer.as_ref().is_some_and(|b| b.refreshable) => {
            let Some(current) = bearer else { return Err(failure) };
            let refreshed = credentials.refresh(&current).await.map_err(|e| fail(true, e.to_string()))?;
            connect_once(server, url, http, Some(&refreshed)).await
        }
        other => other,
    }
}

/// The HTTP client of a server behind a tunnel: every connection is a `CONNECT` through
/// the gateway holding the connector, and the server's certificate must chain to one of
/// the tunnel's CA certificates (no public root is trusted). No redirect is followed.
fn through_tunnel(route: &TunnelRoute) -> Result<reqwest::Client, String> {
    let mut roots = Vec::new();
    for pem in &route.roots {
        roots
            .push(reqwest::Certificate::from_pem(pem.as_bytes()).map_err(|e| format!("a tunnel CA certificate: {e}"))?);
    }
    let credential =
        reqwest::header::HeaderValue::from_str(&format!("Bearer {}", route.credential)).map_err(|e| e.to_string())?;
    let proxy = reqwest::Proxy::all(&route.gateway).map_err(|e| format!("the tunnel's gateway: {e}"))?;
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .proxy(proxy.custom_http_auth(credential))
        .tls_certs_only(roots)
        .build()
        .map_err(|e| e.to_string())
}

async fn connect_once(
    server: &str,
    url: &str,
    http: reqwest::Client,
    bearer: Option<&Bearer>,
) -> Result<Connection, McpFailure> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(bearer) = bearer.filter(|b| !b.token.is_empty()) {
        config = config.auth_header(bearer.token.clone());
    }
    let transport = StreamableHttpClientTransport::with_client(http, config);
    let mut info = ClientConfig::default();
    info.client_info.name = "agentd".into();
    info.client_info.version = env!("CARGO_PKG_VERSION").into();
    let opened = async {
        let service = info.serve(transport).await.map_err(|e| failure(server, &e, bearer))?;
        let tools = service.list_all_tools().await.map_err(|e| failure(server, &e, bearer))?;
        Ok::<_, McpFailure>(Connection { service, tools, bearer: bearer.cloned() })
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, opened).await {
        Ok(result) => result,
        Err(_) => Err(McpFailure {
            server: server.to_owned(),
            authentication: false,
            message: format!("no answer from {url} within {} s", CONNECT_TIMEOUT.as_secs()),
        }),
    }
}

/// The scrubber of what a server said, for the credential sent to it.
fn scrubber(bearer: Option<&Bearer>) -> Scrubber {
    bearer.map(Bearer::scrubber).unwrap_or_default()
}

/// Classifies an rmcp error: a 401/403 from the server is an authentication failure.
fn failure(server: &str, error: &(dyn std::error::Error + 'static), bearer: Option<&Bearer>) -> McpFailure {
    let mut authentication = false;
    // rmcp wraps the transport's error without exposing it as a `source`: unwrap it.
    let inner: Option<&(dyn std::error::Error + 'static)> = match (
        error.downcast_ref::<rmcp::service::ClientInitializeError>(),
        error.downcast_ref::<rmcp::ServiceError>(),
    ) {
        (Some(rmcp::service::ClientInitializeError::TransportError { error, .. }), _) => Some(error),
        (_, Some(rmcp::ServiceError::TransportSend(error))) => Some(error),
        _ => None,
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = inner.or(Some(error));
    while let Some(current) = source {
        if let Some(http) = current.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            authentication |= match http {
                StreamableHttpError::AuthRequired(_) | StreamableHttpError::InsufficientScope(_) => true,
                StreamableHttpError::UnexpectedServerResponse(text) => {
                    text.starts_with("HTTP 401") || text.starts_with("HTTP 403")
                }
                StreamableHttpError::Client(e) => e.status().is_some_and(|s| s.as_u16() == 401 || s.as_u16() == 403),
                _ => false,
            };
        }
        if let Some(e) = current.downcast_ref::<reqwest::Error>() {
            authentication |= e.status().is_some_and(|s| s.as_u16() == 401 || s.as_u16() == 403);
        }
        source = current.source();
    }
    let mut message = scrubber(bearer).scrub(&error.to_string());
    if authentication {
        message = format!("the MCP server refused the credentials: {message}");
    }
    McpFailure { server: server.to_owned(), authentication, message }
}

/// A tool result's content as `agent.mcp_tool_result` content blocks.
pub fn result_content(result: &CallToolResult) -> Value {
    let mut blocks: Vec<Value> = result
        .content
        .iter()
        .map(|block| {
            let block = serde_json::to_value(block).unwrap_or_default();
            match block["type"].as_str() {
                Some("text") => json!({ "type": "text", "text": block["text"] }),
                Some("image") => json!({
                    "type": "image",
                    "source": { "type": "base64", "media_type": block["mimeType"], "data": block["data"] },
                }),
                _ => json!({ "type": "text", "text": block.to_string() }),
            }
        })
        .collect();
    if blocks.is_empty()
        && let Some(structured) = &result.structured_content
    {
        blocks.push(json!({ "type": "text", "text": structured.to_string() }));
    }
    Value::Array(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_schema::NewEvent;

    /// An "MCP server" on 127.0.0.1 that answers every request with `status`, echoing
    /// the bearer token it received in every encoding (rmcp puts a 4xx body into its
    /// error message).
    async fn echoing_server(status: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 8192];
                while !String::from_utf8_lossy(&buffer).contains("\r\n\r\n") {
                    let read = socket.read(&mut chunk).await.unwrap_or(0);
                    if read == 0 {
                        break;
                    }
                    buffer.extend_from_slice(&chunk[..read]);
                }
                let head = String::from_utf8_lossy(&buffer).to_string();
                let token =
                    head.lines().find_map(|l| l.strip_prefix("authorization: Bearer ")).unwrap_or_default().to_owned();
                let body = format!("refused {}", agentd_schema::scrub::encodings(&token).join(" "));
                let reply = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            }
        });
        url
    }

    #[tokio::test]
    async fn connection_failures_never_carry_the_token_in_any_encoding() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let token = "mcp/tok+en~1 with\"quotes\"";
        let bearer = Bearer {
            token: token.into(),
            credential_id: "vcrd_1".into(),
            vault_id: "vlt_1".into(),
            refreshable: false,
        };
        for status in ["401 Unauthorized", "400 Bad Request", "500 Internal Server Error"] {
            let url = echoing_server(status).await;
            let target = egress::check(&url, egress::Rules { allow_private: true, https_only: false }).await.unwrap();
            let http = target.pin(reqwest::Client::builder()).build().unwrap();
            let Err(failure) = connect_once("calc", &url, http, Some(&bearer)).await else {
                panic!("{status}: the server refuses every request")
            };
            assert_eq!(failure.authentication, status.starts_with("401"), "{status}: {}", failure.message);
            if !status.starts_with("500") {
                assert!(
                    failure.message.contains("[redacted]"),
                    "{status}: the echo was scrubbed, not absent: {}",
                    failure.message
                );
            }
            for encoded in agentd_schema::scrub::encodings(token) {
                assert!(!failure.message.contains(&encoded), "{status}: {encoded:?} in {}", failure.message);
                let event = NewEvent::session_error("sesn_1", &failure.session_error());
                assert!(!event.body.to_string().contains(&encoded), "{status}: {encoded:?}");
            }
        }
    }

    #[test]
    fn tool_configs_override_the_toolset_default() {
        let agent = json!({
            "mcp_servers": [{ "type": "url", "name": "calc", "url": "http://127.0.0.1:1/mcp" },
                            { "type": "url", "name": "unused", "url": "http://127.0.0.1:2/mcp" }],
            "tools": [{ "type": "mcp_toolset", "mcp_server_name": "calc",
                        "default_config": { "enabled": true, "permission_policy": { "type": "always_ask" } },
                        "configs": [{ "name": "add", "enabled": true, "permission_policy": { "type": "always_allow" } },
                                    { "name": "wipe", "enabled": false }] }],
        });
        assert_eq!(servers(&agent), vec![("calc".to_owned(), "http://127.0.0.1:1/mcp".to_owned())]);
        assert_eq!(configured(&agent, "calc", "add").as_deref(), Some("always_allow"));
        assert_eq!(configured(&agent, "calc", "other").as_deref(), Some("always_ask"));
        assert_eq!(configured(&agent, "calc", "wipe"), None);
        assert_eq!(configured(&agent, "unused", "add"), None);
    }

    #[test]
    fn failures_become_the_wire_errors() {
        let failure = McpFailure { server: "calc".into(), authentication: true, message: "no".into() };
        let event = NewEvent::session_error("sesn_1", &failure.session_error()).body;
        assert_eq!(event["error"]["type"], "mcp_authentication_failed_error");
        assert_eq!(event["error"]["mcp_server_name"], "calc");
        assert_eq!(event["error"]["retry_status"]["type"], "exhausted");
    }
}
