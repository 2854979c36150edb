//! Configuration: built-in defaults < `--config agentd.toml` < `AGENTD_*` environment
//! variables < command-line flags. Every option has all four spellings; the names of
//! the environment variables are part of the public interface.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use serde::Deserialize;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Options shared by every role. Each is also a key of the `--config` TOML file
/// (the long flag name with `_` for `-`, e.g. `http_addr = "0.0.0.0:8080"`).
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// TOML file with any of these options; environment variables and flags override it.
    #[arg(long, global = true, env = "AGENTD_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Address of the HTTP API listener [default: 127.0.0.1:8080].
    #[arg(long, global = true, env = "AGENTD_HTTP_ADDR", value_name = "ADDR")]
    pub http_addr: Option<SocketAddr>,

    /// Address of the operations listener: /readyz, /metrics and /admin/drain (the
    /// public listener serves only a bare /readyz) [default: 127.0.0.1:9464]. Keep it
    /// unreachable from outside the deployment.
    #[arg(long, global = true, env = "AGENTD_OPS_ADDR", value_name = "ADDR")]
    pub ops_addr: Option<SocketAddr>,

    /// A token POST /admin/drain then requires as `Authorization: Bearer <token>`
    /// [default: none; the listener's reach protects it]. Never logged.
    #[arg(long, global = true, env = "AGENTD_OPS_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub ops_token: Option<String>,

    /// Address of the gRPC health listener [default: 127.0.0.1:50051 for gateway and
    /// worker; not served by dev unless set].
    #[arg(long, global = true, env = "AGENTD_GRPC_ADDR", value_name = "ADDR")]
    pub grpc_addr: Option<SocketAddr>,

    /// Directory for the embedded backends of `agentd dev` [default: ./.agentd].
    #[arg(long, global = true, env = "AGENTD_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Database: postgres://… (production) or sqlite://… [dev default: sqlite in the data dir].
    #[arg(long, global = true, env = "AGENTD_DATABASE_URL", value_name = "URL")]
    pub database_url: Option<String>,

    /// NATS server with JetStream, e.g. nats://127.0.0.1:4222 (required by gateway and worker).
    #[arg(long, global = true, env = "AGENTD_NATS_URL", value_name = "URL")]
    pub nats_url: Option<String>,

    /// Redis server, e.g. redis://127.0.0.1:6379 (required by gateway and worker).
    #[arg(long, global = true, env = "AGENTD_REDIS_URL", value_name = "URL")]
    pub redis_url: Option<String>,

    /// Object store for the bytes of files and skills: s3://bucket/prefix (credentials and
    /// region from the AWS_* variables) or file:///dir (required by gateway and worker;
    /// dev default: the blobs directory in the data dir).
    #[arg(long, global = true, env = "AGENTD_OBJECT_STORE_URL", value_name = "URL")]
    pub object_store_url: Option<String>,

    /// Endpoint of an S3-compatible server (MinIO, Ceph, R2), e.g. http://127.0.0.1:9000
    /// [default: AWS_ENDPOINT_URL, else AWS's own].
    #[arg(long, global = true, env = "AGENTD_OBJECT_STORE_ENDPOINT", value_name = "URL")]
    pub object_store_endpoint: Option<String>,

    /// The largest file POST /v1/files stores, in bytes [default: 500000000].
    #[arg(long, global = true, env = "AGENTD_MAX_FILE_BYTES", value_name = "BYTES")]
    pub max_file_bytes: Option<u64>,

    /// Log format: text or json [default: text].
    #[arg(long, global = true, env = "AGENTD_LOG_FORMAT", value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,

    /// How long SIGTERM waits for in-flight requests, streams and runs, e.g. 30s [default: 30s].
    #[arg(long, global = true, env = "AGENTD_DRAIN_TIMEOUT", value_name = "DURATION")]
    pub drain_timeout: Option<String>,

    /// JetStream stream holding run submissions [default: AGENTD_SUBMISSIONS].
    #[arg(long, global = true, env = "AGENTD_NATS_STREAM", value_name = "NAME")]
    pub nats_stream: Option<String>,

    /// Durable JetStream consumer shared by the worker fleet [default: agentd-workers].
    #[arg(long, global = true, env = "AGENTD_NATS_CONSUMER", value_name = "NAME")]
    pub nats_consumer: Option<String>,

    /// Prefix of every Redis key and channel, to share one Redis [default: agentd].
    #[arg(long, global = true, env = "AGENTD_REDIS_PREFIX", value_name = "PREFIX")]
    pub redis_prefix: Option<String>,

    /// How long a delivered submission may stay unacknowledged before redelivery [default: 30s].
    #[arg(long, global = true, env = "AGENTD_QUEUE_ACK_WAIT", value_name = "DURATION")]
    pub queue_ack_wait: Option<String>,

    /// Deliveries of one submission after which the queue stops redelivering it [default: 1000].
    #[arg(long, global = true, env = "AGENTD_QUEUE_MAX_DELIVER", value_name = "N")]
    pub queue_max_deliver: Option<i64>,

    /// How long a worker's claim on a run lasts without renewal (renewed every third) [default: 30s].
    #[arg(long, global = true, env = "AGENTD_LEASE", value_name = "DURATION")]
    pub lease: Option<String>,

    /// Recoveries of a run (expired leases reclaimed) before it is settled as
    /// `retries_exhausted` [default: 5].
    #[arg(long, global = true, env = "AGENTD_MAX_ATTEMPTS", value_name = "N")]
    pub max_attempts: Option<i64>,

    /// Create requests per minute per organization [default: 300].
    #[arg(long, global = true, env = "AGENTD_RATE_LIMIT_CREATE", value_name = "N")]
    pub rate_limit_create: Option<u32>,

    /// Read requests per minute per organization [default: 1200].
    #[arg(long, global = true, env = "AGENTD_RATE_LIMIT_READ", value_name = "N")]
    pub rate_limit_read: Option<u32>,

    /// An API key to accept from startup on, for workspace "default" of organization
    /// "default" (stored hashed; idempotent). Never logged.
    #[arg(long, global = true, env = "AGENTD_BOOTSTRAP_API_KEY", value_name = "KEY", hide_env_values = true)]
    pub bootstrap_api_key: Option<String>,

    /// JSON file extending the built-in model catalog: `[{"id", "provider"
    /// (anthropic|openai|scripted), "prices": {"input", "output", "cache_read",
    /// "cache_write" (micro-USD per million tokens), "web_search_per_request",
    /// "web_fetch_per_request" (micro-USD per request)}, …}]`.
    #[arg(long, global = true, env = "AGENTD_MODEL_CATALOG", value_name = "FILE")]
    pub model_catalog: Option<PathBuf>,

    /// 32-byte key (base64 or hex) sealing write-only secrets at rest with AES-256-GCM;
    /// required by the gateway; workers need the same key to use vault credentials for
    /// MCP and A2A tools [dev: generated into the data dir]. Never logged.
    #[arg(long, global = true, env = "AGENTD_SECRET_KEY", value_name = "KEY", hide_env_values = true)]
    pub secret_key: Option<String>,

    /// The key (or comma-separated keys) AGENTD_SECRET_KEY replaced: still opens secrets
    /// sealed before the rotation, never seals. Set it on every process, with the new
    /// AGENTD_SECRET_KEY, before `agentd keys rotate-secret`; remove it once that reports
    /// the rotation complete (ADR 0004). Never logged.
    #[arg(long, global = true, env = "AGENTD_SECRET_KEY_PREVIOUS", value_name = "KEYS", hide_env_values = true)]
    pub secret_key_previous: Option<String>,

    /// The agent (id) AI SDK and AG-UI threads start with when a request names none.
    #[arg(long, global = true, env = "AGENTD_ADAPTER_DEFAULT_AGENT", value_name = "AGENT_ID")]
    pub adapter_default_agent: Option<String>,

    /// Path of the MCP endpoint (POST, GET and DELETE; API keys only) [default: /v1/mcp].
    #[arg(long, global = true, env = "AGENTD_MCP_PATH", value_name = "PATH")]
    pub mcp_path: Option<String>,

    /// `Host` header values the MCP endpoint accepts, comma-separated (`host` or
    /// `host:port`; `*`: any) [default: dev: localhost,127.0.0.1,::1; gateway: *].
    #[arg(long, global = true, env = "AGENTD_MCP_ALLOWED_HOSTS", value_name = "HOSTS")]
    pub mcp_allowed_hosts: Option<String>,

    /// The public base URL A2A agent cards advertise (e.g. https://agents.example.com)
    /// [default: from the request's X-Forwarded-Proto / X-Forwarded-Host / Host].
    #[arg(long, global = true, env = "AGENTD_A2A_PUBLIC_URL", value_name = "URL")]
    pub a2a_public_url: Option<String>,

    /// The URL workers reach this gateway at, for MCP tunnels whose connector it holds
    /// (e.g. http://gateway-0.gateways:8080) [default: http:// and the API listener's
    /// bound address, 127.0.0.1 for an unspecified one].
    #[arg(long, global = true, env = "AGENTD_ADVERTISE_URL", value_name = "URL")]
    pub advertise_url: Option<String>,

    /// The load balancers and proxies in front of the gateways, comma-separated addresses
    /// and CIDR blocks: their `X-Forwarded-For` names the client a keyless request (a
    /// public A2A agent card) is rate-limited as [default: none; the TCP peer is the client].
    #[arg(long, global = true, env = "AGENTD_TRUSTED_PROXIES", value_name = "CIDRS")]
    pub trusted_proxies: Option<String>,

    /// Let A2A push notifications target private and loopback addresses and plain
    /// http:// URLs. For tests only; never in production.
    #[arg(long, global = true, env = "AGENTD_A2A_PUSH_ALLOW_PRIVATE")]
    pub a2a_push_allow_private: bool,

    /// Let webhook subscriptions target private and loopback addresses and plain
    /// http:// URLs. For tests and closed networks only; never on the open internet.
    #[arg(long, global = true, env = "AGENTD_WEBHOOKS_ALLOW_PRIVATE")]
    pub webhooks_allow_private: bool,

    /// The delay before a webhook delivery's first retry; each later one is 6 times
    /// longer, up to an hour [default: 5s].
    #[arg(long, global = true, env = "AGENTD_WEBHOOK_RETRY_BASE", value_name = "DURATION")]
    pub webhook_retry_base: Option<String>,

    /// Let remote tools (MCP servers, `a2a_agent` agents and the endpoints their cards
    /// name, `web_fetch`) reach private, loopback and link-local addresses [default: dev: true (a
    /// laptop's MCP servers are local); worker: false].
    #[arg(long, global = true, env = "AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE", value_name = "BOOL")]
    pub remote_tools_allow_private: Option<bool>,

    /// The SearXNG-compatible search endpoint the `web_search` tool queries
    /// (`GET {url}/search?q=…&format=json`). Set it on gateways (which refuse agents that
    /// enable web_search without it) and workers (which make the searches) alike
    /// [default: none — web_search is unavailable].
    #[arg(long, global = true, env = "AGENTD_WEB_SEARCH_URL", value_name = "URL")]
    pub web_search_url: Option<String>,

    /// Browser origins allowed by CORS, comma-separated (`*`: any origin, without
    /// credentials) [default: none — no CORS headers].
    #[arg(long, global = true, env = "AGENTD_CORS_ORIGINS", value_name = "ORIGINS")]
    pub cors_origins: Option<String>,

    /// The gateway `agentd runner` talks to, e.g. http://gateway:8080.
    #[arg(long, global = true, env = "AGENTD_RUNNER_GATEWAY_URL", value_name = "URL")]
    pub runner_gateway_url: Option<String>,

    /// The runner key of `agentd runner` (`agentd keys create --runner`). Never logged.
    #[arg(long, global = true, env = "AGENTD_RUNNER_KEY", value_name = "KEY", hide_env_values = true)]
    pub runner_key: Option<String>,

    /// Directory holding one workdir per session [default: <data dir>/sandboxes; at the
    /// workdir level, which cannot pass through the 0700 data dir, <data dir>-sandboxes].
    #[arg(long, global = true, env = "AGENTD_SANDBOX_ROOT", value_name = "DIR")]
    pub sandbox_root: Option<PathBuf>,

    /// Sandbox isolation: namespace (bubblewrap) or workdir, an explicit opt-in
    /// [default: namespace].
    #[arg(long, global = true, env = "AGENTD_SANDBOX_ISOLATION", value_name = "LEVEL")]
    pub sandbox_isolation: Option<String>,

    /// First uid (and gid) of the range a root runner gives sessions, one each
    /// [default: 1500000000].
    #[arg(long, global = true, env = "AGENTD_SANDBOX_UID_BASE", value_name = "UID")]
    pub sandbox_uid_base: Option<u32>,

    /// How many uids that range holds [default: 1000000].
    #[arg(long, global = true, env = "AGENTD_SANDBOX_UID_COUNT", value_name = "N")]
    pub sandbox_uid_count: Option<u32>,

    /// Each session's disk quota: the size of its workdir tmpfs and of each private scratch
    /// directory (`/tmp`…), e.g. 512MiB; 0 = none [default: 1GiB].
    #[arg(long, global = true, env = "AGENTD_SANDBOX_DISK_QUOTA", value_name = "SIZE")]
    pub sandbox_disk_quota: Option<String>,

    /// How long a session may idle before the runner stops its work item [default: 10s].
    #[arg(long, global = true, env = "AGENTD_RUNNER_IDLE_STOP", value_name = "DURATION")]
    pub runner_idle_stop: Option<String>,

    /// How often a worker commits a `span.outcome_evaluation_ongoing` heartbeat while an
    /// outcome's grader is asked [default: 10s].
    #[arg(long, global = true, env = "AGENTD_OUTCOME_HEARTBEAT", value_name = "DURATION")]
    pub outcome_heartbeat: Option<String>,

    /// How much committed history a worker keeps cached across the threads it drove (its
    /// estimated memory, e.g. 256MiB), threads chosen at random dropped over it; a thread
    /// not cached is read whole on its next turn [default: 128MiB].
    #[arg(long, global = true, env = "AGENTD_WORKER_HISTORY_CACHE", value_name = "SIZE")]
    pub worker_history_cache: Option<String>,

    /// Run no in-process runner in `agentd dev` (cloud tool calls then wait for an
    /// external `agentd runner`).
    #[arg(long, global = true, env = "AGENTD_DEV_NO_RUNNER")]
    pub dev_no_runner: bool,
}

impl Settings {
    /// Fills options not given by flag or environment from the `--config` file.
    pub fn with_file(self) -> Result<Self> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let file = load_file(&path)?;
        Ok(self.or(file))
    }

    fn or(self, file: Settings) -> Self {
        Settings {
            config: self.config,
            http_addr: self.http_addr.or(file.http_addr),
            ops_addr: self.ops_addr.or(file.ops_addr),
            ops_token: self.ops_token.or(file.ops_token),
            grpc_addr: self.grpc_addr.or(file.grpc_addr),
            data_dir: self.data_dir.or(file.data_dir),
            database_url: self.database_url.or(file.database_url),
            runner_gateway_url: self.runner_gateway_url.or(file.runner_gateway_url),
            cors_origins: self.cors_origins.or(file.cors_origins),
            adapter_default_agent: self.adapter_default_agent.or(file.adapter_default_agent),
            mcp_path: self.mcp_path.or(file.mcp_path),
            mcp_allowed_hosts: self.mcp_allowed_hosts.or(file.mcp_allowed_hosts),

            a2a_public_url: self.a2a_public_url.or(file.a2a_public_url),
            advertise_url: self.advertise_url.or(file.advertise_url),
            trusted_proxies: self.trusted_proxies.or(file.trusted_proxies),
            a2a_push_allow_private: self.a2a_push_allow_private || file.a2a_push_allow_private,
            webhooks_allow_private: self.webhooks_allow_private || file.webhooks_allow_private,
            webhook_retry_base: self.webhook_retry_base.or(file.webhook_retry_base),
            remote_tools_allow_private: self.remote_tools_allow_private.or(file.remote_tools_allow_private),
            web_search_url: self.web_search_url.or(file.web_search_url),
            runner_key: self.runner_key.or(file.runner_key),
            sandbox_root: self.sandbox_root.or(file.sandbox_root),
            sandbox_isolation: self.sandbox_isolation.or(file.sandbox_isolation),
            sandbox_uid_base: self.sandbox_uid_base.or(file.sandbox_uid_base),
            sandbox_uid_count: self.sandbox_uid_count.or(file.sandbox_uid_count),
            sandbox_disk_quota: self.sandbox_disk_quota.or(file.sandbox_disk_quota),
            runner_idle_stop: self.runner_idle_stop.or(file.runner_idle_stop),
            outcome_heartbeat: self.outcome_heartbeat.or(file.outcome_heartbeat),
            worker_history_cache: self.worker_history_cache.or(file.worker_history_cache),
            dev_no_runner: self.dev_no_runner || file.dev_no_runner,
            nats_url: self.nats_url.or(file.nats_url),
            redis_url: self.redis_url.or(file.redis_url),
            object_store_url: self.object_store_url.or(file.object_store_url),
            object_store_endpoint: self.object_store_endpoint.or(file.object_store_endpoint),
            max_file_bytes: self.max_file_bytes.or(file.max_file_bytes),
            log_format: self.log_format.or(file.log_format),
            drain_timeout: self.drain_timeout.or(file.drain_timeout),
            nats_stream: self.nats_stream.or(file.nats_stream),
            nats_consumer: self.nats_consumer.or(file.nats_consumer),
            redis_prefix: self.redis_prefix.or(file.redis_prefix),
            queue_ack_wait: self.queue_ack_wait.or(file.queue_ack_wait),
            queue_max_deliver: self.queue_max_deliver.or(file.queue_max_deliver),
            max_attempts: self.max_attempts.or(file.max_attempts),
            lease: self.lease.or(file.lease),
            rate_limit_create: self.rate_limit_create.or(file.rate_limit_create),
            rate_limit_read: self.rate_limit_read.or(file.rate_limit_read),
            bootstrap_api_key: self.bootstrap_api_key.or(file.bootstrap_api_key),
            secret_key: self.secret_key.or(file.secret_key),
            secret_key_previous: self.secret_key_previous.or(file.secret_key_previous),
            model_catalog: self.model_catalog.or(file.model_catalog),
        }
    }

    /// The box sealing secrets at rest: AGENTD_SECRET_KEY, opening with
    /// AGENTD_SECRET_KEY_PREVIOUS too; `None` without a key.
    pub fn secret_box(&self) -> Result<Option<agentd_schema::secrets::SecretBox>> {
        let Some(key) = self.secret_key.as_deref() else { return Ok(None) };
        let secrets = agentd_schema::secrets::SecretBox::from_encoded(key).context("AGENTD_SECRET_KEY")?;
        Ok(Some(self.with_previous_keys(secrets)?))
    }

    /// `secrets` also opening with AGENTD_SECRET_KEY_PREVIOUS.
    pub fn with_previous_keys(
        &self,
        secrets: agentd_schema::secrets::SecretBox,
    ) -> Result<agentd_schema::secrets::SecretBox> {
        match self.secret_key_previous.as_deref().filter(|keys| !keys.trim().is_empty()) {
            Some(keys) => secrets.with_previous(keys).context("AGENTD_SECRET_KEY_PREVIOUS"),
            None => Ok(secrets),
        }
    }

    /// The HTTP listener address.
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)))
    }

    /// The operations listener's address. The default port is taken by no other
    /// default of agentd (8080 API, 50051 gRPC) nor by the Prometheus server or
    /// Cockpit (9090), which often run on the same host.
    pub fn ops_addr(&self) -> SocketAddr {
        self.ops_addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9464)))
    }

    /// The drain token, when one is set (blank counts as unset).
    pub fn ops_token(&self) -> Option<std::sync::Arc<str>> {
        self.ops_token.as_deref().map(str::trim).filter(|token| !token.is_empty()).map(std::sync::Arc::from)
    }

    /// The gRPC health address of a production role.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 50051)))
    }

    /// The embedded data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir.clone().unwrap_or_else(|| PathBuf::from("./.agentd"))
    }

    /// The log format.
    pub fn log_format(&self) -> LogFormat {
        self.log_format.unwrap_or(LogFormat::Text)
    }

    /// The runner's sandbox settings (networking comes from each environment, variables
    /// from each session's vaults). No level configured means `namespace`, also when
    /// bubblewrap is missing: tool calls then fail naming the fix (ADR 0011).
    pub fn sandbox(&self) -> Result<agentd_runner::sandbox::SandboxConfig> {
        use agentd_runner::sandbox::{Isolation, Limits, Networking, SandboxConfig, SecretEnv, UidRange};
        for replaced in ["AGENTD_SANDBOX_UID", "AGENTD_SANDBOX_GID"] {
            anyhow::ensure!(
                std::env::var_os(replaced).is_none(),
                "{replaced} is no longer read: every session runs as its own uid from AGENTD_SANDBOX_UID_BASE \
                 (and AGENTD_SANDBOX_UID_COUNT); unset it"
            );
        }
        let isolation: Isolation = self
            .sandbox_isolation
            .as_deref()
            .unwrap_or("namespace")
            .parse()
            .map_err(|error: String| anyhow::anyhow!("AGENTD_SANDBOX_ISOLATION: {error}"))?;
        let defaults = UidRange::default();
        let uids = UidRange {
            base: self.sandbox_uid_base.unwrap_or(defaults.base),
            count: self.sandbox_uid_count.unwrap_or(defaults.count),
        };
        uids.validate()
            .map_err(|error| anyhow::anyhow!("AGENTD_SANDBOX_UID_BASE / AGENTD_SANDBOX_UID_COUNT: {error}"))?;
        let mut limits = Limits::default();
        if let Some(quota) = self.sandbox_disk_quota.as_deref() {
            limits.disk_bytes = size("AGENTD_SANDBOX_DISK_QUOTA", quota)?;
        }
        let root = self.sandbox_root.clone().unwrap_or_else(|| match isolation {
            Isolation::Namespace => self.data_dir().join("sandboxes"),
            Isolation::Workdir => {
                let mut sibling = self.data_dir().into_os_string();
                sibling.push("-sandboxes");
                PathBuf::from(sibling)
            }
        });
        Ok(SandboxConfig {
            root,
            isolation,
            limits,
            networking: Networking::Unrestricted,
            uids,
            environment: SecretEnv::default(),
            mounts: Vec::new(),
            forwarder: std::env::current_exe().ok(),
            cgroup_limits: Default::default(),
        })
    }

    /// The configured CORS origins.
    pub fn cors_origins(&self) -> Vec<String> {
        self.cors_origins
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// The MCP endpoint's path: absolute, without a trailing `/`, no route parameters.
    pub fn mcp_path(&self) -> Result<String> {
        let path = self.mcp_path.as_deref().map_or("/v1/mcp", str::trim);
        let valid = path.len() > 1
            && path.starts_with('/')
            && !path.ends_with('/')
            && !path.contains("//")
            && path.chars().all(|c| c.is_ascii_alphanumeric() || "/-_.~".contains(c));
        anyhow::ensure!(
            valid,
            "AGENTD_MCP_PATH: expected an absolute path such as /v1/mcp (letters, digits, `-_.~`, no trailing /), got {path:?}"
        );
        // Other routes own these: a clash would only surface as a router panic at startup.
        let taken = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
        anyhow::ensure!(
            (!taken("/v1") || taken("/v1/mcp")) && !["/readyz", "/metrics", "/admin"].into_iter().any(taken),
            "AGENTD_MCP_PATH: {path:?} belongs to other routes; under /v1 use /v1/mcp or a path below it, or pick a \
             path outside /v1, /readyz, /metrics and /admin"
        );
        Ok(path.to_owned())
    }

    /// Whether remote tools may reach private addresses: as set, else only in `agentd dev`.
    pub fn remote_tools_allow_private(&self, dev: bool) -> bool {
        self.remote_tools_allow_private.unwrap_or(dev)
    }

    /// The `web_search` backend (`AGENTD_WEB_SEARCH_URL`), checked; `None` when unset.
    pub fn web_search_url(&self) -> Result<Option<String>> {
        let Some(url) = self.web_search_url.as_deref() else { return Ok(None) };
        agentd_schema::web::search_backend_url(url).map_err(|error| anyhow::anyhow!("AGENTD_WEB_SEARCH_URL: {error}"))
    }

    /// The `Host` values the MCP endpoint accepts (`None`: any). Unset, `agentd dev`
    /// accepts only loopback names (DNS rebinding against a local server); a gateway
    /// accepts any, since it sits behind a load balancer under names only the operator
    /// knows and every request needs an API key anyway (ADR 0008).
    pub fn mcp_allowed_hosts(&self, dev: bool) -> Result<Option<Vec<String>>> {
        let Some(value) = self.mcp_allowed_hosts.as_deref() else {
            return Ok(dev.then(agentd_gateway::adapters::mcp::McpSettings::loopback_hosts));
        };
        let hosts: Vec<String> = value.split(',').map(str::trim).filter(|h| !h.is_empty()).map(str::to_owned).collect();
        anyhow::ensure!(!hosts.is_empty(), "AGENTD_MCP_ALLOWED_HOSTS: empty; list host names, or `*` for any host");
        if hosts.iter().any(|h| h == "*") {
            anyhow::ensure!(hosts.len() == 1, "AGENTD_MCP_ALLOWED_HOSTS: `*` cannot be combined with host names");
            return Ok(None);
        }
        for host in &hosts {
            anyhow::ensure!(
                host.parse::<axum::http::uri::Authority>().is_ok() || host.parse::<std::net::IpAddr>().is_ok(),
                "AGENTD_MCP_ALLOWED_HOSTS: {host:?} is not a host name or host:port"
            );
        }
        Ok(Some(hosts))
    }

    /// See `AGENTD_TRUSTED_PROXIES`.
    pub fn trusted_proxies(&self) -> Result<agentd_gateway::admission::client::TrustedProxies> {
        let list = self.trusted_proxies.as_deref().unwrap_or_default();
        agentd_gateway::admission::client::TrustedProxies::parse(list)
            .map_err(|error| anyhow::anyhow!("AGENTD_TRUSTED_PROXIES: {error}"))
    }

    /// See `AGENTD_RUNNER_IDLE_STOP`.
    pub fn runner_idle_stop(&self) -> Result<Duration> {
        duration("AGENTD_RUNNER_IDLE_STOP", self.runner_idle_stop.as_deref(), Duration::from_secs(10))
    }

    /// See `AGENTD_OUTCOME_HEARTBEAT`.
    pub fn outcome_heartbeat(&self) -> Result<Duration> {
        let every = duration(
            "AGENTD_OUTCOME_HEARTBEAT",
            self.outcome_heartbeat.as_deref(),
            agentd_worker::run::OUTCOME_HEARTBEAT,
        )?;
        anyhow::ensure!(every >= Duration::from_millis(100), "AGENTD_OUTCOME_HEARTBEAT must be at least 100ms");
        Ok(every)
    }

    /// See `AGENTD_WORKER_HISTORY_CACHE`: in bytes.
    pub fn worker_history_cache(&self) -> Result<usize> {
        let Some(value) = self.worker_history_cache.as_deref() else { return Ok(WORKER_HISTORY_CACHE) };
        let bytes = size("AGENTD_WORKER_HISTORY_CACHE", value)?;
        usize::try_from(bytes).map_err(|_| anyhow::anyhow!("AGENTD_WORKER_HISTORY_CACHE: {value:?} is too large"))
    }

    /// Webhook delivery settings.
    pub fn webhooks(&self) -> Result<agentd_gateway::domain::webhooks::Settings> {
        Ok(agentd_gateway::domain::webhooks::Settings {
            allow_private: self.webhooks_allow_private,
            retry_base: duration(
                "AGENTD_WEBHOOK_RETRY_BASE",
                self.webhook_retry_base.as_deref(),
                Duration::from_secs(5),
            )?,
        })
    }

    /// The drain deadline.
    pub fn drain_timeout(&self) -> Result<Duration> {
        duration("AGENTD_DRAIN_TIMEOUT", self.drain_timeout.as_deref(), Duration::from_secs(30))
    }

    /// Queue settings.
    pub fn queue_config(&self) -> Result<agentd_proto::QueueConfig> {
        let defaults = agentd_proto::QueueConfig::default();
        let max_deliver = self.queue_max_deliver.unwrap_or(defaults.max_deliver);
        anyhow::ensure!(max_deliver >= 1, "AGENTD_QUEUE_MAX_DELIVER must be at least 1, got {max_deliver}");
        Ok(agentd_proto::QueueConfig {
            ack_wait: duration("AGENTD_QUEUE_ACK_WAIT", self.queue_ack_wait.as_deref(), defaults.ack_wait)?,
            max_deliver,
            ..defaults
        })
    }

    /// The JetStream stream name.
    pub fn nats_stream(&self) -> String {
        self.nats_stream.clone().unwrap_or_else(|| "AGENTD_SUBMISSIONS".to_owned())
    }

    /// The JetStream consumer name.
    pub fn nats_consumer(&self) -> String {
        self.nats_consumer.clone().unwrap_or_else(|| "agentd-workers".to_owned())
    }

    /// The run lease.
    pub fn lease(&self) -> Result<Duration> {
        let lease = duration("AGENTD_LEASE", self.lease.as_deref(), Duration::from_secs(30))?;
        anyhow::ensure!(lease >= Duration::from_millis(300), "AGENTD_LEASE must be at least 300ms");
        Ok(lease)
    }

    /// The largest file an upload stores.
    pub fn max_file_bytes(&self) -> Result<u64> {
        let bytes = self.max_file_bytes.unwrap_or(agentd_gateway::domain::files::DEFAULT_MAX_FILE_BYTES);
        anyhow::ensure!(bytes >= 1, "AGENTD_MAX_FILE_BYTES must be at least 1");
        Ok(bytes)
    }

    /// The retry budget of new runs.
    pub fn max_attempts(&self) -> Result<i64> {
        let attempts = self.max_attempts.unwrap_or(5);
        anyhow::ensure!(attempts >= 1, "AGENTD_MAX_ATTEMPTS must be at least 1, got {attempts}");
        Ok(attempts)
    }

    /// Request bucket capacities.
    pub fn limits(&self) -> Result<agentd_gateway::Limits> {
        let defaults = agentd_gateway::Limits::default();
        let limits = agentd_gateway::Limits {
            create_per_minute: self.rate_limit_create.unwrap_or(defaults.create_per_minute),
            read_per_minute: self.rate_limit_read.unwrap_or(defaults.read_per_minute),
        };
        anyhow::ensure!(
            limits.create_per_minute >= 1 && limits.read_per_minute >= 1,
            "AGENTD_RATE_LIMIT_CREATE and AGENTD_RATE_LIMIT_READ must be at least 1"
        );
        Ok(limits)
    }

    /// The Redis key prefix.
    pub fn redis_prefix(&self) -> String {
        self.redis_prefix.clone().unwrap_or_else(|| "agentd".to_owned())
    }
}

fn load_file(path: &Path) -> Result<Settings> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}

/// Parses `30s`, `1500ms`, `2m` (or a bare number of seconds).
/// A size in bytes: a bare number, or with a `KiB`/`MiB`/`GiB` (or `K`/`M`/`G`) suffix.
fn size(setting: &str, value: &str) -> Result<u64> {
    let value = value.trim();
    let digits = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let (number, unit) = value.split_at(digits);
    let scale: u64 = match unit.trim() {
        "" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        other => anyhow::bail!("{setting}: unknown unit {other:?} in {value:?} (use a byte count, KiB, MiB or GiB)"),
    };
    let number: u64 =
        number.parse().map_err(|_| anyhow::anyhow!("{setting}: expected a size such as 512MiB, got {value:?}"))?;
    number.checked_mul(scale).ok_or_else(|| anyhow::anyhow!("{setting}: {value:?} is too large"))
}

/// `AGENTD_WORKER_HISTORY_CACHE`' default: about 55,000 turns of the benchmark's small
/// events (a turn's six weigh ~2.4 KB with its fold as the cache packs them,
/// `worker/src/event.rs`), so 32 sessions of a thousand turns each take their turns
/// without reading their whole history again (docs/benchmarks.md, "the history cache by size", "events packed in the
/// history cache").
const WORKER_HISTORY_CACHE: usize = 128 << 20;

fn duration(setting: &str, value: Option<&str>, default: Duration) -> Result<Duration> {
    let Some(value) = value else {
        return Ok(default);
    };
    if let Ok(seconds) = value.trim().parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(value.trim())
        .with_context(|| format!("{setting}: invalid duration {value:?} (expected e.g. 30s, 1500ms, 2m)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_default_to_their_own_loopback_port() {
        let defaults = Settings::default();
        let ops = defaults.ops_addr();
        assert!(ops.ip().is_loopback(), "{ops}");
        assert_ne!(ops.port(), defaults.http_addr().port());
        assert_ne!(ops.port(), defaults.grpc_addr().port());
        assert_ne!(ops.port(), 9090, "Prometheus and Cockpit listen there");
        assert_eq!(defaults.ops_token(), None);
        let blank = Settings { ops_token: Some("  ".to_owned()), ..Settings::default() };
        assert_eq!(blank.ops_token(), None, "a blank token is no token");
        let file: Settings = toml::from_str("ops_addr = \"0.0.0.0:9464\"\nops_token = \"t\"").unwrap();
        assert_eq!(file.ops_token().as_deref(), Some("t"));
    }

    #[test]
    fn flags_and_env_override_the_file() {
        let cli = Settings { http_addr: Some("127.0.0.1:9000".parse().unwrap()), ..Settings::default() };
        let file: Settings = toml::from_str("http_addr = \"127.0.0.1:1\"\nnats_url = \"nats://n:4222\"").unwrap();
        let merged = cli.or(file);
        assert_eq!(merged.http_addr(), "127.0.0.1:9000".parse().unwrap());
        assert_eq!(merged.nats_url.as_deref(), Some("nats://n:4222"));
    }

    #[test]
    fn mcp_settings_are_validated() {
        let with = |path: Option<&str>, hosts: Option<&str>| Settings {
            mcp_path: path.map(str::to_owned),
            mcp_allowed_hosts: hosts.map(str::to_owned),
            ..Settings::default()
        };
        assert_eq!(with(None, None).mcp_path().unwrap(), "/v1/mcp");
        assert_eq!(with(Some("/mcp"), None).mcp_path().unwrap(), "/mcp");
        assert_eq!(with(Some("/v1/mcp/agents"), None).mcp_path().unwrap(), "/v1/mcp/agents");
        for bad in
            ["", "/", "mcp", "/mcp/", "/v1/{id}", "/a//b", "/v1", "/v1/agents", "/v1/mcpx", "/readyz", "/admin/x"]
        {
            assert!(with(Some(bad), None).mcp_path().is_err(), "{bad:?}");
        }
        assert_eq!(with(None, None).mcp_allowed_hosts(true).unwrap().unwrap(), ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(with(None, None).mcp_allowed_hosts(false).unwrap(), None, "a gateway checks no Host by default");
        assert_eq!(with(None, Some("*")).mcp_allowed_hosts(true).unwrap(), None);
        let listed = with(None, Some("agents.example.com, 10.0.0.5:8080")).mcp_allowed_hosts(true).unwrap();
        assert_eq!(listed.unwrap(), ["agents.example.com", "10.0.0.5:8080"]);
        for bad in [" , ", "*,example.com", "bad host"] {
            assert!(with(None, Some(bad)).mcp_allowed_hosts(false).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_worker_history_cache_is_sized_by_the_setting_or_the_default() {
        let from_file = toml::from_str::<Settings>("worker_history_cache = \"1GiB\"").unwrap();
        assert_eq!(from_file.worker_history_cache().unwrap(), 1 << 30);
        assert_eq!(Settings::default().worker_history_cache().unwrap(), WORKER_HISTORY_CACHE);
        let bad = toml::from_str::<Settings>("worker_history_cache = \"lots\"").unwrap();
        assert!(bad.worker_history_cache().unwrap_err().to_string().contains("AGENTD_WORKER_HISTORY_CACHE"));
    }

    #[test]
    fn unknown_file_keys_are_rejected() {
        assert!(toml::from_str::<Settings>("htp_addr = \"127.0.0.1:1\"").is_err());
    }

    #[test]
    fn sizes_accept_binary_units() {
        assert_eq!(size("X", "0").unwrap(), 0);
        assert_eq!(size("X", "4096").unwrap(), 4096);
        assert_eq!(size("X", "512MiB").unwrap(), 512 << 20);
        assert_eq!(size("X", "2G").unwrap(), 2 << 30);
        assert!(size("X", "1TB").unwrap_err().to_string().contains("unknown unit"));
        assert!(size("X", "MiB").is_err());
    }

    #[test]
    fn durations_accept_units_and_bare_seconds() {
        assert_eq!(duration("X", Some("45"), Duration::ZERO).unwrap(), Duration::from_secs(45));
        assert_eq!(duration("X", Some("1500ms"), Duration::ZERO).unwrap(), Duration::from_millis(1500));
        assert_eq!(duration("X", None, Duration::from_secs(7)).unwrap(), Duration::from_secs(7));
        assert!(duration("X", Some("soon"), Duration::ZERO).is_err());
    }
}
