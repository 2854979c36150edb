SELECT skill_id, id, workspace_id, name, description, files, blob_key, created_at_ms
FROM skill_versions WHERE workspace_id = $1 AND skill_id = $2 AND id = $3
