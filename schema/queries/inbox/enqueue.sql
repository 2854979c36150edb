-- Append a message at the end of a session's live inbox.
--
-- $1 message id, $2 session id, $3 content (JSON text), $4 now (ms)
INSERT INTO live_inbox (id, session_id, position, content, created_at_ms)
VALUES ($1, $2, (SELECT COALESCE(MAX(position), 0) + 1 FROM live_inbox WHERE session_id = $2), $3, $4)
