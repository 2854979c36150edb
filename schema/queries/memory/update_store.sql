-- The store's editable fields, only at the revision the caller read and while live.
UPDATE memory_stores
SET name = $4, description = $5, metadata = $6, revision = revision + 1, updated_at_ms = $7
WHERE workspace_id = $1 AND id = $2 AND revision = $3 AND archived_at_ms IS NULL
RETURNING id, workspace_id, name, description, metadata, memory_count, revision, archived_at_ms, created_at_ms, updated_at_ms
