//! The agentd worker: pulls run submissions, claims runs with epoch fencing and drives
//! the agent loop. The consumer and the agent loop arrive with the sessions issue; the
//! worker role currently serves readiness, metrics, drain, gRPC health and the outbox
//! relay (see `src/roles.rs`).
