//! The production queue: a NATS JetStream work-queue stream with one durable pull
//! consumer shared by every worker.
//!
//! Only features of nats-server 2.9 are used (no multi-filter consumers, no consumer
//! metadata), because that is what Debian ships.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use async_nats::jetstream::context::{CreateStreamErrorKind, PublishError, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::ConsumerErrorKind;
use async_nats::jetstream::stream::{self, RetentionPolicy, StorageType};
use async_nats::jetstream::{self, AckKind};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;

use super::{Acker, Delivery, Queue, QueueConfig, QueueError};

/// Bounds JetStream API requests, publish acks and ack confirmations.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Bounds [`Queue::ping`] so `/readyz` answers quickly when NATS is gone.
const PING_TIMEOUT: Duration = Duration::from_secs(1);
/// Extra time granted to a pull request past its server-side expiry before we stop
/// waiting for the server's end-of-batch status.
const PULL_SLACK: Duration = Duration::from_secs(2);

/// A [`Queue`] on a JetStream work-queue stream and one durable pull consumer; clones share it.
#[derive(Clone)]
pub struct JetStreamQueue {
    inner: Arc<Inner>,
}

struct Inner {
    client: async_nats::Client,
    context: jetstream::Context,
    stream: String,
    subject: String,
    consumer: PullConsumer,
}

impl std::fmt::Debug for JetStreamQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamQueue")
            .field("stream", &self.inner.stream)
            .field("subject", &self.inner.subject)
            .field("consumer", &self.inner.consumer.cached_info().name)
            .finish_non_exhaustive()
    }
}

impl JetStreamQueue {
    /// Connects to `url` and opens the queue; see [`JetStreamQueue::connect`].
    pub async fn connect_url(
        url: &str,
        stream: &str,
        subject: &str,
        consumer: &str,
        config: QueueConfig,
    ) -> Result<Self, QueueError> {
        let connect = async_nats::ConnectOptions::new()
            .name(format!("agentd-queue-{stream}"))
            .connection_timeout(REQUEST_TIMEOUT)
            .connect(url);
        let client = tokio::time::timeout(REQUEST_TIMEOUT + PING_TIMEOUT, connect)
            .await
            .map_err(|_| QueueError::Unavailable(format!("connecting to nats at {url} timed out")))?
            .map_err(|err| QueueError::Unavailable(format!("connecting to nats at {url}: {err}")))?;
        Self::connect(client, stream, subject, consumer, config).await
    }

    /// Opens the queue on `client`, creating the stream and durable consumer if missing.
    pub async fn connect(
        client: async_nats::Client,
        stream: &str,
        subject: &str,
        consumer: &str,
        config: QueueConfig,
    ) -> Result<Self, QueueError> {
        // Safe when several processes start at once: creating an identical stream or
        // consumer again is a no-op on the server.
        let context = jetstream::context::ContextBuilder::new().timeout(REQUEST_TIMEOUT).build(client.clone());
        let stream_config = stream::Config {
            name: stream.to_owned(),
            subjects: vec![subject.to_owned()],
            retention: RetentionPolicy::WorkQueue,
            storage: StorageType::File,
            duplicate_window: config.dedupe_window,
            ..Default::default()
        };
        let handle = match context.get_or_create_stream(stream_config).await {
            Ok(handle) => handle,
            // Another process won the creation race with a different config (say another
            // dedupe window); use what exists if it is still a work queue on our subject.
            Err(create_err) => context.get_stream(stream).await.map_err(|_| {
                let text = format!("creating jetstream stream {stream}: {create_err}");
                match create_err.kind() {
                    // The server answered and said no: retrying will not help.
                    CreateStreamErrorKind::JetStream(_)
                    | CreateStreamErrorKind::EmptyStreamName
                    | CreateStreamErrorKind::InvalidStreamName
                    | CreateStreamErrorKind::DomainAndExternalSet => QueueError::Backend(text),
                    CreateStreamErrorKind::JetStreamUnavailable
                    | CreateStreamErrorKind::TimedOut
                    | CreateStreamErrorKind::Response
                    | CreateStreamErrorKind::NotFound
                    | CreateStreamErrorKind::ResponseParse => QueueError::Unavailable(text),
                }
            })?,
        };
        let existing = &handle.cached_info().config;
        if existing.retention != RetentionPolicy::WorkQueue || !existing.subjects.iter().any(|s| s == subject) {
            return Err(QueueError::Backend(format!(
                "jetstream stream {stream} exists but is not a work queue on subject {subject}"
            )));
        }
        if existing.duplicate_window != config.dedupe_window {
            tracing::warn!(
                stream,
                existing = ?existing.duplicate_window,
                wanted = ?config.dedupe_window,
                "jetstream stream keeps its existing duplicate window"
            );
        }

        // Create-or-update rather than get-or-create, so a changed ack wait or delivery
        // budget takes effect on the next deploy instead of being silently ignored.
        let consumer_config = pull::Config {
            durable_name: Some(consumer.to_owned()),
            ack_policy: AckPolicy::Explicit,
            deliver_policy: DeliverPolicy::All,
            ack_wait: config.ack_wait,
            max_deliver: config.max_deliver,
            ..Default::default()
        };
        let consumer = handle.create_consumer(consumer_config).await.map_err(|err| {
            let text = format!("creating jetstream consumer {consumer} on {stream}: {err}");
            match err.kind() {
                ConsumerErrorKind::JetStream(_)
                | ConsumerErrorKind::InvalidName
                | ConsumerErrorKind::InvalidConsumerType => QueueError::Backend(text),
                ConsumerErrorKind::TimedOut | ConsumerErrorKind::Request | ConsumerErrorKind::Other => {
                    QueueError::Unavailable(text)
                }
            }
        })?;
        let inner = Inner { client, context, stream: stream.to_owned(), subject: subject.to_owned(), consumer };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The stream's name.
    pub fn stream_name(&self) -> &str {
        &self.inner.stream
    }

    /// Deletes the stream with its consumer and messages (tests clean up with this).
    pub async fn delete(&self) -> Result<(), QueueError> {
        self.inner
            .context
            .delete_stream(&self.inner.stream)
            .await
            .map(|_| ())
            .map_err(|err| QueueError::Backend(format!("deleting jetstream stream {}: {err}", self.inner.stream)))
    }

    /// Issues one pull request for up to `max` messages: `None` takes what is pending
    /// now, `Some(wait)` lets the server hold the request until the batch is full or
    /// `wait` expires. Also returns how many messages the consumer still had to deliver
    /// after the last one received (0 when none was).
    async fn pull(&self, max: usize, wait: Option<Duration>) -> Result<(Vec<Delivery>, u64), QueueError> {
        let request = match wait {
            Some(wait) => self.inner.consumer.batch().max_messages(max).expires(wait).messages().await,
            None => self.inner.consumer.fetch().max_messages(max).messages().await,
        };
        let mut batch =
            request.map_err(|err| QueueError::Unavailable(format!("pull request on {}: {err}", self.inner.stream)))?;
        let mut out = Vec::with_capacity(max);
        let mut pending = 0;
        let mut failure = None;
        let collect = async {
            while let Some(item) = batch.next().await {
                match item.map_err(|err| err.to_string()).and_then(to_delivery) {
                    Ok((delivery, after)) => {
                        out.push(delivery);
                        pending = after;
                    }
                    Err(err) => {
                        failure = Some(err);
                        break;
                    }
                }
            }
        };
        let timed_out = tokio::time::timeout(wait.unwrap_or_default() + PULL_SLACK, collect).await.is_err();
        // Messages already received are handed out even if the batch ended badly: dropping
        // them would only delay them by an ack wait.
        if !out.is_empty() {
            return Ok((out, pending));
        }
        if let Some(err) = failure {
            return Err(QueueError::Backend(format!("pulling from {}: {err}", self.inner.stream)));
        }
        if timed_out || self.inner.client.connection_state() != async_nats::connection::State::Connected {
            return Err(QueueError::Unavailable(format!("pulling from {}: nats did not answer", self.inner.stream)));
        }
        Ok((out, 0))
    }
}

/// A delivery, and how many messages the consumer had yet to deliver after it.
fn to_delivery(message: jetstream::Message) -> Result<(Delivery, u64), String> {
    let (delivered, pending) = {
        let info = message.info().map_err(|err| format!("reading delivery metadata: {err}"))?;
        (info.delivered, info.pending)
    };
    let msg_id = message
        .message
        .headers
        .as_ref()
        .and_then(|headers| headers.get(async_nats::header::NATS_MESSAGE_ID))
        .map(|value| value.as_str().to_owned())
        .unwrap_or_default();
    let (message, acker) = message.split();
    let delivery_count = u64::try_from(delivered).unwrap_or(1).max(1);
    Ok((Delivery::new(message.payload, msg_id, delivery_count, Box::new(JetStreamAcker { acker })), pending))
}

#[async_trait]
impl Queue for JetStreamQueue {
    async fn publish(&self, msg_id: &str, payload: Bytes) -> Result<(), QueueError> {
        let message = PublishMessage::build().message_id(msg_id).payload(payload);
        let publish_err = |err: PublishError| {
            let text = format!("publishing {msg_id} to {}: {err}", self.inner.subject);
            match err.kind() {
                // No responders (JetStream restarting) and lost connections pass on retry.
                PublishErrorKind::TimedOut
                | PublishErrorKind::BrokenPipe
                | PublishErrorKind::StreamNotFound
                | PublishErrorKind::MaxAckPending => QueueError::Unavailable(text),
                PublishErrorKind::WrongLastMessageId
                | PublishErrorKind::WrongLastSequence
                | PublishErrorKind::MaxPayloadExceeded
                | PublishErrorKind::Other => QueueError::Backend(text),
            }
        };
        // Awaiting the ack future is what makes this durable: the server has stored it
        // (or recognised `msg_id` as a duplicate of something it stored).
        let ack = self.inner.context.send_publish(self.inner.subject.clone(), message).await.map_err(publish_err)?;
        ack.await.map_err(publish_err)?;
        Ok(())
    }

    async fn fetch(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        // A server-held request for the whole batch would only return once it is full or
        // expired. Long-poll for one message instead, then top up with what is pending:
        // only when the last message received says more are (a pull that finds nothing
        // costs the server and this process a subscription and a round trip).
        let (mut out, pending) = if wait < Duration::from_millis(1) {
            self.pull(max, None).await?
        } else {
            self.pull(1, Some(wait)).await?
        };
        if !out.is_empty() && out.len() < max && pending > 0 {
            match self.pull(max - out.len(), None).await {
                Ok((more, _)) => out.extend(more),
                // The first message is ours already; a failed top-up only means fewer now.
                Err(err) => {
                    tracing::debug!(stream = %self.inner.stream, error = %err, "jetstream top-up pull failed")
                }
            }
        }
        Ok(out)
    }

    async fn ping(&self) -> Result<(), QueueError> {
        if self.inner.client.connection_state() != async_nats::connection::State::Connected {
            return Err(QueueError::Unavailable("nats connection is down".to_owned()));
        }
        // Consumer info proves the server, JetStream and our consumer all answer.
        match tokio::time::timeout(PING_TIMEOUT, self.inner.consumer.get_info()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(err)) => {
                Err(QueueError::Unavailable(format!("jetstream consumer info on {}: {err}", self.inner.stream)))
            }
            Err(_) => Err(QueueError::Unavailable(format!("jetstream did not answer within {PING_TIMEOUT:?}"))),
        }
    }

    async fn undelivered(&self) -> Result<u64, QueueError> {
        match tokio::time::timeout(PING_TIMEOUT, self.inner.consumer.get_info()).await {
            Ok(Ok(info)) => Ok(info.num_pending),
            Ok(Err(err)) => {
                Err(QueueError::Unavailable(format!("jetstream consumer info on {}: {err}", self.inner.stream)))
            }
            Err(_) => Err(QueueError::Unavailable(format!("jetstream did not answer within {PING_TIMEOUT:?}"))),
        }
    }

    fn backend_name(&self) -> &'static str {
        "jetstream"
    }
}

/// Settles a JetStream delivery, waiting for the server to confirm each settle so a
/// lost ack or heartbeat surfaces as an error instead of a silent redelivery.
struct JetStreamAcker {
    acker: jetstream::message::Acker,
}

impl JetStreamAcker {
    async fn send(&self, kind: AckKind, what: &str) -> Result<(), QueueError> {
        self.acker
            .double_ack_with(kind)
            .await
            .map_err(|err| QueueError::Unavailable(format!("jetstream {what} not confirmed: {err}")))
    }
}

#[async_trait]
impl Acker for JetStreamAcker {
    async fn ack(&self) -> Result<(), QueueError> {
        self.send(AckKind::Ack, "ack").await
    }

    async fn nak(&self, delay: Duration) -> Result<(), QueueError> {
        let delay = if delay.is_zero() { None } else { Some(delay) };
        self.send(AckKind::Nak(delay), "nak").await
    }

    async fn in_progress(&self) -> Result<(), QueueError> {
        self.send(AckKind::Progress, "in-progress").await
    }
}
