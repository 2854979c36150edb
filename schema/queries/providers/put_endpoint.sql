-- Creates or replaces an endpoint of a provider (its creation time kept).
INSERT INTO provider_endpoints (workspace_id, provider_id, id, base_url, credential_id, credential_pool_id,
                                priority, connect_timeout_ms, request_timeout_ms, created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
ON CONFLICT (workspace_id, provider_id, id)
DO UPDATE SET base_url = $4, credential_id = $5, credential_pool_id = $6, priority = $7,
              connect_timeout_ms = $8, request_timeout_ms = $9, updated_at_ms = $10
RETURNING {columns}
