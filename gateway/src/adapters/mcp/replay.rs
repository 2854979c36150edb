//! Resumable streams: every SSE event of a handshake-era MCP stream (the priming event,
//! progress and log notifications, the call's response) is appended to a log before it
//! is sent, under an id that names its stream and its place in it. A client whose POST
//! stream closed mid-call (it went away, a proxy cut it) reconnects with `GET` and
//! `Last-Event-ID` and gets every later event of that stream, live until the response,
//! with none missed or repeated. The log is a Redis stream per SSE stream when sessions
//! are shared, so the reconnect may land on any gateway (it follows what the gateway
//! running the call appends); in memory in `agentd dev`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::{
    EventId, EventStore, EventStoreError, EventStream, ServerSseMessage,
};
use serde_json::{Value, json};
use tokio::sync::watch;

/// How long a stream's log is kept after its last event.
const KEEP: Duration = Duration::from_secs(3600);
/// How long one reconnect follows a stream that has not answered yet before it ends
/// (the client reconnects again after the `retry` hint).
const FOLLOW: Duration = Duration::from_secs(300);
/// How long one blocking read of the Redis log waits.
const BLOCK_MS: u64 = 5_000;
/// Events replayed per Redis read.
const BATCH: usize = 100;

/// Where a stream's events are logged.
pub struct StreamLog {
    backend: Backend,
}

enum Backend {
    Redis { client: redis::Client, connection: redis::aio::ConnectionManager, prefix: String },
    Memory(Arc<Mutex<HashMap<String, Logged>>>),
}

/// One stream's events in memory, and a signal that counts them.
struct Logged {
    events: Vec<ServerSseMessage>,
    count: watch::Sender<usize>,
    touched: Instant,
}

/// An event as logged: its message (none for a priming event) and retry hint.
fn encode(event: &ServerSseMessage) -> Result<String, EventStoreError> {
    let retry = event.retry.map(|r| u64::try_from(r.as_millis()).unwrap_or(u64::MAX));
    Ok(serde_json::to_string(&json!({ "message": event.message.as_deref(), "retry_ms": retry }))?)
}

fn decode(id: String, logged: &str) -> Result<ServerSseMessage, EventStoreError> {
    let value: Value = serde_json::from_str(logged)?;
    let mut event = match &value["message"] {
        Value::Null => ServerSseMessage::default(),
        message => ServerSseMessage::from_message(serde_json::from_value::<ServerJsonRpcMessage>(message.clone())?),
    };
    event.retry = value["retry_ms"].as_u64().map(Duration::from_millis);
    event.event_id = Some(id);
    Ok(event)
}

/// Whether `event` ends its stream: the answer to the request it serves.
fn answers(event: &ServerSseMessage) -> bool {
    matches!(event.message.as_deref(), Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)))
}

/// An event id: the stream, then the event's place in it.
fn event_id(stream: &str, place: &str) -> String {
    format!("{stream}|{place}")
}

fn parse(id: &str) -> Result<(&str, &str), EventStoreError> {
    id.rsplit_once('|')
        .filter(|(s, p)| !s.is_empty() && !p.is_empty())
        .ok_or_else(|| "not an agentd MCP event id".into())
}

impl StreamLog {
    /// A log in Redis at `url` (keys `{prefix}:mcp:stream:{id}`).
    pub async fn redis(url: &str, prefix: &str) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(2)));
        let connection = client.get_connection_manager_with_config(config).await?;
        Ok(Self { backend: Backend::Redis { client, connection, prefix: prefix.to_owned() } })
    }

    /// A log in this process.
    pub fn memory() -> Self {
        Self { backend: Backend::Memory(Arc::default()) }
    }
}

fn key(prefix: &str, stream: &str) -> String {
    format!("{prefix}:mcp:stream:{stream}")
}

#[async_trait::async_trait]
impl EventStore for StreamLog {
    async fn store_event(&self, stream_id: &str, event: &ServerSseMessage) -> Result<EventId, EventStoreError> {
        let logged = encode(event)?;
        match &self.backend {
            Backend::Redis { connection, prefix, .. } => {
                let key = key(prefix, stream_id);
                let mut connection = connection.clone();
                let (place, ()): (String, ()) = redis::pipe()
                    .cmd("XADD")
                    .arg(&key)
                    .arg("*")
                    .arg("e")
                    .arg(&logged)
                    .cmd("EXPIRE")
                    .arg(&key)
                    .arg(KEEP.as_secs())
                    .ignore()
                    .query_async(&mut connection)
                    .await
                    .map(|(place,): (String,)| (place, ()))?;
                Ok(event_id(stream_id, &place))
            }
            Backend::Memory(streams) => {
                let mut streams = streams.lock().unwrap_or_else(PoisonError::into_inner);
                streams.retain(|_, s| s.touched.elapsed() <= KEEP);
                let log = streams.entry(stream_id.to_owned()).or_insert_with(|| Logged {
                    events: Vec::new(),
                    count: watch::channel(0).0,
                    touched: Instant::now(),
                });
                let id = event_id(stream_id, &log.events.len().to_string());
                let mut stored = event.clone();
                stored.event_id = Some(id.clone());
                log.events.push(stored);
                log.touched = Instant::now();
                log.count.send_replace(log.events.len());
                Ok(id)
            }
        }
    }

    async fn replay_events_after(&self, last_event_id: &str) -> Result<EventStream, EventStoreError> {
        let (stream, place) = parse(last_event_id)?;
        match &self.backend {
            Backend::Redis { client, prefix, .. } => {
                // A connection of its own: the reads below block.
                let connection = client.get_multiplexed_async_connection().await?;
                let key = key(prefix, stream);
                let exists: bool = redis::cmd("EXISTS").arg(&key).query_async(&mut connection.clone()).await?;
                if !exists {
                    return Err(format!("no MCP stream {stream} (unknown or expired)").into());
                }
                Ok(redis_follow(connection, key, stream.to_owned(), place.to_owned()))
            }
            Backend::Memory(streams) => {
                let after: usize = place.parse()?;
                let count = {
                    let streams = streams.lock().unwrap_or_else(PoisonError::into_inner);
                    let log =
                        streams.get(stream).ok_or_else(|| format!("no MCP stream {stream} (unknown or expired)"))?;
                    log.count.subscribe()
                };
                Ok(memory_follow(streams.clone(), stream.to_owned(), after + 1, count))
            }
        }
    }
}

/// Events for a reconnected client, sent by a task that stops when the client goes.
fn channel() -> (tokio::sync::mpsc::Sender<ServerSseMessage>, EventStream) {
    let (tx, rx) = tokio::sync::mpsc::channel(BATCH);
    (tx, Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
}

/// Sends `batch` in order, up to and including an answer. `Some(true)` when the answer
/// was sent, `None` when the client went away.
async fn send(tx: &tokio::sync::mpsc::Sender<ServerSseMessage>, batch: Vec<ServerSseMessage>) -> Option<bool> {
    for event in batch {
        let ends = answers(&event);
        tx.send(event).await.ok()?;
        if ends {
            return Some(true);
        }
    }
    Some(false)
}

/// The events of `stream` from `next` on, from memory, live until its answer.
fn memory_follow(
    streams: Arc<Mutex<HashMap<String, Logged>>>,
    stream: String,
    mut next: usize,
    mut count: watch::Receiver<usize>,
) -> EventStream {
    let (tx, events) = channel();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + FOLLOW;
        loop {
            let ready: Vec<ServerSseMessage> = {
                let streams = streams.lock().unwrap_or_else(PoisonError::into_inner);
                let logged = streams.get(&stream).map(|log| log.events.as_slice()).unwrap_or_default();
                logged.get(next..).unwrap_or_default().to_vec()
            };
            next += ready.len();
            if send(&tx, ready).await != Some(false) {
                return;
            }
            tokio::select! {
                changed = tokio::time::timeout_at(deadline, count.changed()) => {
                    // The log is gone or the follow ran its time: the client reconnects.
                    if !matches!(changed, Ok(Ok(()))) {
                        return;
                    }
                }
                () = tx.closed() => return,
            }
        }
    });
    events
}

type XRead = Option<Vec<(String, Vec<(String, Vec<(String, String)>)>)>>;

/// The events of the Redis log `key` after `place`, live until its answer.
fn redis_follow(
    mut connection: redis::aio::MultiplexedConnection,
    key: String,
    stream: String,
    mut place: String,
) -> EventStream {
    let (tx, events) = channel();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + FOLLOW;
        while tokio::time::Instant::now() < deadline && !tx.is_closed() {
            let read: redis::RedisResult<XRead> = redis::cmd("XREAD")
                .arg("COUNT")
                .arg(BATCH)
                .arg("BLOCK")
                .arg(BLOCK_MS)
                .arg("STREAMS")
                .arg(&key)
                .arg(&place)
                .query_async(&mut connection)
                .await;
            let entries = match read {
                Ok(Some(mut streams)) => streams.pop().map(|(_, entries)| entries).unwrap_or_default(),
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(%error, "MCP stream replay stopped: Redis read failed");
                    return;
                }
            };
            let mut batch = Vec::new();
            for (entry, fields) in entries {
                place.clone_from(&entry);
                let Some((_, logged)) = fields.into_iter().find(|(field, _)| field == "e") else { continue };
                match decode(event_id(&stream, &entry), &logged) {
                    Ok(event) => batch.push(event),
                    Err(error) => tracing::warn!(%error, stream, "an MCP stream event could not be decoded; skipped"),
                }
            }
            if send(&tx, batch).await != Some(false) {
                return;
            }
        }
    });
    events
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CallToolResult, ContentBlock, NumberOrString, ProgressNotificationParam, ProgressToken, ServerNotification,
        ServerResult,
    };

    use futures::StreamExt;

    use super::*;

    fn result(text: &str) -> ServerJsonRpcMessage {
        let result = CallToolResult::success(vec![ContentBlock::text(text)]);
        ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), NumberOrString::Number(7))
    }

    fn progress(n: u32) -> ServerJsonRpcMessage {
        let param = ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(1)), f64::from(n));
        ServerJsonRpcMessage::notification(ServerNotification::ProgressNotification(rmcp::model::Notification::new(
            param,
        )))
    }

    #[test]
    fn logged_events_come_back_as_they_were_sent() {
        for message in [result("done"), progress(3)] {
            let sent = ServerSseMessage::from_message(message);
            let back = decode("s|1".into(), &encode(&sent).unwrap()).unwrap();
            assert_eq!(
                serde_json::to_value(back.message.as_deref()).unwrap(),
                serde_json::to_value(sent.message.as_deref()).unwrap()
            );
            assert_eq!(back.event_id.as_deref(), Some("s|1"));
        }
        let priming = decode("s|0".into(), &encode(&ServerSseMessage::retry(Duration::from_secs(3))).unwrap()).unwrap();
        assert_eq!((priming.message.is_none(), priming.retry), (true, Some(Duration::from_secs(3))));
    }

    #[tokio::test]
    async fn a_reconnect_gets_every_later_event_live_until_the_answer() {
        let log = StreamLog::memory();
        let first = log.store_event("s1", &ServerSseMessage::retry(Duration::from_secs(3))).await.unwrap();
        let seen = log.store_event("s1", &ServerSseMessage::from_message(progress(1))).await.unwrap();
        log.store_event("other", &ServerSseMessage::from_message(progress(9))).await.unwrap();
        let mut replay = log.replay_events_after(&seen).await.unwrap();
        // Nothing new yet: the replay waits for the call to go on.
        assert!(tokio::time::timeout(Duration::from_millis(50), replay.next()).await.is_err());
        log.store_event("s1", &ServerSseMessage::from_message(progress(2))).await.unwrap();
        log.store_event("s1", &ServerSseMessage::from_message(result("done"))).await.unwrap();
        let rest: Vec<ServerSseMessage> = replay.collect().await;
        assert_eq!(rest.len(), 2, "progress 2, then the answer; nothing of another stream");
        assert!(answers(&rest[1]));
        assert_eq!(rest[0].event_id.as_deref(), Some("s1|2"));
        // From the priming event on: everything, once.
        let all: Vec<ServerSseMessage> = log.replay_events_after(&first).await.unwrap().collect().await;
        assert_eq!(all.len(), 3);
        assert!(log.replay_events_after("nope|0").await.is_err());
    }
}
