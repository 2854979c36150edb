-- The current (highest) version of each policy of a workspace, by id.
-- $1 workspace, $2 after this id ('' for the first page), $3 limit
SELECT {columns}
FROM sandbox_policy_versions v
WHERE v.workspace_id = $1
  AND v.policy_id > $2
  AND v.version = (
      SELECT MAX(version) FROM sandbox_policy_versions
      WHERE workspace_id = v.workspace_id AND policy_id = v.policy_id
  )
ORDER BY v.policy_id
LIMIT $3
