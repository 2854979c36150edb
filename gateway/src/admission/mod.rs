//! Admission: the layers every managed request passes, in order — request id,
//! authentication (trusted workspace scope), then, once routed, the credential's reach
//! over the route's typed ids (`scope`), rate limit, beta selector — before a handler
//! sees it.

pub mod auth;
pub mod beta;
pub mod client;
pub mod cors;
pub mod limiter;
pub mod request_id;
pub mod scope;
pub mod workspace_path;

pub use auth::{Access, Tenant};
