INSERT INTO skills (id, workspace_id, name, display_name, source, latest_version_id, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, 'custom', $5, $6, $6)
RETURNING id, workspace_id, name, display_name, source, latest_version_id, created_at_ms, updated_at_ms
