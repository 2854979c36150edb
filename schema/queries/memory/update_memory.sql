UPDATE memories
SET path = $3, content = $4, content_sha256 = $5, content_size_bytes = $6, memory_version_id = $7, updated_at_ms = $8
WHERE memory_store_id = $1 AND id = $2
RETURNING id, memory_store_id, workspace_id, path, content, content_sha256, content_size_bytes, memory_version_id,
          created_at_ms, updated_at_ms
