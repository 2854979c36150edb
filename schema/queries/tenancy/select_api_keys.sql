-- Keys as listed (never the hash), by id: one key by its hash, or a workspace's keys,
-- or every key.
--
-- $1 secret hash or NULL, $2 workspace id or NULL
SELECT id, workspace_id, name, hint, created_at_ms, revoked_at_ms, kind, environment_id
FROM api_keys
WHERE ($1 IS NULL OR key_hash = $1) AND ($2 IS NULL OR workspace_id = $2)
ORDER BY id
