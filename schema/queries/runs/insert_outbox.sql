-- Write a queue message to the transactional outbox, in the transaction whose state it
-- announces; it is published after the commit (or by the relay after a crash).
--
-- $1 topic, $2 queue dedupe id, $3 encoded message, $4 now (ms)
INSERT INTO outbox (topic, msg_id, payload, created_at_ms)
VALUES ($1, $2, $3, $4)
RETURNING id
