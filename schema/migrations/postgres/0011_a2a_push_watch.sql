-- The A2A push watcher (ADR 0010) looks only at tasks whose session moved on:
-- `watched_seq` is the session sequence it last derived the task's state at, and
-- `updated_at_ms` (touched on every look) orders the tasks it looks at, least recently
-- looked at first, so a batch never starves the rest.
ALTER TABLE a2a_tasks ADD COLUMN watched_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX a2a_tasks_push_watch ON a2a_tasks (updated_at_ms, id);
-- `notified_state` names the input it belongs to, "{input_seq}.{state}", so the same
-- state reached again for a later input is notified again.
UPDATE a2a_tasks SET notified_state = CAST(input_seq AS TEXT) || '.' || notified_state
WHERE notified_state IS NOT NULL;
