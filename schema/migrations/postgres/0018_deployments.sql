-- Deployments and deployment runs (issue 20, docs/api/deployments.md): an agent bound to
-- an environment, initial events and an optional cron schedule; each fire is an
-- append-only run that records the session it created or a typed error.
--
-- A schedule fires each slot once across any number of gateways: the scheduler claims
-- a slot by moving `next_slot_ms` forward in a conditional UPDATE (`claim_slot.sql`,
-- the row lock) and inserts the slot's run in the same transaction; the unique
-- (deployment_id, scheduled_at_ms) index refuses a second run for a slot whatever the race.
CREATE TABLE deployments (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL,
    organization_id     TEXT NOT NULL,
    name                TEXT NOT NULL,
    description         TEXT,
    agent_id            TEXT NOT NULL,
    agent_version       BIGINT NOT NULL,
    environment_id      TEXT NOT NULL,
    initial_events      TEXT NOT NULL,
    resources           TEXT NOT NULL,
    vault_ids           TEXT NOT NULL,
    metadata            TEXT NOT NULL,
    budget              TEXT,
    -- The cron schedule (both or neither), and the next slot it fires (NULL: manual
    -- only, or archived).
    schedule_expression TEXT,
    schedule_timezone   TEXT,
    next_slot_ms        BIGINT,
    last_run_at_ms      BIGINT,
    -- `{"type":"manual"}` or `{"type":"error","error":{…}}` while paused.
    paused_reason       TEXT,
    created_at_ms       BIGINT NOT NULL,
    updated_at_ms       BIGINT NOT NULL,
    archived_at_ms      BIGINT
);
CREATE INDEX deployments_by_workspace ON deployments (workspace_id, id);
CREATE INDEX deployments_due ON deployments (next_slot_ms)
    WHERE next_slot_ms IS NOT NULL AND paused_reason IS NULL AND archived_at_ms IS NULL;

CREATE TABLE deployment_runs (
    id                 TEXT PRIMARY KEY,
    workspace_id       TEXT NOT NULL,
    deployment_id      TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    agent              TEXT NOT NULL,
    trigger_type       TEXT NOT NULL CHECK (trigger_type IN ('schedule', 'manual')),
    scheduled_at_ms    BIGINT,
    -- The session the run creates, derived from the run's id before it is created (so
    -- a retry finds it); `session_id` is set once it exists, `error` when it could not
    -- be created. Sessions listed by `deployment_id` are those named here.
    planned_session_id TEXT NOT NULL,
    session_id         TEXT,
    error              TEXT,
    created_at_ms      BIGINT NOT NULL
);
CREATE UNIQUE INDEX deployment_runs_one_per_slot ON deployment_runs (deployment_id, scheduled_at_ms);
CREATE INDEX deployment_runs_by_workspace ON deployment_runs (workspace_id, id);
CREATE INDEX deployment_runs_by_deployment ON deployment_runs (deployment_id, planned_session_id);
CREATE INDEX deployment_runs_pending ON deployment_runs (created_at_ms)
    WHERE session_id IS NULL AND error IS NULL;
