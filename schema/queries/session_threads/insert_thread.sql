-- Create a child thread, `running` from now (a child starts at once: its run is made
-- runnable in the same handoff). Its id derives from the spawning call, so a repeated
-- spawn violates the primary key (a conflict) instead of making a second thread.
--
-- $1 thread id, $2 session id, $3 parent thread id, $4 agent snapshot id, $5 agent name,
-- $6 now (ms)
INSERT INTO session_threads (id, session_id, parent_id, body, status, agent_name, agent_snapshot_id, usage,
                             active_ms, running_since_ms, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, '{}', 'running', $5, $4, '{}', 0, $6, $6, $6)
