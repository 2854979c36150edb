-- Runs that should be moving but may have no queue message left: `pending` since
-- before the cutoff, or `leased` with a lease that expired before it. The queue's
-- redelivery normally handles both; this is the safety net when a message exhausted
-- its deliveries or was lost. Republishing is harmless: claims are fenced.
--
-- $1 cutoff (ms), $2 limit
SELECT id, session_id, thread_id, generation, epoch
FROM runs
WHERE (status = 'pending' AND updated_at_ms < $1)
   OR (status = 'leased' AND lease_until_ms < $1)
ORDER BY updated_at_ms
LIMIT $2
