-- Append a batch of events to a session's history: one statement for the whole batch.
--
-- The caller has allocated the sequence numbers (allocate_seq.sql, which also locks the
-- session row) and appends one row `($1, $n, $n+1, $n+2, $n+3, $n+4, $2)` per event to
-- the VALUES list below, so N events are one round trip on both dialects. A repeated
-- event id violates the UNIQUE constraint and the whole statement (and with it the
-- caller's transaction) writes nothing.
--
-- $1 session id, $2 now (ms); per event: seq, event id, thread id, type, body (JSON text)
INSERT INTO session_events (session_id, seq, event_id, thread_id, type, body, processed_at_ms)
VALUES
