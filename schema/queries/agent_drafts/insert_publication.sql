-- Records a publication once: a second publication of the same content (same
-- fingerprint) writes nothing and returns no row, and the caller reads the first.
-- $1 workspace, $2 fingerprint, $3 agent id, $4 agent version, $5 config (JSON), $6 now
INSERT INTO agent_publications (workspace_id, fingerprint, agent_id, agent_version, config, created_at_ms)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (workspace_id, fingerprint) DO NOTHING
RETURNING {columns}
