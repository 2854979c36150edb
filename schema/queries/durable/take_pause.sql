-- Clear this thread's paused ticket (an awaiting run with a pause intent).
--
-- $1 thread id, $2 now (ms)
UPDATE runs
SET pause_requested = 0, updated_at_ms = $2
WHERE thread_id = $1 AND status = 'awaiting' AND pause_requested = 1
RETURNING id, session_id, thread_id, status, epoch, generation, owner, lease_until_ms, attempts, max_attempts,
          cancel_requested, pause_requested, outcome
