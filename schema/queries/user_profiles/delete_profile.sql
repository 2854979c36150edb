-- Deletes a live profile: a tombstone, never listed again and never changed again. The
-- tombstone keeps no personal data — only what erasure needs to find the subject's
-- records (its id and workspace).
-- $1 workspace, $2 id, $3 now
UPDATE user_profiles
SET deleted_at_ms = $3, updated_at_ms = $3, revision = revision + 1,
    name = NULL, name_key = NULL, reference_id = NULL, onboarded_at_ms = NULL, account_status = NULL,
    country = NULL, email_hash = NULL, entity_type = NULL, name_hash = NULL, metadata = '{}'
WHERE workspace_id = $1 AND id = $2 AND deleted_at_ms IS NULL
RETURNING {columns}
