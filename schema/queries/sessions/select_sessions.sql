-- A page of a workspace's sessions, without their agents. The caller fills `{cursor_op}`
-- (`>` or `<`), `{order}` (ASC or DESC) and `{statuses}` (empty, or
-- `AND status IN ($13, …)` with one bound parameter per status).
--
-- $1 workspace id, $2 agent id or NULL, $3 agent version or NULL, $4 include archived
-- (1 or 0), $5 id cursor or NULL, $6 limit, $7..$10 created_at bounds (> >= < <=),
-- $11 memory store id or NULL (sessions with it among their resources: the index
-- `session_memory_stores`, kept by every write of a session's resources), $12 deployment
-- id or NULL (sessions its runs create: `deployment_runs`, migration 0018)
SELECT id, workspace_id, status, body, agent_id, agent_version, usage, next_seq, created_at_ms, updated_at_ms,
       archived_at_ms, active_ms, running_since_ms, inbox_version, resources_revision, agent_snapshot_id, child_threads
FROM sessions
WHERE workspace_id = $1
  AND ($2 IS NULL OR agent_id = $2)
  AND ($3 IS NULL OR agent_version = $3)
  AND ($4 = 1 OR archived_at_ms IS NULL)
  AND ($5 IS NULL OR id {cursor_op} $5)
  AND ($7 IS NULL OR created_at_ms > $7)
  AND ($8 IS NULL OR created_at_ms >= $8)
  AND ($9 IS NULL OR created_at_ms < $9)
  AND ($10 IS NULL OR created_at_ms <= $10)
  AND ($11 IS NULL OR id IN (SELECT session_id FROM session_memory_stores WHERE memory_store_id = $11))
  AND ($12 IS NULL OR id IN (SELECT planned_session_id FROM deployment_runs WHERE deployment_id = $12))
  {statuses}
ORDER BY id {order}
LIMIT $6
