-- Creates or replaces a model's attributes (its creation time kept).
INSERT INTO model_attributes (workspace_id, model_id, display_name, max_input_tokens, max_tokens, prices,
                              created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
ON CONFLICT (workspace_id, model_id)
DO UPDATE SET display_name = $3, max_input_tokens = $4, max_tokens = $5, prices = $6, updated_at_ms = $7
RETURNING {columns}
