//! The store's connection pool on PostgreSQL (ADR 0032): a connection that sat idle is
//! checked before use, so one the server dropped meanwhile is replaced without an error;
//! a connection used within the last second is not pinged again, so a server that
//! dropped it that recently costs one failed statement, and the pool heals after it.

use std::sync::Arc;
use std::time::Duration;

use agentd_schema::store::prelude::*;
use agentd_schema::{ConnectOptions, SqlStore, StoreError, SystemClock};
use agentd_tests::stores::{create_postgres_database, drop_postgres_database};
use sqlx::Connection;

/// Terminates every server process connected to `database` but the caller's own.
async fn drop_connections(database: &str) {
    let mut admin = sqlx::PgConnection::connect(&agentd_tests::backends::postgres_url()).await.expect("admin");
    let killed: Vec<(bool,)> = sqlx::query_as(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(database)
    .fetch_all(&mut admin)
    .await
    .expect("terminate");
    assert!(!killed.is_empty(), "the store holds a connection to {database}");
    admin.close().await.ok();
    // The server processes exit asynchronously; give them the time to.
    tokio::time::sleep(Duration::from_millis(200)).await;
}

async fn store(prefix: &str) -> (SqlStore, String) {
    let (url, database) = create_postgres_database(prefix).await;
    // One connection, so "the connection" of each test is the one every statement takes.
    let options = ConnectOptions { max_connections: 1, ..ConnectOptions::new(&url) };
    let store = SqlStore::connect(options, Arc::new(SystemClock)).await.expect("connect");
    store.migrate().await.expect("migrate");
    (store, database)
}

#[tokio::test]
async fn a_connection_dropped_while_idle_is_replaced_before_use() {
    let (store, database) = store("agentd_pool_idle").await;
    store.resolve_api_key("sk-nobody").await.expect("a read on a fresh pool");
    drop_connections(&database).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let read = store.resolve_api_key("sk-nobody").await;
    store.close().await;
    drop_postgres_database(&database).await;
    assert!(matches!(read, Ok(None)), "the idle connection was checked and replaced: {read:?}");
}

#[tokio::test]
async fn a_connection_dropped_just_after_use_fails_one_statement_then_the_pool_heals() {
    let (store, database) = store("agentd_pool_busy").await;
    store.resolve_api_key("sk-nobody").await.expect("a read on a fresh pool");
    drop_connections(&database).await;
    let first = store.resolve_api_key("sk-nobody").await;
    let second = store.resolve_api_key("sk-nobody").await;
    store.close().await;
    drop_postgres_database(&database).await;
    // Unavailable (the gateway's 503, a worker's retry), whether the statement met the
    // server's "terminating connection" or the closed socket.
    assert!(
        matches!(first, Err(StoreError::Unavailable(_))),
        "a connection used 200 ms ago is not pinged before use, and its failure is unavailable: {first:?}"
    );
    assert!(matches!(second, Ok(None)), "the broken connection was closed on its release: {second:?}");
}
