//! Crash points for fault-injection tests: a process started with
//! `AGENTD_FAULT_CRASH_AT=<point>@<n>` dies abruptly (no destructors, no further I/O)
//! the `n`-th time it reaches `<point>`. Points:
//!
//! - `commit.before` / `settle.before`: the transaction's writes are done, `COMMIT` is
//!   not sent (the database rolls the transaction back when the connection drops);
//! - `commit.after` / `settle.after`: `COMMIT` succeeded, nothing after it ran (no live
//!   publish, no queue ack).
//! - `handoff.before` / `handoff.after`: the same around a `RunStore::handoff`, the
//!   transaction of a step that reaches other threads (ADR 0022).
//! - `rotate_secret.row`: `agentd keys rotate-secret` has just re-sealed one row.
//! - `session.created`: a session's row is committed, its initial events are not
//!   submitted yet (a deployment run's crash window).
//!
//! Unset (the only production setting), a crash point is one relaxed atomic load.
//!
//! Fail points, for tests of supervision: a process started with
//! `AGENTD_FAULT_FAIL_AT=<point>@<n>` fails the first `n` times it reaches `<point>`
//! ([`fail_point`] returns an error). Points: `runner.start` (the in-process runner of
//! `agentd dev`), `consumer.start`, `outbox_relay.start`.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

struct Armed {
    point: String,
    at: u64,
    hits: AtomicU64,
}

/// The point armed by the environment variable `var` (`<point>@<n>`, `n` 1 when left out).
fn arm(var: &str, what: &str) -> Option<Armed> {
    let spec = std::env::var(var).ok()?;
    let (point, at) = spec.split_once('@').unwrap_or((spec.as_str(), "1"));
    let at = at.parse().unwrap_or(1);
    tracing::warn!(point, at, "fault injection armed: this process will {what} on purpose");
    Some(Armed { point: point.to_owned(), at, hits: AtomicU64::new(0) })
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED.get_or_init(|| arm("AGENTD_FAULT_CRASH_AT", "crash")).as_ref()
}

/// Dies here if this point is armed and its count is reached.
pub fn crash_point(point: &str) {
    let Some(armed) = armed() else { return };
    if armed.point == point && armed.hits.fetch_add(1, Ordering::Relaxed) + 1 == armed.at {
        eprintln!("agentd: fault injection: crashing at {point}");
        std::process::abort();
    }
}

/// `Err` the first `n` times `point` is reached when `AGENTD_FAULT_FAIL_AT=<point>@<n>`
/// is set; `Ok` otherwise.
pub fn fail_point(point: &str) -> Result<(), String> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    match ARMED.get_or_init(|| arm("AGENTD_FAULT_FAIL_AT", "fail")) {
        Some(armed) if armed.point == point && armed.hits.fetch_add(1, Ordering::Relaxed) < armed.at => {
            Err(format!("fault injection: {point} failed on purpose (AGENTD_FAULT_FAIL_AT)"))
        }
        _ => Ok(()),
    }
}
