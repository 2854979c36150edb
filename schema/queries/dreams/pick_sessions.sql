-- The sessions a policy's dream reads: the store attached (`session_memory_stores`; a
-- dream's own session has no resources, so it never qualifies), not running, not
-- archived, updated after the last completed cutoff; the most recently updated first.
-- $1 workspace, $2 memory store, $3 cutoff or NULL, $4 limit
SELECT s.id FROM sessions s
JOIN session_memory_stores m ON m.session_id = s.id AND m.memory_store_id = $2
WHERE s.workspace_id = $1 AND s.status NOT IN ('running', 'rescheduling') AND s.archived_at_ms IS NULL
  AND ($3 IS NULL OR s.updated_at_ms > $3)
ORDER BY s.updated_at_ms DESC, s.id DESC
LIMIT $4
