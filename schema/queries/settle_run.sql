-- Settle the current attempt of a run, under its claim.
--
-- `awaiting` parks the run until new input (a checkpoint: the retry budget resets);
-- `done` ends it with an outcome. The lease is released either way. Zero rows means
-- fenced: someone else owns the run now and this settlement changed nothing.
--
-- $1 run id, $2 claimed epoch, $3 new status ('awaiting' | 'done'), $4 outcome or NULL, $5 now (ms)
UPDATE runs
SET status         = $3,
    outcome        = $4,
    owner          = NULL,
    lease_until_ms = NULL,
    attempts       = CASE WHEN $3 = 'awaiting' THEN 0 ELSE attempts END,
    updated_at_ms  = $5
WHERE id = $1 AND epoch = $2 AND status = 'leased'
RETURNING id
