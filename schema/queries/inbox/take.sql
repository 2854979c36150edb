-- Take a session's live inbox into a commit: the messages in delivery order. Runs in
-- the committing transaction after its session row was locked (inbox_version bumped),
-- so no inbox change interleaves; the caller then deletes them (delete_all.sql) and
-- commits them as `user.message` events in the same transaction.
--
-- $1 session id
SELECT id, content, created_at_ms FROM live_inbox WHERE session_id = $1 ORDER BY position, id
