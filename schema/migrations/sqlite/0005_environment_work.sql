-- Hands: environment keys and the per-environment work queue of the self-hosted
-- environment work protocol (spec: environments.work.*).

-- `api` keys act on a workspace; `environment` keys only on their environment's work
-- queue and its sessions; `runner` keys on every `cloud` environment of the workspace.
ALTER TABLE api_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'api';
ALTER TABLE api_keys ADD COLUMN environment_id TEXT;

-- One work item per stretch of a session needing hands. `state`: queued → starting
-- (ack) → active (first heartbeat) → stopping → stopped. A queued item is "pending"
-- while offered (polled, not acked) since `offered_at_ms`. `token_hash` is the hash of
-- the sessions token handed out with the current offer; it authenticates until the
-- item stops or is offered again. `last_heartbeat` is the exact string the worker
-- must echo. `offers` counts lease losses after an ack (the give-up policy).
CREATE TABLE work_items (
    id                     TEXT PRIMARY KEY,
    workspace_id           TEXT NOT NULL,
    environment_id         TEXT NOT NULL,
    session_id             TEXT NOT NULL,
    hands                  TEXT NOT NULL,
    state                  TEXT NOT NULL,
    metadata               TEXT NOT NULL DEFAULT '{}',
    token_hash             TEXT,
    offered_at_ms          BIGINT,
    lost_leases            BIGINT NOT NULL DEFAULT 0,
    last_heartbeat         TEXT,
    ttl_seconds            BIGINT NOT NULL DEFAULT 30,
    lease_until_ms         BIGINT,
    created_at_ms          BIGINT NOT NULL,
    acknowledged_at_ms     BIGINT,
    started_at_ms          BIGINT,
    latest_heartbeat_at_ms BIGINT,
    stop_requested_at_ms   BIGINT,
    stopped_at_ms          BIGINT
);
CREATE UNIQUE INDEX work_items_one_open_per_session ON work_items (session_id) WHERE state <> 'stopped';
CREATE INDEX work_items_queue ON work_items (environment_id, state, created_at_ms);
CREATE INDEX work_items_hands ON work_items (workspace_id, hands, state, created_at_ms);
CREATE INDEX work_items_token ON work_items (token_hash);
CREATE INDEX work_items_leases ON work_items (state, lease_until_ms);

-- Who polled an environment lately (`workers_polling` in the queue stats).
CREATE TABLE work_pollers (
    environment_id TEXT NOT NULL,
    worker_id      TEXT NOT NULL,
    polled_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (environment_id, worker_id)
);
