-- Record tool uses in the tool-call ledger, in the transaction that appends them: one
-- statement for every use of the batch.
--
-- The caller appends one row `($1, $n, $n+1, $n+2, $n+3, $n+4, $n+5)` per use to the
-- VALUES list below. A use id is its event id, unique across sessions, so a row is
-- never written twice (a repeated event id fails the append itself).
--
-- $1 session id; per use: tool use id (event id), thread id, use kind (event type),
-- tool name, evaluated permission or NULL, use seq
INSERT INTO tool_calls (session_id, tool_use_id, thread_id, use_kind, name, evaluated_permission, use_seq)
VALUES
