//! The worker's cache of committed history, so a turn reads only what is new, with its
//! fold (`agent_loop::Folded`), so a turn folds only what is new.

use agentd_schema::StoredEvent;

use crate::agent_loop::Folded;

/// Committed history of recently driven threads. History is append-only and numbered,
/// so a cached copy is always a valid prefix: a turn extends it from its last sequence
/// number instead of re-reading everything (per-turn cost stays flat as history grows).
/// Bounded by the total number of events held, so memory stays flat however many
/// sessions a worker serves: the least recently used threads are dropped first (and
/// read again in full if they come back).
#[derive(Debug)]
pub struct HistoryCache {
    max_events: usize,
    entries: std::sync::Mutex<CachedHistories>,
}

/// Use counter, events held, and per thread (last use, history and its fold).
#[derive(Debug, Default)]
struct CachedHistories {
    tick: u64,
    events: usize,
    threads: std::collections::HashMap<String, (u64, Cached)>,
}

/// A thread's cached history and its fold (which may lag behind it or be empty:
/// `Folded::update` catches up).
#[derive(Debug, Default)]
pub struct Cached {
    /// The committed history, oldest first.
    pub history: Vec<StoredEvent>,
    /// Its fold.
    pub folded: Folded,
}

impl HistoryCache {
    /// A cache holding at most `max_events` events across all threads.
    pub fn new(max_events: usize) -> Self {
        Self { max_events, entries: std::sync::Mutex::default() }
    }

    /// Takes the cached history of `thread_id` (empty when none is cached).
    pub fn take(&self, thread_id: &str) -> Cached {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let cached = entries.threads.remove(thread_id).map(|(_, cached)| cached).unwrap_or_default();
        entries.events -= cached.history.len();
        cached
    }

    /// Gives back `thread_id`'s history after an attempt that completed.
    pub fn put(&self, thread_id: &str, cached: Cached) {
        if cached.history.len() > self.max_events {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.tick += 1;
        let tick = entries.tick;
        entries.events += cached.history.len();
        if let Some((_, old)) = entries.threads.insert(thread_id.to_owned(), (tick, cached)) {
            entries.events -= old.history.len();
        }
        while entries.events > self.max_events {
            let Some(oldest) = entries.threads.iter().min_by_key(|(_, (t, _))| *t).map(|(k, _)| k.clone()) else {
                break;
            };
            if let Some((_, dropped)) = entries.threads.remove(&oldest) {
                entries.events -= dropped.history.len();
            }
        }
    }
}
