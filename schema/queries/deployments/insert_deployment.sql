-- $1 id, $2 workspace, $3 organization, $4 name, $5 description, $6 agent id, $7 agent
-- version, $8 environment, $9 initial events, $10 resources, $11 vault ids, $12 metadata,
-- $13 budget, $14 cron expression, $15 time zone, $16 user profile id, $17 content capture
-- ceiling, $18 next slot, $19 now
INSERT INTO deployments (id, workspace_id, organization_id, name, description, agent_id, agent_version,
                         environment_id, initial_events, resources, vault_ids, metadata, budget,
                         schedule_expression, schedule_timezone, user_profile_id, content_capture_ceiling,
                         next_slot_ms, last_run_at_ms, paused_reason, created_at_ms, updated_at_ms, archived_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, NULL, NULL, $19, $19, NULL)
RETURNING {columns}
