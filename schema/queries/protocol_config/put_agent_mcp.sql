-- Records the registered servers an agent uses, as last written, with the agent version
-- that write made current (last write wins).
-- $1 workspace, $2 agent id, $3 servers (JSON array), $4 agent version, $5 now
INSERT INTO agent_mcp_configs (workspace_id, agent_id, servers, agent_version, revision, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, 1, $5, $5)
ON CONFLICT (workspace_id, agent_id) DO UPDATE
SET servers = excluded.servers, agent_version = excluded.agent_version,
    revision = agent_mcp_configs.revision + 1, updated_at_ms = excluded.updated_at_ms
RETURNING {columns}
