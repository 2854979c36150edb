-- Claims the start of a pending dream (creating its output store and session) for a
-- while, so racing gateways do not start it together; an expired claim (its gateway
-- died) may be taken over, and the start's steps are idempotent.
-- $1 id, $2 now, $3 claim until
UPDATE dreams SET start_lease_until_ms = $3
WHERE id = $1 AND status = 'pending' AND (start_lease_until_ms IS NULL OR start_lease_until_ms < $2)
