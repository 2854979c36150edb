-- Archive a session (idempotent: the first archive time is kept).
--
-- $1 session id, $2 workspace id, $3 now (ms)
UPDATE sessions
SET archived_at_ms = COALESCE(archived_at_ms, $3),
    updated_at_ms  = $3
WHERE id = $1 AND workspace_id = $2
RETURNING id, workspace_id, status, body, agent_id, agent_version, usage, next_seq, created_at_ms, updated_at_ms,
          archived_at_ms, active_ms, running_since_ms, inbox_version, resources_revision, agent_snapshot_id, child_threads
