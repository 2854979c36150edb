//! A committed event as a worker's thread history holds it: parsed while it is new,
//! packed once it is folded and cached (its body kept as the JSON text it prints), so
//! the history cache holds several times the events in the same memory (`history.rs`).
//!
//! A parsed body is a tree of `serde_json` maps, each a `BTreeMap` node with room for
//! eleven entries: a small event's body weighs about a kilobyte for ~100 bytes of JSON.
//! What a turn reads again of its history's old events is mostly their type, id and
//! position, which a packed event keeps as they are; its body is parsed again only for
//! the reader that asks ([`Event::stored`]).

use std::borrow::Cow;

use agentd_schema::{EventType, StoredEvent};

use crate::heap::{allocation, value_bytes};

/// A committed event of a thread's history.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The event; its body is `null` while it is packed.
    event: StoredEvent,
    /// The body as JSON text, while it is packed.
    packed: Option<Box<str>>,
}

impl From<StoredEvent> for Event {
    fn from(event: StoredEvent) -> Self {
        Event { event, packed: None }
    }
}

impl Event {
    /// The event with its body: the event itself while it is parsed, a parsed copy
    /// while it is packed.
    pub fn stored(&self) -> Cow<'_, StoredEvent> {
        match &self.packed {
            None => Cow::Borrowed(&self.event),
            Some(text) => Cow::Owned(StoredEvent {
                // The text is what a `Value` printed, so it parses back to that value.
                body: serde_json::from_str(text)
                    .unwrap_or_else(|error| unreachable!("a packed body is a printed JSON value ({error})")),
                ..self.event.clone()
            }),
        }
    }

    /// Keeps the body as its JSON text from now on (no change when it is already).
    pub fn pack(&mut self) {
        if self.packed.is_none() {
            let body = std::mem::take(&mut self.event.body);
            self.packed = Some(body.to_string().into_boxed_str());
        }
    }

    /// Whether the body is kept as text.
    pub fn is_packed(&self) -> bool {
        self.packed.is_some()
    }

    /// The position of the event in its session's history.
    pub fn seq(&self) -> i64 {
        self.event.seq
    }

    /// The event's id.
    pub fn event_id(&self) -> &str {
        &self.event.event_id
    }

    /// The thread it is on.
    pub fn thread_id(&self) -> &str {
        &self.event.thread_id
    }

    /// Its type as stored (`EventType` may not know it).
    pub fn kind(&self) -> &str {
        &self.event.kind
    }

    /// Its type, `None` for a type this version does not know.
    pub fn event_type(&self) -> Option<EventType> {
        self.event.event_type()
    }

    /// Whether it is of type `kind`.
    pub fn is(&self, kind: EventType) -> bool {
        self.event.is(kind)
    }

    /// The estimated heap bytes it holds beyond its own slot: its strings and its body,
    /// each allocation as the allocator rounds it.
    pub fn heap_bytes(&self) -> usize {
        let event = &self.event;
        [&event.session_id, &event.event_id, &event.thread_id, &event.kind]
            .into_iter()
            .map(|s| allocation(s.capacity()))
            .sum::<usize>()
            + value_bytes(&event.body)
            + self.packed.as_ref().map_or(0, |text| allocation(text.len()))
    }
}

/// Events of a history as the worker holds them.
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
            thread_id: "sesn_1".to_owned(),
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
