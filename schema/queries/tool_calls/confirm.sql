-- Record the first `user.tool_confirmation` of a call. Later confirmations, and ones
-- naming no call of this session, match no row and change nothing.
--
-- $1 session id, $2 tool use id, $3 'allow' | 'deny', $4 the confirmation's event id, $5 its seq
UPDATE tool_calls
SET confirmation          = $3,
    confirmation_event_id = $4,
    confirmation_seq      = $5
WHERE session_id = $1 AND tool_use_id = $2 AND confirmation_event_id IS NULL
