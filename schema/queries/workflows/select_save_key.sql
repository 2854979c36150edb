-- A recorded save and its revision.
-- $1 workspace, $2 project, $3 definition, $4 key
SELECT k.request_sha256, k.reused, k.override_version, k.override_updated_at_ms,
       r.id, r.project, r.definition, r.content_sha256, r.declaration, r.resolved, r.created_at_ms
FROM workflow_save_keys k
JOIN workflow_revisions r
  ON r.workspace_id = k.workspace_id AND r.project = k.project AND r.definition = k.definition
 AND r.id = k.revision_id
WHERE k.workspace_id = $1 AND k.project = $2 AND k.definition = $3 AND k.idempotency_key = $4
