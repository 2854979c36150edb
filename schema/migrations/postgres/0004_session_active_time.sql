-- `stats.active_seconds`: time the session spent in `running`, kept by the same
-- transactions that commit its status events. `running_since_ms` is set while the
-- session is running; leaving `running` adds the interval to `active_ms`.
ALTER TABLE sessions ADD COLUMN active_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN running_since_ms BIGINT;
