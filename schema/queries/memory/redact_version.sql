-- Erases a version's path and content for good; a redacted version stays as it is.
UPDATE memory_versions
SET path = NULL, content = NULL, content_sha256 = NULL, content_size_bytes = NULL,
    redacted_at_ms = $4, redacted_by_type = $5, redacted_by_id = $6
WHERE workspace_id = $1 AND memory_store_id = $2 AND id = $3 AND redacted_at_ms IS NULL
