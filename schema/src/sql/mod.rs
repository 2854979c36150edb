//! The store written once over `sqlx::Any`, for PostgreSQL and SQLite alike (ADR 0003).
//!
//! Queries are portable SQL: `$N` placeholders, `RETURNING`, `ON CONFLICT`, times as
//! epoch-millisecond BIGINTs, JSON as TEXT, flags as 0/1 BIGINTs. Only the migration
//! directories are per dialect. Each area's trait is implemented in its own module,
//! next to its SQL; statements live in named files under `schema/queries/<area>/`.
//! This module holds the pools, the dialect handling and the shared row conversions.
//!
//! Two pools: `primary` takes every write and every transaction, `readers` the hot
//! reads that need no transaction. On PostgreSQL they are one pool. On SQLite the
//! primary is a single connection, so writers queue in the process (a fair, async
//! wait) instead of colliding in SQLite's lock and sleeping in its busy handler, and
//! the readers have their own connections, which WAL lets run beside the writer
//! (ADR 0014).

mod adapters;
mod agent_drafts;
mod app_tokens;
mod checkpoint;
mod deployments;
mod dreams;
mod durable;
mod erasure;
mod files;
mod held;
mod idempotency;
mod inbox;
mod memory;
mod outbox;
mod protocol_config;
mod providers;
mod resources;
mod runs;
mod sandbox_policies;
mod sealed;
mod session_threads;
mod sessions;
mod skills;
mod tenancy;
mod tool_calls;
mod usage;
mod user_profiles;
mod webhooks;
mod work;
mod workflows;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{Connection, Executor, Row};

use self::checkpoint::Checkpoints;
use self::held::{HeldPool, Tx};
use crate::clock::Clock;
use crate::error::{StoreError, StoreResult};
use crate::store::{Backend, StoreHealth};

/// Embedded migrations, one directory per dialect.
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// How long a SQLite write may queue for the one writer connection.
const WRITER_WAIT: Duration = Duration::from_secs(10);

/// A pooled connection idle at least this long is pinged before it is used again.
const RECHECK_IDLE_AFTER: Duration = Duration::from_secs(1);

/// Every SQLite connection's settings. WAL lets readers proceed while the writer
/// commits; the busy timeout only covers another process writing to the same file
/// (`agentd keys`, say). The writer adds `checkpoint::WRITER_PRAGMAS`.
const SQLITE_PRAGMAS: &str =
    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON;";

/// A reader's settings on top of [`SQLITE_PRAGMAS`]: a page cache of 256 KiB instead of
/// SQLite's 2 MiB. Each of the sixteen readers keeps its own cache, and what they all
/// cache stays resident (the idle-stream figures in docs/benchmarks.md); the file's
/// pages are in the kernel's page cache anyway, so a reader that misses reads them
/// from there.
const SQLITE_READER_PRAGMAS: &str = "PRAGMA cache_size = -256;";

/// Connection settings for [`SqlStore::connect`].
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// `postgres://…` or `sqlite://…`.
    pub url: String,
    /// Pool size.
    pub max_connections: u32,
    /// How long to wait for a connection before reporting the store unavailable.
    pub acquire_timeout: Duration,
}

impl ConnectOptions {
    /// Defaults suited to `url`'s backend.
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), max_connections: 16, acquire_timeout: Duration::from_secs(3) }
    }
}

/// The SQL store over PostgreSQL or SQLite.
pub struct SqlStore {
    /// Every write and every transaction (on SQLite: its one writer connection).
    primary: HeldPool,
    /// Reads outside a transaction (on PostgreSQL: the primary pool itself).
    readers: HeldPool,
    backend: Backend,
    clock: Arc<dyn Clock>,
    /// Sessions' usage as this process's run commits last committed it.
    known_usage: sessions::KnownUsage,
    /// SQLite's WAL checkpoints, run beside the writer instead of in its commits.
    _checkpoints: Option<Checkpoints>,
}

impl std::fmt::Debug for SqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore").field("backend", &self.backend).finish_non_exhaustive()
    }
}

/// The backend a database URL names, or an error naming the accepted schemes.
pub fn backend_of(url: &str) -> StoreResult<Backend> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else {
        Err(StoreError::Backend(format!(
            "unsupported database url scheme in {:?}: expected postgres://… or sqlite://…",
            redact_url(url)
        )))
    }
}

/// The URL with any password replaced, for logs and errors.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}://{user}:***{}", &url[..scheme_end], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl SqlStore {
    /// Connects (and for SQLite creates the file). Does not migrate.
    pub async fn connect(options: ConnectOptions, clock: Arc<dyn Clock>) -> StoreResult<Self> {
        sqlx::any::install_default_drivers();
        let backend = backend_of(&options.url)?;
        let pool = |extra_pragmas: &'static str| {
            let pool = AnyPoolOptions::new()
                .max_connections(options.max_connections)
                .acquire_timeout(options.acquire_timeout)
                // sqlx pings a connection when it goes back to the pool (always) and again
                // when it is taken (by default): two more round trips per statement, to
                // PostgreSQL or to SQLite's connection thread. A connection used within
                // the last second was just checked on its release; only one that sat
                // idle longer is pinged before use (ADR 0032).
                .test_before_acquire(false)
                .before_acquire(|conn, meta| {
                    Box::pin(async move {
                        if meta.idle_for >= RECHECK_IDLE_AFTER {
                            conn.ping().await?;
                        }
                        Ok(true)
                    })
                });
            if backend != Backend::Sqlite {
                return pool;
            }
            pool.after_connect(move |conn, _| {
                Box::pin(async move {
                    conn.execute(SQLITE_PRAGMAS).await?;
                    if !extra_pragmas.is_empty() {
                        conn.execute(extra_pragmas).await?;
                    }
                    Ok(())
                })
            })
        };
        if backend == Backend::Postgres {
            let primary = HeldPool::new(pool("").connect(&options.url).await?);
            let readers = primary.clone();
            return Ok(Self { readers, primary, backend, clock, known_usage: Default::default(), _checkpoints: None });
        }
        let url = if options.url.contains("mode=") {
            options.url.clone()
        } else {
            let sep = if options.url.contains('?') { '&' } else { '?' };
            format!("{}{sep}mode=rwc", options.url)
        };
        // The writer waits in its queue as long as SQLite's busy handler would have.
        let writer = pool(checkpoint::WRITER_PRAGMAS).max_connections(1);
        let primary = HeldPool::grouped_writer(
            writer.acquire_timeout(options.acquire_timeout.max(WRITER_WAIT)).connect(&url).await?,
        );
        let readers = HeldPool::new(pool(SQLITE_READER_PRAGMAS).connect(&url).await?);
        let checkpoints = Some(Checkpoints::spawn(readers.clone(), primary.clone()));
        Ok(Self { primary, readers, backend, clock, known_usage: Default::default(), _checkpoints: checkpoints })
    }

    /// Applies pending migrations. On PostgreSQL an advisory lock serializes
    /// concurrent migrators, so several processes may start together.
    pub async fn migrate(&self) -> StoreResult<()> {
        let migrator = match self.backend {
            Backend::Postgres => &POSTGRES_MIGRATIONS,
            Backend::Sqlite => &SQLITE_MIGRATIONS,
        };
        migrator.run(self.primary.inner()).await.map_err(|error| match error {
            sqlx::migrate::MigrateError::Execute(inner) => StoreError::from(inner),
            other => StoreError::Backend(other.to_string()),
        })
    }

    /// Closes the pools.
    pub async fn close(&self) {
        self.readers.close().await;
        self.primary.close().await;
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }
}

/// Parses a JSON text column.
fn json(row: &AnyRow, column: &str) -> StoreResult<Value> {
    let text: String = row.try_get(column)?;
    Ok(JsonText::try_from(text)?.0)
}

/// A JSON text column, parsed: the one conversion of JSON columns for typed rows
/// (`#[sqlx(try_from = "String")]`), since the Any driver has no JSON type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JsonText(pub Value);

impl TryFrom<String> for JsonText {
    type Error = StoreError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        serde_json::from_str(&text).map(JsonText).map_err(|e| StoreError::Backend(format!("corrupt json column: {e}")))
    }
}

/// A 0/1 flag column for typed rows (`#[sqlx(try_from = "i64")]`): flags are BIGINTs so
/// both dialects store them alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flag(pub bool);

impl From<i64> for Flag {
    fn from(value: i64) -> Self {
        Flag(value != 0)
    }
}

#[async_trait]
impl StoreHealth for SqlStore {
    fn backend(&self) -> Backend {
        self.backend
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.primary).await?;
        Ok(())
    }
}
