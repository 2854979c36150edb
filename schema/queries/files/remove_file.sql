DELETE FROM files WHERE id = $1 AND state = $2
