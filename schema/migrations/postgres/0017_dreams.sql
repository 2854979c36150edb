-- Dreams (issue 19, docs/api/dreams.md): a dream reads a memory store and sessions'
-- transcripts and writes a reorganized store; it runs as a session of its own (ADR 0016).
--
-- Status moves `pending` → `running` → `completed | failed | canceled`, each step a
-- compare-and-swap on `status`, so a dream ends exactly once. `session_id` and
-- `output_store_id` are recorded by the `pending` → `running` step.
CREATE TABLE dreams (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'canceled')),
    memory_store_id  TEXT NOT NULL,
    session_ids      TEXT NOT NULL,
    model            TEXT NOT NULL,
    instructions     TEXT,
    output_behavior  TEXT NOT NULL CHECK (output_behavior IN ('create_new', 'update_existing')),
    session_id       TEXT,
    output_store_id  TEXT,
    error            TEXT,
    usage            TEXT,
    -- The store whose dream policy scheduled it (NULL for a dream created through the
    -- API), and the time up to which its sessions were considered.
    policy_store_id  TEXT,
    cutoff_ms        BIGINT,
    -- Who is starting it: a gateway claims a pending dream for a while before it creates
    -- the output store and the session, so two gateways never copy into one store.
    start_lease_until_ms BIGINT,
    created_at_ms    BIGINT NOT NULL,
    updated_at_ms    BIGINT NOT NULL,
    ended_at_ms      BIGINT,
    archived_at_ms   BIGINT
);
CREATE INDEX dreams_by_workspace ON dreams (workspace_id, id);
CREATE INDEX dreams_open ON dreams (status, id) WHERE status IN ('pending', 'running');
-- At most one open `update_existing` dream per store, and one open dream per policy:
-- the second insert is a unique violation, whatever the race.
CREATE UNIQUE INDEX dreams_one_update_existing ON dreams (memory_store_id)
    WHERE output_behavior = 'update_existing' AND status IN ('pending', 'running');
CREATE UNIQUE INDEX dreams_one_per_policy ON dreams (policy_store_id)
    WHERE policy_store_id IS NOT NULL AND status IN ('pending', 'running');

-- A memory store's recurring dream (prior-art §2.4). The scheduler claims a due policy
-- by moving `next_due_at_ms` forward in a conditional UPDATE (the row lock), and inserts
-- its dream in the same transaction.
CREATE TABLE dream_policies (
    memory_store_id          TEXT PRIMARY KEY REFERENCES memory_stores (id) ON DELETE CASCADE,
    workspace_id             TEXT NOT NULL,
    enabled                  BIGINT NOT NULL,
    interval_seconds         BIGINT NOT NULL,
    min_new_sessions         BIGINT NOT NULL,
    max_sessions             BIGINT NOT NULL,
    model                    TEXT NOT NULL,
    instructions             TEXT,
    next_due_at_ms           BIGINT,
    last_completed_cutoff_ms BIGINT,
    created_at_ms            BIGINT NOT NULL,
    updated_at_ms            BIGINT NOT NULL
);
CREATE INDEX dream_policies_due ON dream_policies (next_due_at_ms) WHERE enabled = 1;
