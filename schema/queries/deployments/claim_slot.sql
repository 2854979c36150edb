-- Claims a deployment's slot: moves `next_slot_ms` from the value the scheduler read to
-- the slot after now. The conditional UPDATE takes the row lock; a racing scheduler
-- waits for it and then finds `next_slot_ms` changed (PostgreSQL re-checks the WHERE on
-- the new row; SQLite has one writer), so each slot is claimed once. The caller inserts
-- the slot's run in the same transaction.
-- $1 deployment, $2 expected next slot, $3 new next slot, $4 now
UPDATE deployments
SET next_slot_ms = $3, last_run_at_ms = $4
WHERE id = $1 AND next_slot_ms = $2 AND paused_reason IS NULL AND archived_at_ms IS NULL
RETURNING id
