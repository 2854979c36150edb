-- Creates a workspace's draft of an agent at revision 1, or replaces its body and bumps
-- its revision (last write wins; the primary key serializes concurrent writers).
-- $1 workspace, $2 agent id, $3 body (JSON), $4 now
INSERT INTO agent_drafts (workspace_id, agent_id, body, revision, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, 1, $4, $4)
ON CONFLICT (workspace_id, agent_id) DO UPDATE
SET body = excluded.body, revision = agent_drafts.revision + 1, updated_at_ms = excluded.updated_at_ms
RETURNING {columns}
