-- agentd schema, PostgreSQL dialect. Keep in step with migrations/sqlite/0001_init.sql:
-- the same tables, columns and indexes, differing only in types the dialects spell apart.
-- Times are epoch milliseconds (BIGINT) and wire bodies are JSON text, so one set of
-- queries serves both backends.

CREATE TABLE organizations (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    created_at_ms BIGINT NOT NULL
);

CREATE TABLE workspaces (
    id              TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    name            TEXT NOT NULL,
    created_at_ms   BIGINT NOT NULL,
    archived_at_ms  BIGINT,
    UNIQUE (organization_id, name)
);

-- Only the SHA-256 of a key is stored; `hint` is the last characters, for listings.
CREATE TABLE api_keys (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces (id),
    name            TEXT NOT NULL,
    key_hash        TEXT NOT NULL UNIQUE,
    hint            TEXT NOT NULL,
    created_at_ms   BIGINT NOT NULL,
    revoked_at_ms   BIGINT
);

-- Most managed families: the wire body as JSON, typed columns for what is queried.
CREATE TABLE resources (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL REFERENCES workspaces (id),
    kind           TEXT NOT NULL,
    parent_id      TEXT,
    version        BIGINT NOT NULL,
    body           TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    updated_at_ms  BIGINT NOT NULL,
    archived_at_ms BIGINT
);
CREATE INDEX resources_by_kind ON resources (workspace_id, kind, id);
CREATE INDEX resources_by_parent ON resources (parent_id, kind, id);

-- Immutable snapshots of versioned families (agents, skills, memories, ...).
CREATE TABLE resource_versions (
    resource_id   TEXT NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    version       BIGINT NOT NULL,
    body          TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (resource_id, version)
);

-- `next_seq` is the next event sequence number: allocating a range is one
-- conditional UPDATE, which also serializes appends to one session.
CREATE TABLE sessions (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL REFERENCES workspaces (id),
    status         TEXT NOT NULL,
    body           TEXT NOT NULL,
    next_seq       BIGINT NOT NULL DEFAULT 1,
    created_at_ms  BIGINT NOT NULL,
    updated_at_ms  BIGINT NOT NULL,
    archived_at_ms BIGINT
);
CREATE INDEX sessions_by_workspace ON sessions (workspace_id, id);

CREATE TABLE session_threads (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    parent_id      TEXT,
    body           TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    archived_at_ms BIGINT
);
CREATE INDEX session_threads_by_session ON session_threads (session_id, id);

CREATE TABLE session_events (
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq              BIGINT NOT NULL,
    event_id         TEXT NOT NULL UNIQUE,
    thread_id        TEXT NOT NULL,
    type             TEXT NOT NULL,
    body             TEXT NOT NULL,
    processed_at_ms  BIGINT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX session_events_by_thread ON session_events (thread_id, seq);

-- One row per run. `epoch` is the fencing token: bumped by every claim, checked by
-- every commit. `attempts` counts expired-lease recoveries since the last checkpoint.
CREATE TABLE runs (
    id                  TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    thread_id           TEXT NOT NULL,
    status              TEXT NOT NULL,
    epoch               BIGINT NOT NULL DEFAULT 0,
    generation          BIGINT NOT NULL DEFAULT 0,
    owner               TEXT,
    lease_until_ms      BIGINT,
    attempts            BIGINT NOT NULL DEFAULT 0,
    max_attempts        BIGINT NOT NULL,
    cancel_requested    BIGINT NOT NULL DEFAULT 0,
    outcome             TEXT,
    dead_lettered_at_ms BIGINT,
    created_at_ms       BIGINT NOT NULL,
    updated_at_ms       BIGINT NOT NULL
);
-- At most one attempt of a thread runs at a time.
CREATE UNIQUE INDEX runs_one_leased_per_thread ON runs (thread_id) WHERE status = 'leased';
CREATE INDEX runs_by_thread ON runs (thread_id, created_at_ms);
CREATE INDEX runs_expired_leases ON runs (lease_until_ms) WHERE status = 'leased';

-- Messages to publish after the transaction that wrote them commits.
CREATE TABLE outbox (
    id            BIGSERIAL PRIMARY KEY,
    topic         TEXT NOT NULL,
    msg_id        TEXT NOT NULL,
    payload       BYTEA NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX outbox_by_age ON outbox (created_at_ms);

CREATE TABLE idempotency_keys (
    workspace_id  TEXT NOT NULL,
    key           TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    status_code   BIGINT,
    response      TEXT,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, key)
);
