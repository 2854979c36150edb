//! Migration 0030 (a session's environment as a column) on existing data, on SQLite and
//! PostgreSQL: sessions written by the previous schema name their environment to
//! `get_session_for_turn`, so admitting their turns reads the environment's state with
//! the session, as for sessions created since.

use std::sync::Arc;

use agentd_schema::store::prelude::*;
use agentd_schema::{ConnectOptions, ManualClock, SqlStore};
use agentd_tests::stores::{create_postgres_database, drop_postgres_database};
use sqlx::any::AnyPoolOptions;

/// The migration under test; the ones before it build the old schema.
const VERSION: &str = "0030";

async fn backfills_existing_sessions(url: &str, dialect: &str) {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let old = sqlx::migrate::Migrator::new(agentd_tests::stores::migrations_before(dialect, VERSION, dir.path()))
        .await
        .unwrap();
    let pool = AnyPoolOptions::new().max_connections(1).connect(url).await.unwrap();
    old.run(&pool).await.unwrap();
    for statement in [
        "INSERT INTO organizations (id, name, created_at_ms) VALUES ('org_1', 'acme', 0)",
        "INSERT INTO workspaces (id, organization_id, name, created_at_ms) VALUES ('wrkspc_1', 'org_1', 'default', 0)",
        "INSERT INTO resources (id, workspace_id, kind, version, body, created_at_ms, updated_at_ms, archived_at_ms) \
         VALUES ('env_1', 'wrkspc_1', 'environment', 1, '{}', 0, 0, 5)",
        "INSERT INTO sessions (id, workspace_id, status, body, next_seq, created_at_ms, updated_at_ms) \
         VALUES ('sesn_env', 'wrkspc_1', 'idle', '{\"environment_id\":\"env_1\",\"title\":\"t\"}', 1, 0, 0)",
        "INSERT INTO sessions (id, workspace_id, status, body, next_seq, created_at_ms, updated_at_ms) \
         VALUES ('sesn_none', 'wrkspc_1', 'idle', '{}', 1, 0, 0)",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    pool.close().await;

    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = SqlStore::connect(ConnectOptions::new(url), clock).await.unwrap();
    store.migrate().await.unwrap();
    let read = store.get_session_for_turn("wrkspc_1", "sesn_env").await.unwrap().unwrap();
    let (environment_id, state) = read.environment.unwrap();
    assert_eq!(environment_id, "env_1");
    assert_eq!(state.unwrap().archived_at_ms, Some(5), "the environment's state, read with the session");
    assert_eq!(read.session.body["title"], "t", "the body is kept");
    let none = store.get_session_for_turn("wrkspc_1", "sesn_none").await.unwrap().unwrap();
    assert_eq!(none.environment, None, "a body without an environment names none");
    store.close().await;
}

#[tokio::test]
async fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("store.db").display());
    backfills_existing_sessions(&url, "sqlite").await;
}

#[tokio::test]
async fn postgres() {
    let (url, database) = create_postgres_database("agentd_migrate").await;
    backfills_existing_sessions(&url, "postgres").await;
    drop_postgres_database(&database).await;
}
