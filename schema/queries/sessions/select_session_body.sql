-- A session's stored body (without its agent), read inside a transaction that holds the
-- session row (an append locked it first: allocate_seq.sql), to change one projection
-- kept in it.
--
-- $1 session id
SELECT body
FROM sessions
WHERE id = $1
