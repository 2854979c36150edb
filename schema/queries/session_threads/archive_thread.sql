-- Archive a child thread: `terminated`, its running clock stopped, out of the session's
-- status aggregate (project_session_status.sql). Only a child not archived yet whose
-- run is neither running (leased) nor about to (pending: input woke it and was not
-- taken yet): zero rows is a conflict, so an archive racing a wake refuses instead of
-- leaving a thread that still runs.
--
-- $1 session id, $2 thread id, $3 now (ms)
UPDATE session_threads
SET archived_at_ms   = $3,
    updated_at_ms    = $3,
    status           = 'terminated',
    active_ms        = CASE
                           WHEN running_since_ms IS NOT NULL AND $3 > running_since_ms
                           THEN active_ms + ($3 - running_since_ms)
                           ELSE active_ms
                       END,
    running_since_ms = NULL
WHERE id = $2 AND session_id = $1 AND parent_id IS NOT NULL AND archived_at_ms IS NULL
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = $2 AND r.status IN ('pending', 'leased'))
RETURNING id
