-- Expired files first (their bytes must stop being served), then rows a crash or a
-- lost client left uploading or deleting.
SELECT id, workspace_id, filename, mime_type, size_bytes, downloadable, scope_type, scope_id, blob_key,
       state, created_at_ms, expires_at_ms, changed_at_ms
FROM files
WHERE (state = 'ready' AND expires_at_ms IS NOT NULL AND expires_at_ms <= $1)
   OR (state IN ('uploading', 'deleting') AND changed_at_ms < $2)
ORDER BY changed_at_ms
LIMIT $3
