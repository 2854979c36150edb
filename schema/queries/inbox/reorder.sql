-- Move one live-inbox message to a position (a reorder writes every message's position
-- in the transaction that checked the new order is a permutation of the current one).
--
-- $1 position (from 1), $2 message id
UPDATE live_inbox SET position = $1 WHERE id = $2
