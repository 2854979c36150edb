-- Tool calls of a session by use id, in any state, oldest first. The caller replaces
-- `{ids}` with one bound parameter per id ($2, $3, …); ids are never inlined.
--
-- $1 session id, $2… tool use ids
SELECT session_id, tool_use_id, thread_id, use_kind, name, evaluated_permission, use_seq, confirmation,
       confirmation_event_id, confirmation_seq, result_event_id, result_kind, result_seq
FROM tool_calls
WHERE session_id = $1 AND tool_use_id IN ({ids})
ORDER BY use_seq
