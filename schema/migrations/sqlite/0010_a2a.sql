-- A2A (docs/api/a2a.md, ADR 0010). A task is one A2A exchange on a context (an adapter
-- thread bound to a session): the input that started it, the run it landed in, and the
-- committed events from `first_seq` until the turn that answers its latest input
-- (`input_seq`) ends. Its state is derived from those events, never stored.
CREATE TABLE a2a_tasks (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL,
    context_id     TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    run_id         TEXT NOT NULL,
    first_seq      BIGINT NOT NULL,
    input_seq      BIGINT NOT NULL,
    canceled       BIGINT NOT NULL DEFAULT 0,
    -- The last state whose push notifications were enqueued (push watcher only).
    notified_state TEXT,
    created_at_ms  BIGINT NOT NULL,
    updated_at_ms  BIGINT NOT NULL
);
CREATE INDEX a2a_tasks_by_workspace ON a2a_tasks (workspace_id, created_at_ms, id);
CREATE INDEX a2a_tasks_by_context ON a2a_tasks (workspace_id, context_id, created_at_ms);

-- Push notification configs per task; `auth_credentials` is sealed (write-only).
CREATE TABLE a2a_push_configs (
    task_id          TEXT NOT NULL,
    id               TEXT NOT NULL,
    workspace_id     TEXT NOT NULL,
    url              TEXT NOT NULL,
    token            TEXT,
    auth_scheme      TEXT,
    auth_credentials TEXT,
    created_at_ms    BIGINT NOT NULL,
    PRIMARY KEY (task_id, id)
);

-- Notifications to deliver, at least once: claimed under a lease by one gateway,
-- retried with backoff, dropped after the last attempt. `id` is the stable
-- notification id (the `webhook-id` header).
CREATE TABLE a2a_push_deliveries (
    id              TEXT PRIMARY KEY,
    task_id         TEXT NOT NULL,
    config_id       TEXT NOT NULL,
    payload         TEXT NOT NULL,
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_ms BIGINT NOT NULL,
    lease_until_ms  BIGINT,
    created_at_ms   BIGINT NOT NULL
);
CREATE INDEX a2a_push_deliveries_due ON a2a_push_deliveries (next_attempt_ms);

-- A short lease per context while a new task is checked for and started, so two
-- messages racing onto one context cannot both start a task. A holder that dies
-- leaves a lease that simply expires.
CREATE TABLE a2a_context_locks (
    workspace_id TEXT NOT NULL,
    context_id   TEXT NOT NULL,
    holder       TEXT NOT NULL,
    until_ms     BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, context_id)
);
