-- The workspace that owns an agent id, in any workspace: a draft may name only an agent
-- of its own workspace or an id no agent has (read by the primary key of `resources`).
-- $1 agent id
SELECT workspace_id FROM resources WHERE id = $1 AND kind = 'agent'
