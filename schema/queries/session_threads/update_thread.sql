-- Keep one thread's row in step with an append's events on it (ADR 0022 §7), inside the
-- appending transaction: its status (`$3`, the last status event's; NULL unchanged),
-- the stop reason of an idle, its usage (`$5`; NULL unchanged) and its running clock,
-- kept like the session's in allocate_seq.sql (entering `running` starts it, leaving it
-- adds the elapsed time to `active_ms`; every expression reads the row as it was).
--
-- $1 session id, $2 thread id, $3 status or NULL, $4 stop reason (JSON text) or NULL,
-- $5 usage (JSON text) or NULL, $6 now (ms)
-- An archived thread keeps `terminated`: nothing it commits afterwards brings it back.
UPDATE session_threads
SET status           = CASE WHEN archived_at_ms IS NULL THEN COALESCE($3, status) ELSE status END,
    stop_reason      = CASE WHEN $3 = 'idle' THEN $4 ELSE stop_reason END,
    usage            = COALESCE($5, usage),
    active_ms        = CASE
                           WHEN $3 IS NOT NULL AND $3 <> 'running' AND running_since_ms IS NOT NULL
                                AND $6 > running_since_ms
                           THEN active_ms + ($6 - running_since_ms)
                           ELSE active_ms
                       END,
    running_since_ms = CASE
                           WHEN $3 IS NULL THEN running_since_ms
                           WHEN $3 = 'running' THEN COALESCE(running_since_ms, $6)
                           ELSE NULL
                       END,
    updated_at_ms    = $6
WHERE id = $2 AND session_id = $1
