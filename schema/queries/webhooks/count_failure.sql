-- One more failed attempt for a subscription; at $4 consecutive failures an enabled
-- subscription is disabled with a reason. Returns the count after the update.
--
-- $1 workspace id, $2 subscription id, $3 now (ms), $4 the count that disables
UPDATE webhook_subscriptions
SET consecutive_failures = consecutive_failures + 1,
    updated_at_ms        = $3,
    state                = CASE WHEN consecutive_failures + 1 >= $4 THEN 'disabled' ELSE state END,
    disabled_reason      = CASE
                               WHEN consecutive_failures + 1 >= $4 AND state = 'enabled'
                               THEN 'disabled after ' || CAST($4 AS TEXT) || ' consecutive failed deliveries'
                               ELSE disabled_reason
                           END
WHERE workspace_id = $1 AND id = $2
RETURNING consecutive_failures
