-- Create a session: status and body as given, empty usage, sequence numbers from 1.
-- A taken id violates the primary key (a conflict).
--
-- $1 id, $2 workspace id, $3 status, $4 body without its agent (JSON text), $5 agent id,
-- $6 agent version, $7 now (ms), $8 agent snapshot id or NULL, $9 user profile id or NULL,
-- $10 effective content capture level when below `full`, or NULL, $11 environment id
INSERT INTO sessions (id, workspace_id, status, body, agent_id, agent_version, usage, next_seq, created_at_ms,
                      updated_at_ms, agent_snapshot_id, user_profile_id, capture_level, environment_id)
VALUES ($1, $2, $3, $4, $5, $6, '{}', 1, $7, $7, $8, $9, $10, $11)
RETURNING id, workspace_id, status, body, agent_id, agent_version, usage, next_seq, created_at_ms, updated_at_ms,
          archived_at_ms, active_ms, running_since_ms, inbox_version, resources_revision, agent_snapshot_id, child_threads
