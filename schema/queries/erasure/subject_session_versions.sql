-- The memory versions a session authored that still hold content, with whether each is
-- its memory's current version (that memory's content is the session's).
--
-- $1 workspace id, $2 session id
SELECT v.id, v.memory_store_id, v.memory_id,
       CASE WHEN m.memory_version_id = v.id THEN 1 ELSE 0 END AS current_version
FROM memory_versions v
LEFT JOIN memories m ON m.memory_store_id = v.memory_store_id AND m.id = v.memory_id
WHERE v.workspace_id = $1 AND v.actor_type = 'session' AND v.actor_id = $2 AND v.redacted_at_ms IS NULL
ORDER BY v.id
