-- Agent memory (issue 19): memory stores, their memories (text at a path) and the
-- versions recording every change to a memory and who made it.
--
-- Every write to a memory first locks its store's row (bumping nothing but taking the
-- lock), so the writers of one store are serialized: `memory_count` enforces the cap,
-- the unique index the path, and `content_sha256` the precondition, on committed state.
-- Paths compare bytewise (SQLite's default BINARY here, `COLLATE "C"` on PostgreSQL), so a
-- directory's memories are one contiguous range of the path index.
CREATE TABLE memory_stores (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL,
    name           TEXT NOT NULL,
    description    TEXT NOT NULL,
    metadata       TEXT NOT NULL,
    memory_count   BIGINT NOT NULL DEFAULT 0,
    revision       BIGINT NOT NULL DEFAULT 0,
    archived_at_ms BIGINT,
    created_at_ms  BIGINT NOT NULL,
    updated_at_ms  BIGINT NOT NULL
);
CREATE INDEX memory_stores_by_workspace ON memory_stores (workspace_id, id);

CREATE TABLE memories (
    id                 TEXT PRIMARY KEY,
    memory_store_id    TEXT NOT NULL REFERENCES memory_stores (id) ON DELETE CASCADE,
    workspace_id       TEXT NOT NULL,
    path               TEXT NOT NULL,
    content            TEXT NOT NULL,
    content_sha256     TEXT NOT NULL,
    content_size_bytes BIGINT NOT NULL,
    memory_version_id  TEXT NOT NULL,
    created_at_ms      BIGINT NOT NULL,
    updated_at_ms      BIGINT NOT NULL
);
CREATE UNIQUE INDEX memories_path ON memories (memory_store_id, path);

-- Versions stay after their memory is deleted (`memory_id` is not a foreign key) and go
-- with their store.
CREATE TABLE memory_versions (
    id                 TEXT PRIMARY KEY,
    memory_store_id    TEXT NOT NULL REFERENCES memory_stores (id) ON DELETE CASCADE,
    workspace_id       TEXT NOT NULL,
    memory_id          TEXT NOT NULL,
    operation          TEXT NOT NULL CHECK (operation IN ('created', 'modified', 'deleted')),
    path               TEXT,
    content            TEXT,
    content_sha256     TEXT,
    content_size_bytes BIGINT,
    actor_type         TEXT NOT NULL,
    actor_id           TEXT NOT NULL,
    redacted_at_ms     BIGINT,
    redacted_by_type   TEXT,
    redacted_by_id     TEXT,
    created_at_ms      BIGINT NOT NULL
);
CREATE INDEX memory_versions_by_store ON memory_versions (memory_store_id, id);
CREATE INDEX memory_versions_by_memory ON memory_versions (memory_store_id, memory_id, id);

-- The memory stores a session has among its resources (for `sessions.list(memory_store_id=…)`),
-- kept by every write of the session's resources.
CREATE TABLE session_memory_stores (
    session_id      TEXT NOT NULL,
    memory_store_id TEXT NOT NULL,
    PRIMARY KEY (memory_store_id, session_id)
);
CREATE INDEX session_memory_stores_by_session ON session_memory_stores (session_id);
