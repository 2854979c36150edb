-- Delete this thread's dead-lettered runs.
--
-- $1 thread id
DELETE FROM runs WHERE thread_id = $1 AND status = 'dead_letter'
