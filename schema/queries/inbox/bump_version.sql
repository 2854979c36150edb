-- Lock a session row for a live-inbox change (or a take) by bumping its inbox
-- version; zero rows: no such session.
--
-- $1 session id
UPDATE sessions SET inbox_version = inbox_version + 1 WHERE id = $1 RETURNING inbox_version
