-- A session's primary thread shares the session's id, so `{thread}` may name either.
--
-- $1 session id, $2 now (ms)
INSERT INTO session_threads (id, session_id, parent_id, body, created_at_ms, updated_at_ms)
VALUES ($1, $1, NULL, '{}', $2, $2)
