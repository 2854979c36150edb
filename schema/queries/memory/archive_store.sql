UPDATE memory_stores
SET archived_at_ms = $3, updated_at_ms = $3, revision = revision + 1
WHERE workspace_id = $1 AND id = $2 AND archived_at_ms IS NULL
RETURNING id, workspace_id, name, description, metadata, memory_count, revision, archived_at_ms, created_at_ms, updated_at_ms
