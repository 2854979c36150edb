UPDATE skills SET latest_version_id = $2, updated_at_ms = $3 WHERE id = $1
RETURNING id, workspace_id, name, display_name, source, latest_version_id, created_at_ms, updated_at_ms
