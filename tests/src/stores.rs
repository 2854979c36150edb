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

/// A one-connection pool on `url` holding the dialect's schema as it was before
/// migration `version` ([`migrations_before`]), with organization `org_1` and its
/// workspace `wrkspc_1`: the start of every test of a migration on existing data.
pub async fn old_schema(url: &str, dialect: &str, version: &str) -> sqlx::AnyPool {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().expect("temp dir");
    let old = sqlx::migrate::Migrator::new(migrations_before(dialect, version, dir.path())).await.expect("migrator");
    let pool = sqlx::any::AnyPoolOptions::new().max_connections(1).connect(url).await.expect("connect");
    old.run(&pool).await.expect("the schema before the migration");
    for statement in [
        "INSERT INTO organizations (id, name, created_at_ms) VALUES ('org_1', 'acme', 0)",
        "INSERT INTO workspaces (id, organization_id, name, created_at_ms) VALUES ('wrkspc_1', 'org_1', 'default', 0)",
    ] {
        sqlx::query(statement).execute(&pool).await.expect("organization and workspace");
    }
    pool
}

/// Runs `check(url, dialect)` on an empty, unmigrated database of `kind`: a SQLite file
/// in a temp dir, or a fresh PostgreSQL database named after `prefix`, dropped after
/// `check` even when it panics (the panic is then resumed). The migration tests build
/// the old schema on it themselves ([`migrations_before`]), through [`dialect_tests!`](crate::dialect_tests).
pub async fn on_empty_database<F, Fut>(kind: Kind, prefix: &str, check: F)
where
    F: FnOnce(String, &'static str) -> Fut,
    Fut: Future<Output = ()>,
{
    use futures::FutureExt;
    match kind {
        Kind::Sqlite => {
            let dir = tempfile::tempdir().expect("temp dir");
            let url = format!("sqlite://{}?mode=rwc", dir.path().join("store.db").display());
            check(url, "sqlite").await;
        }
        Kind::Postgres => {
            let (url, database) = create_postgres_database(prefix).await;
            let outcome = std::panic::AssertUnwindSafe(check(url, "postgres")).catch_unwind().await;
            drop_postgres_database(&database).await;
            if let Err(panic) = outcome {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

/// Defines `sqlite` and `postgres` tests that run `$check(url, dialect)` on an empty
/// database of each ([`on_empty_database`](crate::stores::on_empty_database)).
#[macro_export]
macro_rules! dialect_tests {
    ($check:path, $prefix:literal) => {
        #[tokio::test]
        async fn sqlite() {
            $crate::stores::on_empty_database($crate::stores::Kind::Sqlite, $prefix, |url, dialect| async move {
                $check(&url, dialect).await
            })
            .await;
        }

        #[tokio::test]
        async fn postgres() {
            $crate::stores::on_empty_database($crate::stores::Kind::Postgres, $prefix, |url, dialect| async move {
                $check(&url, dialect).await
            })
            .await;
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
