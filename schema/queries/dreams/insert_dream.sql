-- A dream, `pending`. The partial unique indexes of migration 0017 refuse a second open
-- `update_existing` dream on one store (and a second open dream of one policy).
-- $1 id, $2 workspace, $3 memory store, $4 session ids (JSON), $5 model (JSON),
-- $6 instructions, $7 output behavior, $8 policy store or NULL, $9 cutoff or NULL, $10 now
INSERT INTO dreams (id, workspace_id, status, memory_store_id, session_ids, model, instructions, output_behavior,
                    policy_store_id, cutoff_ms, created_at_ms, updated_at_ms)
VALUES ($1, $2, 'pending', $3, $4, $5, $6, $7, $8, $9, $10, $10)
RETURNING id, workspace_id, status, memory_store_id, session_ids, model, instructions, output_behavior, session_id, output_store_id, error, usage, policy_store_id, cutoff_ms, created_at_ms, updated_at_ms, ended_at_ms, archived_at_ms
