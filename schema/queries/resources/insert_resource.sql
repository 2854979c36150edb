-- Create a resource at version 1; a taken id violates the primary key (a conflict).
--
-- $1 id, $2 workspace id, $3 kind, $4 parent id or NULL, $5 body (JSON text), $6 now (ms)
INSERT INTO resources (id, workspace_id, kind, parent_id, version, body, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, 1, $5, $6, $6)
RETURNING id, workspace_id, kind, parent_id, version, body, created_at_ms, updated_at_ms, archived_at_ms
