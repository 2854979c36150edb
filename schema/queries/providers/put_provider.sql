-- Creates or replaces a provider (its creation time kept).
INSERT INTO model_providers (workspace_id, id, kind, display_name, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, $5, $5)
ON CONFLICT (workspace_id, id)
DO UPDATE SET kind = $3, display_name = $4, updated_at_ms = $5
RETURNING workspace_id, id, kind, display_name, created_at_ms, updated_at_ms
