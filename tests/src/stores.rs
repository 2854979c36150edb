//! Throwaway stores for the conformance suites: a SQLite file in a temp dir, or a
//! PostgreSQL database created for one test and dropped after it.

use std::sync::Arc;

use agentd_schema::{Clock, ConnectOptions, SqlStore};
use sqlx::Connection;

use crate::backends::{postgres_url, require_tcp, unique_name};

/// A migrated store and what must be cleaned up after it.
pub struct TestStore {
    /// The store under test.
    pub store: Arc<SqlStore>,
    /// `postgres://…/name` or `sqlite://…`.
    pub url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres { database: String },
}

/// Which backend to build a store on.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// SQLite in a temp directory.
    Sqlite,
    /// A fresh PostgreSQL database.
    Postgres,
}

/// A fresh PostgreSQL database named after `prefix`; returns its URL.
pub async fn create_postgres_database(prefix: &str) -> (String, String) {
    let server = postgres_url();
    require_tcp("PostgreSQL", "AGENTD_TEST_POSTGRES_URL", &server).await;
    let database = unique_name(prefix);
    let mut admin = sqlx::PgConnection::connect(&server).await.expect("connect to the PostgreSQL test server");
    sqlx::query(&format!("CREATE DATABASE {database}")).execute(&mut admin).await.expect("create database");
    admin.close().await.ok();
    let base = server.rsplit_once('/').map_or(server.as_str(), |(base, _)| base).to_owned();
    (format!("{base}/{database}"), database)
}

/// Drops a database made by [`create_postgres_database`], disconnecting its clients.
pub async fn drop_postgres_database(database: &str) {
    if let Ok(mut admin) = sqlx::PgConnection::connect(&postgres_url()).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)")).execute(&mut admin).await;
        admin.close().await.ok();
    }
}

impl TestStore {
    /// Creates and migrates a store.
    pub async fn new(kind: Kind, clock: Arc<dyn Clock>) -> Self {
        let (url, cleanup) = match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("store.db").display());
                (url, Cleanup::Sqlite(dir))
            }
            Kind::Postgres => {
                let (url, database) = create_postgres_database("agentd_store").await;
                (url, Cleanup::Postgres { database })
            }
        };
        let store = SqlStore::connect(ConnectOptions::new(&url), clock).await.expect("connect store");
        store.migrate().await.expect("migrate");
        Self { store: Arc::new(store), url, cleanup }
    }

    /// Closes the store and removes its database.
    pub async fn cleanup(self) {
        self.store.close().await;
        if let Cleanup::Postgres { database } = &self.cleanup {
            drop_postgres_database(database).await;
        }
    }
}

/// Runs `body` against a fresh store of `kind` on a manual clock, cleaning up even when
/// `body` panics (the panic is then resumed). The store conformance suites call it
/// through [`store_conformance!`](crate::store_conformance).
pub async fn run_conformance<F, Fut>(kind: Kind, body: F)
where
    F: FnOnce(Arc<dyn agentd_schema::Store>, Arc<agentd_schema::ManualClock>) -> Fut,
    Fut: Future<Output = ()>,
{
    use futures::FutureExt;
    let clock = Arc::new(agentd_schema::ManualClock::new(1_700_000_000_000));
    let test = TestStore::new(kind, clock.clone()).await;
    let store: Arc<dyn agentd_schema::Store> = test.store.clone();
    let outcome = std::panic::AssertUnwindSafe(body(store, clock)).catch_unwind().await;
    test.cleanup().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// One store conformance case: a module `$name` with a SQLite and a PostgreSQL test,
/// each running `$body(store, clock)` on a fresh store.
#[macro_export]
macro_rules! store_conformance {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $crate::stores::run_conformance($crate::stores::Kind::Sqlite, $body).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                $crate::stores::run_conformance($crate::stores::Kind::Postgres, $body).await;
            }
        }
    };
}

/// The dialect's (`postgres`, `sqlite`) migrations numbered before `version`, copied into
/// `into`: a migrator for the schema as it was, to test a migration on existing data.
pub fn migrations_before(dialect: &str, version: &str, into: &std::path::Path) -> std::path::PathBuf {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../schema/migrations").join(dialect);
    let target = into.join(dialect);
    std::fs::create_dir_all(&target).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.as_str() < version {
            std::fs::copy(&path, target.join(name)).unwrap();
        }
    }
    target
}
