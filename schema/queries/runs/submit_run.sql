-- Make the thread's open run runnable for new input, or report that there is none.
--
-- An open run is one that is not `done`: `pending` or `awaiting` becomes `pending`;
-- `leased` stays leased (the live attempt picks the input up). Each submission bumps
-- `generation`, which names the queue message (run_id:generation) so a republish of
-- the same submission is deduplicated and a new one is not. Dead-lettered runs are
-- left alone: only the explicit requeue route revives them.
--
-- A client's input ends a pause (a paused ticket is an awaiting run with the flag); a
-- wake from another thread of the session (`$3` = 1: a subagent's reply, ADR 0022)
-- does not: its events are committed and the ticket stays paused until resumed.
--
-- $1 thread id, $2 now (ms), $3 1 to keep a pause, else 0, $4 session id
UPDATE runs
SET status        = CASE
                        WHEN status = 'leased' THEN 'leased'
                        WHEN status = 'awaiting' AND pause_requested = 1 AND $3 = 1 THEN 'awaiting'
                        ELSE 'pending'
                    END,
    generation    = generation + 1,
    attempts      = CASE WHEN status = 'awaiting' THEN 0 ELSE attempts END,
    pause_requested = CASE WHEN status = 'awaiting' AND $3 = 0 THEN 0 ELSE pause_requested END,
    updated_at_ms = $2
WHERE thread_id = $1 AND session_id = $4 AND status IN ('pending', 'awaiting', 'leased')
RETURNING id, status, generation, epoch
