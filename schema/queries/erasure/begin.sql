-- Starts an erasure of a profile unless one is running (the partial unique index keeps
-- one running job per profile, so two racing requests share it).
--
-- $1 id, $2 workspace id, $3 user profile id, $4 now (ms)
INSERT INTO user_profile_erasures (id, workspace_id, user_profile_id, status, records_removed, created_at_ms,
                                   updated_at_ms)
VALUES ($1, $2, $3, 'running', 0, $4, $4)
ON CONFLICT DO NOTHING
