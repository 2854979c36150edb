//! Committed history on the live bus. After every commit the committer publishes each
//! event on its session's channel; streams forward them and fill any gap from the
//! store, which stays authoritative. Publishing is best-effort: a lost notification
//! costs a stream one store read, never an event.

use agentd_proto::v1::{Batch, Committed, ControlSignal, LiveEvent, Preview, Terminal, control_signal, live_event};
use agentd_proto::{Bus, BusError};
use bytes::Bytes;
use prost::Message;
use serde_json::{Value, json};

use crate::events::{EventType, MODEL_KEY, MODEL_USAGE_KEY, THREAD_CALL_KEY};
use crate::store::StoredEvent;

/// The bus channel of a session's live traffic.
pub fn session_channel(session_id: &str) -> String {
    format!("session.{session_id}")
}

/// The bus channel of control signals to a thread's live attempt (pause, wake).
pub fn control_channel(thread_id: &str) -> String {
    format!("control.{thread_id}")
}

/// Signals whatever process holds the live attempt of `run_id` (best effort: durable
/// intent, where there is one, is in the store already).
pub async fn publish_control(
    bus: &dyn Bus,
    thread_id: &str,
    run_id: &str,
    kind: agentd_proto::v1::control_signal::Kind,
) {
    let signal = ControlSignal {
        run_id: run_id.to_owned(),
        thread_id: thread_id.to_owned(),
        kind: kind as i32,
        ..Default::default()
    };
    if let Err(error) = signal_control(bus, &signal).await {
        tracing::warn!(%error, "could not signal the live attempt");
    }
}

async fn signal_control(bus: &dyn Bus, signal: &ControlSignal) -> Result<(), BusError> {
    bus.publish(&control_channel(&signal.thread_id), Bytes::from(signal.encode_to_vec())).await
}

/// RFC 3339 with microseconds and `Z`, as the wire expects.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// The store's private keys of event bodies, never rendered: the mark of a web tool's
/// result, a thread call's, a child's model and the advisor's usage.
const PRIVATE_KEYS: &[&str] = &[crate::web::SERVER_TOOL_KEY, THREAD_CALL_KEY, MODEL_KEY, MODEL_USAGE_KEY];

/// The wire form of a committed event: its body plus `id` and `processed_at`, without
/// the store's private keys, and with `session_thread_id` on every event of a child
/// thread (ADR 0022 §6: one rendering serves the session's view, where it marks a
/// cross-posted event, and the thread's own stream alike).
pub fn render(event: &StoredEvent) -> Value {
    let mut body = event.body.clone();
    if let Some(map) = body.as_object_mut() {
        for key in PRIVATE_KEYS {
            map.remove(*key);
        }
        if event.thread_id != event.session_id {
            map.insert("session_thread_id".into(), json!(event.thread_id));
        }
    }
    body["id"] = json!(event.event_id);
    body["processed_at"] = json!(rfc3339(event.processed_at_ms));
    body
}

/// Publishes committed events in order: the events of one session as one message — a
/// `committed` event when it is alone, a `batch` of them when a transaction committed
/// several — so a commit costs one publish, and each stream one wake-up. Failures are
/// logged, not returned: history is already committed and streams recover from the
/// store.
///
/// A committed `user.interrupt` is also signalled on its thread's control channel, the
/// one channel a live attempt listens on (`KIND_INTERRUPT` with the event's sequence
/// number): the attempt does not take the session's whole traffic to find it. A lost
/// signal costs the attempt its next step, where it reads the interrupt from history.
pub async fn publish_committed(bus: &dyn Bus, events: &[StoredEvent]) {
    for event in events.iter().filter(|event| event.kind == EventType::UserInterrupt) {
        let signal = ControlSignal {
            thread_id: event.thread_id.clone(),
            kind: control_signal::Kind::Interrupt as i32,
            seq: event.seq,
            ..Default::default()
        };
        if let Err(error) = signal_control(bus, &signal).await {
            tracing::warn!(%error, session = %event.session_id, "interrupt signal lost; the attempt reads history");
        }
    }
    for session in events.chunk_by(|a, b| a.session_id == b.session_id) {
        let message = match session {
            [event] => committed(event),
            _ => LiveEvent {
                session_id: session[0].session_id.clone(),
                // Each event of the batch names its own thread.
                thread_id: String::new(),
                kind: Some(live_event::Kind::Batch(Batch { events: session.iter().map(committed).collect() })),
            },
        };
        if let Err(error) = publish(bus, &message.session_id, &message).await {
            tracing::warn!(%error, session = %message.session_id, "live notification lost; streams will read the store");
            return;
        }
    }
}

/// The live message of one committed event.
fn committed(event: &StoredEvent) -> LiveEvent {
    LiveEvent {
        session_id: event.session_id.clone(),
        thread_id: event.thread_id.clone(),
        kind: Some(live_event::Kind::Committed(Committed {
            seq: event.seq,
            event_id: event.event_id.clone(),
            body_json: render(event).to_string(),
        })),
    }
}

/// Publishes preview frames (`event_start` / `event_delta`) of one thread's model
/// response as one message: a `preview` when there is one, a `batch` of them when the
/// response produced several faster than the bus took them. `false` when the bus did
/// not take it (the caller may stop previewing for a while).
pub async fn publish_previews(bus: &dyn Bus, session_id: &str, thread_id: &str, frames: &[(EventType, Value)]) -> bool {
    let preview = |(event_type, frame): &(EventType, Value)| LiveEvent {
        session_id: session_id.to_owned(),
        thread_id: thread_id.to_owned(),
        kind: Some(live_event::Kind::Preview(Preview {
            body_json: frame.to_string(),
            event_type: event_type.to_string(),
        })),
    };
    let message = match frames {
        [] => return true,
        [frame] => preview(frame),
        _ => LiveEvent {
            session_id: session_id.to_owned(),
            thread_id: thread_id.to_owned(),
            kind: Some(live_event::Kind::Batch(Batch { events: frames.iter().map(preview).collect() })),
        },
    };
    match publish(bus, session_id, &message).await {
        Ok(()) => true,
        Err(error) => {
            tracing::debug!(%error, "preview dropped");
            false
        }
    }
}

/// Publishes the last event of a deleted session; streams forward it and end.
pub async fn publish_terminal(bus: &dyn Bus, session_id: &str, body: &Value) {
    let message = LiveEvent {
        session_id: session_id.to_owned(),
        thread_id: session_id.to_owned(),
        kind: Some(live_event::Kind::Terminal(Terminal { body_json: body.to_string() })),
    };
    if let Err(error) = publish(bus, session_id, &message).await {
        tracing::warn!(%error, session = %session_id, "session.deleted notification lost");
    }
}

async fn publish(bus: &dyn Bus, session_id: &str, message: &LiveEvent) -> Result<(), BusError> {
    bus.publish(&session_channel(session_id), Bytes::from(message.encode_to_vec())).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(thread_id: &str, body: Value) -> StoredEvent {
        StoredEvent {
            session_id: "sesn_a".into(),
            seq: 1,
            event_id: "sevt_a".into(),
            thread_id: thread_id.into(),
            kind: body["type"].as_str().unwrap_or_default().into(),
            body,
            processed_at_ms: 0,
        }
    }

    #[test]
    fn child_events_name_their_thread_and_private_keys_stay_in_the_store() {
        let body = json!({ "type": "agent.tool_use", "name": "bash", "_thread_call": { "role": "request" },
                           "_model": "m", "_model_usage": {}, "_server_tool": "web_fetch" });
        let child = render(&stored("sthr_b", body.clone()));
        assert_eq!(child["session_thread_id"], "sthr_b");
        for key in ["_thread_call", "_model", "_model_usage", "_server_tool"] {
            assert!(child.get(key).is_none(), "{key}");
        }
        assert_eq!((child["id"].as_str(), child["name"].as_str()), (Some("sevt_a"), Some("bash")));
        // The primary's events are rendered as before; a `session_thread_id` they carry
        // (a `session.thread_created`) is theirs.
        let primary = render(&stored("sesn_a", body));
        assert!(primary.get("session_thread_id").is_none());
        let created =
            render(&stored("sesn_a", json!({ "type": "session.thread_created", "session_thread_id": "sthr_b" })));
        assert_eq!(created["session_thread_id"], "sthr_b");
    }

    /// The kinds of a live message: one committed event's seq, or a batch's.
    fn seqs(bytes: &[u8]) -> Vec<i64> {
        match LiveEvent::decode(bytes).unwrap().kind {
            Some(live_event::Kind::Committed(committed)) => vec![committed.seq],
            Some(live_event::Kind::Batch(batch)) => {
                batch.events.iter().flat_map(|event| seqs(&event.encode_to_vec())).collect()
            }
            other => panic!("not a committed event: {other:?}"),
        }
    }

    async fn next(subscription: &mut agentd_proto::Subscription) -> Vec<u8> {
        use futures::StreamExt;
        match tokio::time::timeout(std::time::Duration::from_secs(5), subscription.next()).await {
            Ok(Some(agentd_proto::BusItem::Message(bytes))) => bytes.to_vec(),
            other => panic!("no message: {other:?}"),
        }
    }

    #[tokio::test]
    async fn previews_gathered_together_are_one_message_in_their_order() {
        let bus = agentd_proto::MemoryBus::new();
        let mut session = bus.subscribe(&session_channel("sesn_a")).await.unwrap();
        let frame = |n: i64| (EventType::AgentMessage, json!({ "type": "event_delta", "n": n }));
        assert!(publish_previews(&bus, "sesn_a", "sesn_a", &[]).await, "nothing to publish");
        assert!(publish_previews(&bus, "sesn_a", "sesn_a", &[frame(1)]).await);
        assert!(publish_previews(&bus, "sesn_a", "sthr_b", &[frame(2), frame(3), frame(4)]).await);
        let preview = |message: LiveEvent| match message.kind {
            Some(live_event::Kind::Preview(preview)) => {
                let frame: Value = serde_json::from_str(&preview.body_json).unwrap();
                (message.thread_id, preview.event_type, frame["n"].as_i64().unwrap())
            }
            other => panic!("not a preview: {other:?}"),
        };
        let alone = LiveEvent::decode(next(&mut session).await.as_slice()).unwrap();
        assert_eq!(preview(alone), ("sesn_a".into(), "agent.message".into(), 1));
        let Some(live_event::Kind::Batch(batch)) = LiveEvent::decode(next(&mut session).await.as_slice()).unwrap().kind
        else {
            panic!("three frames are one batch")
        };
        let frames: Vec<_> = batch.events.into_iter().map(preview).collect();
        assert_eq!(frames, [2, 3, 4].map(|n| ("sthr_b".into(), "agent.message".into(), n)));
    }

    #[tokio::test]
    async fn a_transactions_events_are_one_message_and_an_interrupt_is_signalled_to_its_thread() {
        let bus = agentd_proto::MemoryBus::new();
        let mut session = bus.subscribe(&session_channel("sesn_a")).await.unwrap();
        let mut control = bus.subscribe(&control_channel("sthr_b")).await.unwrap();
        let event =
            |seq: i64, thread_id: &str, kind: &str| StoredEvent { seq, ..stored(thread_id, json!({ "type": kind })) };
        publish_committed(&bus, &[event(3, "sesn_a", "user.message")]).await;
        publish_committed(
            &bus,
            &[
                event(4, "sesn_a", "agent.message"),
                event(5, "sthr_b", "user.interrupt"),
                event(6, "sesn_a", "session.status_idle"),
            ],
        )
        .await;
        assert_eq!(seqs(&next(&mut session).await), [3]);
        let batch = next(&mut session).await;
        assert_eq!(seqs(&batch), [4, 5, 6]);
        let Some(live_event::Kind::Batch(batch)) = LiveEvent::decode(batch.as_slice()).unwrap().kind else {
            unreachable!()
        };
        let threads: Vec<_> = batch.events.iter().map(|event| event.thread_id.as_str()).collect();
        assert_eq!(threads, ["sesn_a", "sthr_b", "sesn_a"]);
        let signal = ControlSignal::decode(next(&mut control).await.as_slice()).unwrap();
        assert_eq!(
            (signal.kind(), signal.seq, signal.thread_id.as_str()),
            (control_signal::Kind::Interrupt, 5, "sthr_b")
        );
    }
}
