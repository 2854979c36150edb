SELECT id, workspace_id, filename, mime_type, size_bytes, downloadable, scope_type, scope_id, blob_key,
       state, created_at_ms, expires_at_ms, changed_at_ms
FROM files WHERE workspace_id = $1 AND id = $2
