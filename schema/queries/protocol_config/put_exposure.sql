-- Sets a workspace's exposure of one protocol (last write wins; the primary key
-- serializes concurrent writers).
-- $1 workspace, $2 protocol, $3 mode, $4 agent ids (JSON array), $5 now
INSERT INTO protocol_exposure (workspace_id, protocol, mode, agent_ids, updated_at_ms)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (workspace_id, protocol) DO UPDATE
SET mode = excluded.mode, agent_ids = excluded.agent_ids, updated_at_ms = excluded.updated_at_ms
RETURNING {columns}
