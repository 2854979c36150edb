-- Whether a session's live inbox holds a message.
--
-- $1 session id
SELECT id FROM live_inbox WHERE session_id = $1 LIMIT 1
