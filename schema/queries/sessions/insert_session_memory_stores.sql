-- Indexes the memory stores among a session's resources (for `sessions.list`'s
-- `memory_store_id` filter). The caller appends one `($1, $n)` row per store (each once):
-- `VALUES ($1, $2), ($1, $3)`.
--
-- $1 session id, $2.. memory store ids
INSERT INTO session_memory_stores (session_id, memory_store_id) VALUES
