-- Count new child threads of a session: the first write of a spawning handoff, so it
-- locks the session row first (lock order: session, thread rows, run). It returns the
-- session's projections as they were, which the first spawn copies into the primary's
-- row (`copy_primary_thread.sql`): from then on the rows are kept, not the session's
-- own status (allocate_seq.sql). Zero rows: no such session.
--
-- $1 session id, $2 how many, $3 now (ms)
UPDATE sessions
SET child_threads = child_threads + $2,
    updated_at_ms = $3
WHERE id = $1
RETURNING child_threads, status, usage, active_ms, running_since_ms
