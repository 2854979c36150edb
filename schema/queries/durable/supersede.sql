-- Supersede this thread's pending and awaiting runs that carry no cancel intent; a
-- leased run is left alone (cancel it).
--
-- $1 thread id, $2 now (ms)
UPDATE runs
SET status = 'superseded', updated_at_ms = $2
WHERE thread_id = $1 AND status IN ('pending', 'awaiting') AND cancel_requested = 0
RETURNING id
