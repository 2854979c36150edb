-- Move a thread's leased runs whose lease expired and whose attempts reached the
-- budget to dead letters: only an explicit requeue revives them.
--
-- $1 thread id, $2 attempts at least, $3 now (ms)
UPDATE runs
SET status = 'dead_letter', owner = NULL, lease_until_ms = NULL, dead_lettered_at_ms = $3, updated_at_ms = $3
WHERE thread_id = $1 AND status = 'leased' AND lease_until_ms < $3 AND attempts >= $2
