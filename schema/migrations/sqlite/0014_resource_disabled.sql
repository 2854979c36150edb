-- Whether a resource's body has `disabled_at` set (agents: `agents.disable`), as a
-- column, so admitting a turn reads the agent's and environment's state in one small
-- statement without fetching and parsing their bodies. SQLite cannot add a stored
-- generated column to an existing table, so triggers keep it (PostgreSQL: generated).
ALTER TABLE resources ADD COLUMN disabled BIGINT NOT NULL DEFAULT 0;

UPDATE resources
SET disabled = CASE WHEN json_type(body, '$.disabled_at') IS NULL OR json_type(body, '$.disabled_at') = 'null'
                    THEN 0 ELSE 1 END;

CREATE TRIGGER resources_disabled_on_insert AFTER INSERT ON resources
BEGIN
    UPDATE resources
    SET disabled = CASE WHEN json_type(NEW.body, '$.disabled_at') IS NULL
                             OR json_type(NEW.body, '$.disabled_at') = 'null'
                        THEN 0 ELSE 1 END
    WHERE id = NEW.id;
END;

CREATE TRIGGER resources_disabled_on_update AFTER UPDATE OF body ON resources
BEGIN
    UPDATE resources
    SET disabled = CASE WHEN json_type(NEW.body, '$.disabled_at') IS NULL
                             OR json_type(NEW.body, '$.disabled_at') = 'null'
                        THEN 0 ELSE 1 END
    WHERE id = NEW.id;
END;
