-- A page of a workspace's MCP servers by id.
-- $1 workspace, $2 return ids strictly after this one ('' for the first page), $3 limit
SELECT {columns}
FROM mcp_servers
WHERE workspace_id = $1 AND id > $2
ORDER BY id
LIMIT $3
