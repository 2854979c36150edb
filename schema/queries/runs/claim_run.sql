-- Claim one run for one attempt: the fencing token is minted here.
--
-- A run is claimable when it is `pending` (fresh work, or new input after a checkpoint)
-- or `leased` with a lease that expired strictly before now (its holder is presumed
-- dead). Every claim bumps `epoch`; commits presented with an older epoch are rejected
-- by fence_run.sql. Reclaiming an expired lease is a recovery and spends one attempt
-- of the retry budget; a fresh claim does not. A run with a durable cancel intent is
-- still claimed: the worker must commit its cancelled outcome under the claim.
--
-- Zero rows: the run is settled, unknown, or held by a live lease (see run_status.sql).
-- A unique violation on runs_one_leased_per_thread: another run of the thread is live.
--
-- $1 run id, $2 owner (unique per worker process), $3 now (ms), $4 lease length (ms)
UPDATE runs
SET status         = 'leased',
    epoch          = epoch + 1,
    owner          = $2,
    lease_until_ms = $3 + $4,
    attempts       = CASE WHEN status = 'leased' THEN attempts + 1 ELSE attempts END,
    updated_at_ms  = $3
WHERE id = $1
  AND (status = 'pending' OR (status = 'leased' AND lease_until_ms < $3))
RETURNING session_id, thread_id, epoch, generation, attempts, max_attempts, cancel_requested, pause_requested, lease_until_ms
