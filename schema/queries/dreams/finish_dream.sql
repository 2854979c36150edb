-- pending|running → completed|failed|canceled, exactly once: the WHERE is the
-- compare-and-swap, so of two racing finishers (reconcilers, a cancel) one ends the
-- dream and the other changes nothing. `usage` is frozen unless NULL is given.
-- $1 id, $2 status, $3 error (JSON) or NULL, $4 usage (JSON) or NULL, $5 now
UPDATE dreams SET status = $2, error = $3, usage = COALESCE($4, usage), ended_at_ms = $5, updated_at_ms = $5
WHERE id = $1 AND status IN ('pending', 'running')
RETURNING id, workspace_id, status, memory_store_id, session_ids, model, instructions, output_behavior, session_id, output_store_id, error, usage, policy_store_id, cutoff_ms, created_at_ms, updated_at_ms, ended_at_ms, archived_at_ms
