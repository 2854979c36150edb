-- Appends a run (neither session nor error yet). A second run for one (deployment,
-- slot) violates `deployment_runs_one_per_slot` (a conflict).
-- $1 id, $2 workspace, $3 deployment, $4 agent (JSON), $5 trigger type, $6 slot or NULL,
-- $7 planned session id, $8 now
INSERT INTO deployment_runs (id, workspace_id, deployment_id, agent, trigger_type, scheduled_at_ms,
                             planned_session_id, session_id, error, created_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, NULL, $8)
RETURNING id, workspace_id, deployment_id, agent, trigger_type, scheduled_at_ms, planned_session_id, session_id,
          error, created_at_ms
