-- Workflow revisions (issue 23 item 3, docs/api/workflows.md): a project's workflow
-- definitions saved as immutable, content-addressed revisions; the project override, a
-- pointer to one revision moved by compare-and-swap on its version; and the record of
-- each idempotency key's first successful save, so a replay answers what it answered.
-- `project` and `definition` are the caller's slugs, namespaces inside a workspace.
CREATE TABLE workflow_revisions (
    workspace_id   TEXT NOT NULL,
    project        TEXT NOT NULL,
    definition     TEXT NOT NULL,
    -- `wfrev_` + content_sha256: the revision is its content, and never changes.
    id             TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    -- The validated declaration (JSON object), as written.
    declaration    TEXT NOT NULL,
    -- What its author references resolved to at save time (JSON object).
    resolved       TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, project, definition, id)
);

-- One row per (project, definition) once a revision of it was saved; a cleared override
-- keeps its row (revision_id NULL) so the version keeps increasing and is never reused.
CREATE TABLE workflow_overrides (
    workspace_id     TEXT NOT NULL,
    project          TEXT NOT NULL,
    definition       TEXT NOT NULL,
    revision_id      TEXT,
    override_version BIGINT NOT NULL,
    updated_at_ms    BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, project, definition)
);

-- A save's idempotency key, claimed first in the saving transaction (a concurrent save
-- with the same key waits on this primary key, then replays); the result columns are
-- written by the same transaction, so a committed row always has them.
CREATE TABLE workflow_save_keys (
    workspace_id           TEXT NOT NULL,
    project                TEXT NOT NULL,
    definition             TEXT NOT NULL,
    idempotency_key        TEXT NOT NULL,
    -- SHA-256 of the canonical JSON of the request body: the same key with another body
    -- is refused.
    request_sha256         TEXT NOT NULL,
    revision_id            TEXT,
    reused                 BIGINT,
    override_version       BIGINT,
    override_updated_at_ms BIGINT,
    created_at_ms          BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, project, definition, idempotency_key)
);
