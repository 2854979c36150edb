//! A committed event as a worker's thread history holds it: parsed while it is new,
//! packed once it is folded and cached — its ids, type and body (as the JSON text it
//! prints) in one string — so the history cache holds several times the events in the
//! same memory (`history.rs`).
//!
//! A parsed body is a tree of `serde_json` maps, each a `BTreeMap` node with room for
//! eleven entries: a small event's body weighs about a kilobyte for ~100 bytes of JSON.
//! What a turn reads again of its history's old events is mostly their type, id and
//! position, which a packed event gives without parsing; its body is parsed again only
//! for the reader that asks ([`Event::stored`]).

use std::borrow::Cow;

use agentd_schema::{EventType, StoredEvent};

use crate::heap::{allocation, value_bytes};

/// A committed event of a thread's history.
#[derive(Debug, Clone, PartialEq)]
pub struct Event(Repr);

#[derive(Debug, Clone, PartialEq)]
enum Repr {
    /// As committed or read (boxed, so a packed event's slot in a history is small).
    Parsed(Box<StoredEvent>),
    Packed(Packed),
}

/// An event in one string: `session_id`, `thread_id`, `event_id` and `kind`, one after
/// another, then the body's JSON.
#[derive(Debug, Clone, PartialEq)]
struct Packed {
    seq: i64,
    processed_at_ms: i64,
    text: Box<str>,
    /// Where each of the four strings ends in `text`.
    ends: [u32; 4],
}

impl Packed {
    /// The `i`th string (0 `session_id`, 1 `thread_id`, 2 `event_id`, 3 `kind`), or the
    /// body's JSON (4).
    fn part(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let end = self.ends.get(i).map_or(self.text.len(), |&end| end as usize);
        &self.text[start..end]
    }

    /// `event` packed; `None` when it is too large to be addressed by `u32` offsets.
    fn of(event: &StoredEvent) -> Option<Self> {
        let body = event.body.to_string();
        let parts = [&event.session_id, &event.thread_id, &event.event_id, &event.kind];
        let mut text = String::with_capacity(parts.iter().map(|p| p.len()).sum::<usize>() + body.len());
        let mut ends = [0; 4];
        for (end, part) in ends.iter_mut().zip(parts) {
            text.push_str(part);
            *end = u32::try_from(text.len()).ok()?;
        }
        text.push_str(&body);
        Some(Packed { seq: event.seq, processed_at_ms: event.processed_at_ms, text: text.into_boxed_str(), ends })
    }

    fn unpack(&self) -> StoredEvent {
        StoredEvent {
            session_id: self.part(0).to_owned(),
            seq: self.seq,
            event_id: self.part(2).to_owned(),
            thread_id: self.part(1).to_owned(),
            kind: self.part(3).to_owned(),
            // The text is what a `Value` printed, so it parses back to that value.
            body: serde_json::from_str(self.part(4))
                .unwrap_or_else(|error| unreachable!("a packed body is a printed JSON value ({error})")),
            processed_at_ms: self.processed_at_ms,
        }
    }
}

impl From<StoredEvent> for Event {
    fn from(event: StoredEvent) -> Self {
        Event(Repr::Parsed(Box::new(event)))
    }
}

impl Event {
    /// The event with its body: the event itself while it is parsed, a parsed copy
    /// while it is packed.
    pub fn stored(&self) -> Cow<'_, StoredEvent> {
        match &self.0 {
            Repr::Parsed(event) => Cow::Borrowed(event),
            Repr::Packed(packed) => Cow::Owned(packed.unpack()),
        }
    }

    /// `event`, packed as the history cache keeps it.
    #[cfg(test)]
    pub fn packed(event: StoredEvent) -> Self {
        let mut event = Event::from(event);
        event.pack();
        event
    }

    /// Keeps the event packed from now on (no change when it is already, or when it is
    /// too large to pack).
    pub fn pack(&mut self) {
        if let Repr::Parsed(event) = &self.0
            && let Some(packed) = Packed::of(event)
        {
            self.0 = Repr::Packed(packed);
        }
    }

    /// Whether the event is packed.
    pub fn is_packed(&self) -> bool {
        matches!(self.0, Repr::Packed(_))
    }

    /// The position of the event in its session's history.
    pub fn seq(&self) -> i64 {
        match &self.0 {
            Repr::Parsed(event) => event.seq,
            Repr::Packed(packed) => packed.seq,
        }
    }

    /// The thread it is on.
    pub fn thread_id(&self) -> &str {
        match &self.0 {
            Repr::Parsed(event) => &event.thread_id,
            Repr::Packed(packed) => packed.part(1),
        }
    }

    /// The event's id.
    pub fn event_id(&self) -> &str {
        match &self.0 {
            Repr::Parsed(event) => &event.event_id,
            Repr::Packed(packed) => packed.part(2),
        }
    }

    /// Its type as stored (`EventType` may not know it).
    pub fn kind(&self) -> &str {
        match &self.0 {
            Repr::Parsed(event) => &event.kind,
            Repr::Packed(packed) => packed.part(3),
        }
    }

    /// Its type, `None` for a type this version does not know.
    pub fn event_type(&self) -> Option<EventType> {
        self.kind().parse().ok()
    }

    /// Whether it is of type `kind`.
    pub fn is(&self, kind: EventType) -> bool {
        self.kind() == kind.as_str()
    }

    /// The estimated heap bytes it holds beyond its own slot, each allocation as the
    /// allocator rounds it.
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            Repr::Parsed(event) => {
                allocation(std::mem::size_of::<StoredEvent>())
                    + [&event.session_id, &event.event_id, &event.thread_id, &event.kind]
                        .into_iter()
                        .map(|s| allocation(s.capacity()))
                        .sum::<usize>()
                    + value_bytes(&event.body)
            }
            Repr::Packed(packed) => allocation(packed.text.len()),
        }
    }
}

/// Events of a history as the worker first holds them (parsed).
#[cfg(test)]
pub fn events(stored: impl IntoIterator<Item = StoredEvent>) -> Vec<Event> {
    stored.into_iter().map(Event::from).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn event(body: Value) -> Event {
        Event::from(StoredEvent {
            session_id: "sesn_1".to_owned(),
            seq: 7,
            event_id: "sevt_7".to_owned(),
            thread_id: "sthr_é".to_owned(),
            kind: "agent.message".to_owned(),
            body,
            processed_at_ms: 5,
        })
    }

    #[test]
    fn a_packed_event_reads_as_it_was_and_weighs_less() {
        let body = json!({"type": "agent.message", "content": [{"type": "text", "text": "hello"}],
                          "usage": {"input_tokens": 3, "output_tokens": 1.5, "big": u64::MAX, "neg": -2}});
        let parsed = event(body);
        let mut packed = parsed.clone();
        packed.pack();
        assert!(packed.is_packed() && !parsed.is_packed());
        assert_eq!(packed.stored().as_ref(), parsed.stored().as_ref());
        assert!(matches!(parsed.stored(), Cow::Borrowed(_)));
        assert_eq!((packed.seq(), packed.event_id(), packed.kind()), (7, "sevt_7", "agent.message"));
        assert_eq!(packed.thread_id(), "sthr_é");
        assert!(std::mem::size_of::<Event>() <= 56, "a packed event's slot: {}", std::mem::size_of::<Event>());
        assert!(packed.is(EventType::AgentMessage));
        assert!(
            packed.heap_bytes() * 3 < parsed.heap_bytes(),
            "{} against {}",
            packed.heap_bytes(),
            parsed.heap_bytes()
        );
        // Packing again changes nothing.
        let again = {
            let mut again = packed.clone();
            again.pack();
            again
        };
        assert_eq!(again, packed);
    }
}
