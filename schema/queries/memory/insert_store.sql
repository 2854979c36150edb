INSERT INTO memory_stores (id, workspace_id, name, description, metadata, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $6)
RETURNING id, workspace_id, name, description, metadata, memory_count, revision, archived_at_ms, created_at_ms, updated_at_ms
