-- Outbox rows written at or before a cutoff, oldest first: what the relay republishes
-- (rows younger than the cutoff are left to the publisher that wrote them).
--
-- $1 cutoff (ms), $2 limit
SELECT id, topic, msg_id, payload, created_at_ms
FROM outbox
WHERE created_at_ms <= $1
ORDER BY created_at_ms, id
LIMIT $2
