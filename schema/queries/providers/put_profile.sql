-- Creates or replaces an inference profile (its creation time kept).
INSERT INTO inference_profiles (workspace_id, id, candidates, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, $4)
ON CONFLICT (workspace_id, id)
DO UPDATE SET candidates = $3, updated_at_ms = $4
RETURNING workspace_id, id, candidates, created_at_ms, updated_at_ms
