-- Archives a credential; an archived one keeps its first archive time.
UPDATE provider_credentials
SET archived_at_ms = COALESCE(archived_at_ms, $3)
WHERE workspace_id = $1 AND id = $2
RETURNING id, workspace_id, name, sealed, created_at_ms, archived_at_ms
