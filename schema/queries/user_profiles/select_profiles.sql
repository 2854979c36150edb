-- A page of a workspace's live profiles. `{after}` is the cursor's condition and
-- `{order}` the listing's order (both built from a closed set by the caller): by id, or
-- by name key then id with nameless profiles last in either direction.
-- $1 workspace, $2 limit, then the cursor's values
SELECT {columns}
FROM user_profiles
WHERE workspace_id = $1 AND deleted_at_ms IS NULL {after}
ORDER BY {order}
LIMIT $2
