-- Agent drafts and publications (issue 21 item 1, docs/api/config.md): a workspace's
-- working copy of an agent's configuration, stored as written, and the immutable record
-- of each configuration published as a version of its agent, keyed by the SHA-256 of
-- its canonical JSON.
CREATE TABLE agent_drafts (
    workspace_id  TEXT NOT NULL,
    agent_id      TEXT NOT NULL,
    -- The configuration as written (JSON object; may be invalid until published).
    body          TEXT NOT NULL,
    revision      BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, agent_id)
);

CREATE TABLE agent_publications (
    workspace_id  TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    agent_id      TEXT NOT NULL,
    -- The agent's version that carried this content when it was first published.
    agent_version BIGINT NOT NULL,
    -- The normalized configuration (JSON object).
    config        TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, fingerprint)
);
CREATE INDEX agent_publications_by_agent ON agent_publications (workspace_id, agent_id, created_at_ms);
