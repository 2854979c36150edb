-- Writes one version of a sandbox policy. The primary key (workspace, policy, version)
-- makes two writers of the same version conflict: exactly one wins.
-- $1 workspace, $2 policy, $3 version, $4 config (JSON), $5 provisioning,
-- $6 idle_retention (JSON or NULL), $7 disabled (0/1), $8 now
INSERT INTO sandbox_policy_versions
    (workspace_id, policy_id, version, config, provisioning, idle_retention, disabled, created_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING {columns}
