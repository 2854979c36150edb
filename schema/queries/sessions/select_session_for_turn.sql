-- One session of a workspace with its agent snapshot (as select_session.sql) and the
-- state of the agent and the environment its row names, without their bodies: what
-- admitting a turn checks, in one read. A `*_state_id` of NULL: the row names none, or
-- the workspace has no such resource (the caller tells them apart by the named id).
--
-- $1 session id, $2 workspace id
SELECT s.id, s.workspace_id, s.status, s.body, s.agent_id, s.agent_version, s.usage, s.next_seq, s.created_at_ms,
       s.updated_at_ms, s.archived_at_ms, s.active_ms, s.running_since_ms, s.inbox_version, s.resources_revision,
       s.agent_snapshot_id, s.child_threads,
       (SELECT snapshot.body FROM agent_snapshots snapshot WHERE snapshot.id = s.agent_snapshot_id) AS agent_snapshot,
       s.environment_id,
       agent.id AS agent_state_id, agent.archived_at_ms AS agent_archived_at_ms, agent.disabled AS agent_disabled,
       environment.id AS environment_state_id, environment.archived_at_ms AS environment_archived_at_ms,
       environment.disabled AS environment_disabled
FROM sessions s
LEFT JOIN resources agent
       ON agent.id = s.agent_id AND agent.workspace_id = s.workspace_id AND agent.kind = 'agent'
LEFT JOIN resources environment
       ON environment.id = s.environment_id AND environment.workspace_id = s.workspace_id
      AND environment.kind = 'environment'
WHERE s.id = $1 AND s.workspace_id = $2
