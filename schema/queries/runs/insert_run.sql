-- Create a thread's run for input that found no open run: `pending`, epoch 0 (the
-- first claim mints epoch 1), generation 1 (the first queue message is run_id:1).
--
-- $1 run id, $2 session id, $3 thread id, $4 retry budget, $5 now (ms)
INSERT INTO runs (id, session_id, thread_id, status, epoch, generation, attempts, max_attempts, cancel_requested,
                  created_at_ms, updated_at_ms)
VALUES ($1, $2, $3, 'pending', 0, 1, 0, $4, 0, $5, $5)
