-- The first save of a definition in a project (expected override version 0): creates
-- the override at version 1. A concurrent first save waits on the primary key and then
-- inserts nothing (its compare-and-swap fails).
-- $1 workspace, $2 project, $3 definition, $4 revision id, $5 now
INSERT INTO workflow_overrides (workspace_id, project, definition, revision_id, override_version, updated_at_ms)
VALUES ($1, $2, $3, $4, 1, $5)
ON CONFLICT DO NOTHING
RETURNING {columns}
