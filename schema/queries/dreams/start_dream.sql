-- pending → running, recording the session that runs the dream and the store it
-- writes. A compare-and-swap: a dream no longer pending is not touched.
-- $1 id, $2 session id, $3 output store id, $4 now
UPDATE dreams SET status = 'running', session_id = $2, output_store_id = $3, updated_at_ms = $4
WHERE id = $1 AND status = 'pending'
RETURNING id, workspace_id, status, memory_store_id, session_ids, model, instructions, output_behavior, session_id, output_store_id, error, usage, policy_store_id, cutoff_ms, created_at_ms, updated_at_ms, ended_at_ms, archived_at_ms
