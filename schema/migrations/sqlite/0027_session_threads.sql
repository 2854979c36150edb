-- Session threads (ADR 0022): subagents run as child threads of one session, each with
-- its own run. A thread's row carries its projections, kept by the transaction that
-- commits its events (`sql/session_threads.rs`): `status` (from `session.status_*` on
-- the primary, `session.thread_status_*` on a child), `stop_reason` (the last idle's,
-- JSON), `usage` (JSON, from its spans) and its running clock (`active_ms`,
-- `running_since_ms`, as `sessions` keeps it). A child's `agent_snapshot_id` names the
-- content-addressed `agent_snapshots` row it runs (the primary runs the session's
-- agent); `awaited_by` is the parent's `tool_use_id` waiting for the child's reply.
--
-- While `sessions.child_threads` is 0 the primary's row is not kept (single-agent turns
-- pay no statement for it): reads take the session's projections instead, and the
-- first spawn copies them into the row.
ALTER TABLE session_threads ADD COLUMN status TEXT NOT NULL DEFAULT 'idle';
ALTER TABLE session_threads ADD COLUMN stop_reason TEXT;
ALTER TABLE session_threads ADD COLUMN agent_name TEXT;
ALTER TABLE session_threads ADD COLUMN agent_snapshot_id TEXT;
ALTER TABLE session_threads ADD COLUMN awaited_by TEXT;
ALTER TABLE session_threads ADD COLUMN usage TEXT NOT NULL DEFAULT '{}';
ALTER TABLE session_threads ADD COLUMN active_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE session_threads ADD COLUMN running_since_ms BIGINT;
ALTER TABLE session_threads ADD COLUMN updated_at_ms BIGINT NOT NULL DEFAULT 0;
UPDATE session_threads SET updated_at_ms = created_at_ms;

-- How many child threads the session has; 0 keeps the single-agent path (the status
-- projection in allocate_seq.sql itself).
ALTER TABLE sessions ADD COLUMN child_threads BIGINT NOT NULL DEFAULT 0;
