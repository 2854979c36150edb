//! How agentd processes talk: prost messages, the queue and bus seams with their
//! JetStream / Redis / in-process implementations, the transport-neutral error code,
//! and the gRPC health service.

pub mod bus;
pub mod code;
pub mod health;
pub mod lifecycle;
pub mod queue;

/// Generated prost types from `proto/agentd.proto`.
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/agentd.v1.rs"));
}

pub use bus::memory::MemoryBus;
pub use bus::redis::RedisBus;
pub use bus::{Bus, BusError, BusItem, Subscription};
pub use code::Code;
pub use lifecycle::Lifecycle;
pub use queue::jetstream::JetStreamQueue;
pub use queue::memory::MemoryQueue;
pub use queue::{Delivery, Queue, QueueConfig, QueueError};
