-- The session's status before its threads' rows are projected into it (see
-- project_session_status.sql), inside the transaction that holds the session row.
--
-- $1 session id
SELECT status FROM sessions WHERE id = $1
