-- One resource of a family, within its workspace.
--
-- $1 resource id, $2 workspace id, $3 kind
SELECT id, workspace_id, kind, parent_id, version, body, created_at_ms, updated_at_ms, archived_at_ms
FROM resources
WHERE id = $1 AND workspace_id = $2 AND kind = $3
