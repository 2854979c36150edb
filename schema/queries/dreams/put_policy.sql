-- Writes a store's policy whole. The next due tick is kept while it stays enabled at the
-- same interval, moved to now + interval when it is enabled or its interval changes,
-- and cleared when it is disabled; the last completed cutoff is kept.
-- $1 memory store, $2 workspace, $3 enabled (0/1), $4 interval seconds, $5 min new
-- sessions, $6 max sessions, $7 model (JSON), $8 instructions, $9 now
INSERT INTO dream_policies (memory_store_id, workspace_id, enabled, interval_seconds, min_new_sessions, max_sessions, model, instructions, next_due_at_ms, last_completed_cutoff_ms, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $3 = 1 THEN $9 + $4 * 1000 END, NULL, $9, $9)
ON CONFLICT (memory_store_id) DO UPDATE SET
    next_due_at_ms = CASE
        WHEN excluded.enabled = 0 THEN NULL
        WHEN dream_policies.enabled = 1 AND dream_policies.interval_seconds = excluded.interval_seconds
             AND dream_policies.next_due_at_ms IS NOT NULL THEN dream_policies.next_due_at_ms
        ELSE excluded.next_due_at_ms
    END,
    enabled = excluded.enabled,
    interval_seconds = excluded.interval_seconds,
    min_new_sessions = excluded.min_new_sessions,
    max_sessions = excluded.max_sessions,
    model = excluded.model,
    instructions = excluded.instructions,
    updated_at_ms = excluded.updated_at_ms
RETURNING memory_store_id, workspace_id, enabled, interval_seconds, min_new_sessions, max_sessions, model, instructions, next_due_at_ms, last_completed_cutoff_ms
