-- The state of a few resources of one workspace, without their bodies: what admitting
-- a turn checks of the session's agent and environment (`disabled` is kept from the
-- body's `disabled_at` by migration 0014).
--
-- $1 workspace id; {pairs}: `(kind = $n AND id = $n+1)` per resource, joined by OR
SELECT id, kind, archived_at_ms, disabled
FROM resources
WHERE workspace_id = $1 AND ({pairs})
