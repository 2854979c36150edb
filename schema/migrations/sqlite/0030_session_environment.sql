-- The environment a session runs in, as a column (it is fixed at creation), so admitting
-- a turn reads the session and the state of its agent and environment in one statement
-- (`queries/sessions/select_session_for_turn.sql`).
ALTER TABLE sessions ADD COLUMN environment_id TEXT;

UPDATE sessions SET environment_id = json_extract(body, '$.environment_id');
