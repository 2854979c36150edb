-- A page of a session's events. The caller fills `{after_op}` (`>` ascending, `<`
-- descending), `{order}` (ASC or DESC), `{types}` (empty, or `AND type IN ($9, …)`
-- with one bound parameter per type: types are bound, never inlined) and `{view}`
-- (empty, or the session-level view of a session with child threads, ADR 0022 §6:
-- `AND (thread_id = $1 OR type IN (<events::CROSS_POSTED>))`, the primary's events and
-- the child events it shows — a constant list of known types, inlined).
--
-- $1 session id, $2 thread id or NULL, $3 seq cursor (never NULL: without a cursor,
-- the caller binds the bound below every seq, or above; so the seq range is an index
-- bound in every plan, a prepared statement's generic one too, and a read after a
-- cursor costs what it returns, not the session's whole history), $4 limit,
-- $5..$8 processed_at bounds (> >= < <=, each NULL for none)
SELECT session_id, seq, event_id, thread_id, type, body, processed_at_ms
FROM session_events
WHERE session_id = $1
  AND ($2 IS NULL OR thread_id = $2)
  AND seq {after_op} $3
  AND ($5 IS NULL OR processed_at_ms > $5)
  AND ($6 IS NULL OR processed_at_ms >= $6)
  AND ($7 IS NULL OR processed_at_ms < $7)
  AND ($8 IS NULL OR processed_at_ms <= $8)
  {types}
  {view}
ORDER BY seq {order}
LIMIT $4
