-- Takes the store's row lock for the rest of the transaction (writers of one store go
-- one at a time) and moves its memory count by $3 (+1 create, -1 delete, 0 update);
-- a refused write rolls the change back with everything else.
UPDATE memory_stores SET memory_count = memory_count + $3
WHERE workspace_id = $1 AND id = $2
RETURNING archived_at_ms, memory_count
