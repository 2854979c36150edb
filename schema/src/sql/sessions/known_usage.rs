//! What this process last committed of sessions' usage projection, so that an append
//! that spends writes the new total with its sequence allocation (`allocate_seq.sql`)
//! instead of with a statement of its own. A worker's turn commits the request's start
//! and then the answer that spends: the first commit tells the second what the usage
//! is.
//!
//! Only appends write a session's `usage`, and every append moves its `next_seq`
//! forward, so a usage known at a `next_seq` is the session's usage for as long as
//! `next_seq` has not moved. The allocation writes the offered total only on that
//! condition, and the caller tells from the returned counter whether it did. An entry
//! must therefore be a committed state: callers record one only after their
//! transaction committed (a rolled-back append's counter is reached again by other
//! appends, with another usage). A missing or outdated entry costs the statement it
//! would have saved, never a wrong total.

use std::sync::Mutex;

use hashlink::LruCache;

/// A session's usage projection (JSON text) as it was when its counter was `next_seq`.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::sql) struct Known {
    pub next_seq: i64,
    pub usage: String,
}

/// The last committed [`Known`] of recently appended sessions, least recently used
/// dropped first.
#[derive(Debug)]
pub(in crate::sql) struct KnownUsage {
    entries: Mutex<LruCache<String, Known>>,
}

/// Sessions remembered per process: a few MiB at most, and many more than a worker
/// drives at once.
const CAPACITY: usize = 16_384;

impl Default for KnownUsage {
    fn default() -> Self {
        Self { entries: Mutex::new(LruCache::new(CAPACITY)) }
    }
}

impl KnownUsage {
    /// The last committed usage of `session_id`, if remembered.
    pub(in crate::sql) fn get(&self, session_id: &str) -> Option<Known> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).get(session_id).cloned()
    }

    /// Remembers `known` of `session_id`; call only once the append that saw it has
    /// committed.
    pub(in crate::sql) fn record(&self, session_id: &str, known: Known) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        // A later state is never replaced by an earlier one (commits of one session
        // may be recorded out of order by two tasks).
        if entries.get(session_id).is_none_or(|held| held.next_seq < known.next_seq) {
            entries.insert(session_id.to_owned(), known);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(next_seq: i64, usage: &str) -> Known {
        Known { next_seq, usage: usage.to_owned() }
    }

    #[test]
    fn a_later_state_is_kept_over_an_earlier_one() {
        let cache = KnownUsage::default();
        cache.record("sesn_a", known(5, r#"{"input_tokens":1}"#));
        cache.record("sesn_a", known(3, "{}"));
        assert_eq!(cache.get("sesn_a"), Some(known(5, r#"{"input_tokens":1}"#)));
        cache.record("sesn_a", known(7, r#"{"input_tokens":2}"#));
        assert_eq!(cache.get("sesn_a"), Some(known(7, r#"{"input_tokens":2}"#)));
        assert_eq!(cache.get("sesn_b"), None);
    }

    #[test]
    fn the_least_recently_used_session_is_dropped_at_capacity() {
        let cache = KnownUsage::default();
        for i in 0..=CAPACITY {
            cache.record(&format!("sesn_{i}"), known(1, "{}"));
        }
        assert_eq!(cache.get("sesn_0"), None);
        assert!(cache.get(&format!("sesn_{CAPACITY}")).is_some());
    }
}
