//! Role wiring: which backends each role connects, which listeners it serves, and
//! how it shuts down. Production roles never fall back to an embedded backend: a
//! missing or unreachable dependency is a startup error naming the setting to fix.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentd_gateway::adapters::mcp::McpSettings;
use agentd_gateway::adapters::mcp::replay::StreamLog;
use agentd_gateway::adapters::mcp::sessions::RedisSessions;
use agentd_gateway::admission::limiter::Limiter;
use agentd_gateway::ops::{self, Backends, OpsState};
use agentd_gateway::{AppState, MemoryLimiter, RedisLimiter, Shared};
use agentd_proto::bus::memory::MemoryBus;
use agentd_proto::bus::redis::RedisBus;
use agentd_proto::queue::jetstream::JetStreamQueue;
use agentd_proto::queue::memory::MemoryQueue;
use agentd_proto::{Bus, Lifecycle, Queue};
use agentd_schema::blobs::Blobs;
use agentd_schema::catalogs::Catalogs;
use agentd_schema::outbox::{RelayConfig, run_relay};
use agentd_schema::secrets::SecretBox;
use agentd_schema::sql::redact_url;
use agentd_schema::store::prelude::*;
use agentd_schema::{Clock, ConnectOptions, SqlStore, SystemClock};
use agentd_worker::consumer::ConsumerConfig;
use agentd_worker::providers::Registry;
use agentd_worker::run::{HistoryCache, RunContext};
use anyhow::{Context, Result, bail};
use axum::Router;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::Settings;

/// How long a production role waits for each dependency at startup.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `agentd migrate`.
pub async fn migrate(settings: Settings) -> Result<()> {
    let url = settings
        .database_url
        .clone()
        .context("no database configured: set AGENTD_DATABASE_URL (or --database-url) to postgres://… or sqlite://…")?;
    let store = connect_store(&url).await?;
    store.migrate().await.with_context(|| format!("migrating {} failed", redact_url(&url)))?;
    info!(database = %redact_url(&url), "migrations applied");
    store.close().await;
    Ok(())
}

/// `agentd dev`: everything in one process on embedded backends.
pub async fn dev(settings: Settings) -> Result<()> {
    let data_dir = settings.data_dir();
    let database = crate::data_dir::prepare(&data_dir)?;
    let url = settings.database_url.clone().unwrap_or_else(|| format!("sqlite://{}", database.display()));
    let store = connect_store(&url).await?;
    store.migrate().await.context("migrating the embedded database failed")?;
    let queue: Arc<dyn Queue> = Arc::new(MemoryQueue::new(settings.queue_config()?));
    let bus: Arc<dyn Bus> = Arc::new(MemoryBus::new());
    info!(
        store = %redact_url(&url),
        queue = queue.backend_name(),
        bus = bus.backend_name(),
        "embedded backends ready"
    );
    let dev_key = dev_api_key(store.as_ref(), &data_dir).await?;
    bootstrap_key(store.as_ref(), &settings).await?;
    let limiter: Arc<dyn Limiter> = Arc::new(MemoryLimiter::new(settings.limits()?));
    let secrets = match settings.secret_box()? {
        Some(secrets) => secrets,
        None => settings.with_previous_keys(dev_secret_box(&data_dir)?)?,
    };
    let blobs = connect_blobs(&settings, Some(&data_dir.join("blobs"))).await?;
    let mut process = Process::new(settings, store, Some(queue), Some(bus), blobs, Some(limiter));
    process.secrets = Some(Arc::new(secrets));
    process.start_relay();
    process.start_catalogs().await?;
    // No Anthropic endpoint configured: Claude models answer from the scripted model.
    process.start_consumer(Registry::from_env(true), true)?;
    let mcp = mcp_settings(&process.settings, true, None)?;
    let (bound, ops) = process.serve_api(mcp, true).await?;
    if let Some(grpc) = process.settings.grpc_addr {
        process.serve_grpc(grpc, "agentd.dev").await?;
    } else {
        process.lifecycle.report(true).await;
    }
    let base = format!("http://{}", connectable(bound));
    // The hands of cloud environments, in process, over the same HTTP protocol.
    let mut sandbox_line = None;
    if !process.settings.dev_no_runner {
        let key = agentd_schema::ids::new_secret("sk-agentd-runner");
        let workspace = process.backends.store.ensure_workspace("default", "default").await?;
        let kind = agentd_schema::KeyKind::Runner;
        process.backends.store.insert_api_key(&workspace.id, "dev-runner", &key, &kind).await?;
        let config = runner_config(&process.settings, base.clone(), key)?;
        sandbox_line = Some(sandbox_summary(&config.sandbox));
        let stop = process.stop.clone();
        process.supervise("runner", move || {
            let run = agentd_runner::run(config.clone(), stop.clone());
            async move { run.await.map_err(|error| format!("the in-process runner stopped: {error:#}")) }
        });
    }
    println!();
    println!("  agentd dev is running at {base}");
    println!("  data:      {} (SQLite; in-process queue and bus)", data_dir.display());
    if let Some(line) = sandbox_line {
        println!("  sandbox:   {line}");
    }
    let ops = connectable(ops);
    println!("  readiness: curl http://{ops}/readyz");
    println!("  metrics:   curl http://{ops}/metrics   (the operations listener, AGENTD_OPS_ADDR)");
    println!();
    println!("  Point the official SDK at it:");
    println!("  ANTHROPIC_BASE_URL={base} ANTHROPIC_API_KEY={dev_key}");
    println!();
    process.run_until_signal().await
}

/// The address a client on this machine reaches `bound` at: loopback for a listener on
/// every interface (`0.0.0.0:8080` is not an address to connect to).
fn connectable(bound: SocketAddr) -> SocketAddr {
    match bound.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, bound.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, bound.port()))
        }
        _ => bound,
    }
}

fn runner_config(settings: &Settings, gateway_url: String, key: String) -> Result<agentd_runner::RunnerConfig> {
    let sandbox = settings.sandbox()?;
    log_sandbox(&sandbox);
    // Found (and on cgroup v2 delegated to itself) before any sandbox starts.
    let host = agentd_runner::policy::Host::current();
    info!(
        memory = host.cgroups.caps_memory(),
        pids = host.cgroups.caps_pids(),
        cpu = host.cgroups.caps_cpu(),
        "sandbox cgroups: what sandbox execution policies can cap per session"
    );
    Ok(agentd_runner::RunnerConfig {
        gateway_url,
        key,
        sandbox,
        max_sessions: 64,
        idle_stop: settings.runner_idle_stop()?,
    })
}

/// Says at start-up which isolation level the built-in tools run under, and what is
/// missing for it (ADR 0011: a missing bubblewrap is not papered over).
fn log_sandbox(sandbox: &agentd_runner::sandbox::SandboxConfig) {
    use agentd_runner::sandbox::{Isolation, bubblewrap_available, runner_is_root};
    let root_user = runner_is_root();
    let isolation = sandbox.isolation.as_str();
    let root = sandbox.root.display().to_string();
    match sandbox.isolation {
        Isolation::Namespace if !bubblewrap_available() => tracing::error!(
            isolation, %root,
            "sandbox isolation `namespace` needs bubblewrap, which is not installed: every built-in tool call will \
             fail until it is (apt-get install bubblewrap) or AGENTD_SANDBOX_ISOLATION=workdir opts into the weaker level"
        ),
        Isolation::Namespace => match agentd_runner::sandbox::probe_bubblewrap() {
            Ok(()) => info!(isolation, %root, per_session_uid = root_user, "sandbox isolation in force"),
            Err(error) => tracing::error!(
                isolation, %root, %error,
                "sandbox isolation `namespace` is configured but bubblewrap cannot create namespaces here: built-in \
                 tool calls will fail (run the hands as root, or allow user namespaces)"
            ),
        },
        Isolation::Workdir if root_user => warn!(
            isolation, %root,
            "sandbox isolation `workdir` (opted in): a uid, pid namespace and disk quota per session, but the host's \
             world-readable files are visible to tool calls"
        ),
        Isolation::Workdir => warn!(
            isolation, %root,
            "sandbox isolation `workdir` without root: sessions share the runner's uid, process limit and host \
             directories; this level guards against accidents only"
        ),
    }
}

/// The `agentd dev` banner's sandbox line.
fn sandbox_summary(sandbox: &agentd_runner::sandbox::SandboxConfig) -> String {
    use agentd_runner::sandbox::{Isolation, bubblewrap_available};
    let level = match sandbox.isolation {
        Isolation::Namespace if !bubblewrap_available() => "namespace — bubblewrap MISSING, tool calls fail",
        Isolation::Namespace => "namespace (bubblewrap)",
        Isolation::Workdir => "workdir (opted in)",
    };
    format!("{level}; workdirs in {}", sandbox.root.display())
}

/// A standalone runner does not start on a level it cannot give (ADR 0030): in a container
/// without the privileges bubblewrap needs, every built-in tool call would fail. (`agentd
/// dev` on a laptop keeps running and says so in its banner and log.)
fn refuse_an_unenforceable_sandbox(sandbox: &agentd_runner::sandbox::SandboxConfig) -> Result<()> {
    use agentd_runner::sandbox::{Isolation, probe_bubblewrap};
    match sandbox.isolation {
        Isolation::Namespace => probe_bubblewrap().map_err(|error| {
            anyhow::anyhow!(
                "sandbox isolation `namespace` cannot work here: {error}. Grant what is missing, or set \
                 AGENTD_SANDBOX_ISOLATION=workdir to accept the weaker level"
            )
        }),
        Isolation::Workdir => Ok(()),
    }
}

/// `agentd runner`: polls cloud work through a gateway until SIGTERM/SIGINT.
pub async fn runner(settings: Settings) -> Result<()> {
    let Some(url) = settings.runner_gateway_url.clone() else {
        bail!("agentd runner needs AGENTD_RUNNER_GATEWAY_URL (the gateway to poll, e.g. http://gateway:8080)");
    };
    let Some(key) = settings.runner_key.clone() else {
        bail!("agentd runner needs AGENTD_RUNNER_KEY (create one with `agentd keys create --workspace W --runner`)");
    };
    refuse_an_unenforceable_sandbox(&settings.sandbox()?)?;
    let config = runner_config(&settings, url, key)?;
    let mut shutdown = Shutdown::listen();
    let stop = CancellationToken::new();
    let runner = tokio::spawn(agentd_runner::run(config, stop.clone()));
    shutdown.wait().await;
    info!("runner stopping: open work items are left to expire and be offered again");
    stop.cancel();
    runner.await??;
    Ok(())
}

/// `agentd tunnel`: serves an MCP tunnel's connector until SIGTERM/SIGINT.
pub async fn tunnel(args: crate::tunnel::TunnelArgs) -> Result<()> {
    let mut shutdown = Shutdown::listen();
    let stop = CancellationToken::new();
    let mut connector = tokio::spawn(crate::tunnel::run(args, stop.clone()));
    tokio::select! {
        () = shutdown.wait() => {
            stop.cancel();
            connector.await?
        }
        ended = &mut connector => ended?,
    }
}

/// `agentd gateway`.
pub async fn gateway(settings: Settings) -> Result<()> {
    let (store, queue, bus, blobs) = production_backends(&settings, "gateway").await?;
    bootstrap_key(store.as_ref(), &settings).await?;
    let redis_url = settings.redis_url.clone().unwrap_or_default();
    let limiter =
        RedisLimiter::connect(&redis_url, &settings.redis_prefix(), settings.limits()?).await.with_context(|| {
            format!("cannot use Redis at {} for rate limits (check AGENTD_REDIS_URL)", redact_url(&redis_url))
        })?;
    let Some(secrets) = settings.secret_box()? else {
        bail!(
            "agentd gateway needs a key for secrets at rest: set AGENTD_SECRET_KEY to 32 random bytes, base64 (e.g. `openssl rand -base64 32`)"
        );
    };
    // Handshake-era MCP sessions are shared by every gateway through Redis (ADR 0008).
    let mcp_sessions = RedisSessions::connect(&redis_url, &settings.redis_prefix()).await.with_context(|| {
        format!("cannot use Redis at {} for MCP sessions (check AGENTD_REDIS_URL)", redact_url(&redis_url))
    })?;
    let mcp_streams = StreamLog::redis(&redis_url, &settings.redis_prefix()).await.with_context(|| {
        format!("cannot use Redis at {} for MCP streams (check AGENTD_REDIS_URL)", redact_url(&redis_url))
    })?;
    let mut mcp = mcp_settings(&settings, false, Some(Arc::new(mcp_sessions)))?;
    mcp.streams = Arc::new(mcp_streams);
    let mut process = Process::new(settings, store, Some(queue), Some(bus), blobs, Some(Arc::new(limiter)));
    process.secrets = Some(Arc::new(secrets));
    process.start_relay();
    process.start_catalogs().await?;
    process.serve_grpc(process.settings.grpc_addr(), "agentd.gateway").await?;
    process.serve_api(mcp, false).await?;
    process.run_until_signal().await
}

/// The MCP endpoint's settings for a dev process or a gateway.
fn mcp_settings(settings: &Settings, dev: bool, sessions: Option<Arc<RedisSessions>>) -> Result<McpSettings> {
    Ok(McpSettings {
        path: settings.mcp_path()?,
        allowed_hosts: settings.mcp_allowed_hosts(dev)?,
        sessions,
        streams: Arc::new(StreamLog::memory()),
    })
}

/// `agentd worker`.
pub async fn worker(settings: Settings) -> Result<()> {
    let (store, queue, bus, blobs) = production_backends(&settings, "worker").await?;
    // The gateway's key opens vault credentials for remote tools (MCP, A2A).
    let secrets = settings.secret_box()?.map(Arc::new);
    let mut process = Process::new(settings, store, Some(queue), Some(bus), blobs, None);
    process.secrets = secrets;
    process.start_relay();
    process.start_catalogs().await?;
    process.start_consumer(Registry::from_env(false), false)?;
    process.serve_grpc(process.settings.grpc_addr(), "agentd.worker").await?;
    // A worker serves only the operations listener.
    process.serve_ops().await?;
    process.run_until_signal().await
}

/// The development key of `agentd dev`: made once, kept in the data dir (mode 0600)
/// so it survives restarts, and stored hashed like any other key.
async fn dev_api_key(store: &SqlStore, data_dir: &std::path::Path) -> Result<String> {
    let path = data_dir.join("dev-api-key");
    let key = match std::fs::read_to_string(&path) {
        Ok(key) if !key.trim().is_empty() => key.trim().to_owned(),
        _ => {
            let key = agentd_schema::ids::new_secret("sk-agentd-dev");
            write_private(&path, &key).with_context(|| format!("cannot write {}", path.display()))?;
            key
        }
    };
    let workspace = store.ensure_workspace("default", "default").await?;
    store.insert_api_key(&workspace.id, "dev", &key, &agentd_schema::KeyKind::Api).await?;
    Ok(key)
}

fn write_private(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(contents.as_bytes())
}

/// The secret key of `agentd dev`: generated once into the data dir (mode 0600).
fn dev_secret_box(data_dir: &std::path::Path) -> Result<SecretBox> {
    let path = data_dir.join("secret-key");
    let key = match std::fs::read_to_string(&path) {
        Ok(key) if !key.trim().is_empty() => key.trim().to_owned(),
        _ => {
            let key = SecretBox::generate_key();
            write_private(&path, &key).with_context(|| format!("cannot write {}", path.display()))?;
            key
        }
    };
    SecretBox::from_encoded(&key).with_context(|| format!("{} holds no valid key", path.display()))
}

/// Seeds `AGENTD_BOOTSTRAP_API_KEY` for workspace "default" (idempotent).
async fn bootstrap_key(store: &SqlStore, settings: &Settings) -> Result<()> {
    let Some(key) = settings.bootstrap_api_key.as_deref().filter(|key| !key.trim().is_empty()) else {
        return Ok(());
    };
    let workspace = store.ensure_workspace("default", "default").await?;
    let info = store.insert_api_key(&workspace.id, "bootstrap", key.trim(), &agentd_schema::KeyKind::Api).await?;
    info!(key_id = %info.id, workspace = %workspace.id, "bootstrap API key ready");
    Ok(())
}

pub(crate) async fn connect_store(url: &str) -> Result<Arc<SqlStore>> {
    let connect = SqlStore::connect(ConnectOptions::new(url), Arc::new(SystemClock));
    let store = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {CONNECT_TIMEOUT:?}"))
        .and_then(|result| result.map_err(anyhow::Error::from))
        .with_context(|| {
            format!("cannot connect to the database at {} (check AGENTD_DATABASE_URL)", redact_url(url))
        })?;
    Ok(Arc::new(store))
}

/// The object store of files and skills: `AGENTD_OBJECT_STORE_URL`, else (dev only)
/// `default_dir`. It must answer before the role starts.
async fn connect_blobs(settings: &Settings, default_dir: Option<&std::path::Path>) -> Result<Blobs> {
    let blobs = match (&settings.object_store_url, default_dir) {
        (Some(url), _) => Blobs::from_url(url, settings.object_store_endpoint.as_deref())
            .with_context(|| format!("AGENTD_OBJECT_STORE_URL={url} cannot be used"))?,
        (None, Some(dir)) => Blobs::filesystem(dir)?,
        (None, None) => bail!(
            "agentd needs an object store for files and skills: set AGENTD_OBJECT_STORE_URL=s3://bucket/prefix \
             (with AWS_* credentials and AGENTD_OBJECT_STORE_ENDPOINT for MinIO/Ceph/R2) or file:///shared/dir"
        ),
    };
    tokio::time::timeout(CONNECT_TIMEOUT, blobs.ping())
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {CONNECT_TIMEOUT:?}"))
        .and_then(|result| result.map_err(anyhow::Error::from))
        .with_context(|| {
            format!("the object store {} does not answer (check AGENTD_OBJECT_STORE_URL)", blobs.location())
        })?;
    info!(blobs = blobs.backend().name(), location = blobs.location(), "object store ready");
    Ok(blobs)
}

async fn production_backends(
    settings: &Settings,
    role: &str,
) -> Result<(Arc<SqlStore>, Arc<dyn Queue>, Arc<dyn Bus>, Blobs)> {
    let Some(database_url) = settings.database_url.clone() else {
        bail!(
            "agentd {role} needs PostgreSQL: set AGENTD_DATABASE_URL=postgres://… (use `agentd dev` for embedded backends)"
        );
    };
    let Some(nats_url) = settings.nats_url.clone() else {
        bail!("agentd {role} needs NATS JetStream: set AGENTD_NATS_URL=nats://…");
    };
    let Some(redis_url) = settings.redis_url.clone() else {
        bail!("agentd {role} needs Redis: set AGENTD_REDIS_URL=redis://…");
    };
    let blobs = connect_blobs(settings, None).await?;
    let store = connect_store(&database_url).await?;
    store.ping().await.with_context(|| {
        format!("the database at {} does not answer (check AGENTD_DATABASE_URL)", redact_url(&database_url))
    })?;
    let stream = settings.nats_stream();
    let subject = format!("{}.submissions", stream.to_lowercase());
    let queue = tokio::time::timeout(
        CONNECT_TIMEOUT,
        JetStreamQueue::connect_url(&nats_url, &stream, &subject, &settings.nats_consumer(), settings.queue_config()?),
    )
    .await
    .map_err(|_| anyhow::anyhow!("no answer within {CONNECT_TIMEOUT:?}"))
    .and_then(|result| result.map_err(anyhow::Error::from))
    .with_context(|| format!("cannot use NATS JetStream at {} (check AGENTD_NATS_URL)", redact_url(&nats_url)))?;
    let bus = tokio::time::timeout(CONNECT_TIMEOUT, RedisBus::connect(&redis_url, &settings.redis_prefix()))
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {CONNECT_TIMEOUT:?}"))
        .and_then(|result| result.map_err(anyhow::Error::from))
        .with_context(|| format!("cannot connect to Redis at {} (check AGENTD_REDIS_URL)", redact_url(&redis_url)))?;
    info!(
        store = %redact_url(&database_url),
        queue = %format!("jetstream {} (stream {stream})", redact_url(&nats_url)),
        bus = %format!("redis {}", redact_url(&redis_url)),
        "backends ready"
    );
    Ok((store, Arc::new(queue), Arc::new(bus), blobs))
}

/// One running role: its backends, lifecycle and the tasks it must wait for.
struct Process {
    settings: Settings,
    store: Arc<SqlStore>,
    backends: Backends,
    lifecycle: Arc<Lifecycle>,
    limiter: Option<Arc<dyn Limiter>>,
    secrets: Option<Arc<SecretBox>>,
    /// The effective model catalog of each workspace, shared by the role's API and runs.
    catalogs: Arc<Catalogs>,
    clock: Arc<dyn Clock>,
    /// Fires after draining, when listeners and background tasks must stop.
    stop: CancellationToken,
    /// Fires shortly before the drain deadline: runs still in flight are handed back.
    relinquish: CancellationToken,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
    /// Registered before any listener opens, so a SIGTERM during start-up drains.
    shutdown: Shutdown,
}

impl Process {
    fn new(
        settings: Settings,
        store: Arc<SqlStore>,
        queue: Option<Arc<dyn Queue>>,
        bus: Option<Arc<dyn Bus>>,
        blobs: Blobs,
        limiter: Option<Arc<dyn Limiter>>,
    ) -> Self {
        // Install the recorder before anything records, or early samples are lost.
        agentd_gateway::telemetry::prometheus();
        let backends = Backends { store: store.clone(), queue, bus, blobs };
        Self {
            settings,
            store,
            backends,
            lifecycle: Lifecycle::new(),
            limiter,
            secrets: None,
            catalogs: Arc::new(Catalogs::new(agentd_schema::catalog::current().clone())),
            clock: Arc::new(SystemClock),
            stop: CancellationToken::new(),
            relinquish: CancellationToken::new(),
            shutdown: Shutdown::listen(),
            tasks: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Runs the component `name` under the lifecycle's supervision (restarted with
    /// backoff when it stops; `/readyz` says it is down meanwhile), tracked for shutdown.
    /// Each start passes the fail point `<name>.start` (`faults.rs`).
    fn supervise<F, Fut>(&self, name: &'static str, start: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        let (lifecycle, stop) = (self.lifecycle.clone(), self.stop.clone());
        let point = format!("{name}.start");
        let mut start = start;
        let start = move || {
            let failed = agentd_schema::faults::fail_point(&point);
            let run = start();
            async move {
                failed?;
                run.await
            }
        };
        self.track(tokio::spawn(async move { lifecycle.supervise(name, stop, start).await }));
    }

    fn track(&self, task: JoinHandle<()>) {
        self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(task);
    }

    fn start_relay(&self) {
        let Some(queue) = self.backends.queue.clone() else {
            return;
        };
        let store: Arc<dyn Store> = self.store.clone();
        let (clock, stop) = (self.clock.clone(), self.stop.clone());
        self.supervise("outbox_relay", move || {
            let relay = run_relay(store.clone(), queue.clone(), clock.clone(), RelayConfig::default(), stop.clone());
            async move {
                relay.await;
                Ok(())
            }
        });
    }

    /// Reads every workspace's model configuration once, then keeps the effective
    /// catalogs current: a reload for each change announced on the bus, a poll of the
    /// revisions as the safety net. Awaited before the roles serve or consume, so no
    /// request meets a configured workspace not read yet (it would route by the
    /// bootstrap catalog and the operator's keys).
    async fn start_catalogs(&self) -> Result<()> {
        let store: Arc<dyn ProviderStore> = self.store.clone();
        self.catalogs
            .refresh(store.as_ref())
            .await
            .context("cannot read the workspaces' provider configuration (config_revisions)")?;
        let task = self.catalogs.clone().spawn(store, self.backends.bus.clone(), self.stop.clone());
        self.track(task);
        Ok(())
    }

    /// Starts pulling submissions and driving runs (dev and worker roles).
    fn start_consumer(&self, providers: Registry, dev: bool) -> Result<()> {
        let (Some(queue), Some(bus)) = (self.backends.queue.clone(), self.backends.bus.clone()) else { return Ok(()) };
        let store: Arc<dyn Store> = self.store.clone();
        let ctx = RunContext {
            store,
            bus,
            providers: providers.configured(self.secrets.clone(), self.settings.remote_tools_allow_private(dev)),
            histories: Arc::new(HistoryCache::new(self.settings.worker_history_cache()?)),
            catalogs: self.catalogs.clone(),
            blobs: self.backends.blobs.clone(),
            secrets: self.secrets.clone(),
            remote_allow_private: self.settings.remote_tools_allow_private(dev),
            outcome_heartbeat: self.settings.outcome_heartbeat()?,
        };
        let config = ConsumerConfig {
            lease: self.settings.lease()?,
            relinquish: self.relinquish.clone(),
            ..ConsumerConfig::new()
        };
        let (lifecycle, stop) = (self.lifecycle.clone(), self.stop.clone());
        self.supervise("consumer", move || {
            let consumer = agentd_worker::consumer::run(
                ctx.clone(),
                queue.clone(),
                config.clone(),
                lifecycle.clone(),
                stop.clone(),
            );
            async move {
                consumer.await;
                Ok(())
            }
        });
        Ok(())
    }

    /// The operations routes' state: the drain token comes from the settings.
    fn ops_state(&self) -> OpsState {
        OpsState {
            backends: self.backends.clone(),
            lifecycle: self.lifecycle.clone(),
            drain_token: self.settings.ops_token(),
        }
    }

    /// Serves the operations listener (`AGENTD_OPS_ADDR`); returns its bound address.
    async fn serve_ops(&self) -> Result<SocketAddr> {
        self.serve("ops", self.settings.ops_addr(), agentd_gateway::ops_app(self.ops_state())).await
    }

    /// Serves the public API listener, then the operations listener. Returns both
    /// bound addresses (API, operations).
    async fn serve_api(&self, mcp: McpSettings, dev: bool) -> Result<(SocketAddr, SocketAddr)> {
        let limiter = self.limiter.clone().context("this role serves no API")?;
        let secrets = self.secrets.clone().context("this role serves no API")?;
        let key_cache = Arc::new(agentd_gateway::admission::auth::KeyCache::new(Duration::from_secs(2)));
        let state = AppState::new(Shared {
            outbox: agentd_schema::outbox::Sweeper::spawn(self.store.clone()),
            backends: self.backends.clone(),
            max_file_bytes: self.settings.max_file_bytes()?,
            lifecycle: self.lifecycle.clone(),
            limiter,
            secrets,
            key_cache,
            max_attempts: self.settings.max_attempts()?,
            default_agent: self.settings.adapter_default_agent.as_deref().map(Arc::from),
            mcp: Arc::new(mcp),
            a2a: Arc::new(agentd_gateway::adapters::a2a::Settings {
                public_url: self.settings.a2a_public_url.clone(),
                push_allow_private: self.settings.a2a_push_allow_private,
            }),
            trusted_proxies: self.settings.trusted_proxies()?,
            remote_allow_private: self.settings.remote_tools_allow_private(dev),
            catalogs: self.catalogs.clone(),
            webhooks: Arc::new(self.settings.webhooks()?),
            tunnels: Arc::new(agentd_gateway::tunnel::Connectors::new()),
        });
        // A2A push notifications: every gateway watches and delivers (rows are claimed
        // under a lease, so each notification goes out from one of them).
        self.track(agentd_gateway::adapters::a2a::push::spawn(state.clone(), self.stop.clone()));
        // Expired files lose their bytes; uploads and deletions a crash left are finished.
        self.track(agentd_gateway::domain::files::spawn_sweeper(
            state.backends.store.clone(),
            state.backends.blobs.clone(),
            self.stop.clone(),
        ));
        // Dreams: every gateway starts pending dreams, settles running ones and fires the
        // due dream policies (each step a compare-and-swap, so any number may run).
        self.track(agentd_gateway::domain::dreams::spawn_reconciler(state.clone(), self.stop.clone()));
        // Deployments: every gateway fires the due schedules (each slot claimed once by a
        // conditional update, so any number may run) and finishes runs a crash cut short.
        self.track(agentd_gateway::domain::deployments::spawn_scheduler(state.clone(), self.stop.clone()));
        // Erasures: a job whose gateway stopped is carried on by any gateway's sweeper.
        self.track(agentd_gateway::domain::erasure::spawn_sweeper(state.clone(), self.stop.clone()));
        // Expired application access tokens are removed (they never resolve anyway).
        self.track(agentd_gateway::domain::app_tokens::spawn_sweeper(state.clone(), self.stop.clone()));
        // Webhook deliveries: every gateway delivers (rows are claimed under a lease).
        self.track(agentd_gateway::domain::webhooks::spawn_deliverer(state.clone(), self.stop.clone()));
        // CORS answers preflights before admission, so it wraps the whole router.
        let cors = agentd_gateway::admission::cors::layer(&self.settings.cors_origins()).map_err(anyhow::Error::msg)?;
        let with_cors = |router: Router| match &cors {
            Some(cors) => router.layer(cors.clone()),
            None => router,
        };
        // The operations routes are never on the public listener (it keeps a bare
        // /readyz), and never behind CORS.
        // MCP tunnels: every gateway drops the connectors a rotation or archive cut.
        self.track(agentd_gateway::tunnel::spawn_cutter(state.clone(), self.stop.clone()));
        let tunnels = state.tunnels.clone();
        let api = self.serve("http", self.settings.http_addr(), with_cors(agentd_gateway::app(state))).await?;
        // Where workers reach this gateway's tunnel connectors. One process (`agentd dev`)
        // or a listener on a specific address can say it; a gateway listening on every
        // address cannot know which one workers reach, and records none until told.
        match (&self.settings.advertise_url, api.ip().is_unspecified()) {
            (Some(url), _) => tunnels.advertise(url.clone()),
            (None, true) if dev => tunnels.advertise(format!("http://127.0.0.1:{}", api.port())),
            (None, true) => warn!(
                "the API listens on every address and AGENTD_ADVERTISE_URL is not set: MCP tunnel connectors this \
                 gateway holds cannot be reached by workers (set it to the address workers reach it at)"
            ),
            (None, false) => tunnels.advertise(format!("http://{api}")),
        }
        let ops = self.serve_ops().await?;
        Ok((api, ops))
    }

    async fn serve(&self, name: &'static str, addr: SocketAddr, router: Router) -> Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await.with_context(|| {
            format!("cannot listen on {addr} for {name} (check AGENTD_{}_ADDR)", name.to_uppercase())
        })?;
        let bound = listener.local_addr()?;
        // Without TCP_NODELAY a keep-alive client of a streamed response waits on
        // Nagle + delayed ACK (~40 ms) per turn.
        let listener = listener.tap_io(|tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                warn!(%error, "cannot set TCP_NODELAY");
            }
        });
        let stop = self.stop.clone();
        let task = tokio::spawn(async move {
            // The peer address reaches handlers (`ConnectInfo`): anonymous buckets are per client.
            let service = router.into_make_service_with_connect_info::<SocketAddr>();
            let served = axum::serve(listener, service).with_graceful_shutdown(stop.cancelled_owned()).await;
            if let Err(error) = served {
                tracing::error!(%error, listener = name, "http server failed");
            }
        });
        self.track(task);
        info!(listener = name, %bound, "listening on http://{bound}");
        // A stable line on stdout, for scripts and the test harness.
        println!("agentd: {name} listening on http://{bound}");
        Ok(bound)
    }

    async fn serve_grpc(&self, addr: SocketAddr, service: &'static str) -> Result<()> {
        let (health, bound, task) = agentd_proto::health::serve(addr, service, self.stop.clone())
            .await
            .with_context(|| format!("cannot listen on {addr} for gRPC health (check AGENTD_GRPC_ADDR)"))?;
        self.lifecycle.attach_health(health);
        self.track(task);
        let monitor = ops::spawn_health_monitor(self.ops_state(), Duration::from_secs(2), self.stop.clone());
        self.track(monitor);
        info!(%bound, service, "grpc health listening");
        println!("agentd: grpc listening on {bound}");
        Ok(())
    }

    /// Waits for SIGTERM or Ctrl-C, drains, lets in-flight work finish within the
    /// drain deadline, hands back runs that could not finish, and returns (exit code 0).
    async fn run_until_signal(mut self) -> Result<()> {
        let deadline = self.settings.drain_timeout()?;
        self.shutdown.wait().await;
        info!(?deadline, "shutdown requested; draining");
        self.lifecycle.drain().await;
        self.stop.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        let mut all = futures::future::join_all(tasks);
        // Keep a margin before the deadline to hand unfinished runs back cleanly.
        let margin = (deadline / 5).min(Duration::from_secs(5));
        if tokio::time::timeout(deadline - margin, &mut all).await.is_err() {
            warn!("drain deadline near with runs in flight; handing them back to the queue");
            self.relinquish.cancel();
            if tokio::time::timeout(margin, &mut all).await.is_err() {
                warn!(?deadline, "drain deadline passed with work still in flight; exiting");
            }
        }
        self.store.close().await;
        info!("stopped");
        Ok(())
    }
}

/// SIGTERM and SIGINT (Ctrl-C), registered when made: a signal that arrives before
/// anyone waits is kept, not left to the default action (exit without draining).
struct Shutdown {
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl Shutdown {
    fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let register = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(signal) => Some(signal),
                Err(error) => {
                    warn!(%error, "cannot listen for {name}");
                    None
                }
            };
            Self {
                terminate: register(SignalKind::terminate(), "SIGTERM"),
                interrupt: register(SignalKind::interrupt(), "SIGINT"),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Resolves at the first SIGTERM or SIGINT (never, for one that could not be registered).
    async fn wait(&mut self) {
        #[cfg(unix)]
        {
            async fn next(signal: &mut Option<tokio::signal::unix::Signal>) {
                match signal {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            tokio::select! {
                () = next(&mut self.terminate) => {}
                () = next(&mut self.interrupt) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
