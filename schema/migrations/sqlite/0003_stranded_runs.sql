-- Finding runs whose queue message may be gone (pending too long, or leased past an
-- expired lease) must not scan every run.
CREATE INDEX runs_pending_since ON runs (updated_at_ms) WHERE status = 'pending';
