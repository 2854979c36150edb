-- A session's agent is stored once per distinct configuration instead of once per
-- session: sessions reference a snapshot (content-addressed, immutable), so every
-- session of one agent version shares one row, and a session whose agent was
-- overridden or updated references its own. `agent_id`/`agent_version` say which
-- agent version a snapshot came from.
CREATE TABLE agent_snapshots (
    id            TEXT PRIMARY KEY,
    agent_id      TEXT,
    agent_version BIGINT,
    body          TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX agent_snapshots_by_agent ON agent_snapshots (agent_id, agent_version);
ALTER TABLE sessions ADD COLUMN agent_snapshot_id TEXT;
CREATE INDEX sessions_by_agent_snapshot ON sessions (agent_snapshot_id);

-- Existing sessions: one snapshot per distinct embedded agent (named after its
-- oldest session), then the agent leaves the session's body.
INSERT INTO agent_snapshots (id, agent_id, agent_version, body, created_at_ms)
SELECT 'asnap_m' || MIN(id), MIN(agent_id), MIN(agent_version), agent, MIN(created_at_ms)
FROM (
    SELECT id, json_extract(body, '$.agent.id') AS agent_id, json_extract(body, '$.agent.version') AS agent_version,
           json_extract(body, '$.agent') AS agent, created_at_ms
    FROM sessions WHERE json_type(body, '$.agent') = 'object'
) AS embedded
GROUP BY agent;

UPDATE sessions
SET agent_snapshot_id = (
        SELECT a.id FROM agent_snapshots a
        WHERE a.agent_id IS json_extract(sessions.body, '$.agent.id')
          AND a.agent_version IS json_extract(sessions.body, '$.agent.version')
          AND a.body = json_extract(sessions.body, '$.agent')
    ),
    body = json_remove(body, '$.agent')
WHERE json_type(body, '$.agent') = 'object';
