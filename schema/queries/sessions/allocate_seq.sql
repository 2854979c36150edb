-- Allocate `$2` consecutive event sequence numbers of a session: the returned
-- `next_seq` is one past the last allocated number. The UPDATE also serializes
-- concurrent appends to one session, so sequence order is commit order.
--
-- Lock order: every transaction that touches both locks the session row first, then
-- the run row (fence_run.sql), so two writers never wait on each other in a cycle.
--
-- $1 session id, $2 count, $3 now (ms)
UPDATE sessions
SET next_seq      = next_seq + $2,
    updated_at_ms = $3
WHERE id = $1
RETURNING next_seq, usage, active_ms, running_since_ms
