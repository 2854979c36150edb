UPDATE files SET state = $3, changed_at_ms = $4 WHERE id = $1 AND state = $2
