-- Archives a dream that has ended; an archived one keeps its first archival time.
-- $1 workspace, $2 id, $3 now
UPDATE dreams SET archived_at_ms = COALESCE(archived_at_ms, $3), updated_at_ms = $3
WHERE workspace_id = $1 AND id = $2 AND status IN ('completed', 'failed', 'canceled')
RETURNING id, workspace_id, status, memory_store_id, session_ids, model, instructions, output_behavior, session_id, output_store_id, error, usage, policy_store_id, cutoff_ms, created_at_ms, updated_at_ms, ended_at_ms, archived_at_ms
