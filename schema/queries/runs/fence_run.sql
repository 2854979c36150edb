-- Fence a commit: the run write of a transaction that commits under a claim without
-- settling and without appending (a handoff's, an empty commit's). A commit that
-- appends is fenced by its allocation instead (allocate_seq_fenced.*.sql, ADR 0036);
-- settle_run.sql fences a settlement by the same condition.
--
-- Succeeds (one row) only while the presented epoch is still the run's epoch and the
-- run is leased. Being an UPDATE, it holds the run row's lock (Postgres) or the
-- database write lock (SQLite) until the transaction ends, so no claim can bump the
-- epoch between this check and the commit: the check and the write are one atomic
-- step, never check-then-commit. Zero rows means "fenced": the caller rolls back and
-- abandons the run; nothing it meant to write becomes visible.
--
-- The lease's expiry is deliberately not checked: until someone reclaims the run the
-- epoch is still ours, and committing is safe.
--
-- $1 run id, $2 claimed epoch, $3 now (ms)
UPDATE runs
SET updated_at_ms = $3
WHERE id = $1 AND epoch = $2 AND status = 'leased'
RETURNING lease_until_ms
