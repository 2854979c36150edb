-- Bumps a workspace's config_revision, creating it at 1. The first statement of every
-- configuration write: the row stays locked until commit, so a workspace's
-- configuration writers run one at a time, and pollers see the new revision exactly
-- when the change is visible.
INSERT INTO provider_config_revisions (workspace_id, revision, updated_at_ms)
VALUES ($1, 1, $2)
ON CONFLICT (workspace_id)
DO UPDATE SET revision = provider_config_revisions.revision + 1, updated_at_ms = $2
RETURNING revision
