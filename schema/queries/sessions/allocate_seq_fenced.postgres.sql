-- allocate_seq.sql fenced by the claim it commits under, in one statement (PostgreSQL):
-- the fence of fence_run.sql folded into the allocation of the commit it guards.
--
-- The placeholder below is replaced by allocate_seq.sql (the store does it once). The
-- fence locks the run row (FOR UPDATE), so no claim can bump the epoch between this
-- check and the commit.
-- It reads from `allocated`, so the session row is locked first and the run row after:
-- the lock order of every transaction (allocate_seq.sql). A reclaim that bumped the
-- epoch while this statement waited for the run row is seen by the re-check of the
-- locked row: `fence_held` is 0 and the caller rolls back.
--
-- $1–$7 as allocate_seq.sql, $8 run id, $9 claimed epoch
WITH allocated AS (
{allocate_seq}
),
fence AS (
    SELECT r.id FROM runs r, allocated
    WHERE r.id = $8 AND r.epoch = $9 AND r.status = 'leased'
    FOR UPDATE OF r
)
SELECT allocated.*, (SELECT COUNT(*) FROM fence) AS fence_held
FROM allocated
