-- Make the thread's open run runnable for new input, or report that there is none.
--
-- An open run is one that is not `done`: `pending` or `awaiting` becomes `pending`;
-- `leased` stays leased (the live attempt picks the input up). Each submission bumps
-- `generation`, which names the queue message (run_id:generation) so a republish of
-- the same submission is deduplicated and a new one is not. Dead-lettered runs are
-- left alone: only the explicit requeue route revives them.
--
-- $1 thread id, $2 now (ms)
UPDATE runs
SET status        = CASE WHEN status = 'leased' THEN 'leased' ELSE 'pending' END,
    generation    = generation + 1,
    attempts      = CASE WHEN status = 'awaiting' THEN 0 ELSE attempts END,
    -- New input ends a pause (a paused ticket is an awaiting run with the flag).
    pause_requested = CASE WHEN status = 'awaiting' THEN 0 ELSE pause_requested END,
    updated_at_ms = $2
WHERE thread_id = $1 AND status IN ('pending', 'awaiting', 'leased')
RETURNING id, status, generation, epoch
