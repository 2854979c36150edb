INSERT INTO memory_versions (id, memory_store_id, workspace_id, memory_id, operation, path, content, content_sha256,
                             content_size_bytes, actor_type, actor_id, created_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
