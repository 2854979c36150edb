-- The skill row, written to take its lock: versions of one skill are added one at a time.
UPDATE skills SET updated_at_ms = $3 WHERE workspace_id = $1 AND id = $2
RETURNING id, workspace_id, name, display_name, source, latest_version_id, created_at_ms, updated_at_ms
