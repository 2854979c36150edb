-- Record the first result of a call (`user.tool_result`, `agent.tool_result`,
-- `agent.mcp_tool_result`, `user.custom_tool_result`): the call is no longer open.
-- Later results, and ones naming no call of this session, change nothing.
--
-- $1 session id, $2 tool use id, $3 the result's event id, $4 its event type, $5 its seq
UPDATE tool_calls
SET result_event_id = $3,
    result_kind     = $4,
    result_seq      = $5
WHERE session_id = $1 AND tool_use_id = $2 AND result_event_id IS NULL
