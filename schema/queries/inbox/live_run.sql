-- Whether a run of the session's primary thread is live (leased): the inbox takes
-- changes only then.
--
-- $1 session id (= its primary thread id)
SELECT id FROM runs WHERE thread_id = $1 AND status = 'leased' LIMIT 1
