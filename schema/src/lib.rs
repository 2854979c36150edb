//! How agentd stores state: migrations, named queries (the claim and fencing SQL),
//! the store trait and its SQL implementation for PostgreSQL and SQLite.

pub mod blobs;
pub mod budget;
pub mod capture;
pub mod catalog;
pub mod catalogs;
pub mod clock;
pub mod egress;
pub mod error;
pub mod events;
pub mod faults;
pub mod hands;
pub mod ids;
pub mod live;
pub mod memory;
pub mod multiagent;
pub mod oauth;
pub mod outbox;
pub mod rotation;
pub mod scrub;
pub mod secrets;
pub mod sql;
pub mod store;
pub mod tunnels;
pub mod web;
pub mod webhooks;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{StoreError, StoreResult};
pub use events::{ErrorType, EventType, ModelUsage, Permission, RetryStatus, SessionError, StopReason};
pub use sql::{ConnectOptions, SqlStore};
pub use store::*;
