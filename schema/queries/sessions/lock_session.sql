-- Lock a session row (the first write of a transaction that commits nothing else to
-- it), so writers of one session serialize as they do when appending. Zero rows: no
-- such session.
--
-- $1 session id, $2 now (ms)
UPDATE sessions SET updated_at_ms = $2 WHERE id = $1
