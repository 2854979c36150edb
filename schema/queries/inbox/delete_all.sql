-- Empty a session's live inbox (after taking it into a commit).
--
-- $1 session id
DELETE FROM live_inbox WHERE session_id = $1
