-- A session's open tool calls (no result yet), oldest first: served by the partial
-- index tool_calls_open (session_id, use_seq) WHERE result_event_id IS NULL.
--
-- $1 session id
SELECT session_id, tool_use_id, thread_id, use_kind, name, evaluated_permission, use_seq, confirmation,
       confirmation_event_id, confirmation_seq, result_event_id, result_kind, result_seq
FROM tool_calls
WHERE session_id = $1 AND result_event_id IS NULL
ORDER BY use_seq
