-- Claim one run for one attempt: the fencing token is minted here. SQLite's dialect;
-- claim_run.postgres.sql is the same claim with the session read by one join.
--
-- A run is claimable when it is `pending` (fresh work, or new input after a checkpoint)
-- or `leased` with a lease that expired strictly before now (its holder is presumed
-- dead). Every claim bumps `epoch`; commits presented with an older epoch are rejected
-- by fence_run.sql. Reclaiming an expired lease is a recovery and spends one attempt
-- of the retry budget; a fresh claim does not. A run with a durable cancel intent is
-- still claimed: the worker must commit its cancelled outcome under the claim.
--
-- Zero rows: the run is settled, unknown, or held by a live lease (see run_status.sql).
-- A unique violation on runs_one_leased_per_thread: another run of the thread is live.
--
-- It returns the run's session too, as `select_session.sql` reads it (all NULL when the
-- session is gone), so the attempt starts without a read of its own. On PostgreSQL a
-- claim that waited for the run row's lock sees the session as it was when the
-- statement began (other rows keep the statement's snapshot): the worker uses it only
-- once its history read shows that nothing was appended since (`Attempt::steps`).
--
-- $1 run id, $2 owner (unique per worker process), $3 now (ms), $4 lease length (ms)
UPDATE runs
SET status         = 'leased',
    epoch          = epoch + 1,
    owner          = $2,
    lease_until_ms = $3 + $4,
    attempts       = CASE WHEN status = 'leased' THEN attempts + 1 ELSE attempts END,
    updated_at_ms  = $3
WHERE id = $1
  AND (status = 'pending' OR (status = 'leased' AND lease_until_ms < $3))
RETURNING session_id, thread_id, epoch, generation, attempts, max_attempts, cancel_requested, pause_requested, lease_until_ms,
          (SELECT s.id FROM sessions s WHERE s.id = runs.session_id) AS id,
          (SELECT s.workspace_id FROM sessions s WHERE s.id = runs.session_id) AS workspace_id,
          (SELECT s.status FROM sessions s WHERE s.id = runs.session_id) AS status,
          (SELECT s.body FROM sessions s WHERE s.id = runs.session_id) AS body,
          (SELECT s.agent_id FROM sessions s WHERE s.id = runs.session_id) AS agent_id,
          (SELECT s.agent_version FROM sessions s WHERE s.id = runs.session_id) AS agent_version,
          (SELECT s.usage FROM sessions s WHERE s.id = runs.session_id) AS usage,
          (SELECT s.next_seq FROM sessions s WHERE s.id = runs.session_id) AS next_seq,
          (SELECT s.created_at_ms FROM sessions s WHERE s.id = runs.session_id) AS created_at_ms,
          (SELECT s.updated_at_ms FROM sessions s WHERE s.id = runs.session_id) AS updated_at_ms,
          (SELECT s.archived_at_ms FROM sessions s WHERE s.id = runs.session_id) AS archived_at_ms,
          (SELECT s.active_ms FROM sessions s WHERE s.id = runs.session_id) AS active_ms,
          (SELECT s.running_since_ms FROM sessions s WHERE s.id = runs.session_id) AS running_since_ms,
          (SELECT s.inbox_version FROM sessions s WHERE s.id = runs.session_id) AS inbox_version,
          (SELECT s.resources_revision FROM sessions s WHERE s.id = runs.session_id) AS resources_revision,
          (SELECT s.agent_snapshot_id FROM sessions s WHERE s.id = runs.session_id) AS agent_snapshot_id,
          (SELECT s.child_threads FROM sessions s WHERE s.id = runs.session_id) AS child_threads,
          (SELECT a.body FROM sessions s JOIN agent_snapshots a ON a.id = s.agent_snapshot_id
           WHERE s.id = runs.session_id) AS agent_snapshot
