//! The one follower of a session under every adapter (ADR 0007): committed events in
//! order, merged with the worker's previews of what the model is writing.
//!
//! Committed history is authoritative. A preview (`event_start` / `event_delta` on the
//! session's bus channel, the frames `event_deltas[]` serves on the managed stream)
//! names the id its event will be committed under. It is shown only until that id is
//! committed; then the translator learns whether what it showed is a prefix of the
//! committed text (send the rest) or not (correct it in its protocol's way). A preview
//! whose model request ends, or is superseded, without committing it is dropped. So a
//! client ends with exactly the committed text whatever it saw live: after a
//! reconnect, a lost bus message, or a worker that died mid-message.

use std::collections::HashSet;
use std::time::Duration;

use agentd_proto::v1::{Committed, LiveEvent, live_event};
use agentd_proto::{BusItem, Subscription};
use agentd_schema::events::EventType;
use agentd_schema::{EventQuery, StoredEvent, live};
use futures::StreamExt;
use prost::Message;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{HISTORY_UNAVAILABLE, text_of};
use crate::AppState;
use crate::domain::session_threads;

/// What a preview is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An `agent.message`.
    Message,
    /// An `agent.thinking`.
    Thinking,
}

impl Kind {
    fn of(event_type: &str) -> Option<Self> {
        match event_type.parse().ok()? {
            EventType::AgentMessage => Some(Self::Message),
            EventType::AgentThinking => Some(Self::Thinking),
            _ => None,
        }
    }
}

/// A change to what a stream shows live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Preview {
    /// The model began the event that will be committed as `id`.
    Open { id: String, kind: Kind },
    /// `delta` was appended to `id`; `text` is everything shown of it so far.
    Delta { id: String, kind: Kind, delta: String, text: String },
    /// `id` will never be committed (its model request ended without it, or a later
    /// request started): take back `shown`.
    Drop { id: String, kind: Kind, shown: String },
}

/// How a committed event relates to what was shown of it live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Shown {
    /// No preview of it was shown: the event stands alone.
    Nothing,
    /// The preview was a prefix of the committed text: `rest` completes it (may be empty).
    Prefix { rest: String },
    /// The preview (`shown`) is not a prefix of the committed text: replace it.
    Diverged { shown: String },
}

/// Turns one protocol's view of a session into its wire events.
///
/// The follower calls `preview` for every change to a live preview and `settle` (not
/// `translate`) for a committed event a preview was opened for. A translator that shows
/// no previews keeps the defaults and sees every committed event whole; one that skips
/// some previews must remember which it showed and settle the others whole.
pub(crate) trait Translate: Send + 'static {
    /// The wire events for one committed event, and whether the run is over.
    fn translate(&mut self, event: &StoredEvent) -> (Vec<Value>, bool);
    /// The wire event that reports a store failure mid-stream (`message` is generic).
    fn failure(&self, message: String) -> Value;
    /// The wire events for a change to a live preview.
    fn preview(&mut self, _change: &Preview) -> Vec<Value> {
        Vec::new()
    }
    /// The wire events for a committed event that was previewed, and whether the run is over.
    fn settle(&mut self, event: &StoredEvent, _shown: &Shown) -> (Vec<Value>, bool) {
        self.translate(event)
    }
}

/// One open preview.
#[derive(Debug)]
struct Open {
    id: String,
    kind: Kind,
    text: String,
}

/// Which previews are live, decided from committed events and preview frames in the
/// order the bus delivers them. Pure: the follower does the IO.
#[derive(Debug, Default)]
pub(crate) struct Merge {
    /// Open previews, oldest first.
    open: Vec<Open>,
    /// Ids committed or dropped: frames that arrive for them later are stale.
    closed: HashSet<String>,
    /// Whether a model request is under way; `None` until one starts or ends.
    request: Option<bool>,
}

impl Merge {
    /// A preview frame of `event_type`: the change to show, if any.
    pub(crate) fn on_frame(&mut self, event_type: &str, frame: &Value) -> Option<Preview> {
        let kind = Kind::of(event_type)?;
        match frame["type"].as_str()?.parse().ok()? {
            EventType::EventStart => {
                let id = frame["event"]["id"].as_str()?;
                // A start read after its request ended is stale (the store ran ahead of the bus).
                if self.request == Some(false) || self.closed.contains(id) || self.open.iter().any(|o| o.id == id) {
                    return None;
                }
                self.open.push(Open { id: id.to_owned(), kind, text: String::new() });
                Some(Preview::Open { id: id.to_owned(), kind })
            }
            EventType::EventDelta => {
                let id = frame["event_id"].as_str()?;
                let content = &frame["delta"]["content"];
                let delta = content["text"].as_str().or(content["thinking"].as_str())?;
                // Deltas of a preview whose start this stream missed are not shown: the
                // commit shows the event whole.
                let open = self.open.iter_mut().find(|o| o.id == id)?;
                if delta.is_empty() {
                    return None;
                }
                open.text.push_str(delta);
                Some(Preview::Delta { id: id.to_owned(), kind, delta: delta.to_owned(), text: open.text.clone() })
            }
            _ => None,
        }
    }

    /// A committed event, in history order: the previews it ends (to drop before the
    /// event is shown) and how the event relates to what was shown of it.
    pub(crate) fn on_commit(&mut self, event: &StoredEvent) -> (Vec<Preview>, Shown) {
        match event.event_type() {
            Some(EventType::AgentMessage | EventType::AgentThinking) => {
                self.closed.insert(event.event_id.clone());
                let Some(i) = self.open.iter().position(|o| o.id == event.event_id) else {
                    return (Vec::new(), Shown::Nothing);
                };
                let open = self.open.remove(i);
                let committed = text_of(&event.body["content"]);
                let shown = match committed.strip_prefix(open.text.as_str()) {
                    Some(rest) => Shown::Prefix { rest: rest.to_owned() },
                    None => Shown::Diverged { shown: open.text },
                };
                (Vec::new(), shown)
            }
            // A request's outputs are committed with its end, so what is still open then
            // never will be; a new start (after a dead worker's request) supersedes too.
            Some(EventType::SpanModelRequestStart) => {
                let dropped = self.drop_open();
                self.request = Some(true);
                (dropped, Shown::Nothing)
            }
            Some(
                EventType::SpanModelRequestEnd | EventType::SessionStatusIdle | EventType::SessionStatusTerminated,
            ) => {
                let dropped = self.drop_open();
                self.request = Some(false);
                (dropped, Shown::Nothing)
            }
            _ => (Vec::new(), Shown::Nothing),
        }
    }

    fn drop_open(&mut self) -> Vec<Preview> {
        self.open
            .drain(..)
            .map(|open| {
                self.closed.insert(open.id.clone());
                Preview::Drop { id: open.id, kind: open.kind, shown: open.text }
            })
            .collect()
    }
}

/// What the follower does next.
enum Flow {
    /// Keep following.
    Go,
    /// The store must be read: the bus skipped something.
    Read,
    /// The translator said the run is over.
    Done,
    /// The client went away.
    Gone,
}

/// One stream's state: the merge, the translator and the channel to the client.
struct Follower<T> {
    merge: Merge,
    translator: T,
    last_seq: i64,
    tx: mpsc::Sender<Value>,
}

/// Sends `items` in order; `Err` when the client went away.
async fn send(tx: &mpsc::Sender<Value>, items: Vec<Value>) -> Result<(), ()> {
    for item in items {
        tx.send(item).await.map_err(|_| ())?;
    }
    Ok(())
}

impl<T: Translate> Follower<T> {
    /// One committed event, the next in history. A child thread's event outside the
    /// session-level view (ADR 0022 §6) only moves the follower past it.
    async fn committed(&mut self, event: &StoredEvent) -> Flow {
        self.last_seq = event.seq;
        if !session_threads::in_session_view(&event.session_id, &event.thread_id, &event.kind) {
            return Flow::Go;
        }
        let (dropped, shown) = self.merge.on_commit(event);
        let mut out = Vec::new();
        for change in &dropped {
            out.extend(self.translator.preview(change));
        }
        let (items, done) = match shown {
            Shown::Nothing => self.translator.translate(event),
            shown => self.translator.settle(event, &shown),
        };
        out.extend(items);
        match (send(&self.tx, out).await, done) {
            (Err(()), _) => Flow::Gone,
            (Ok(()), true) => Flow::Done,
            (Ok(()), false) => Flow::Go,
        }
    }

    /// Everything committed after `last_seq`, from the store.
    async fn catch_up(&mut self, state: &AppState, session_id: &str) -> Flow {
        loop {
            let query = EventQuery { after_seq: Some(self.last_seq), limit: 500, ..EventQuery::default() };
            let committed = match state.backends.store.query_events(session_id, &query).await {
                Ok(events) => events,
                Err(error) => {
                    // The cause stays in the log: store errors name internals.
                    tracing::error!(%error, session = %session_id, "adapter stream: reading committed events failed");
                    let failure = self.translator.failure(HISTORY_UNAVAILABLE.to_owned());
                    let _ = self.tx.send(failure).await;
                    return Flow::Done;
                }
            };
            for event in &committed {
                match self.committed(event).await {
                    Flow::Go | Flow::Read => {}
                    other => return other,
                }
            }
            if committed.len() < 500 {
                return Flow::Go;
            }
        }
    }

    /// One message from the session's bus channel: one live event, or a batch of the
    /// events one transaction committed, followed in order.
    async fn live(&mut self, session_id: &str, bytes: &[u8]) -> Flow {
        let Ok(message) = LiveEvent::decode(bytes) else { return Flow::Go };
        let Some(live_event::Kind::Batch(batch)) = message.kind else {
            return self.live_event(session_id, message).await;
        };
        for event in batch.events {
            match self.live_event(session_id, event).await {
                Flow::Go => {}
                other => return other,
            }
        }
        Flow::Go
    }

    /// One live event (a batch's events are never batches).
    async fn live_event(&mut self, session_id: &str, message: LiveEvent) -> Flow {
        match message.kind {
            Some(live_event::Kind::Committed(committed)) => {
                if committed.seq <= self.last_seq {
                    return Flow::Go;
                }
                if committed.seq > self.last_seq + 1 {
                    return Flow::Read;
                }
                match from_bus(session_id, &message.thread_id, committed) {
                    Some(event) => self.committed(&event).await,
                    None => Flow::Read,
                }
            }
            // A child thread's previews reach only its thread's stream.
            Some(live_event::Kind::Preview(_)) if message.thread_id != session_id => Flow::Go,
            Some(live_event::Kind::Preview(preview)) => {
                let Ok(frame) = serde_json::from_str::<Value>(&preview.body_json) else { return Flow::Go };
                let Some(change) = self.merge.on_frame(&preview.event_type, &frame) else { return Flow::Go };
                let out = self.translator.preview(&change);
                if send(&self.tx, out).await.is_err() { Flow::Gone } else { Flow::Go }
            }
            Some(live_event::Kind::Terminal(_) | live_event::Kind::Batch(_)) | None => Flow::Read,
        }
    }
}

/// A committed event as the bus carries it (`live::render`: the body plus `id` and
/// `processed_at`), back in its stored form; `None` sends the follower to the store.
fn from_bus(session_id: &str, thread_id: &str, committed: Committed) -> Option<StoredEvent> {
    let mut body: Value = serde_json::from_str(&committed.body_json).ok()?;
    let map = body.as_object_mut()?;
    map.remove("id");
    let processed = map.remove("processed_at")?;
    let processed_at_ms = chrono::DateTime::parse_from_rfc3339(processed.as_str()?).ok()?.timestamp_millis();
    let kind = body["type"].as_str()?.to_owned();
    Some(StoredEvent {
        session_id: session_id.to_owned(),
        seq: committed.seq,
        event_id: committed.event_id,
        thread_id: thread_id.to_owned(),
        kind,
        body,
        processed_at_ms,
    })
}

/// A subscription to a session's bus channel for a follower. Take it before the
/// request's input is committed: every preview the worker publishes for that input then
/// reaches the stream, while one taken later can miss the start of a message (whose text
/// then shows only when it commits).
pub(crate) struct Wake(Option<Subscription>);

impl Wake {
    /// Subscribes to `session_id`'s channel; without a bus (or when it refuses) the
    /// follower reads the store on its tick.
    pub(crate) async fn subscribe(state: &AppState, session_id: &str) -> Self {
        match &state.backends.bus {
            Some(bus) => Self(bus.subscribe(&live::session_channel(session_id)).await.ok()),
            None => Self(None),
        }
    }
}

/// Follows a session after `after_seq`: `first` goes out at once, then every committed
/// event and every preview through `translator` until it says the run is over.
/// Committed events and previews are taken from the session's bus channel in the order
/// they were published; the store fills any gap (and is read every 500 ms while the bus
/// is quiet), so nothing committed is missed or sent twice. `on_gone` runs if the
/// client leaves first.
pub(crate) fn follow<T, G, F>(
    state: AppState,
    session_id: String,
    after_seq: i64,
    wake: Wake,
    first: Value,
    translator: T,
    on_gone: G,
) -> mpsc::Receiver<Value>
where
    T: Translate,
    G: FnOnce(AppState, String) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send,
{
    let (tx, rx) = mpsc::channel::<Value>(256);
    tokio::spawn(async move {
        // Subscribed before the store is read: nothing committed in between is missed.
        let Wake(mut wake) = wake;
        if tx.send(first).await.is_err() {
            return;
        }
        let mut follower = Follower { merge: Merge::default(), translator, last_seq: after_seq, tx };
        let mut read = true;
        loop {
            if std::mem::take(&mut read) {
                match follower.catch_up(&state, &session_id).await {
                    Flow::Go | Flow::Read => {}
                    Flow::Done => return,
                    Flow::Gone => return on_gone(state, session_id).await,
                }
            }
            let tick = tokio::time::sleep(Duration::from_millis(500));
            let item = match wake.as_mut() {
                Some(subscription) => tokio::select! {
                    () = follower.tx.closed() => return on_gone(state, session_id).await,
                    item = subscription.next() => Some(item),
                    () = tick => None,
                },
                None => tokio::select! {
                    () = follower.tx.closed() => return on_gone(state, session_id).await,
                    () = tick => None,
                },
            };
            let flow = match item {
                // Quiet for a while: the store says whether anything was missed.
                None => Flow::Read,
                Some(None) => {
                    // The subscription ended: the store alone, every tick.
                    wake = None;
                    Flow::Read
                }
                Some(Some(BusItem::Gap)) => Flow::Read,
                Some(Some(BusItem::Message(bytes))) => follower.live(&session_id, bytes.as_ref()).await,
            };
            match flow {
                Flow::Go => {}
                Flow::Read => read = true,
                Flow::Done => return,
                Flow::Gone => return on_gone(state, session_id).await,
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn committed(kind: &str, id: &str, body: Value) -> StoredEvent {
        let mut body = body;
        body["type"] = json!(kind);
        StoredEvent {
            session_id: "sesn_1".into(),
            seq: 1,
            event_id: id.into(),
            thread_id: "sesn_1".into(),
            kind: kind.into(),
            body,
            processed_at_ms: 0,
        }
    }

    fn message(id: &str, text: &str) -> StoredEvent {
        committed("agent.message", id, json!({ "content": [{ "type": "text", "text": text }] }))
    }

    /// A translator that shows each committed event as its sequence number.
    struct Seqs;

    impl Translate for Seqs {
        fn translate(&mut self, event: &StoredEvent) -> (Vec<Value>, bool) {
            (vec![json!(event.seq)], false)
        }

        fn failure(&self, message: String) -> Value {
            json!(message)
        }
    }

    /// The bus message of the events `seqs` committed by one transaction.
    fn batch(seqs: &[i64]) -> Vec<u8> {
        use agentd_proto::v1::Batch;
        let events = seqs
            .iter()
            .map(|seq| {
                let body = json!({ "type": "agent.message", "content": [], "processed_at": live::rfc3339(0) });
                let committed = Committed { seq: *seq, event_id: format!("sevt_{seq}"), body_json: body.to_string() };
                LiveEvent {
                    session_id: "sesn_1".into(),
                    thread_id: "sesn_1".into(),
                    kind: Some(live_event::Kind::Committed(committed)),
                }
            })
            .collect();
        let message = LiveEvent {
            session_id: "sesn_1".into(),
            kind: Some(live_event::Kind::Batch(Batch { events })),
            ..Default::default()
        };
        message.encode_to_vec()
    }

    #[tokio::test]
    async fn a_batch_is_followed_in_order_and_a_gap_in_it_sends_the_follower_to_the_store() {
        let (tx, mut rx) = mpsc::channel(16);
        let mut follower = Follower { merge: Merge::default(), translator: Seqs, last_seq: 4, tx };
        assert!(matches!(follower.live("sesn_1", &batch(&[5, 6])).await, Flow::Go));
        assert_eq!((rx.recv().await, rx.recv().await), (Some(json!(5)), Some(json!(6))));
        // What was followed already is skipped; the next one is followed.
        assert!(matches!(follower.live("sesn_1", &batch(&[6, 7])).await, Flow::Go));
        assert_eq!(rx.recv().await, Some(json!(7)));
        // An event past a gap: the store has what is missing, and the rest with it.
        assert!(matches!(follower.live("sesn_1", &batch(&[8, 10, 11])).await, Flow::Read));
        assert_eq!(rx.recv().await, Some(json!(8)));
        assert!(rx.try_recv().is_err(), "nothing past the gap is followed from the bus");
        assert_eq!(follower.last_seq, 8);
    }

    fn start(id: &str) -> Value {
        json!({ "type": "event_start", "event": { "type": "agent.message", "id": id } })
    }

    fn delta(id: &str, text: &str) -> Value {
        json!({
            "type": "event_delta", "event_id": id,
            "delta": { "type": "content_delta", "index": 0, "content": { "type": "text", "text": text } },
        })
    }

    /// A merge inside a started model request that has shown `parts` of `id`.
    fn previewed(id: &str, parts: &[&str]) -> Merge {
        let mut merge = Merge::default();
        assert_eq!(merge.on_commit(&committed("span.model_request_start", "sevt_s", json!({}))).0, []);
        assert_eq!(
            merge.on_frame("agent.message", &start(id)),
            Some(Preview::Open { id: id.into(), kind: Kind::Message })
        );
        let mut text = String::new();
        for part in parts {
            text.push_str(part);
            let change = merge.on_frame("agent.message", &delta(id, part));
            assert_eq!(
                change,
                Some(Preview::Delta { id: id.into(), kind: Kind::Message, delta: (*part).into(), text: text.clone() })
            );
        }
        merge
    }

    #[test]
    fn a_commit_with_the_previewed_text_completes_it_with_nothing() {
        let mut merge = previewed("sevt_x", &["Hel", "lo"]);
        assert_eq!(merge.on_commit(&message("sevt_x", "Hello")), (vec![], Shown::Prefix { rest: String::new() }));
        // Late frames of a committed event are stale.
        assert_eq!(merge.on_frame("agent.message", &delta("sevt_x", "!")), None);
        assert_eq!(merge.on_frame("agent.message", &start("sevt_x")), None);
    }

    #[test]
    fn a_longer_commit_sends_only_the_missing_suffix() {
        let mut merge = previewed("sevt_x", &["Hel"]);
        assert_eq!(
            merge.on_commit(&message("sevt_x", "Hello world")),
            (vec![], Shown::Prefix { rest: "lo world".into() })
        );
    }

    #[test]
    fn a_shorter_or_divergent_commit_replaces_what_was_shown() {
        let mut merge = previewed("sevt_x", &["Hello", " there"]);
        assert_eq!(
            merge.on_commit(&message("sevt_x", "Hello")),
            (vec![], Shown::Diverged { shown: "Hello there".into() })
        );
        let mut merge = previewed("sevt_y", &["Goodbye"]);
        assert_eq!(
            merge.on_commit(&message("sevt_y", "Good day")),
            (vec![], Shown::Diverged { shown: "Goodbye".into() })
        );
    }

    #[test]
    fn a_preview_that_never_commits_is_dropped_and_a_different_id_stands_alone() {
        // The worker died mid-message: the next attempt closes the cut request's span,
        // starts a new one and commits the message under another id.
        let mut merge = previewed("sevt_dead", &["partial ", "answ"]);
        let (dropped, shown) =
            merge.on_commit(&committed("span.model_request_end", "sevt_e", json!({ "is_error": true })));
        assert_eq!(
            dropped,
            [Preview::Drop { id: "sevt_dead".into(), kind: Kind::Message, shown: "partial answ".into() }]
        );
        assert_eq!(shown, Shown::Nothing);
        // Frames of the dead request still in flight show nothing once it ended.
        assert_eq!(merge.on_frame("agent.message", &delta("sevt_dead", "er")), None);
        assert_eq!(merge.on_frame("agent.message", &start("sevt_late")), None);
        assert_eq!(merge.on_commit(&committed("span.model_request_start", "sevt_s2", json!({}))).0, []);
        assert_eq!(merge.on_commit(&message("sevt_new", "the full answer")), (vec![], Shown::Nothing));
    }

    #[test]
    fn a_new_request_supersedes_previews_of_one_that_never_ended() {
        let mut merge = previewed("sevt_dead", &["cut"]);
        let (dropped, _) = merge.on_commit(&committed("span.model_request_start", "sevt_s2", json!({})));
        assert_eq!(dropped, [Preview::Drop { id: "sevt_dead".into(), kind: Kind::Message, shown: "cut".into() }]);
        // A dropped id is closed: should it still commit, it is shown whole.
        assert_eq!(merge.on_frame("agent.message", &start("sevt_dead")), None);
        assert_eq!(merge.on_commit(&message("sevt_dead", "cut short")), (vec![], Shown::Nothing));
    }

    #[test]
    fn a_commit_before_any_preview_stands_alone() {
        let mut merge = Merge::default();
        assert_eq!(merge.on_commit(&message("sevt_x", "whole")), (vec![], Shown::Nothing));
        assert_eq!(merge.on_frame("agent.message", &start("sevt_x")), None);
        assert_eq!(merge.on_frame("agent.message", &delta("sevt_x", "wh")), None);
    }

    #[test]
    fn deltas_without_their_start_are_not_shown() {
        // A stream that joined mid-message shows the message when it commits.
        let mut merge = Merge::default();
        assert_eq!(merge.on_frame("agent.message", &delta("sevt_x", "ole")), None);
        assert_eq!(merge.on_commit(&message("sevt_x", "whole")), (vec![], Shown::Nothing));
    }

    #[test]
    fn the_turn_ending_drops_whatever_is_still_open() {
        let mut merge = previewed("sevt_x", &["a"]);
        let (dropped, _) = merge.on_commit(&committed("session.status_idle", "sevt_i", json!({})));
        assert_eq!(dropped.len(), 1);
        assert_eq!(merge.on_frame("agent.message", &start("sevt_z")), None, "no request is under way");
    }

    #[test]
    fn thinking_previews_settle_against_their_empty_committed_text() {
        let mut merge = Merge::default();
        let frame = json!({ "type": "event_start", "event": { "type": "agent.thinking", "id": "sevt_t" } });
        assert_eq!(
            merge.on_frame("agent.thinking", &frame),
            Some(Preview::Open { id: "sevt_t".into(), kind: Kind::Thinking })
        );
        assert_eq!(
            merge.on_commit(&committed("agent.thinking", "sevt_t", json!({}))),
            (vec![], Shown::Prefix { rest: String::new() })
        );
        assert_eq!(merge.on_frame("tool.whatever", &start("sevt_q")), None);
    }

    #[test]
    fn a_committed_event_read_back_from_the_bus_is_the_stored_one() {
        let stored = StoredEvent {
            session_id: "sesn_1".into(),
            seq: 7,
            event_id: "sevt_7".into(),
            thread_id: "sesn_1".into(),
            kind: "agent.message".into(),
            body: json!({ "type": "agent.message", "content": [{ "type": "text", "text": "hi" }] }),
            processed_at_ms: 1_764_000_000_123,
        };
        let wire = Committed { seq: 7, event_id: "sevt_7".into(), body_json: live::render(&stored).to_string() };
        assert_eq!(from_bus("sesn_1", "sesn_1", wire), Some(stored));
    }
}
