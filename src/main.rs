//! The `agentd` binary: parses arguments and configuration, sets up telemetry and
//! signals, and runs one role. The roles themselves live in the library crates.

mod config;
mod data_dir;
mod keys;
mod logging;
mod roles;
mod tunnel;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::config::Settings;

/// agentd — a self-hosted agent platform speaking the Managed Agents API.
///
/// Every option can be given as a flag, as an AGENTD_* environment variable, or as a
/// key of the TOML file named by --config; flags win over the environment, which wins
/// over the file.
#[derive(Debug, Parser)]
#[command(name = "agentd", version, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    settings: Settings,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run everything in one process on embedded backends (SQLite under the data dir,
    /// in-process queue and bus). Needs no configuration and no services.
    Dev,
    /// Run an HTTP gateway against PostgreSQL, NATS JetStream and Redis
    /// (AGENTD_DATABASE_URL, AGENTD_NATS_URL, AGENTD_REDIS_URL are required).
    Gateway,
    /// Run a worker against PostgreSQL, NATS JetStream and Redis (same settings as the gateway).
    Worker,
    /// Run the hands of `cloud` environments: poll their work through a gateway
    /// (AGENTD_RUNNER_GATEWAY_URL, AGENTD_RUNNER_KEY) and run built-in tool calls in
    /// per-session sandboxes.
    Runner,
    /// Apply database migrations to AGENTD_DATABASE_URL and exit. Safe to run from
    /// several processes at once.
    Migrate,
    /// Run an MCP tunnel's connector inside a private network: dial the gateway with
    /// the tunnel's token and carry workers' connections to the MCP server at
    /// --upstream (docs/api/tunnels.md).
    Tunnel(tunnel::TunnelArgs),
    /// Manage API keys (AGENTD_DATABASE_URL, or the dev database in the data dir).
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
}

impl Command {
    fn role(&self) -> &'static str {
        match self {
            Command::Dev => "dev",
            Command::Gateway => "gateway",
            Command::Worker => "worker",
            Command::Runner => "runner",
            Command::Migrate => "migrate",
            Command::Keys { .. } => "keys",
            Command::Tunnel(_) => "tunnel",
        }
    }
}

/// glibc's malloc slows down as the heap fills with the small allocations of parsed JSON
/// (the worker's history cache): a turn's CPU grew by half after 30,000 stored turns, most
/// of it in `_int_malloc` (docs/benchmarks.md; ADR 0035).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Not a role: the egress forwarder the runner starts inside a `namespace` sandbox
    // with allowed hosts (agentd_runner::egress). It reads no settings and logs nothing.
    if std::env::args().nth(1).as_deref() == Some("sandbox-forward") {
        let forwarded = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|runtime| runtime.block_on(agentd_runner::egress::forward()));
        return match forwarded {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(_) => std::process::ExitCode::FAILURE,
        };
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // Also on stderr without the subscriber: startup errors must be readable
            // even when logging itself failed to start.
            eprintln!("agentd: error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let settings = cli.settings.with_file()?;
    let role = cli.command.role();
    let _telemetry = logging::init(settings.log_format(), role)?;
    if let Some(path) = &settings.model_catalog {
        let catalog = agentd_schema::catalog::Catalog::with_file(path)
            .map_err(|e| anyhow::anyhow!("{e} (check AGENTD_MODEL_CATALOG)"))?;
        agentd_schema::catalog::install(catalog);
    }
    // Gateways and workers read it alike: one decides whether web_search may be enabled,
    // the other makes the searches.
    agentd_schema::web::install_search_backend(settings.web_search_url()?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Dev => roles::dev(settings).await,
            Command::Gateway => roles::gateway(settings).await,
            Command::Worker => roles::worker(settings).await,
            Command::Runner => roles::runner(settings).await,
            Command::Migrate => roles::migrate(settings).await,
            Command::Keys { command } => keys::run(settings, command).await,
            Command::Tunnel(args) => roles::tunnel(args).await,
        }
    })
}
