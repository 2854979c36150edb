-- Forgets the memory stores of a session's resources, before they are written again
-- (a replacement of its resources) or with the session (its deletion).
--
-- $1 session id
DELETE FROM session_memory_stores WHERE session_id = $1
