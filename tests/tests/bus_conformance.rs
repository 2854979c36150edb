//! Conformance suite of the bus seam: every case runs against the in-process bus and
//! against Redis pub/sub (which must be reachable; the suite fails, never skips). A few
//! Redis-only cases cut the connection through a local proxy to check reconnects.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentd_proto::{Bus, BusItem, MemoryBus, RedisBus, Subscription};
use agentd_tests::backends::{redis_url, require_tcp, unique_name};
use bytes::Bytes;
use futures::StreamExt;

/// Generous bound for anything that should happen "soon".
const SOON: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug)]
enum Backend {
    Memory,
    Redis,
}

/// One bus under test, plus a side channel to observe its subscriptions.
enum Fixture {
    Memory(MemoryBus),
    Redis { bus: RedisBus, admin: ::redis::aio::MultiplexedConnection },
}

impl Fixture {
    async fn open(backend: Backend) -> Self {
        match backend {
            Backend::Memory => Self::Memory(MemoryBus::new()),
            Backend::Redis => {
                let url = redis_url();
                require_tcp("Redis", "AGENTD_TEST_REDIS_URL", &url).await;
                let bus = RedisBus::connect(&url, &unique_name("bus")).await.expect("connect redis bus");
                Self::Redis { bus, admin: admin_connection(&url).await }
            }
        }
    }

    fn bus(&self) -> &dyn Bus {
        match self {
            Self::Memory(bus) => bus,
            Self::Redis { bus, .. } => bus,
        }
    }

    /// Subscriptions the backend holds for `channel` (Redis: PUBSUB NUMSUB, seen from
    /// another connection).
    async fn subscriber_count(&self, channel: &str) -> usize {
        match self {
            Self::Memory(bus) => bus.subscriber_count(channel),
            Self::Redis { bus, admin } => numsub(&mut admin.clone(), &bus.channel_key(channel)).await,
        }
    }
}

async fn admin_connection(url: &str) -> ::redis::aio::MultiplexedConnection {
    let client = ::redis::Client::open(url).expect("redis url");
    client.get_multiplexed_async_connection().await.expect("admin redis connection")
}

async fn numsub(admin: &mut ::redis::aio::MultiplexedConnection, key: &str) -> usize {
    let (_, count): (String, usize) =
        ::redis::cmd("PUBSUB").arg("NUMSUB").arg(key).query_async(admin).await.expect("PUBSUB NUMSUB");
    count
}

async fn publish(bus: &dyn Bus, channel: &str, payload: &str) {
    bus.publish(channel, Bytes::from(payload.to_owned()))
        .await
        .unwrap_or_else(|err| panic!("publish to {channel}: {err}"));
}

async fn subscribe(bus: &dyn Bus, channel: &str) -> Subscription {
    bus.subscribe(channel).await.unwrap_or_else(|err| panic!("subscribe to {channel}: {err}"))
}

async fn next(subscription: &mut Subscription) -> BusItem {
    tokio::time::timeout(SOON, subscription.next())
        .await
        .expect("no bus item within the bound")
        .expect("subscription ended")
}

fn message(payload: &str) -> BusItem {
    BusItem::Message(Bytes::from(payload.to_owned()))
}

mod cases {
    use super::*;

    pub async fn subscribe_then_publish_is_received(backend: Backend) {
        let fx = Fixture::open(backend).await;
        let mut sub = subscribe(fx.bus(), "sesn_1").await;
        publish(fx.bus(), "sesn_1", "hello").await;
        assert_eq!(next(&mut sub).await, message("hello"));
    }

    pub async fn every_subscriber_receives(backend: Backend) {
        let fx = Fixture::open(backend).await;
        let mut first = subscribe(fx.bus(), "sesn_2").await;
        let mut second = subscribe(fx.bus(), "sesn_2").await;
        publish(fx.bus(), "sesn_2", "fan-out").await;
        assert_eq!(next(&mut first).await, message("fan-out"));
        assert_eq!(next(&mut second).await, message("fan-out"));
    }

    pub async fn per_channel_order_is_preserved(backend: Backend) {
        const COUNT: usize = 1000;
        let fx = Fixture::open(backend).await;
        let mut sub = subscribe(fx.bus(), "sesn_3").await;
        // Read while publishing, so the check is about order, not buffer size.
        let reader = tokio::spawn(async move {
            let mut items = Vec::with_capacity(COUNT);
            while items.len() < COUNT {
                items.push(next(&mut sub).await);
            }
            items
        });
        for i in 0..COUNT {
            publish(fx.bus(), "sesn_3", &i.to_string()).await;
        }
        let items = reader.await.expect("reader task");
        let expected: Vec<BusItem> = (0..COUNT).map(|i| message(&i.to_string())).collect();
        assert!(items == expected, "messages arrived out of order or with gaps");
    }

    pub async fn channels_are_isolated(backend: Backend) {
        let fx = Fixture::open(backend).await;
        let mut a = subscribe(fx.bus(), "sesn_a").await;
        let mut b = subscribe(fx.bus(), "sesn_b").await;
        publish(fx.bus(), "sesn_a", "for a").await;
        publish(fx.bus(), "sesn_b", "for b").await;
        publish(fx.bus(), "sesn_a", "for a again").await;
        assert_eq!(next(&mut a).await, message("for a"));
        assert_eq!(next(&mut a).await, message("for a again"));
        assert_eq!(next(&mut b).await, message("for b"));
    }

    pub async fn nothing_is_replayed_to_a_late_subscriber(backend: Backend) {
        let fx = Fixture::open(backend).await;
        publish(fx.bus(), "sesn_4", "before anyone listened").await;
        let mut sub = subscribe(fx.bus(), "sesn_4").await;
        publish(fx.bus(), "sesn_4", "after").await;
        assert_eq!(next(&mut sub).await, message("after"));
    }

    pub async fn dropping_the_last_subscription_unsubscribes(backend: Backend) {
        let fx = Fixture::open(backend).await;
        let first = subscribe(fx.bus(), "sesn_5").await;
        let mut second = subscribe(fx.bus(), "sesn_5").await;
        assert!(fx.subscriber_count("sesn_5").await > 0, "no subscription registered");

        drop(first);
        publish(fx.bus(), "sesn_5", "still here").await;
        assert_eq!(next(&mut second).await, message("still here"));
        assert!(fx.subscriber_count("sesn_5").await > 0, "dropping one of two subscriptions unsubscribed");

        drop(second);
        let deadline = Instant::now() + SOON;
        while fx.subscriber_count("sesn_5").await > 0 {
            assert!(Instant::now() < deadline, "channel still subscribed after its last subscription dropped");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn ping_answers(backend: Backend) {
        let fx = Fixture::open(backend).await;
        fx.bus().ping().await.expect("ping");
        let expected = match backend {
            Backend::Memory => "memory",
            Backend::Redis => "redis",
        };
        assert_eq!(fx.bus().backend_name(), expected);
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

        mod redis {
            $(
                #[tokio::test]
                async fn $case() {
                    super::cases::$case(super::Backend::Redis).await;
                }
            )*
        }
    };
}

conformance!(
    subscribe_then_publish_is_received,
    every_subscriber_receives,
    per_channel_order_is_preserved,
    channels_are_isolated,
    nothing_is_replayed_to_a_late_subscriber,
    dropping_the_last_subscription_unsubscribes,
    ping_answers,
);

/// A TCP proxy in front of Redis that can cut every connection and refuse new ones,
/// standing in for a Redis restart without touching the shared server.
struct Proxy {
    addr: SocketAddr,
    /// Bumped to cut every open connection.
    generation: tokio::sync::watch::Sender<u64>,
    /// While true, new connections are closed as soon as they are accepted.
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
    upstream: String,
}

impl Proxy {
    async fn start(upstream: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (generation, _) = tokio::sync::watch::channel(0u64);
        let down = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (cut, refuse, target) = (generation.clone(), down.clone(), upstream.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if refuse.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let mut cut = cut.subscribe();
                let target = target.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self { addr, generation, down, upstream }
    }

    /// The Redis URL with the proxy in place of the server.
    fn url(&self, redis_url: &str) -> String {
        redis_url.replacen(&self.upstream, &self.addr.to_string(), 1)
    }

    fn cut_connections(&self) {
        self.generation.send_modify(|generation| *generation += 1);
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, std::sync::atomic::Ordering::SeqCst);
        if down {
            self.cut_connections();
        }
    }
}

/// `host:port` of a Redis URL.
fn host_port(url: &str) -> String {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let rest = rest.rsplit('@').next().unwrap_or(rest);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

async fn proxied_bus() -> (Proxy, RedisBus) {
    let url = redis_url();
    require_tcp("Redis", "AGENTD_TEST_REDIS_URL", &url).await;
    let proxy = Proxy::start(host_port(&url)).await;
    let bus = RedisBus::connect(&proxy.url(&url), &unique_name("bus")).await.expect("connect redis bus via proxy");
    (proxy, bus)
}

/// Publishes until the publishing connection has reconnected and accepts it.
async fn publish_eventually(bus: &dyn Bus, channel: &str, payload: &str) {
    let deadline = Instant::now() + SOON;
    while let Err(err) = bus.publish(channel, Bytes::from(payload.to_owned())).await {
        assert!(Instant::now() < deadline, "publish never recovered: {err}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

mod redis_only {
    use super::*;

    #[tokio::test]
    async fn a_dropped_connection_is_resubscribed_and_reported_as_a_gap() {
        let (proxy, bus) = proxied_bus().await;
        let mut sub = subscribe(&bus, "sesn_6").await;
        publish(&bus, "sesn_6", "before").await;
        assert_eq!(next(&mut sub).await, message("before"));

        proxy.cut_connections();
        assert_eq!(next(&mut sub).await, BusItem::Gap, "reconnect not reported as a gap");
        publish_eventually(&bus, "sesn_6", "after").await;
        assert_eq!(next(&mut sub).await, message("after"), "not resubscribed after reconnect");
    }

    #[tokio::test]
    async fn ping_fails_fast_while_redis_is_down_and_recovers() {
        let (proxy, bus) = proxied_bus().await;
        bus.ping().await.expect("ping while up");

        proxy.set_down(true);
        // The cut reaches the sockets asynchronously, so a ping or two may still pass;
        // what matters is that each ping answers quickly and they soon start failing.
        let deadline = Instant::now() + SOON;
        loop {
            let started = Instant::now();
            let outcome = bus.ping().await;
            assert!(started.elapsed() < Duration::from_secs(3), "ping took {:?} to answer", started.elapsed());
            if outcome.is_err() {
                break;
            }
            assert!(Instant::now() < deadline, "ping kept succeeding while redis was unreachable");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(bus.subscribe("sesn_7").await.is_err(), "subscribe succeeded while redis was unreachable");

        proxy.set_down(false);
        let deadline = Instant::now() + SOON;
        while let Err(err) = bus.ping().await {
            assert!(Instant::now() < deadline, "ping never recovered: {err}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut sub = subscribe(&bus, "sesn_7").await;
        publish(&bus, "sesn_7", "back").await;
        assert_eq!(next(&mut sub).await, message("back"));
    }
}
