-- Creates a workspace's MCP server at revision 1, or replaces its fields and bumps its
-- revision (its creation time kept). A name another server of the workspace has fails
-- the unique index `mcp_servers_by_name` (a conflict; nothing written).
-- $1 workspace, $2 id, $3 name, $4 url, $5 description, $6 now
INSERT INTO mcp_servers (workspace_id, id, name, url, description, revision, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, $5, 1, $6, $6)
ON CONFLICT (workspace_id, id) DO UPDATE
SET name = excluded.name, url = excluded.url, description = excluded.description,
    revision = mcp_servers.revision + 1, updated_at_ms = excluded.updated_at_ms
RETURNING {columns}
