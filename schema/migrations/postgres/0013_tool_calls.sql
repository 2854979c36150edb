-- The tool-call ledger: one row per tool use (`agent.tool_use`, `agent.custom_tool_use`,
-- `agent.mcp_tool_use`) with what has answered it, maintained by every transaction that
-- appends events. "Which calls of a session are still open" is then one indexed read
-- instead of a scan of the history. `tool_use_id` is the use's event id.
CREATE TABLE tool_calls (
    session_id            TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_use_id           TEXT NOT NULL,
    thread_id             TEXT NOT NULL,
    use_kind              TEXT NOT NULL,
    name                  TEXT NOT NULL,
    evaluated_permission  TEXT,
    use_seq               BIGINT NOT NULL,
    confirmation          TEXT CHECK (confirmation IN ('allow', 'deny')),
    confirmation_event_id TEXT,
    confirmation_seq      BIGINT,
    result_event_id       TEXT,
    result_kind           TEXT,
    result_seq            BIGINT,
    PRIMARY KEY (session_id, tool_use_id)
);
CREATE INDEX tool_calls_open ON tool_calls (session_id, use_seq) WHERE result_event_id IS NULL;

-- Backfill from the committed history: every use, then the first confirmation and the
-- first result naming it (in its session), as the appending transaction would have.
INSERT INTO tool_calls (session_id, tool_use_id, thread_id, use_kind, name, evaluated_permission, use_seq)
SELECT session_id, event_id, thread_id, type, COALESCE(body::jsonb ->> 'name', ''),
       body::jsonb ->> 'evaluated_permission', seq
FROM session_events
WHERE type IN ('agent.tool_use', 'agent.custom_tool_use', 'agent.mcp_tool_use');

UPDATE tool_calls
SET confirmation_event_id = (
        SELECT e.event_id FROM session_events e
        WHERE e.session_id = tool_calls.session_id AND e.type = 'user.tool_confirmation'
          AND e.body::jsonb ->> 'tool_use_id' = tool_calls.tool_use_id
        ORDER BY e.seq LIMIT 1);

UPDATE tool_calls
SET confirmation_seq = (SELECT e.seq FROM session_events e WHERE e.event_id = tool_calls.confirmation_event_id),
    confirmation = (
        SELECT CASE WHEN e.body::jsonb ->> 'result' = 'allow' THEN 'allow' ELSE 'deny' END
        FROM session_events e WHERE e.event_id = tool_calls.confirmation_event_id)
WHERE confirmation_event_id IS NOT NULL;

UPDATE tool_calls
SET result_event_id = (
        SELECT e.event_id FROM session_events e
        WHERE e.session_id = tool_calls.session_id
          AND ((e.type IN ('user.tool_result', 'agent.tool_result')
                AND e.body::jsonb ->> 'tool_use_id' = tool_calls.tool_use_id)
            OR (e.type = 'agent.mcp_tool_result'
                AND COALESCE(e.body::jsonb ->> 'mcp_tool_use_id', e.body::jsonb ->> 'tool_use_id') = tool_calls.tool_use_id)
            OR (e.type = 'user.custom_tool_result'
                AND e.body::jsonb ->> 'custom_tool_use_id' = tool_calls.tool_use_id))
        ORDER BY e.seq LIMIT 1);

UPDATE tool_calls
SET result_kind = (SELECT e.type FROM session_events e WHERE e.event_id = tool_calls.result_event_id),
    result_seq = (SELECT e.seq FROM session_events e WHERE e.event_id = tool_calls.result_event_id)
WHERE result_event_id IS NOT NULL;
