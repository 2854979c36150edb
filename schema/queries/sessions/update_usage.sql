-- Write the session's usage projection after an append that committed
-- `span.model_request_end` events, in the appending transaction (the status and the
-- running time are kept by allocate_seq.sql itself), when the allocation did not write
-- it already (ADR 0033). Nothing but an append may write `usage`: allocate_seq.sql's
-- conditional write relies on it.
--
-- $1 session id, $2 cumulative usage (JSON text)
UPDATE sessions
SET usage = $2
WHERE id = $1
