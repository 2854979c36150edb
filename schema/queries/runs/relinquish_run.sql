-- Hand a run back without spending its retry budget (a draining worker at its deadline).
--
-- Only the exact claim may relinquish. The run becomes `pending` with its epoch
-- unchanged; the next claim mints a new epoch as always, and because the run was not
-- `leased` when claimed, that claim is not a recovery and `attempts` stays as it is.
-- Zero rows: the claim was already lost.
--
-- $1 run id, $2 claimed epoch, $3 owner, $4 now (ms)
UPDATE runs
SET status         = 'pending',
    owner          = NULL,
    lease_until_ms = NULL,
    updated_at_ms  = $4
WHERE id = $1 AND epoch = $2 AND owner = $3 AND status = 'leased'
RETURNING id
