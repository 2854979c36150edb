-- The usage of a session's threads, read inside an append that holds the session row
-- (allocate_seq.sql locked it), to add the append's spans to each thread's.
--
-- $1 session id
SELECT id, usage
FROM session_threads
WHERE session_id = $1
