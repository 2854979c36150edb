-- The revision of a session's resources: bumped by every change to them (the managed
-- `sessions.resources` routes and the manifest replace), the `If-Match` precondition
-- of `PUT /v1/ext/sessions/{id}/resources`.
ALTER TABLE sessions ADD COLUMN resources_revision BIGINT NOT NULL DEFAULT 1;
