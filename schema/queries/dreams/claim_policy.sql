-- Claims a policy's due tick: moves the next due time past now by whole intervals.
-- The conditional UPDATE takes the row lock; a racing scheduler waits for it and then
-- finds the tick no longer due (PostgreSQL re-checks the WHERE on the new row; SQLite
-- has one writer), so each tick is claimed once.
-- $1 workspace, $2 memory store, $3 now
UPDATE dream_policies
SET next_due_at_ms = next_due_at_ms
        + (($3 - next_due_at_ms) / (interval_seconds * 1000) + 1) * (interval_seconds * 1000),
    updated_at_ms = $3
WHERE workspace_id = $1 AND memory_store_id = $2 AND enabled = 1
  AND next_due_at_ms IS NOT NULL AND next_due_at_ms <= $3
RETURNING memory_store_id, workspace_id, enabled, interval_seconds, min_new_sessions, max_sessions, model, instructions, next_due_at_ms, last_completed_cutoff_ms
