//! Conformance suite of the queue seam: every case runs against the in-process queue and
//! against NATS JetStream (which must be reachable; the suite fails, never skips).
//!
//! Ack waits are short (1–2 s) so the suite stays fast; the only timing assertions are
//! "not before X" and "within a generous bound".

use std::collections::HashSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd_proto::{Delivery, JetStreamQueue, MemoryQueue, Queue, QueueConfig};
use agentd_tests::backends::{nats_url, require_tcp, unique_name};
use bytes::Bytes;
use futures::FutureExt;

#[derive(Clone, Copy, Debug)]
enum Backend {
    Memory,
    JetStream,
}

/// One queue under test, plus what it takes to open more handles on it and remove it.
#[derive(Clone)]
enum Fixture {
    Memory(MemoryQueue),
    JetStream { queue: JetStreamQueue, stream: String, consumer: String, config: QueueConfig },
}

impl Fixture {
    async fn open(backend: Backend, config: QueueConfig) -> Self {
        match backend {
            Backend::Memory => Self::Memory(MemoryQueue::new(config)),
            Backend::JetStream => {
                require_tcp("NATS", "AGENTD_TEST_NATS_URL", &nats_url()).await;
                let stream = unique_name("queue");
                let consumer = format!("{stream}_workers");
                let queue = open_jetstream(&stream, &consumer, config.clone()).await;
                Self::JetStream { queue, stream, consumer, config }
            }
        }
    }

    fn queue(&self) -> Arc<dyn Queue> {
        match self {
            Self::Memory(queue) => Arc::new(queue.clone()),
            Self::JetStream { queue, .. } => Arc::new(queue.clone()),
        }
    }

    /// Another handle on the same queue, as a second process would open it.
    async fn another(&self) -> Arc<dyn Queue> {
        match self {
            Self::Memory(queue) => Arc::new(queue.clone()),
            Self::JetStream { stream, consumer, config, .. } => {
                Arc::new(open_jetstream(stream, consumer, config.clone()).await)
            }
        }
    }

    async fn cleanup(&self) {
        if let Self::JetStream { queue, .. } = self {
            queue.delete().await.expect("delete test stream");
        }
    }
}

async fn open_jetstream(stream: &str, consumer: &str, config: QueueConfig) -> JetStreamQueue {
    let subject = format!("{stream}.submissions");
    JetStreamQueue::connect_url(&nats_url(), stream, &subject, consumer, config)
        .await
        .unwrap_or_else(|err| panic!("open jetstream queue {stream}: {err}"))
}

/// Runs `body` on a fresh queue and removes the queue afterwards, even if `body` panics.
async fn run<F, Fut>(backend: Backend, config: QueueConfig, body: F)
where
    F: FnOnce(Fixture) -> Fut,
    Fut: Future<Output = ()>,
{
    let fixture = Fixture::open(backend, config).await;
    let outcome = AssertUnwindSafe(body(fixture.clone())).catch_unwind().await;
    fixture.cleanup().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

fn config(ack_wait: Duration, max_deliver: i64) -> QueueConfig {
    QueueConfig { ack_wait, max_deliver, dedupe_window: Duration::from_secs(60) }
}

async fn publish(queue: &dyn Queue, msg_id: &str, payload: &str) {
    queue
        .publish(msg_id, Bytes::from(payload.to_owned()))
        .await
        .unwrap_or_else(|err| panic!("publish {msg_id}: {err}"));
}

async fn fetch(queue: &dyn Queue, max: usize, wait: Duration) -> Vec<Delivery> {
    queue.fetch(max, wait).await.unwrap_or_else(|err| panic!("fetch: {err}"))
}

/// Fetches and expects exactly one delivery.
async fn fetch_one(queue: &dyn Queue, wait: Duration) -> Delivery {
    let mut batch = fetch(queue, 10, wait).await;
    assert_eq!(batch.len(), 1, "expected exactly one delivery, got {batch:?}");
    batch.remove(0)
}

async fn expect_nothing(queue: &dyn Queue, wait: Duration, why: &str) {
    let batch = fetch(queue, 10, wait).await;
    assert!(batch.is_empty(), "{why}: unexpected deliveries {batch:?}");
}

mod cases {
    use super::*;

    pub async fn publish_fetch_ack_delivers_once(backend: Backend) {
        let ack_wait = Duration::from_secs(1);
        run(backend, config(ack_wait, 10), |fx| async move {
            let queue = fx.queue();
            publish(&*queue, "run_1:1", "hello").await;
            let delivery = fetch_one(&*queue, Duration::from_secs(5)).await;
            assert_eq!(delivery.payload, Bytes::from_static(b"hello"));
            assert_eq!(delivery.msg_id, "run_1:1");
            assert_eq!(delivery.delivery_count, 1);
            delivery.ack().await.expect("ack");
            // Longer than the ack wait: an acked message must not come back.
            expect_nothing(&*queue, ack_wait * 2, "acked message redelivered").await;
        })
        .await;
    }

    pub async fn duplicate_msg_id_is_delivered_once(backend: Backend) {
        run(backend, config(Duration::from_secs(2), 10), |fx| async move {
            let queue = fx.queue();
            publish(&*queue, "run_2:1", "first").await;
            publish(&*queue, "run_2:1", "second").await;
            let delivery = fetch_one(&*queue, Duration::from_secs(5)).await;
            assert_eq!(delivery.payload, Bytes::from_static(b"first"));
            delivery.ack().await.expect("ack");
            expect_nothing(&*queue, Duration::from_secs(1), "duplicate delivered").await;
        })
        .await;
    }

    pub async fn unacked_message_is_redelivered_after_ack_wait(backend: Backend) {
        let ack_wait = Duration::from_secs(1);
        run(backend, config(ack_wait, 10), |fx| async move {
            let queue = fx.queue();
            publish(&*queue, "run_3:1", "work").await;
            let first = fetch_one(&*queue, Duration::from_secs(5)).await;
            let delivered_at = Instant::now();
            assert_eq!(first.delivery_count, 1);
            drop(first);

            let again = fetch_one(&*queue, Duration::from_secs(5)).await;
            assert!(
                delivered_at.elapsed() >= ack_wait - Duration::from_millis(50),
                "redelivered after {:?}, before the ack wait of {ack_wait:?}",
                delivered_at.elapsed()
            );
            assert_eq!(again.delivery_count, 2);
            assert_eq!(again.msg_id, "run_3:1");
            assert_eq!(again.payload, Bytes::from_static(b"work"));
            again.ack().await.expect("ack");
            expect_nothing(&*queue, ack_wait * 2, "acked redelivery came back").await;
        })
        .await;
    }

    pub async fn nak_with_delay_redelivers_after_the_delay(backend: Backend) {
        // The ack wait is far longer than the delay, so a redelivery can only be the nak's.
        let delay = Duration::from_secs(1);
        run(backend, config(Duration::from_secs(10), 10), |fx| async move {
            let queue = fx.queue();
            publish(&*queue, "run_4:1", "busy").await;
            let first = fetch_one(&*queue, Duration::from_secs(5)).await;
            let nakked_at = Instant::now();
            first.nak(delay).await.expect("nak");

            expect_nothing(&*queue, delay / 2, "nakked message redelivered before its delay").await;
            let again = fetch_one(&*queue, Duration::from_secs(5)).await;
            assert!(
                nakked_at.elapsed() >= delay - Duration::from_millis(50),
                "redelivered {:?} after a nak delayed by {delay:?}",
                nakked_at.elapsed()
            );
            assert_eq!(again.delivery_count, 2);
            assert_eq!(again.msg_id, "run_4:1");
            again.ack().await.expect("ack");
        })
        .await;
    }

    pub async fn in_progress_keeps_a_message_past_the_ack_wait(backend: Backend) {
        let ack_wait = Duration::from_millis(1500);
        run(backend, config(ack_wait, 10), |fx| async move {
            let queue = fx.queue();
            publish(&*queue, "run_5:1", "long turn").await;
            let delivery = fetch_one(&*queue, Duration::from_secs(5)).await;
            let delivered_at = Instant::now();
            // Heartbeat well inside the ack wait until we are far past the original one.
            while delivered_at.elapsed() < ack_wait * 2 {
                tokio::time::sleep(Duration::from_millis(400)).await;
                delivery.in_progress().await.expect("in_progress");
            }
            expect_nothing(&*queue, Duration::from_millis(500), "message redelivered despite in_progress").await;
            delivery.ack().await.expect("ack");
            expect_nothing(&*queue, ack_wait + Duration::from_millis(500), "acked message redelivered").await;
        })
        .await;
    }

    pub async fn max_deliver_stops_redelivery(backend: Backend) {
        let ack_wait = Duration::from_secs(1);
        run(backend, config(ack_wait, 2), |fx| async move {
            let queue = fx.queue();
            publish(&*queue, "run_6:1", "poison").await;
            let first = fetch_one(&*queue, Duration::from_secs(5)).await;
            assert_eq!(first.delivery_count, 1);
            drop(first);
            let second = fetch_one(&*queue, Duration::from_secs(5)).await;
            assert_eq!(second.delivery_count, 2);
            drop(second);
            expect_nothing(&*queue, ack_wait * 5 / 2, "delivered past max_deliver").await;
        })
        .await;
    }

    pub async fn concurrent_consumers_never_share_a_message(backend: Backend) {
        const MESSAGES: usize = 40;
        run(backend, config(Duration::from_secs(5), 10), |fx| async move {
            // Two more handles opened at once, as two workers starting together would.
            let (a, b) = tokio::join!(fx.another(), fx.another());
            let publisher = fx.queue();
            for i in 0..MESSAGES {
                publish(&*publisher, &format!("run_7_{i}:1"), &format!("payload {i}")).await;
            }
            let seen: Arc<Mutex<Vec<(usize, String)>>> = Arc::default();
            let deadline = Instant::now() + Duration::from_secs(20);
            let consume = |worker: usize, queue: Arc<dyn Queue>| {
                let seen = seen.clone();
                async move {
                    while seen.lock().unwrap().len() < MESSAGES && Instant::now() < deadline {
                        for delivery in fetch(&*queue, 4, Duration::from_millis(300)).await {
                            seen.lock().unwrap().push((worker, delivery.msg_id.clone()));
                            delivery.ack().await.expect("ack");
                        }
                    }
                }
            };
            tokio::join!(consume(0, a), consume(1, b));

            let seen = seen.lock().unwrap().clone();
            let unique: HashSet<&str> = seen.iter().map(|(_, id)| id.as_str()).collect();
            assert_eq!(unique.len(), MESSAGES, "not every message was delivered: {seen:?}");
            assert_eq!(seen.len(), MESSAGES, "some message was delivered twice: {seen:?}");
        })
        .await;
    }

    pub async fn fetch_on_an_empty_queue_waits_then_returns_nothing(backend: Backend) {
        run(backend, config(Duration::from_secs(1), 10), |fx| async move {
            let queue = fx.queue();
            let wait = Duration::from_millis(700);
            let started = Instant::now();
            let batch = fetch(&*queue, 10, wait).await;
            let took = started.elapsed();
            assert!(batch.is_empty(), "empty queue delivered {batch:?}");
            assert!(took >= wait - Duration::from_millis(50), "fetch returned after {took:?}, before its wait");
            assert!(took < wait + Duration::from_secs(5), "fetch took {took:?} for a {wait:?} wait");
        })
        .await;
    }

    pub async fn one_fetch_takes_what_is_pending_up_to_its_max(backend: Backend) {
        run(backend, config(Duration::from_secs(5), 10), |fx| async move {
            let queue = fx.queue();
            for n in 0..5 {
                publish(&*queue, &format!("run_{n}:1"), "pending").await;
            }
            let first = fetch(&*queue, 3, Duration::from_secs(5)).await;
            assert_eq!(first.len(), 3, "a fetch fills its batch from what is pending");
            let rest = fetch(&*queue, 10, Duration::from_secs(5)).await;
            let ids: Vec<_> = first.iter().chain(&rest).map(|delivery| delivery.msg_id.clone()).collect();
            assert_eq!(
                ids,
                (0..5).map(|n| format!("run_{n}:1")).collect::<Vec<_>>(),
                "the rest in one more fetch, in order"
            );
            for delivery in first.into_iter().chain(rest) {
                delivery.ack().await.expect("ack");
            }
        })
        .await;
    }

    pub async fn ping_answers(backend: Backend) {
        run(backend, config(Duration::from_secs(1), 10), |fx| async move {
            let queue = fx.queue();
            queue.ping().await.expect("ping");
            let expected = match backend {
                Backend::Memory => "memory",
                Backend::JetStream => "jetstream",
            };
            assert_eq!(queue.backend_name(), expected);
        })
        .await;
    }
}

/// Instantiates every case once per backend.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $case() {
                    super::cases::$case(super::Backend::Memory).await;
                }
            )*
        }

        mod jetstream {
            $(
                #[tokio::test]
                async fn $case() {
                    super::cases::$case(super::Backend::JetStream).await;
                }
            )*
        }
    };
}

conformance!(
    publish_fetch_ack_delivers_once,
    duplicate_msg_id_is_delivered_once,
    unacked_message_is_redelivered_after_ack_wait,
    nak_with_delay_redelivers_after_the_delay,
    in_progress_keeps_a_message_past_the_ack_wait,
    max_deliver_stops_redelivery,
    concurrent_consumers_never_share_a_message,
    fetch_on_an_empty_queue_waits_then_returns_nothing,
    one_fetch_takes_what_is_pending_up_to_its_max,
    ping_answers,
);
