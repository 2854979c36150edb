//! MCP and A2A configuration (`protocol_exposure`, `mcp_servers`, `agent_mcp_configs`,
//! migration 0025).

use async_trait::async_trait;
use sqlx::FromRow;

use super::{JsonText, SqlStore};
use crate::error::{StoreError, StoreResult};
use crate::store::{AgentMcpConfigRow, ExposedProtocol, ExposureMode, ExposureRow, McpServerRow, ProtocolConfigStore};

const EXPOSURE_COLUMNS: &str = "workspace_id, protocol, mode, agent_ids, updated_at_ms";
const SERVER_COLUMNS: &str = "workspace_id, id, name, url, description, revision, created_at_ms, updated_at_ms";
const AGENT_COLUMNS: &str = "workspace_id, agent_id, servers, agent_version, revision, created_at_ms, updated_at_ms";

/// A `protocol_exposure` row as stored.
#[derive(Debug, FromRow)]
struct StoredExposure {
    workspace_id: String,
    protocol: String,
    mode: String,
    #[sqlx(try_from = "String")]
    agent_ids: JsonText,
    updated_at_ms: i64,
}

impl TryFrom<StoredExposure> for ExposureRow {
    type Error = StoreError;

    fn try_from(row: StoredExposure) -> StoreResult<Self> {
        let corrupt =
            |what: &str, value: &str| StoreError::Backend(format!("protocol_exposure: unknown {what} {value:?}"));
        let protocol = ExposedProtocol::parse(&row.protocol).ok_or_else(|| corrupt("protocol", &row.protocol))?;
        let mode = ExposureMode::parse(&row.mode).ok_or_else(|| corrupt("mode", &row.mode))?;
        let agent_ids = serde_json::from_value(row.agent_ids.0)
            .map_err(|e| StoreError::Backend(format!("protocol_exposure: corrupt agent_ids: {e}")))?;
        Ok(ExposureRow { workspace_id: row.workspace_id, protocol, mode, agent_ids, updated_at_ms: row.updated_at_ms })
    }
}

/// An `mcp_servers` row as stored.
#[derive(Debug, FromRow)]
struct StoredServer {
    workspace_id: String,
    id: String,
    name: String,
    url: String,
    description: Option<String>,
    revision: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl From<StoredServer> for McpServerRow {
    fn from(row: StoredServer) -> Self {
        McpServerRow {
            workspace_id: row.workspace_id,
            id: row.id,
            name: row.name,
            url: row.url,
            description: row.description,
            revision: row.revision,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        }
    }
}

/// An `agent_mcp_configs` row as stored.
#[derive(Debug, FromRow)]
struct StoredAgentConfig {
    workspace_id: String,
    agent_id: String,
    #[sqlx(try_from = "String")]
    servers: JsonText,
    agent_version: i64,
    revision: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl From<StoredAgentConfig> for AgentMcpConfigRow {
    fn from(row: StoredAgentConfig) -> Self {
        AgentMcpConfigRow {
            workspace_id: row.workspace_id,
            agent_id: row.agent_id,
            servers: row.servers.0,
            agent_version: row.agent_version,
            revision: row.revision,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        }
    }
}

#[async_trait]
impl ProtocolConfigStore for SqlStore {
    async fn put_exposure(
        &self,
        workspace_id: &str,
        protocol: ExposedProtocol,
        mode: ExposureMode,
        agent_ids: &[String],
    ) -> StoreResult<ExposureRow> {
        let sql = include_str!("../../queries/protocol_config/put_exposure.sql").replace("{columns}", EXPOSURE_COLUMNS);
        let row: StoredExposure = sqlx::query_as(&sql)
            .bind(workspace_id)
            .bind(protocol.as_str())
            .bind(mode.as_str())
            .bind(serde_json::json!(agent_ids).to_string())
            .bind(self.now())
            .fetch_one(&self.primary)
            .await?;
        row.try_into()
    }

    async fn get_exposure(&self, workspace_id: &str, protocol: ExposedProtocol) -> StoreResult<Option<ExposureRow>> {
        let row: Option<StoredExposure> = sqlx::query_as(&format!(
            "SELECT {EXPOSURE_COLUMNS} FROM protocol_exposure WHERE workspace_id = $1 AND protocol = $2"
        ))
        .bind(workspace_id)
        .bind(protocol.as_str())
        .fetch_optional(&self.readers)
        .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn put_mcp_server(&self, row: McpServerRow) -> StoreResult<McpServerRow> {
        let sql = include_str!("../../queries/protocol_config/put_mcp_server.sql").replace("{columns}", SERVER_COLUMNS);
        let stored: StoredServer = sqlx::query_as(&sql)
            .bind(&row.workspace_id)
            .bind(&row.id)
            .bind(&row.name)
            .bind(&row.url)
            .bind(row.description.as_deref())
            .bind(self.now())
            .fetch_one(&self.primary)
            .await
            .map_err(|error| match StoreError::from(error) {
                StoreError::Conflict(_) => {
                    StoreError::Conflict(format!("another MCP server of the workspace is named {:?}", row.name))
                }
                other => other,
            })?;
        Ok(stored.into())
    }

    async fn get_mcp_server(&self, workspace_id: &str, id: &str) -> StoreResult<Option<McpServerRow>> {
        let row: Option<StoredServer> =
            sqlx::query_as(&format!("SELECT {SERVER_COLUMNS} FROM mcp_servers WHERE workspace_id = $1 AND id = $2"))
                .bind(workspace_id)
                .bind(id)
                .fetch_optional(&self.readers)
                .await?;
        Ok(row.map(Into::into))
    }

    async fn list_mcp_servers(
        &self,
        workspace_id: &str,
        after_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<McpServerRow>> {
        let sql =
            include_str!("../../queries/protocol_config/select_mcp_servers.sql").replace("{columns}", SERVER_COLUMNS);
        let rows: Vec<StoredServer> = sqlx::query_as(&sql)
            .bind(workspace_id)
            .bind(after_id.unwrap_or(""))
            .bind(limit)
            .fetch_all(&self.readers)
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn delete_mcp_server(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM mcp_servers WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .execute(&self.primary)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn put_agent_mcp_config(&self, row: AgentMcpConfigRow) -> StoreResult<AgentMcpConfigRow> {
        let sql = include_str!("../../queries/protocol_config/put_agent_mcp.sql").replace("{columns}", AGENT_COLUMNS);
        let stored: StoredAgentConfig = sqlx::query_as(&sql)
            .bind(&row.workspace_id)
            .bind(&row.agent_id)
            .bind(row.servers.to_string())
            .bind(row.agent_version)
            .bind(self.now())
            .fetch_one(&self.primary)
            .await?;
        Ok(stored.into())
    }

    async fn get_agent_mcp_config(&self, workspace_id: &str, agent_id: &str) -> StoreResult<Option<AgentMcpConfigRow>> {
        let row: Option<StoredAgentConfig> = sqlx::query_as(&format!(
            "SELECT {AGENT_COLUMNS} FROM agent_mcp_configs WHERE workspace_id = $1 AND agent_id = $2"
        ))
        .bind(workspace_id)
        .bind(agent_id)
        .fetch_optional(&self.readers)
        .await?;
        Ok(row.map(Into::into))
    }

    async fn list_agent_mcp_configs(&self, workspace_id: &str) -> StoreResult<Vec<AgentMcpConfigRow>> {
        let rows: Vec<StoredAgentConfig> = sqlx::query_as(&format!(
            "SELECT {AGENT_COLUMNS} FROM agent_mcp_configs WHERE workspace_id = $1 ORDER BY agent_id"
        ))
        .bind(workspace_id)
        .fetch_all(&self.readers)
        .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }
}
