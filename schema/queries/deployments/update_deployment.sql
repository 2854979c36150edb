-- Writes an unarchived deployment's config whole; the next slot changes only when the
-- schedule did ($18 = 1), so a concurrent claim's advance is kept otherwise.
-- $1 workspace, $2 id, $3 name, $4 description, $5 agent id, $6 agent version,
-- $7 environment, $8 initial events, $9 resources, $10 vault ids, $11 metadata, $12 budget,
-- $13 cron expression, $14 time zone, $15 user profile id, $16 content capture ceiling,
-- $17 next slot, $18 replace next slot (0/1), $19 now
UPDATE deployments
SET name = $3, description = $4, agent_id = $5, agent_version = $6, environment_id = $7, initial_events = $8,
    resources = $9, vault_ids = $10, metadata = $11, budget = $12, schedule_expression = $13,
    schedule_timezone = $14, user_profile_id = $15, content_capture_ceiling = $16,
    next_slot_ms = CASE WHEN $18 = 1 THEN $17 ELSE next_slot_ms END, updated_at_ms = $19
WHERE workspace_id = $1 AND id = $2 AND archived_at_ms IS NULL
RETURNING {columns}
