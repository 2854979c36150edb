-- The result of the save that claimed the key, for its replays.
-- $1 workspace, $2 project, $3 definition, $4 key, $5 revision id, $6 reused (0/1),
-- $7 override version, $8 override updated at
UPDATE workflow_save_keys
SET revision_id = $5, reused = $6, override_version = $7, override_updated_at_ms = $8
WHERE workspace_id = $1 AND project = $2 AND definition = $3 AND idempotency_key = $4
