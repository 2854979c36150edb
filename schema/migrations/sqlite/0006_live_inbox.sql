-- The live inbox: user messages queued for a session's live run, delivered (committed
-- as `user.message`) at the run's next model request. `inbox_version` counts changes
-- to a session's inbox; every change locks the session row first.
ALTER TABLE sessions ADD COLUMN inbox_version BIGINT NOT NULL DEFAULT 0;
CREATE TABLE live_inbox (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL,
    position      BIGINT NOT NULL,
    content       TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX live_inbox_by_session ON live_inbox (session_id, position);
