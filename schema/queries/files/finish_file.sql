UPDATE files SET state = 'ready', size_bytes = $2, changed_at_ms = $3
WHERE id = $1 AND state = 'uploading'
RETURNING id, workspace_id, filename, mime_type, size_bytes, downloadable, scope_type, scope_id, blob_key,
          state, created_at_ms, expires_at_ms, changed_at_ms
