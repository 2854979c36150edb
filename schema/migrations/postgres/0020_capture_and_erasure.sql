-- Content capture and erasure (issue 20, docs/api/user-profiles.md).
--
-- A session may be attributed to a data subject (`user_profile_id`) and keeps its
-- capture decision in its body; `capture_level` repeats the effective level when it is
-- below `full` (NULL: everything is kept). When a turn settles, the append that commits
-- its idle rewrites the events after `captured_through_seq` to what the level keeps and
-- moves the mark, in the same transaction.
ALTER TABLE sessions ADD COLUMN user_profile_id TEXT;
ALTER TABLE sessions ADD COLUMN capture_level TEXT;
ALTER TABLE sessions ADD COLUMN captured_through_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX sessions_by_user_profile ON sessions (workspace_id, user_profile_id)
    WHERE user_profile_id IS NOT NULL;

-- A deployment's sessions: the data subject they are attributed to and the ceiling of
-- their content capture.
ALTER TABLE deployments ADD COLUMN user_profile_id TEXT;
ALTER TABLE deployments ADD COLUMN content_capture_ceiling TEXT;

-- One erasure of a data subject's records: a durable job. It is `running` until every
-- record it found is gone; whoever finds it running (the next request for the same
-- profile, or the sweeper once it is stale) carries it on. `records_removed` grows in
-- the same transaction as each removal, so a resumed job never counts twice.
CREATE TABLE user_profile_erasures (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL,
    user_profile_id  TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('running', 'completed')),
    records_removed  BIGINT NOT NULL DEFAULT 0,
    created_at_ms    BIGINT NOT NULL,
    updated_at_ms    BIGINT NOT NULL,
    completed_at_ms  BIGINT
);
CREATE INDEX user_profile_erasures_by_profile ON user_profile_erasures (workspace_id, user_profile_id, created_at_ms);
CREATE UNIQUE INDEX user_profile_erasures_one_running ON user_profile_erasures (workspace_id, user_profile_id)
    WHERE status = 'running';
CREATE INDEX user_profile_erasures_running ON user_profile_erasures (updated_at_ms) WHERE status = 'running';
