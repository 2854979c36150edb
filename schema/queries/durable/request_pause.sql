-- Record a pause intent on this thread's leased run (the given one, or whichever is
-- leased): the live attempt parks at its next step boundary.
--
-- $1 thread id, $2 run id or NULL, $3 now (ms)
UPDATE runs
SET pause_requested = 1, updated_at_ms = $3
WHERE thread_id = $1 AND status = 'leased' AND ($2 IS NULL OR id = $2)
RETURNING id, session_id, thread_id, status, epoch, generation, owner, lease_until_ms, attempts, max_attempts,
          cancel_requested, pause_requested, outcome
