-- A completed dream of a policy: sessions updated up to its cutoff are dreamed over.
-- The cutoff only moves forward. $1 memory store, $2 cutoff, $3 now
UPDATE dream_policies SET last_completed_cutoff_ms = $2, updated_at_ms = $3
WHERE memory_store_id = $1 AND (last_completed_cutoff_ms IS NULL OR last_completed_cutoff_ms < $2)
