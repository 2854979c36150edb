INSERT INTO skill_versions (skill_id, id, workspace_id, name, description, files, blob_key, created_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING skill_id, id, workspace_id, name, description, files, blob_key, created_at_ms
