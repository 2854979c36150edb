-- Replaces one committed event's body (content capture and erasure redact in place; the
-- event keeps its id, type and sequence number).
--
-- $1 session id, $2 seq, $3 body (JSON text)
UPDATE session_events SET body = $3 WHERE session_id = $1 AND seq = $2
