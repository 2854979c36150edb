-- Writes one fact to the outbox: a pending delivery for every enabled subscription of
-- the workspace that takes its type. Runs in the transaction of the fact; inserts
-- nothing when no subscription takes it.
--
-- $1 event id, $2 workspace id, $3 event type, $4 resource id, $5 extra (JSON or NULL),
-- $6 now (ms)
INSERT INTO webhook_deliveries
    (id, event_id, workspace_id, subscription_id, organization_id, event_type, resource_id, extra,
     occurred_at_ms, state, attempts, next_attempt_ms, updated_at_ms)
SELECT CAST($1 AS TEXT) || '.' || s.id, $1, s.workspace_id, s.id, s.organization_id, $3, $4, $5,
       $6, 'pending', 0, $6, $6
FROM webhook_subscriptions s
JOIN webhook_subscription_events e ON e.workspace_id = s.workspace_id AND e.subscription_id = s.id
WHERE s.workspace_id = $2 AND e.event_type = $3 AND s.state = 'enabled'
