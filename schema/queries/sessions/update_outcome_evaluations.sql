-- Write a session's body after its `outcome_evaluations` projection changed, in the
-- appending transaction that committed the outcome events (events/outcomes.rs).
--
-- $1 session id, $2 body without its agent (JSON text)
UPDATE sessions
SET body = $2
WHERE id = $1
