INSERT INTO files (id, workspace_id, filename, mime_type, size_bytes, downloadable, scope_type, scope_id,
                   blob_key, state, created_at_ms, expires_at_ms, changed_at_ms)
VALUES ($1, $2, $3, $4, 0, $5, $6, $7, $8, 'uploading', $9, $10, $9)
RETURNING id, workspace_id, filename, mime_type, size_bytes, downloadable, scope_type, scope_id, blob_key,
          state, created_at_ms, expires_at_ms, changed_at_ms
