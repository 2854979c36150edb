-- Files and skills (issue 18): metadata here, bytes in the object store (`blob_key`).
--
-- A file row is written before its bytes (`uploading`), made `ready` once they are
-- stored, `expired` (a tombstone answering `file_expired`) or `deleting` once its bytes
-- must go; the sweeper finishes what a crash or a lost client left half done.
CREATE TABLE files (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    filename      TEXT NOT NULL,
    mime_type     TEXT NOT NULL,
    size_bytes    BIGINT NOT NULL,
    downloadable  BIGINT NOT NULL,
    scope_type    TEXT,
    scope_id      TEXT,
    blob_key      TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('uploading', 'ready', 'expired', 'deleting')),
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT,
    changed_at_ms BIGINT NOT NULL
);
CREATE INDEX files_by_workspace ON files (workspace_id, id);
CREATE INDEX files_by_scope ON files (workspace_id, scope_id, id) WHERE scope_id IS NOT NULL;
CREATE INDEX files_expiring ON files (expires_at_ms) WHERE state = 'ready' AND expires_at_ms IS NOT NULL;
CREATE INDEX files_unsettled ON files (changed_at_ms) WHERE state IN ('uploading', 'deleting');

-- A skill: its immutable slug (`name`, unique in its workspace) and its newest version.
CREATE TABLE skills (
    id                TEXT PRIMARY KEY,
    workspace_id      TEXT NOT NULL,
    name              TEXT NOT NULL,
    display_name      TEXT NOT NULL,
    source            TEXT NOT NULL,
    latest_version_id TEXT NOT NULL,
    created_at_ms     BIGINT NOT NULL,
    updated_at_ms     BIGINT NOT NULL
);
CREATE UNIQUE INDEX skills_name ON skills (workspace_id, name);
CREATE INDEX skills_by_workspace ON skills (workspace_id, id);

-- One immutable version of a skill: its front matter, its file list (JSON) and its
-- archive in the object store. Version ids are epoch-microsecond strings, increasing
-- within a skill.
CREATE TABLE skill_versions (
    skill_id      TEXT NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
    id            TEXT NOT NULL,
    workspace_id  TEXT NOT NULL,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL,
    files         TEXT NOT NULL,
    blob_key      TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (skill_id, id)
);
