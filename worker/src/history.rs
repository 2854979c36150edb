//! The worker's cache of committed history, so a turn reads only what is new, with its
//! fold (`agent_loop::Folded`), so a turn folds only what is new. Events are cached
//! packed (`event.rs`): their bodies as JSON text, parsed again only if read.

use std::mem::size_of;

use indexmap::IndexMap;
use rand::Rng;

use crate::agent_loop::Folded;
use crate::event::Event;

/// Committed history of recently driven threads. History is append-only and numbered,
/// so a cached copy is always a valid prefix: a turn extends it from its last sequence
/// number instead of re-reading everything (per-turn cost stays flat as history grows).
///
/// Bounded by the estimated memory the cached events hold, so memory stays flat however
/// many sessions a worker serves. Over the bound, threads chosen at random are dropped
/// (and read again in full if they come back). Not the least recently used: sessions
/// taking turns in turn are the common load, and for them least-recently-used is its
/// worst case — once they hold more than the bound, it drops exactly the thread whose
/// turn comes next, and every turn misses. Random eviction keeps a stable share of them
/// cached, and still drops idle threads over time.
#[derive(Debug)]
pub struct HistoryCache {
    max_bytes: usize,
    entries: std::sync::Mutex<CachedHistories>,
}

/// Bytes held (histories and folds), and per thread its history and fold.
#[derive(Debug, Default)]
struct CachedHistories {
    bytes: usize,
    threads: IndexMap<String, Cached>,
}

/// A thread's cached history and its fold (which may lag behind it or be empty:
/// `Folded::update` catches up).
#[derive(Debug, Default)]
pub struct Cached {
    /// The committed history, oldest first.
    pub history: Vec<Event>,
    /// Its fold.
    pub folded: Folded,
    /// The estimated size of the history's first events, so a put weighs only the new.
    pub weight: Weight,
}

impl Cached {
    /// The estimated heap bytes held: the history's and its fold's (the conversation
    /// the fold keeps repeats the history's text).
    fn bytes(&self) -> usize {
        self.weight.bytes + self.folded.heap_bytes()
    }
}

/// The estimated heap size of a history's first `events` events, packed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Weight {
    events: usize,
    bytes: usize,
}

impl Weight {
    /// Brought up to `history`, which extends what was weighed (history only grows; a
    /// shorter one is weighed again), packing the events it weighs: the cache holds them
    /// packed, and the fold has read them.
    fn of(self, history: &mut [Event]) -> Self {
        let from = if self.events <= history.len() { self } else { Weight::default() };
        let new = &mut history[from.events..];
        new.iter_mut().for_each(Event::pack);
        let bytes = new.iter().map(event_bytes).sum::<usize>();
        Weight { events: history.len(), bytes: from.bytes + bytes }
    }

    /// The estimated bytes.
    pub fn bytes(self) -> usize {
        self.bytes
    }
}

impl HistoryCache {
    /// A cache holding histories of about `max_bytes` in all.
    pub fn new(max_bytes: usize) -> Self {
        Self { max_bytes, entries: std::sync::Mutex::default() }
    }

    /// Takes the cached history of `thread_id` (empty when none is cached).
    pub fn take(&self, thread_id: &str) -> Cached {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let cached = entries.threads.swap_remove(thread_id);
        metrics::counter!("agentd_worker_history_cache_total", "outcome" => if cached.is_some() { "hit" } else { "miss" })
            .increment(1);
        let cached = cached.unwrap_or_default();
        entries.bytes -= cached.bytes();
        cached
    }

    /// Gives back `thread_id`'s history after an attempt that completed.
    pub fn put(&self, thread_id: &str, mut cached: Cached) {
        cached.weight = cached.weight.of(&mut cached.history);
        let bytes = cached.bytes();
        if bytes > self.max_bytes {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.bytes += bytes;
        let (mut at, old) = entries.threads.insert_full(thread_id.to_owned(), cached);
        if let Some(old) = old {
            entries.bytes -= old.bytes();
        }
        // Any thread but the one just put: it is the most likely to take the next turn.
        let mut rng = rand::rng();
        while entries.bytes > self.max_bytes && entries.threads.len() > 1 {
            let last = entries.threads.len() - 1;
            let mut victim = rng.random_range(0..last);
            if victim >= at {
                victim += 1;
            }
            let Some((_, dropped)) = entries.threads.swap_remove_index(victim) else { break };
            entries.bytes -= dropped.bytes();
            // `swap_remove` moved the last thread into the victim's place.
            if at == last {
                at = victim;
            }
        }
        metrics::gauge!("agentd_worker_history_cache_bytes").set(entries.bytes as f64);
    }

    /// The estimated bytes held, and how many threads.
    pub fn held(&self) -> (usize, usize) {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        (entries.bytes, entries.threads.len())
    }
}

/// An event's estimated heap size: its slot in the history's `Vec` and what it holds.
fn event_bytes(event: &Event) -> usize {
    size_of::<Event>() + event.heap_bytes()
}

#[cfg(test)]
mod tests {
    use agentd_schema::StoredEvent;

    use super::*;

    fn history(thread: &str, events: usize, text: usize) -> Vec<Event> {
        (1..=events)
            .map(|seq| StoredEvent {
                session_id: "sesn_1".to_owned(),
                seq: seq as i64,
                event_id: format!("sevt_{thread}_{seq}"),
                thread_id: thread.to_owned(),
                kind: "user.message".to_owned(),
                body: serde_json::json!({"content": [{"type": "text", "text": "x".repeat(text)}]}),
                processed_at_ms: 0,
            })
            .map(Event::from)
            .collect()
    }

    fn put(cache: &HistoryCache, thread: &str, events: usize) {
        cache.put(thread, Cached { history: history(thread, events, 1_000), ..Cached::default() });
    }

    #[test]
    fn a_history_comes_back_as_it_was_put_and_leaves_the_cache() {
        let cache = HistoryCache::new(1 << 20);
        put(&cache, "a", 3);
        let taken = cache.take("a");
        assert_eq!(taken.history.len(), 3);
        assert!(taken.history.iter().all(Event::is_packed), "cached packed");
        assert!(taken.weight.bytes() > 3 * 1_000, "{:?}", taken.weight);
        assert_eq!(cache.held(), (0, 0));
        assert!(cache.take("a").history.is_empty());
    }

    #[test]
    fn a_put_weighs_only_what_was_appended_and_matches_weighing_it_whole() {
        let cache = HistoryCache::new(1 << 20);
        put(&cache, "a", 2);
        let mut taken = cache.take("a");
        taken.history.extend(history("a", 5, 1_000).split_off(2));
        cache.put("a", taken);
        let grown = cache.take("a").weight;
        assert_eq!(grown, Weight::default().of(&mut history("a", 5, 1_000)));
    }

    #[test]
    fn the_bound_holds_and_keeps_the_thread_just_put() {
        let one = Weight::default().of(&mut history("t0", 10, 1_000)).bytes();
        let cache = HistoryCache::new(one * 8 + one / 2);
        for i in 0..100 {
            put(&cache, &format!("t{i}"), 10);
            let (bytes, threads) = cache.held();
            assert!(bytes <= one * 8 + one / 2, "{bytes} held after {i}");
            assert_eq!(threads, (i + 1).min(8));
        }
        assert_eq!(cache.take("t99").history.len(), 10);
        // A history larger than the whole bound is not cached.
        put(&cache, "huge", 100);
        assert!(cache.take("huge").history.is_empty());
    }

    #[test]
    fn threads_taking_turns_in_turn_keep_hitting_when_they_outgrow_the_bound() {
        // 16 threads round-robin in a cache that holds 12 of them: least-recently-used
        // would drop each just before its turn and never hit.
        let one = Weight::default().of(&mut history("t0", 10, 1_000)).bytes();
        let cache = HistoryCache::new(one * 12);
        let mut hits = 0;
        for round in 0..20 {
            for i in 0..16 {
                let thread = format!("t{i}");
                let mut cached = cache.take(&thread);
                if round > 0 && !cached.history.is_empty() {
                    hits += 1;
                }
                if cached.history.is_empty() {
                    cached = Cached { history: history(&thread, 10, 1_000), ..Cached::default() };
                }
                cache.put(&thread, cached);
            }
        }
        // 19 rounds × 16 turns; random eviction keeps about 44 % hitting here (118–149 hits
        // in 200 runs).
        assert!(hits > 19 * 16 / 4, "{hits} hits");
    }
}
