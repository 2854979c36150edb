//! MCP and A2A configuration (docs/api/config.md "MCP and A2A configuration"): which
//! agents each protocol endpoint exposes, the workspace's registry of named MCP servers,
//! and which registered servers each agent uses. Every row belongs to one workspace;
//! another workspace's row reads as missing.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;

/// A protocol endpoint whose agents the workspace chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExposedProtocol {
    /// The A2A server (`/v1/a2a…`, agent cards, `/.well-known/agent-card.json`).
    A2a,
    /// The MCP endpoint (agents as tools).
    Mcp,
}

impl ExposedProtocol {
    /// Every protocol, in the order answers list them.
    pub const ALL: [ExposedProtocol; 2] = [ExposedProtocol::A2a, ExposedProtocol::Mcp];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ExposedProtocol::A2a => "a2a",
            ExposedProtocol::Mcp => "mcp",
        }
    }

    /// The protocol of a stored or wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// Which agents a protocol endpoint exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExposureMode {
    /// Every agent of the workspace (the default: no row).
    All,
    /// None.
    None,
    /// Only the listed agents.
    Listed,
}

impl ExposureMode {
    /// Every mode.
    pub const ALL: [ExposureMode; 3] = [ExposureMode::All, ExposureMode::None, ExposureMode::Listed];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ExposureMode::All => "all",
            ExposureMode::None => "none",
            ExposureMode::Listed => "listed",
        }
    }

    /// The mode of a stored or wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// A workspace's exposure of one protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposureRow {
    /// The workspace.
    pub workspace_id: String,
    /// The protocol.
    pub protocol: ExposedProtocol,
    /// The mode.
    pub mode: ExposureMode,
    /// The agents exposed when `Listed` (empty otherwise), in the order written.
    pub agent_ids: Vec<String>,
    /// Last write, epoch ms.
    pub updated_at_ms: i64,
}

/// A named MCP server of a workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerRow {
    /// The workspace.
    pub workspace_id: String,
    /// The id the caller chose.
    pub id: String,
    /// The `mcp_servers[].name` agents using it get; unique in the workspace.
    pub name: String,
    /// Its URL (checked by the egress guard when written).
    pub url: String,
    /// What it is for.
    pub description: Option<String>,
    /// 1 on creation, bumped by every replacement (set by the store).
    pub revision: i64,
    /// Creation, epoch ms (set by the store).
    pub created_at_ms: i64,
    /// Last write, epoch ms (set by the store).
    pub updated_at_ms: i64,
}

/// The registered servers an agent uses, as last written.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentMcpConfigRow {
    /// The workspace.
    pub workspace_id: String,
    /// The agent.
    pub agent_id: String,
    /// JSON array of `{server_id, tools?, permission_policy?}`.
    pub servers: Value,
    /// The agent version the write made (or found) current.
    pub agent_version: i64,
    /// 1 on the first write, bumped by every later one (set by the store).
    pub revision: i64,
    /// First write, epoch ms (set by the store).
    pub created_at_ms: i64,
    /// Last write, epoch ms (set by the store).
    pub updated_at_ms: i64,
}

/// Exposure gates, the MCP server registry and per-agent MCP bindings. Every method is
/// one statement, durable when it returns; writes are last-write-wins upserts.
#[async_trait]
pub trait ProtocolConfigStore: Send + Sync {
    /// Sets the workspace's exposure of `protocol` (replacing what it was).
    async fn put_exposure(
        &self,
        workspace_id: &str,
        protocol: ExposedProtocol,
        mode: ExposureMode,
        agent_ids: &[String],
    ) -> StoreResult<ExposureRow>;

    /// The workspace's exposure of `protocol`; `None` when never set (mode `all`). One
    /// read by primary key: the adapters call it on every request.
    async fn get_exposure(&self, workspace_id: &str, protocol: ExposedProtocol) -> StoreResult<Option<ExposureRow>>;

    /// Creates or replaces MCP server `row.id` of `row.workspace_id` (its `revision` and
    /// times are the store's). Returns the stored row; `revision` 1 means created. A
    /// `name` another server of the workspace has is a `Conflict` and writes nothing.
    async fn put_mcp_server(&self, row: McpServerRow) -> StoreResult<McpServerRow>;

    /// The workspace's MCP server `id`, if any.
    async fn get_mcp_server(&self, workspace_id: &str, id: &str) -> StoreResult<Option<McpServerRow>>;

    /// The workspace's MCP servers by id, strictly after `after_id`, at most `limit`.
    async fn list_mcp_servers(
        &self,
        workspace_id: &str,
        after_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<McpServerRow>>;

    /// Removes the workspace's MCP server `id`; `false` when there was none.
    async fn delete_mcp_server(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;

    /// Records the servers `row.agent_id` uses (its `revision` and times are the
    /// store's), replacing what was recorded.
    async fn put_agent_mcp_config(&self, row: AgentMcpConfigRow) -> StoreResult<AgentMcpConfigRow>;

    /// The servers the workspace's agent `agent_id` uses, if ever written.
    async fn get_agent_mcp_config(&self, workspace_id: &str, agent_id: &str) -> StoreResult<Option<AgentMcpConfigRow>>;

    /// Every agent's recorded servers in the workspace (to tell which agents use a
    /// server), by agent id.
    async fn list_agent_mcp_configs(&self, workspace_id: &str) -> StoreResult<Vec<AgentMcpConfigRow>>;
}
