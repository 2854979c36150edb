-- Records one purpose's consent answer and when, in one statement: a concurrent field
-- update or another purpose's answer is neither lost nor overwritten (`{purpose}` is the
-- purpose's column, chosen from a closed set by the caller).
-- $1 workspace, $2 id, $3 granted (1) or withdrawn (0), $4 now
UPDATE user_profiles
SET consent_{purpose} = $3, consent_{purpose}_at_ms = $4, revision = revision + 1, updated_at_ms = $4
WHERE workspace_id = $1 AND id = $2 AND deleted_at_ms IS NULL
RETURNING {columns}
