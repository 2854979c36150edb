-- Bring the primary's row in step with its session at the session's first spawn: until
-- then the session's status, usage and running clock were the primary's own.
--
-- $1 session id (the primary thread's id), $2 status, $3 usage (JSON text),
-- $4 active ms, $5 running since (ms) or NULL, $6 now (ms)
UPDATE session_threads
SET status           = $2,
    usage            = $3,
    active_ms        = $4,
    running_since_ms = $5,
    updated_at_ms    = $6
WHERE id = $1 AND session_id = $1
