-- Records a run's outcome once: its session or its error, a compare-and-swap on both
-- being unset.
-- $1 run, $2 session id or NULL, $3 error (JSON) or NULL
UPDATE deployment_runs
SET session_id = $2, error = $3
WHERE id = $1 AND session_id IS NULL AND error IS NULL
RETURNING id, workspace_id, deployment_id, agent, trigger_type, scheduled_at_ms, planned_session_id, session_id,
          error, created_at_ms
