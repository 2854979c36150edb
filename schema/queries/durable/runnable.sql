-- This thread's runnable runs (pending, or leased past their lease), for a republish.
--
-- $1 thread id, $2 now (ms)
SELECT id, session_id, thread_id, status, epoch, generation, owner, lease_until_ms, attempts, max_attempts,
       cancel_requested, pause_requested, outcome
FROM runs
WHERE thread_id = $1 AND (status = 'pending' OR (status = 'leased' AND lease_until_ms < $2))
ORDER BY created_at_ms
