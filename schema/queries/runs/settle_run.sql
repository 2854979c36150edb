-- Settle the current attempt of a run, under its claim.
--
-- `awaiting` parks the run until new input (a checkpoint: the retry budget resets);
-- `done` ends it with an outcome. The lease is released either way. Zero rows means
-- fenced: someone else owns the run now and this settlement changed nothing. Its
-- WHERE is fence_run.sql's, so it is the settling transaction's fence: the events
-- appended before it in the transaction are rolled back with it.
--
-- Input that arrived during the attempt bumped `generation` past the one the worker
-- last consumed ($6); parking would strand it (an awaiting run is not claimable), so
-- the run goes back to `pending` instead and RETURNING tells the worker to go on.
--
-- $1 run id, $2 claimed epoch, $3 new status ('awaiting' | 'done'), $4 outcome or NULL,
-- $5 now (ms), $6 the generation the worker has consumed
UPDATE runs
SET status         = CASE WHEN $3 = 'awaiting' AND generation <> $6 THEN 'pending' ELSE $3 END,
    outcome        = $4,
    owner          = NULL,
    lease_until_ms = NULL,
    attempts       = CASE WHEN $3 = 'awaiting' THEN 0 ELSE attempts END,
    updated_at_ms  = $5
WHERE id = $1 AND epoch = $2 AND status = 'leased'
RETURNING status
