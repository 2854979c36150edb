-- Application adapters (AI SDK, AG-UI) address conversations by their own thread ids;
-- each is bound to one session of the workspace on first use, shared by every adapter
-- and the managed API.
CREATE TABLE adapter_threads (
    workspace_id  TEXT NOT NULL,
    thread_key    TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, thread_key)
);
