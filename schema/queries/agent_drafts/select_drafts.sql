-- A page of a workspace's drafts, newest agent id first (ids sort by creation time).
-- $1 workspace, $2 return agent ids strictly before this one (NULL for the first page:
-- no sentinel, whose place in the order depends on the column's collation), $3 limit
SELECT {columns}
FROM agent_drafts
WHERE workspace_id = $1 AND ($2 IS NULL OR agent_id < $2)
ORDER BY agent_id DESC
LIMIT $3
