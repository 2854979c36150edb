-- Whether a resource's body has `disabled_at` set (agents: `agents.disable`), as a
-- column, so admitting a turn reads the agent's and environment's state in one small
-- statement without fetching and parsing their bodies.
ALTER TABLE resources
    ADD COLUMN disabled BIGINT NOT NULL
    GENERATED ALWAYS AS (
        CASE WHEN jsonb_typeof(body::jsonb -> 'disabled_at') IS NULL
                  OR jsonb_typeof(body::jsonb -> 'disabled_at') = 'null'
             THEN 0 ELSE 1 END
    ) STORED;
