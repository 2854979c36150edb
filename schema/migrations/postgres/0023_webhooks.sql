-- Webhooks (issue 21, docs/api/webhooks.md): subscriptions of a workspace to lifecycle
-- events, and the durable outbox of their deliveries.
--
-- A subscription is reached through two APIs over the same rows: the control plane's
-- `/v1/config/webhook-subscriptions` (client-chosen ids) and the SDK's organization
-- endpoint API `/v1/organizations/webhooks` (`whep_…` ids). The signing secret is
-- sealed (`secrets.rs`): the deliverer needs it back to sign.
CREATE TABLE webhook_subscriptions (
    workspace_id         TEXT NOT NULL,
    id                   TEXT NOT NULL,
    organization_id      TEXT NOT NULL,
    url                  TEXT NOT NULL,
    name                 TEXT NOT NULL DEFAULT '',
    description          TEXT NOT NULL DEFAULT '',
    secret               TEXT NOT NULL,
    -- 'enabled' | 'disabled'
    state                TEXT NOT NULL,
    disabled_reason      TEXT NOT NULL DEFAULT '',
    consecutive_failures BIGINT NOT NULL DEFAULT 0,
    created_at_ms        BIGINT NOT NULL,
    updated_at_ms        BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, id)
);

-- One row per event type a subscription takes, so the fact's transaction fans out with
-- one join (`insert_deliveries.sql`) in either dialect.
CREATE TABLE webhook_subscription_events (
    workspace_id    TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    PRIMARY KEY (workspace_id, event_type, subscription_id)
);
CREATE INDEX webhook_subscription_events_by_subscription
    ON webhook_subscription_events (workspace_id, subscription_id);

-- The outbox: one row per (event, subscription), written in the transaction of the fact
-- it reports. `id` is `{event_id}.{subscription_id}`; `event_id` is the stable
-- `webhook-id` of every attempt. The payload is rendered from these columns at delivery.
CREATE TABLE webhook_deliveries (
    id                TEXT PRIMARY KEY,
    event_id          TEXT NOT NULL,
    workspace_id      TEXT NOT NULL,
    subscription_id   TEXT NOT NULL,
    organization_id   TEXT NOT NULL,
    event_type        TEXT NOT NULL,
    resource_id       TEXT NOT NULL,
    -- JSON object of the event's other `data` fields (`vault_id`), or NULL.
    extra             TEXT,
    occurred_at_ms    BIGINT NOT NULL,
    -- 'pending' | 'delivered' | 'failed' | 'canceled'
    state             TEXT NOT NULL,
    attempts          BIGINT NOT NULL DEFAULT 0,
    next_attempt_ms   BIGINT NOT NULL,
    lease_until_ms    BIGINT,
    last_status       BIGINT,
    last_error        TEXT,
    updated_at_ms     BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_ms);
CREATE INDEX webhook_deliveries_by_subscription
    ON webhook_deliveries (workspace_id, subscription_id, occurred_at_ms);
