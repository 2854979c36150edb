-- Keep one version of a versioned resource as an immutable snapshot.
--
-- $1 resource id, $2 version, $3 body (JSON text), $4 now (ms)
INSERT INTO resource_versions (resource_id, version, body, created_at_ms) VALUES ($1, $2, $3, $4)
