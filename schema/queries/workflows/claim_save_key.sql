-- Claims a save's idempotency key, first in the saving transaction. A concurrent save
-- with the same key waits on the primary key until this transaction ends: after a
-- commit it inserts nothing and replays the recorded result, after a rollback it claims
-- the key itself. The result columns are set by `record_save_key.sql` before commit.
-- $1 workspace, $2 project, $3 definition, $4 key, $5 request sha256, $6 now
INSERT INTO workflow_save_keys (workspace_id, project, definition, idempotency_key, request_sha256, created_at_ms)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING
RETURNING idempotency_key
