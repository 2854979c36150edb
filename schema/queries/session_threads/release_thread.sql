-- The call `$3` no longer awaits the thread (its reply, or an error result, is written
-- in the same handoff). Only while the thread is awaited by that very call: a reply
-- that lost a race with another release matches zero rows, a conflict, and writes
-- nothing (so the call is answered once).
--
-- $1 session id, $2 thread id, $3 the awaiting tool_use_id, $4 now (ms)
UPDATE session_threads
SET awaited_by    = NULL,
    updated_at_ms = $4
WHERE id = $2 AND session_id = $1 AND awaited_by = $3
RETURNING id
