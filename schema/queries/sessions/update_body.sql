-- Replace a session's wire body. A body without an agent keeps the snapshot the session
-- has. With $6 = 1 the session's resources revision is bumped, guarded by $5 (the
-- revision the body was computed from; NULL: unconditionally): a compare-and-swap
-- that matches no row when the revision moved.
--
-- $1 session id, $2 workspace id, $3 body without its agent (JSON text), $4 now (ms),
-- $5 expected resources revision or NULL, $6 1 to bump the revision else 0,
-- $7 agent snapshot id or NULL
UPDATE sessions
SET body               = $3,
    updated_at_ms      = $4,
    resources_revision = resources_revision + $6,
    agent_snapshot_id  = COALESCE($7, agent_snapshot_id)
WHERE id = $1 AND workspace_id = $2 AND ($5 IS NULL OR resources_revision = $5)
RETURNING id, workspace_id, status, body, agent_id, agent_version, usage, next_seq, created_at_ms, updated_at_ms,
          archived_at_ms, active_ms, running_since_ms, inbox_version, resources_revision, agent_snapshot_id, child_threads
