-- The events of a session's settled turn that its content capture may rewrite: only the
-- types that carry content (capture::CONTENT_EVENTS decides per event).
--
-- $1 session id, $2 the last sequence number already captured, $3 the turn's idle
SELECT seq, type, body
FROM session_events
WHERE session_id = $1 AND seq > $2 AND seq <= $3
  AND (type LIKE 'user.%' OR type LIKE 'agent.%' OR type = 'system.message' OR type = 'span.outcome_evaluation_end')
ORDER BY seq
