-- A dead letter of this thread back to pending with a fresh retry budget and a new
-- generation (its queue message is written by the caller in the same transaction). A
-- run with a cancel intent stays dead.
--
-- $1 run id, $2 thread id, $3 now (ms)
UPDATE runs
SET status = 'pending', attempts = 0, generation = generation + 1, dead_lettered_at_ms = NULL, updated_at_ms = $3
WHERE id = $1 AND thread_id = $2 AND status = 'dead_letter' AND cancel_requested = 0
RETURNING id, session_id, thread_id, status, epoch, generation, owner, lease_until_ms, attempts, max_attempts,
          cancel_requested, pause_requested, outcome
