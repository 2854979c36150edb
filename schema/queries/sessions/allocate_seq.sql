-- Allocate `$2` consecutive event sequence numbers of a session: the returned
-- `next_seq` is one past the last allocated number. The UPDATE also serializes
-- concurrent appends to one session, so sequence order is commit order.
--
-- While the session has no child threads the same statement keeps the status
-- projection: `$4` is the status of the primary thread's last `session.status_*` event
-- of the append (NULL: unchanged). Entering `running` starts the running-time clock;
-- leaving it adds the elapsed time to `active_ms`. (Every expression reads the row as
-- it was before the UPDATE.) With child threads the session's status is the aggregate
-- of its threads' (ADR 0022 §7): `$4` is ignored, and the returned `child_threads`
-- tells the caller to keep the thread rows and project the session from them
-- (`sql/session_threads.rs`).
--
-- Lock order: every transaction that touches both locks the session row first, then
-- the thread rows, then the run row (fence_run.sql), so two writers never wait on each
-- other in a cycle.
--
-- It returns the session's content capture (`capture_level`, `captured_through_seq`) so
-- an append that ends a turn knows what to keep of it (see `sessions::append`), and
-- how many enabled webhook subscriptions its workspace has, so an append reports its
-- lifecycle facts to the outbox only when someone listens (no statement otherwise).
-- For the outcomes projection (events/outcomes.rs) it returns the session's `status` (an
-- outcome defined while it runs is taken up by the turn under way) and, only when the
-- append makes the primary thread `running`, whether the body shows an outcome still
-- `pending` (`$5`, the text its entry has): the turn starts work on it, and the append
-- reads and writes the body then. Any other append reads nothing more. The live inbox's
-- `inbox_version` tells a worker ending a turn whether messages were queued meanwhile
-- (`RunStore::settle_if_current`).
--
-- The usage projection may be written here too, saving `update_usage.sql`: `$7` is the
-- new total the caller computed from the usage the session had when `next_seq` was `$6`
-- (`sessions/known_usage.rs`). Only appends write `usage`, and every append moves
-- `next_seq` forward, so a session whose `next_seq` is still `$6` still has that usage:
-- the total is written exactly then. The caller tells from the returned `next_seq`
-- whether it was (`next_seq - $2 = $6`) and otherwise adds to the returned `usage`.
--
-- $1 session id, $2 count, $3 now (ms), $4 new status or NULL, $5 LIKE pattern of a
-- pending outcome, $6 the `next_seq` the caller's usage was read at or NULL, $7 the
-- usage to write if it still is (JSON text) or NULL
UPDATE sessions
SET next_seq         = next_seq + $2,
    usage            = CASE WHEN next_seq = $6 THEN $7 ELSE usage END,
    updated_at_ms    = $3,
    status           = CASE WHEN child_threads = 0 THEN COALESCE($4, status) ELSE status END,
    active_ms        = CASE
                           WHEN child_threads = 0 AND $4 IS NOT NULL AND $4 <> 'running'
                                AND running_since_ms IS NOT NULL AND $3 > running_since_ms
                           THEN active_ms + ($3 - running_since_ms)
                           ELSE active_ms
                       END,
    running_since_ms = CASE
                           WHEN child_threads > 0 OR $4 IS NULL THEN running_since_ms
                           WHEN $4 = 'running' THEN COALESCE(running_since_ms, $3)
                           ELSE NULL
                       END
WHERE id = $1
RETURNING next_seq, usage, capture_level, captured_through_seq, workspace_id, child_threads, status, inbox_version,
          (SELECT COUNT(*) FROM webhook_subscriptions w
           WHERE w.workspace_id = sessions.workspace_id AND w.state = 'enabled') AS webhook_subscriptions,
          CAST(CASE WHEN $4 = 'running' THEN CASE WHEN body LIKE $5 THEN 1 ELSE 0 END ELSE 0 END AS BIGINT)
              AS outcomes_pending
