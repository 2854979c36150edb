-- Binds an environment to one exact policy version, replacing its binding.
-- $1 workspace, $2 environment, $3 policy, $4 version, $5 now
INSERT INTO sandbox_policy_bindings (workspace_id, environment_id, policy_id, version, bound_at_ms)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (workspace_id, environment_id) DO UPDATE
SET policy_id = excluded.policy_id, version = excluded.version, bound_at_ms = excluded.bound_at_ms
RETURNING workspace_id, environment_id, policy_id, version, bound_at_ms
