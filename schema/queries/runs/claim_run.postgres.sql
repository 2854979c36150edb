-- claim_run.sqlite.sql in PostgreSQL's dialect: the same claim, with the run's session
-- read by one join of the claimed row instead of a scalar subquery per column (each
-- of which PostgreSQL plans, initialises and runs as an index scan of its own).
--
-- The rules are claim_run.sqlite.sql's: a pending run, or a leased one whose lease
-- expired strictly before now, is claimed; every claim bumps `epoch`; a reclaim spends
-- one attempt. Zero rows: not claimable. A unique violation on
-- runs_one_leased_per_thread: another run of the thread is live. The session columns are
-- NULL when the session is gone (the left join). A claim that waited for the run row's
-- lock reads the session as it was when the statement began, as the outer query keeps
-- the statement's snapshot (see claim_run.sqlite.sql for why the worker may use it).
--
-- $1 run id, $2 owner (unique per worker process), $3 now (ms), $4 lease length (ms)
WITH claimed AS (
    UPDATE runs
    SET status         = 'leased',
        epoch          = epoch + 1,
        owner          = $2,
        lease_until_ms = $3 + $4,
        attempts       = CASE WHEN status = 'leased' THEN attempts + 1 ELSE attempts END,
        updated_at_ms  = $3
    WHERE id = $1
      AND (status = 'pending' OR (status = 'leased' AND lease_until_ms < $3))
    RETURNING session_id, thread_id, epoch, generation, attempts, max_attempts, cancel_requested, pause_requested,
              lease_until_ms
)
SELECT c.session_id, c.thread_id, c.epoch, c.generation, c.attempts, c.max_attempts, c.cancel_requested,
       c.pause_requested, c.lease_until_ms,
       s.id, s.workspace_id, s.status, s.body, s.agent_id, s.agent_version, s.usage, s.next_seq, s.created_at_ms,
       s.updated_at_ms, s.archived_at_ms, s.active_ms, s.running_since_ms, s.inbox_version, s.resources_revision,
       s.agent_snapshot_id, s.child_threads, a.body AS agent_snapshot
FROM claimed c
LEFT JOIN sessions s ON s.id = c.session_id
LEFT JOIN agent_snapshots a ON a.id = s.agent_snapshot_id
