-- Sandbox execution policies (issue 23 item 1, docs/api/sandbox-policies.md): versioned
-- policies whose versions never change once written, and each environment's binding to
-- one exact version. The built-in presets (`standard`, `locked-down`) are not stored.

-- One row per version. The current version of a policy is its highest; a new version
-- is inserted only as current + 1, and the primary key makes racing writers of the same
-- version conflict.
CREATE TABLE sandbox_policy_versions (
    workspace_id     TEXT NOT NULL,
    policy_id        TEXT NOT NULL,
    version          BIGINT NOT NULL,
    -- JSON: the validated `config` (`isolation`, `limits`).
    config           TEXT NOT NULL,
    -- `eager`.
    provisioning     TEXT NOT NULL,
    -- JSON `idle_retention` or NULL.
    idle_retention   TEXT,
    -- 0/1: a disabled version cannot be newly bound.
    disabled         BIGINT NOT NULL,
    created_at_ms    BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, policy_id, version)
);

-- At most one binding per environment; it pins an exact version.
CREATE TABLE sandbox_policy_bindings (
    workspace_id     TEXT NOT NULL,
    environment_id   TEXT NOT NULL,
    policy_id        TEXT NOT NULL,
    version          BIGINT NOT NULL,
    bound_at_ms      BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, environment_id)
);
