-- Replace one live-inbox message's content.
--
-- $1 content (JSON text), $2 message id
UPDATE live_inbox SET content = $1 WHERE id = $2
