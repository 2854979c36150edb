//! The production bus: Redis pub/sub.
//!
//! Publishing goes through a [`ConnectionManager`], which reconnects on its own.
//! Subscribing goes through ONE pub/sub connection per [`RedisBus`], owned by a hub task
//! that fans messages out to the subscriptions' queues ([`Fanout`]). All SUBSCRIBE/UNSUBSCRIBE
//! commands are issued by the hub, one at a time, so its view of what Redis has
//! subscribed can never race with a subscription being dropped. When the connection
//! drops, the hub reconnects with backoff, resubscribes every live channel and sends
//! [`BusItem::Gap`] to every subscriber, who then re-reads committed history.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSubSink, PubSubStream};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::memory::{CHANNEL_CAPACITY, Fanout};
use super::{Bus, BusError, BusItem, Subscription};

/// Bounds [`Bus::ping`] so `/readyz` turns 503 quickly when Redis is down.
const PING_TIMEOUT: Duration = Duration::from_millis(800);
/// Bounds a publish, including waiting for a reconnect of the publishing connection.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(2);
/// Bounds establishing a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Bounds a SUBSCRIBE/UNSUBSCRIBE confirmation; a connection that cannot confirm in this
/// time is treated as dead and replaced.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the hub checks an otherwise quiet pub/sub connection: a stopped or
/// partitioned server never closes the socket, so silence alone proves nothing.
const HUB_PING_EVERY: Duration = Duration::from_secs(5);
/// Reconnect backoff of the hub.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// A [`Bus`] on Redis pub/sub, with every channel name prefixed by a key prefix.
#[derive(Clone)]
pub struct RedisBus {
    publisher: ConnectionManager,
    prefix: String,
    hub: mpsc::UnboundedSender<Command>,
    hub_connected: Arc<AtomicBool>,
}

impl std::fmt::Debug for RedisBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBus").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

enum Command {
    /// Subscribe to `key`: Redis delivers it to this process and the hub adds the
    /// subscription to the fan-out before it answers.
    Subscribe { key: String, reply: oneshot::Sender<Result<Subscription, BusError>> },
    /// A subscription of `key` was dropped; unsubscribe if it was the last one.
    Release { key: String },
}

impl RedisBus {
    /// Connects to `url`, naming every channel `{key_prefix}:{channel}` in Redis.
    pub async fn connect(url: &str, key_prefix: &str) -> Result<Self, BusError> {
        let client =
            redis::Client::open(url).map_err(|err| BusError::Unavailable(format!("invalid redis url {url}: {err}")))?;
        // Both connections are opened now: a production role must not start without its bus.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(PUBLISH_TIMEOUT))
            .set_number_of_retries(2)
            .set_min_delay(MIN_BACKOFF)
            .set_max_delay(MAX_BACKOFF);
        let publisher =
            tokio::time::timeout(CONNECT_TIMEOUT * 3, ConnectionManager::new_with_config(client.clone(), config))
                .await
                .map_err(|_| BusError::Unavailable(format!("connecting to redis at {url} timed out")))?
                .map_err(|err| BusError::Unavailable(format!("connecting to redis at {url}: {err}")))?;
        let connection = open_pubsub(&client, &[]).await?;

        let (hub, commands) = mpsc::unbounded_channel();
        let hub_connected = Arc::new(AtomicBool::new(true));
        let state = Hub {
            client,
            commands,
            // Weak: the hub stops once every RedisBus clone is gone.
            releases: hub.downgrade(),
            subscribed: HashSet::new(),
            fanout: Arc::new(Fanout::new(CHANNEL_CAPACITY)),
            connected: hub_connected.clone(),
        };
        tokio::spawn(state.run(connection));
        Ok(Self { publisher, prefix: key_prefix.to_owned(), hub, hub_connected })
    }

    /// The Redis channel that carries bus channel `channel`.
    pub fn channel_key(&self, channel: &str) -> String {
        if self.prefix.is_empty() { channel.to_owned() } else { format!("{}:{channel}", self.prefix) }
    }
}

#[async_trait]
impl Bus for RedisBus {
    async fn publish(&self, channel: &str, payload: Bytes) -> Result<(), BusError> {
        let key = self.channel_key(channel);
        let mut publisher = self.publisher.clone();
        let mut command = redis::cmd("PUBLISH");
        command.arg(&key).arg(payload.as_ref());
        let publish = command.query_async::<i64>(&mut publisher);
        match tokio::time::timeout(PUBLISH_TIMEOUT, publish).await {
            Ok(Ok(_receivers)) => Ok(()),
            Ok(Err(err)) => Err(BusError::Unavailable(format!("publishing to redis channel {key}: {err}"))),
            Err(_) => Err(BusError::Unavailable(format!("publishing to redis channel {key} timed out"))),
        }
    }

    async fn subscribe(&self, channel: &str) -> Result<Subscription, BusError> {
        let key = self.channel_key(channel);
        let (reply, answer) = oneshot::channel();
        let hub_gone = || BusError::Unavailable("redis pub/sub hub has stopped".to_owned());
        self.hub.send(Command::Subscribe { key: key.clone(), reply }).map_err(|_| hub_gone())?;
        // The hub bounds each confirmation itself; this only guards against a hub that
        // is stuck behind a long queue of commands.
        tokio::time::timeout(CONFIRM_TIMEOUT * 3, answer)
            .await
            .map_err(|_| BusError::Unavailable(format!("subscribing to redis channel {key} timed out")))?
            .map_err(|_| hub_gone())?
    }

    async fn ping(&self) -> Result<(), BusError> {
        if !self.hub_connected.load(Ordering::Relaxed) {
            return Err(BusError::Unavailable("redis pub/sub connection is down".to_owned()));
        }
        let mut publisher = self.publisher.clone();
        let command = redis::cmd("PING");
        let ping = command.query_async::<String>(&mut publisher);
        match tokio::time::timeout(PING_TIMEOUT, ping).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(err)) => Err(BusError::Unavailable(format!("redis ping: {err}"))),
            Err(_) => Err(BusError::Unavailable(format!("redis did not answer ping within {PING_TIMEOUT:?}"))),
        }
    }

    fn backend_name(&self) -> &'static str {
        "redis"
    }
}

struct Connection {
    sink: PubSubSink,
    stream: PubSubStream,
}

/// Opens a pub/sub connection already subscribed to `keys`.
async fn open_pubsub(client: &redis::Client, keys: &[&str]) -> Result<Connection, BusError> {
    let pubsub = tokio::time::timeout(CONNECT_TIMEOUT, client.get_async_pubsub())
        .await
        .map_err(|_| BusError::Unavailable("opening redis pub/sub connection timed out".to_owned()))?
        .map_err(|err| BusError::Unavailable(format!("opening redis pub/sub connection: {err}")))?;
    let (mut sink, stream) = pubsub.split();
    if !keys.is_empty() {
        confirm(sink.subscribe(keys), "resubscribe").await.map_err(|failure| match failure {
            Unconfirmed::Lost(text) | Unconfirmed::Refused(text) => BusError::Unavailable(text),
        })?;
    }
    Ok(Connection { sink, stream })
}

/// Why a pub/sub command was not confirmed.
enum Unconfirmed {
    /// The connection is dead or silent and must be replaced.
    Lost(String),
    /// Redis refused the command (say, an ACL); the connection itself is fine.
    Refused(String),
}

async fn confirm(command: impl Future<Output = redis::RedisResult<()>>, what: &str) -> Result<(), Unconfirmed> {
    match tokio::time::timeout(CONFIRM_TIMEOUT, command).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) if err.is_io_error() || err.is_connection_dropped() || err.is_unrecoverable_error() => {
            Err(Unconfirmed::Lost(format!("redis {what}: {err}")))
        }
        Ok(Err(err)) => Err(Unconfirmed::Refused(format!("redis {what}: {err}"))),
        Err(_) => Err(Unconfirmed::Lost(format!("redis {what}: no answer within {CONFIRM_TIMEOUT:?}"))),
    }
}

/// The task that owns the pub/sub connection.
struct Hub {
    client: redis::Client,
    commands: mpsc::UnboundedReceiver<Command>,
    /// Where a dropped subscription asks for its release.
    releases: mpsc::WeakUnboundedSender<Command>,
    /// The keys Redis delivers to this process.
    subscribed: HashSet<String>,
    /// The live subscriptions of those keys.
    fanout: Arc<Fanout>,
    connected: Arc<AtomicBool>,
}

impl Hub {
    async fn run(mut self, connection: Connection) {
        let mut connection = Some(connection);
        let mut backoff = MIN_BACKOFF;
        let mut next_attempt = Instant::now();
        let mut ping = tokio::time::interval_at(Instant::now() + HUB_PING_EVERY, HUB_PING_EVERY);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let lost = match connection.as_mut() {
                Some(conn) => tokio::select! {
                    message = conn.stream.next() => match message {
                        Some(message) => {
                            self.dispatch(&message);
                            None
                        }
                        None => Some("connection closed".to_owned()),
                    },
                    command = self.commands.recv() => match command {
                        Some(command) => self.handle(command, &mut conn.sink).await.err(),
                        None => return,
                    },
                    _ = ping.tick() => {
                        let ping = conn.sink.ping::<redis::Value>().map(|reply| reply.map(drop));
                        match confirm(ping, "ping").await {
                            Err(Unconfirmed::Lost(reason)) => Some(reason),
                            Ok(()) | Err(Unconfirmed::Refused(_)) => None,
                        }
                    }
                },
                None => tokio::select! {
                    command = self.commands.recv() => match command {
                        Some(command) => {
                            self.handle_offline(command);
                            None
                        }
                        None => return,
                    },
                    () = tokio::time::sleep_until(next_attempt) => {
                        let keys: Vec<&str> = self.subscribed.iter().map(String::as_str).collect();
                        match open_pubsub(&self.client, &keys).await {
                            Ok(conn) => {
                                connection = Some(conn);
                                backoff = MIN_BACKOFF;
                                self.connected.store(true, Ordering::Relaxed);
                                tracing::info!(channels = self.subscribed.len(), "redis pub/sub reconnected");
                                // Whatever was published while we were away is lost to
                                // these subscribers; tell them to re-read history.
                                self.fanout.gap_all();
                            }
                            Err(err) => {
                                tracing::warn!(error = %err, retry_in = ?backoff, "redis pub/sub reconnect failed");
                                next_attempt = Instant::now() + backoff;
                                backoff = (backoff * 2).min(MAX_BACKOFF);
                            }
                        }
                        None
                    }
                },
            };
            if let Some(reason) = lost {
                tracing::warn!(reason = %reason, "redis pub/sub connection lost; reconnecting");
                connection = None;
                self.connected.store(false, Ordering::Relaxed);
                next_attempt = Instant::now();
            }
        }
    }

    fn dispatch(&self, message: &redis::Msg) {
        // Nobody left for a channel means its Release is on the way.
        let payload = Bytes::copy_from_slice(message.get_payload_bytes());
        self.fanout.send(message.get_channel_name(), &BusItem::Message(payload));
    }

    /// A subscription of `key` in the fan-out, released through the hub when dropped.
    fn subscription(&self, key: &str) -> Subscription {
        let releases = self.releases.clone();
        let released = key.to_owned();
        self.fanout.subscribe(key, move || {
            if let Some(hub) = releases.upgrade() {
                let _ = hub.send(Command::Release { key: released });
            }
        })
    }

    /// Runs one command on a live connection; an error means the connection is broken.
    async fn handle(&mut self, command: Command, sink: &mut PubSubSink) -> Result<(), String> {
        match command {
            Command::Subscribe { key, reply } => {
                if !self.subscribed.contains(&key) {
                    match confirm(sink.subscribe(&key), "subscribe").await {
                        Ok(()) => {}
                        Err(Unconfirmed::Refused(text)) => {
                            let _ = reply.send(Err(BusError::Unavailable(text)));
                            return Ok(());
                        }
                        Err(Unconfirmed::Lost(text)) => {
                            let _ = reply.send(Err(BusError::Unavailable(text.clone())));
                            return Err(text);
                        }
                    }
                    self.subscribed.insert(key.clone());
                }
                // Added before the answer, so a Release of another subscription handled
                // meanwhile sees this one and keeps the key. Should the caller have given
                // up, the dropped subscription sends its own Release.
                let _ = reply.send(Ok(self.subscription(&key)));
                Ok(())
            }
            Command::Release { key } => self.release(key, sink).await,
        }
    }

    async fn release(&mut self, key: String, sink: &mut PubSubSink) -> Result<(), String> {
        if !self.forget_if_unused(&key) {
            return Ok(());
        }
        match confirm(sink.unsubscribe(&key), "unsubscribe").await {
            Ok(()) => Ok(()),
            Err(Unconfirmed::Refused(text)) => {
                // Only costs us unwanted messages, which dispatch drops.
                tracing::warn!(channel = %key, error = %text, "redis refused unsubscribe");
                Ok(())
            }
            Err(Unconfirmed::Lost(text)) => Err(text),
        }
    }

    /// Forgets `key` if no subscription of it is left; a subscribe that raced with the
    /// release keeps it.
    fn forget_if_unused(&mut self, key: &str) -> bool {
        let unused = self.subscribed.contains(key) && self.fanout.subscriber_count(key) == 0;
        if unused {
            self.subscribed.remove(key);
        }
        unused
    }

    /// Runs one command while disconnected: nothing can be confirmed, so subscribing fails.
    fn handle_offline(&mut self, command: Command) {
        match command {
            Command::Subscribe { key, reply } => {
                let _ = reply.send(Err(BusError::Unavailable(format!(
                    "cannot subscribe to redis channel {key}: pub/sub connection is down"
                ))));
            }
            Command::Release { key } => {
                // Not resubscribing it on reconnect is all that unsubscribing takes now.
                self.forget_if_unused(&key);
            }
        }
    }
}
