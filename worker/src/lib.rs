//! The agentd worker: pulls run submissions, claims runs with epoch fencing, drives
//! the agent loop (a state machine over committed history, `agent_loop`) with model
//! providers (`providers`), and commits every step under its claim (`run`).

pub mod a2a;
pub mod agent_loop;
pub mod attachments;
pub mod budget;
pub mod consumer;
pub mod credentials;
pub mod dream_memory;
pub mod event;
mod heap;
pub mod history;
pub mod mcp;
pub mod providers;
pub mod remote;
pub mod run;
pub mod signals;
pub mod threads;
pub mod web;
