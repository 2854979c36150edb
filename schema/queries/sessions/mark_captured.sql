-- Moves a session's content-capture mark: events up to `$2` are as its level keeps them.
--
-- $1 session id, $2 seq
UPDATE sessions SET captured_through_seq = $2 WHERE id = $1 AND captured_through_seq < $2
