SELECT id, workspace_id, name, display_name, source, latest_version_id, created_at_ms, updated_at_ms
FROM skills WHERE workspace_id = $1 AND id = $2
