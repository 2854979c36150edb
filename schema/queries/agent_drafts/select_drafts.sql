-- A page of a workspace's drafts, newest agent id first (ids sort by creation time).
-- $1 workspace, $2 return agent ids strictly before this one ('~' for the first page:
-- every id sorts before it), $3 limit
SELECT {columns}
FROM agent_drafts
WHERE workspace_id = $1 AND agent_id < $2
ORDER BY agent_id DESC
LIMIT $3
