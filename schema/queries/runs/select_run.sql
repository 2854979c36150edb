-- One run row.
--
-- $1 run id
SELECT id, session_id, thread_id, status, epoch, generation, owner, lease_until_ms, attempts, max_attempts,
       cancel_requested, pause_requested, outcome
FROM runs
WHERE id = $1
