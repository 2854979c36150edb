-- Moves the override by compare-and-swap on its version: to a revision (a save) or to
-- none (a clear), and to the next version. The conditional UPDATE takes the row lock; a
-- racing save or clear expecting the same version waits for it and then finds the
-- version changed (PostgreSQL re-checks the WHERE on the new row; SQLite has one
-- writer), so of the writers that saw one version exactly one moves it.
-- $1 workspace, $2 project, $3 definition, $4 revision id or NULL, $5 expected version,
-- $6 now
UPDATE workflow_overrides
SET revision_id = $4, override_version = override_version + 1, updated_at_ms = $6
WHERE workspace_id = $1 AND project = $2 AND definition = $3 AND override_version = $5
RETURNING {columns}
