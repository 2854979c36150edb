-- Replace a resource's body: a compare-and-swap on its version. A concurrent writer
-- moved the version, so this matches no row and the caller reports a conflict.
--
-- $1 resource id, $2 workspace id, $3 kind, $4 expected version, $5 body (JSON text), $6 now (ms)
UPDATE resources
SET body = $5, version = version + 1, updated_at_ms = $6
WHERE id = $1 AND workspace_id = $2 AND kind = $3 AND version = $4
RETURNING id, workspace_id, kind, parent_id, version, body, created_at_ms, updated_at_ms, archived_at_ms
