-- User profiles (issue 20, docs/api/user-profiles.md): the entities a platform serves
-- through the API (an end user of its product, or a company it resells to), with the
-- details the platform states about them and the consent the entity gives on agentd's
-- consent page (per purpose: granted or withdrawn, and when).
--
-- A deleted profile is a tombstone (`deleted_at_ms`): never listed, 404 to the API, and
-- still found by id so that erasure and consent decisions can tell "deleted" from
-- "never existed". Updates are compare-and-swaps on `revision` (a metadata merge reads,
-- merges and writes only if nothing changed since); a consent answer is one UPDATE of
-- its purpose's columns.
CREATE TABLE user_profiles (
    id                                 TEXT PRIMARY KEY,
    workspace_id                       TEXT NOT NULL,
    organization_id                    TEXT NOT NULL,
    name                               TEXT,
    -- The name with ASCII letters lowercased: the `order_by=name` key, compared byte by
    -- byte (PostgreSQL's "C" collation, SQLite's default BINARY) so both dialects order
    -- alike. NULL when nameless.
    name_key                           TEXT,
    access_type                        TEXT NOT NULL CHECK (access_type IN ('application', 'passthrough')),
    -- `external_user_details` (the legacy `external_id` is `reference_id`, the legacy
    -- `external_user_onboarded_at` is `onboarded_at_ms`).
    reference_id                       TEXT,
    onboarded_at_ms                    BIGINT,
    account_status                     TEXT CHECK (account_status IN ('active', 'suspended', 'blocked')),
    country                            TEXT,
    email_hash                         TEXT,
    entity_type                        TEXT CHECK (entity_type IN ('individual', 'business', 'non_profit', 'government')),
    name_hash                          TEXT,
    metadata                           TEXT NOT NULL,
    -- Consent per purpose: 1 granted, 0 withdrawn, NULL never answered; and when.
    consent_conversation_content       BIGINT CHECK (consent_conversation_content IN (0, 1)),
    consent_conversation_content_at_ms BIGINT,
    consent_activity_record            BIGINT CHECK (consent_activity_record IN (0, 1)),
    consent_activity_record_at_ms      BIGINT,
    revision                           BIGINT NOT NULL,
    created_at_ms                      BIGINT NOT NULL,
    updated_at_ms                      BIGINT NOT NULL,
    deleted_at_ms                      BIGINT
);
CREATE INDEX user_profiles_by_workspace ON user_profiles (workspace_id, id) WHERE deleted_at_ms IS NULL;
CREATE INDEX user_profiles_by_name ON user_profiles (workspace_id, name_key, id) WHERE deleted_at_ms IS NULL;
