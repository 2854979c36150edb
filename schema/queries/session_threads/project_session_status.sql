-- The status of a session with child threads, projected from its threads' rows after a
-- change to any of them (ADR 0022 §7): `terminated` if the primary is; else `running`
-- if any non-archived thread runs; else `rescheduling` if any is; else `idle` — idle
-- only when every thread is. The session's running clock follows the aggregate, so
-- time during which several threads ran counts once (`usage.active_seconds`).
--
-- It returns the status, so the append reports a change of the aggregate to webhooks.
--
-- Runs inside the transaction that changed the rows, which holds the session row.
--
-- $1 session id, $2 now (ms)
UPDATE sessions
SET status           = threads.aggregate,
    active_ms        = CASE
                           WHEN threads.aggregate <> 'running' AND running_since_ms IS NOT NULL
                                AND $2 > running_since_ms
                           THEN active_ms + ($2 - running_since_ms)
                           ELSE active_ms
                       END,
    running_since_ms = CASE
                           WHEN threads.aggregate = 'running' THEN COALESCE(running_since_ms, $2)
                           ELSE NULL
                       END
FROM (
    SELECT CASE
               WHEN SUM(CASE WHEN parent_id IS NULL AND status = 'terminated' THEN 1 ELSE 0 END) > 0
               THEN 'terminated'
               WHEN SUM(CASE WHEN archived_at_ms IS NULL AND status = 'running' THEN 1 ELSE 0 END) > 0
               THEN 'running'
               WHEN SUM(CASE WHEN archived_at_ms IS NULL AND status = 'rescheduling' THEN 1 ELSE 0 END) > 0
               THEN 'rescheduling'
               ELSE 'idle'
           END AS aggregate
    FROM session_threads
    WHERE session_id = $1
) AS threads
WHERE sessions.id = $1
RETURNING status
