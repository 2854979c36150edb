-- Write the session's projections after an append, in the appending transaction: the
-- status of the primary thread's last `session.status_*` event (NULL: unchanged), the
-- cumulative usage of `span.model_request_end` events, and the running-time counters.
--
-- $1 session id, $2 status or NULL, $3 usage (JSON text), $4 active ms, $5 running since (ms) or NULL
UPDATE sessions
SET status           = COALESCE($2, status),
    usage            = $3,
    active_ms        = $4,
    running_since_ms = $5
WHERE id = $1
