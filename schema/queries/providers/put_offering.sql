-- Creates or replaces the offering of a model id (its creation time kept).
INSERT INTO model_offerings (workspace_id, model_id, provider_id, provider_model, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, $5, $5)
ON CONFLICT (workspace_id, model_id)
DO UPDATE SET provider_id = $3, provider_model = $4, updated_at_ms = $5
RETURNING workspace_id, model_id, provider_id, provider_model, created_at_ms, updated_at_ms
