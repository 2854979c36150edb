-- Model providers, the model catalog's configuration and provider credentials (issue 21
-- item 2, docs/api/config.md "Providers, models and credentials"). Everything is scoped
-- to a workspace: API keys are workspace keys, and one workspace's configuration must
-- never route another workspace's conversations. Keep in step with
-- migrations/postgres/0024_providers.sql.

-- One row per configured workspace; `revision` is bumped in the transaction of every
-- change below, so a process keeps its effective catalog current by polling this table.
CREATE TABLE provider_config_revisions (
    workspace_id  TEXT PRIMARY KEY,
    revision      BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);

CREATE TABLE model_providers (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL,
    -- `anthropic` | `openai_compatible`
    kind          TEXT NOT NULL,
    display_name  TEXT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, id)
);

-- Where a provider is reached. The first endpoint by (priority, id) serves.
CREATE TABLE provider_endpoints (
    workspace_id       TEXT NOT NULL,
    provider_id        TEXT NOT NULL,
    id                 TEXT NOT NULL,
    base_url           TEXT NOT NULL,
    -- At most one of the two: a credential (`pcrd_…`) or a credential pool.
    credential_id      TEXT,
    credential_pool_id TEXT,
    priority           BIGINT NOT NULL,
    connect_timeout_ms BIGINT,
    request_timeout_ms BIGINT,
    created_at_ms      BIGINT NOT NULL,
    updated_at_ms      BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, provider_id, id)
);

-- Which provider serves a model id, and under which name upstream.
CREATE TABLE model_offerings (
    workspace_id   TEXT NOT NULL,
    model_id       TEXT NOT NULL,
    provider_id    TEXT NOT NULL,
    provider_model TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    updated_at_ms  BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, model_id)
);

-- How a model is described and priced; NULL columns keep the bootstrap's value.
CREATE TABLE model_attributes (
    workspace_id     TEXT NOT NULL,
    model_id         TEXT NOT NULL,
    display_name     TEXT,
    max_input_tokens BIGINT,
    max_tokens       BIGINT,
    -- JSON: micro-USD per million tokens (and per web request), as the catalog's `Prices`.
    prices           TEXT,
    created_at_ms    BIGINT NOT NULL,
    updated_at_ms    BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, model_id)
);

-- Write-only secrets, sealed with the process key for owner `id` (like vault credentials).
CREATE TABLE provider_credentials (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL,
    name           TEXT NOT NULL,
    sealed         TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    archived_at_ms BIGINT
);
CREATE INDEX provider_credentials_by_workspace ON provider_credentials (workspace_id, id);

CREATE TABLE credential_pools (
    workspace_id   TEXT NOT NULL,
    id             TEXT NOT NULL,
    -- JSON array of credential ids, in the order they are tried.
    credential_ids TEXT NOT NULL,
    cooldown_ms    BIGINT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    updated_at_ms  BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, id)
);

CREATE TABLE inference_profiles (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL,
    -- JSON array of model ids, in the order they are tried.
    candidates    TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, id)
);
