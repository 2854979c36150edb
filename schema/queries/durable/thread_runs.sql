-- A thread's runs in creation order.
--
-- $1 thread id
SELECT id, session_id, thread_id, status, epoch, generation, owner, lease_until_ms, attempts, max_attempts,
       cancel_requested, pause_requested, outcome
FROM runs
WHERE thread_id = $1
ORDER BY created_at_ms, id
