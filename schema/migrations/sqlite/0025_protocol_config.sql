-- MCP and A2A configuration of the control plane (issue 21 item 3, docs/api/config.md
-- "MCP and A2A configuration"): which agents each protocol endpoint exposes, the
-- workspace's registry of named MCP servers, and the registered servers each agent uses.

-- One row per (workspace, protocol) that was ever set; no row is mode `all`. The
-- adapters read it by its primary key on every request (one indexed read).
CREATE TABLE protocol_exposure (
    workspace_id  TEXT NOT NULL,
    -- `a2a` or `mcp`.
    protocol      TEXT NOT NULL,
    -- `all`, `none` or `listed`.
    mode          TEXT NOT NULL,
    -- JSON array of agent ids (empty unless `listed`).
    agent_ids     TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, protocol)
);

CREATE TABLE mcp_servers (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL,
    -- The `mcp_servers[].name` agents get; unique in the workspace.
    name          TEXT NOT NULL,
    url           TEXT NOT NULL,
    description   TEXT,
    revision      BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, id)
);
CREATE UNIQUE INDEX mcp_servers_by_name ON mcp_servers (workspace_id, name);

CREATE TABLE agent_mcp_configs (
    workspace_id  TEXT NOT NULL,
    agent_id      TEXT NOT NULL,
    -- JSON array of `{server_id, tools?, permission_policy?}` as last written.
    servers       TEXT NOT NULL,
    -- The agent version that write made (or found) current.
    agent_version BIGINT NOT NULL,
    revision      BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, agent_id)
);
