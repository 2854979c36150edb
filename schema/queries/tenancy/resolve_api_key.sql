-- Resolve a presented secret (by its hash) to the key's trusted scope: unknown keys,
-- revoked keys and keys of archived workspaces resolve to nothing.
--
-- $1 SHA-256 of the secret, hex
SELECT k.id AS key_id, w.organization_id, w.id AS workspace_id, k.kind, k.environment_id
FROM api_keys k
JOIN workspaces w ON w.id = k.workspace_id
WHERE k.key_hash = $1 AND k.revoked_at_ms IS NULL AND w.archived_at_ms IS NULL
