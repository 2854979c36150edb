-- allocate_seq.sql fenced by the claim it commits under, in one statement (SQLite):
-- the fence of fence_run.sql folded into the allocation of the commit it guards.
--
-- The placeholder below is replaced by allocate_seq.sql (the store does it once); this
-- adds one returned column. The UPDATE holds the database's write lock, which the
-- transaction keeps until it ends, so the run row read here cannot change before the
-- commit: no claim can bump the epoch between this check and the commit. `fence_held`
-- 0: the caller rolls back.
--
-- $1–$7 as allocate_seq.sql, $8 run id, $9 claimed epoch
{allocate_seq},
          (SELECT COUNT(*) FROM runs r WHERE r.id = $8 AND r.epoch = $9 AND r.status = 'leased') AS fence_held
