-- One session with its agent snapshot (put back into the body by the caller).
--
-- $1 session id, $2 workspace id or NULL (NULL: any workspace; workers hold a claim)
SELECT id, workspace_id, status, body, agent_id, agent_version, usage, next_seq, created_at_ms, updated_at_ms,
       archived_at_ms, active_ms, running_since_ms, inbox_version, resources_revision, agent_snapshot_id, child_threads,
       (SELECT a.body FROM agent_snapshots a WHERE a.id = sessions.agent_snapshot_id) AS agent_snapshot
FROM sessions
WHERE id = $1 AND ($2 IS NULL OR workspace_id = $2)
