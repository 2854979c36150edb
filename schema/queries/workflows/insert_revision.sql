-- Creates a revision unless the definition has one with its id (its content address):
-- identical content reuses the row, which never changes. A concurrent insert of the same
-- content waits on the primary key and then inserts nothing.
-- $1 workspace, $2 project, $3 definition, $4 id, $5 content sha256, $6 declaration,
-- $7 resolved, $8 now
INSERT INTO workflow_revisions (workspace_id, project, definition, id, content_sha256, declaration, resolved,
                                created_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT DO NOTHING
RETURNING {columns}
