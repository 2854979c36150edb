-- Record a durable cancel intent. A leased run's lease is revoked by a new epoch (its
-- holder's next fenced write fails) and, like an awaiting run, it becomes pending so
-- the next claim commits the cancelled outcome; other runs just carry the intent.
--
-- $1 run id, $2 thread id, $3 now (ms)
UPDATE runs
SET cancel_requested = 1,
    epoch            = CASE WHEN status = 'leased' THEN epoch + 1 ELSE epoch END,
    owner            = CASE WHEN status = 'leased' THEN NULL ELSE owner END,
    lease_until_ms   = CASE WHEN status = 'leased' THEN NULL ELSE lease_until_ms END,
    status           = CASE WHEN status IN ('leased', 'awaiting') THEN 'pending' ELSE status END,
    updated_at_ms    = $3
WHERE id = $1 AND thread_id = $2
RETURNING id, session_id, thread_id, status, epoch, generation, owner, lease_until_ms, attempts, max_attempts,
          cancel_requested, pause_requested, outcome
