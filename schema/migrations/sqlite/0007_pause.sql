-- Durable pause intent (`/v1/durable/threads/{thread}/pause`): the live attempt parks
-- at its next step boundary; an awaiting run with the flag is a paused ticket that only
-- `resume` (or new user input) clears.
ALTER TABLE runs ADD COLUMN pause_requested BIGINT NOT NULL DEFAULT 0;
