-- Auto-pause after a failed scheduled run, unless paused or archived already.
-- $1 deployment, $2 reason (JSON), $3 now
UPDATE deployments SET paused_reason = $2, updated_at_ms = $3
WHERE id = $1 AND paused_reason IS NULL AND archived_at_ms IS NULL
