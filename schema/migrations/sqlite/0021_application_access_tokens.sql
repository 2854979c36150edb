-- Application access tokens (issue 21, docs/api/app-tokens.md): short-lived bearer
-- tokens for browser apps, restricted to adapter protocols, operations and the threads
-- they bind to sessions. Only the token's SHA-256 is kept; the token is shown once.
CREATE TABLE application_access_tokens (
    id                TEXT PRIMARY KEY,
    workspace_id      TEXT NOT NULL,
    organization_id   TEXT NOT NULL,
    token_sha256      TEXT NOT NULL UNIQUE,
    authority_id      TEXT NOT NULL,
    application_scope TEXT NOT NULL,
    actor_key         TEXT,
    -- JSON arrays: protocols, operations, and {external_thread_id, managed_session_id}.
    protocols         TEXT NOT NULL,
    operations        TEXT NOT NULL,
    thread_bindings   TEXT NOT NULL,
    created_at_ms     BIGINT NOT NULL,
    expires_at_ms     BIGINT NOT NULL
);
CREATE INDEX application_access_tokens_by_workspace ON application_access_tokens (workspace_id, id);
CREATE INDEX application_access_tokens_expiring ON application_access_tokens (expires_at_ms);
