-- Store an agent snapshot. Snapshots are content-addressed (the id is a hash of the
-- body), so writing one that exists is a no-op.
--
-- $1 snapshot id, $2 agent id, $3 agent version, $4 body (JSON text), $5 now (ms)
INSERT INTO agent_snapshots (id, agent_id, agent_version, body, created_at_ms)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO NOTHING
