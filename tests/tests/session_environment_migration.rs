//! Migration 0030 (a session's environment as a column) on existing data, on SQLite and
//! PostgreSQL: sessions written by the previous schema name their environment to
//! `get_session_for_turn`, so admitting their turns reads the environment's state with
//! the session, as for sessions created since.

use std::sync::Arc;

use agentd_schema::store::prelude::*;
use agentd_schema::{ConnectOptions, ManualClock, SqlStore};

/// The migration under test; the ones before it build the old schema.
const VERSION: &str = "0030";

async fn backfills_existing_sessions(url: &str, dialect: &str) {
    let pool = agentd_tests::stores::old_schema(url, dialect, VERSION).await;
    for statement in [
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

agentd_tests::dialect_tests!(backfills_existing_sessions, "agentd_migrate");
