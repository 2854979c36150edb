INSERT INTO memories (id, memory_store_id, workspace_id, path, content, content_sha256, content_size_bytes,
                      memory_version_id, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
RETURNING id, memory_store_id, workspace_id, path, content, content_sha256, content_size_bytes, memory_version_id,
          created_at_ms, updated_at_ms
