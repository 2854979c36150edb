-- A session's threads in id order (the primary, `sesn_…`, sorts before every `sthr_…`),
-- each with the agent it runs: a child its snapshot, the primary the session's agent.
-- While the session has no child threads its primary's row is not kept (ADR 0022 §7):
-- the primary's status, usage, running clock and update time are the session's then.
-- The caller fills `{statuses}` (empty, or `AND status IN ($5, …)` with one bound
-- parameter per status), which filters on those effective statuses.
--
-- $1 session id, $2 thread id or NULL (every thread), $3 id cursor or NULL, $4 limit
SELECT id, session_id, parent_id, status, stop_reason, agent_name, awaited_by, usage, active_ms, running_since_ms,
       created_at_ms, updated_at_ms, archived_at_ms,
       (SELECT a.body FROM agent_snapshots a WHERE a.id = threads.agent_snapshot_id) AS agent
FROM (
    SELECT t.id, t.session_id, t.parent_id, t.stop_reason, t.agent_name, t.awaited_by, t.created_at_ms,
           t.archived_at_ms,
           CASE WHEN t.parent_id IS NULL THEN s.agent_snapshot_id ELSE t.agent_snapshot_id END AS agent_snapshot_id,
           CASE WHEN t.parent_id IS NULL AND s.child_threads = 0 THEN s.status ELSE t.status END AS status,
           CASE WHEN t.parent_id IS NULL AND s.child_threads = 0 THEN s.usage ELSE t.usage END AS usage,
           CASE WHEN t.parent_id IS NULL AND s.child_threads = 0 THEN s.active_ms ELSE t.active_ms END AS active_ms,
           CASE WHEN t.parent_id IS NULL AND s.child_threads = 0 THEN s.running_since_ms
                ELSE t.running_since_ms END AS running_since_ms,
           CASE WHEN t.parent_id IS NULL AND s.child_threads = 0 THEN s.updated_at_ms
                ELSE t.updated_at_ms END AS updated_at_ms
    FROM session_threads t
    JOIN sessions s ON s.id = t.session_id
    WHERE t.session_id = $1
      AND ($2 IS NULL OR t.id = $2)
      AND ($3 IS NULL OR t.id > $3)
) AS threads
WHERE 1 = 1
  {statuses}
ORDER BY id
LIMIT $4
