-- Write the session's usage projection after an append that committed
-- `span.model_request_end` events, in the appending transaction (the status and the
-- running time are kept by allocate_seq.sql itself).
--
-- $1 session id, $2 cumulative usage (JSON text)
UPDATE sessions
SET usage = $2
WHERE id = $1
