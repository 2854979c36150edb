-- Writes a live profile's fields whole, only at the revision the caller read (a
-- compare-and-swap: a metadata merge computed from a stale read writes nothing).
-- $1 workspace, $2 id, $3 expected revision, $4 name, $5 name key, $6 access type,
-- $7 reference id, $8 onboarded at, $9 account status, $10 country, $11 email hash,
-- $12 entity type, $13 name hash, $14 metadata (JSON), $15 now
UPDATE user_profiles
SET name = $4, name_key = $5, access_type = $6, reference_id = $7, onboarded_at_ms = $8, account_status = $9,
    country = $10, email_hash = $11, entity_type = $12, name_hash = $13, metadata = $14, revision = revision + 1,
    updated_at_ms = $15
WHERE workspace_id = $1 AND id = $2 AND revision = $3 AND deleted_at_ms IS NULL
RETURNING {columns}
