-- Creates or replaces a credential pool (its creation time kept).
INSERT INTO credential_pools (workspace_id, id, credential_ids, cooldown_ms, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, $5, $5)
ON CONFLICT (workspace_id, id)
DO UPDATE SET credential_ids = $3, cooldown_ms = $4, updated_at_ms = $5
RETURNING workspace_id, id, credential_ids, cooldown_ms, created_at_ms, updated_at_ms
