-- Store a key by the hash of its secret; storing the same secret again changes nothing
-- (the caller reads the existing key back).
--
-- $1 key id, $2 workspace id, $3 name, $4 secret hash, $5 hint, $6 now (ms), $7 kind,
-- $8 environment id or NULL
INSERT INTO api_keys (id, workspace_id, name, key_hash, hint, created_at_ms, kind, environment_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (key_hash) DO NOTHING
