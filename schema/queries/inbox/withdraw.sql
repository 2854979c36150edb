-- Withdraw one live-inbox message.
--
-- $1 message id
DELETE FROM live_inbox WHERE id = $1
