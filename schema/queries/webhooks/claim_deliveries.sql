-- Claims up to $3 due pending deliveries for a lease ending at $2, counting one attempt
-- each. The due condition is repeated outside the subquery so that, on PostgreSQL, a
-- concurrent claimer re-checks it on the row it waited for and skips it.
--
-- $1 now (ms), $2 lease end (ms), $3 limit
UPDATE webhook_deliveries
SET lease_until_ms = $2, attempts = attempts + 1, updated_at_ms = $1
WHERE id IN (SELECT id FROM webhook_deliveries
             WHERE state = 'pending' AND next_attempt_ms <= $1
               AND (lease_until_ms IS NULL OR lease_until_ms < $1)
             ORDER BY next_attempt_ms
             LIMIT $3)
  AND state = 'pending' AND next_attempt_ms <= $1
  AND (lease_until_ms IS NULL OR lease_until_ms < $1)
RETURNING id, event_id, workspace_id, subscription_id, organization_id, event_type, resource_id, extra,
          occurred_at_ms, state, attempts, next_attempt_ms, last_status, last_error, updated_at_ms
