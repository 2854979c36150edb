-- Session columns the API filters on, and the usage projection kept up to date by the
-- same transactions that commit span.model_request_end events.
ALTER TABLE sessions ADD COLUMN agent_id TEXT;
ALTER TABLE sessions ADD COLUMN agent_version BIGINT;
ALTER TABLE sessions ADD COLUMN usage TEXT NOT NULL DEFAULT '{}';
CREATE INDEX sessions_by_created ON sessions (workspace_id, created_at_ms, id);
CREATE INDEX sessions_by_agent ON sessions (agent_id, agent_version);
CREATE INDEX session_events_by_type ON session_events (session_id, type, seq);
