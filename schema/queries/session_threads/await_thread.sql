-- The parent's call `$3` awaits a child's reply. Only a child that is not archived and
-- not awaited already: zero rows is a conflict, and the handoff writes nothing.
--
-- $1 session id, $2 thread id, $3 the awaiting tool_use_id, $4 now (ms)
UPDATE session_threads
SET awaited_by    = $3,
    updated_at_ms = $4
WHERE id = $2 AND session_id = $1 AND parent_id IS NOT NULL AND awaited_by IS NULL AND archived_at_ms IS NULL
RETURNING id
