-- Extend a live lease. Only the exact claim (run, epoch, owner) may renew; zero rows
-- means the lease was lost (reclaimed, cancelled or settled) and the worker must stop.
--
-- $1 run id, $2 claimed epoch, $3 owner, $4 now (ms), $5 lease length (ms)
UPDATE runs
SET lease_until_ms = $4 + $5,
    updated_at_ms  = $4
WHERE id = $1 AND epoch = $2 AND owner = $3 AND status = 'leased'
RETURNING lease_until_ms
