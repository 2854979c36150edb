//! Migration 0012 (agent snapshots) on existing data, on SQLite and PostgreSQL: sessions
//! written by the previous schema, with the agent embedded in each row, keep answering
//! with the same agent, and sessions that embedded the same agent share one snapshot.

use std::sync::Arc;

use agentd_schema::store::prelude::*;
use agentd_schema::{ConnectOptions, ManualClock, SessionQuery, SqlStore};
use serde_json::{Value, json};

/// The migration under test; the ones before it build the old schema.
const VERSION: &str = "0012";

fn agent(id: &str, version: i64, system: &str) -> Value {
    json!({ "type": "agent", "id": id, "version": version, "name": "a", "system": system,
            "model": { "id": "claude-sonnet-4-5", "effort": { "type": "high" } }, "tools": [] })
}

async fn migrates_existing_sessions(url: &str, dialect: &str) {
    let pool = agentd_tests::stores::old_schema(url, dialect, VERSION).await;
    let shared = agent("agent_a", 1, "shared");
    let rows = [
        ("sesn_01", Some(shared.clone())),
        ("sesn_02", Some(shared.clone())),
        ("sesn_03", Some(agent("agent_a", 2, "newer"))),
        ("sesn_04", None),
    ];
    for (n, (id, agent)) in rows.iter().enumerate() {
        let mut body = json!({ "type": "session", "id": id, "title": format!("t{n}"), "metadata": {} });
        if let Some(agent) = agent {
            body["agent"] = agent.clone();
        }
        sqlx::query(
            "INSERT INTO sessions (id, workspace_id, status, body, agent_id, agent_version, created_at_ms, updated_at_ms) \
             VALUES ($1, 'wrkspc_1', 'idle', $2, $3, $4, $5, $5)",
        )
        .bind(*id)
        .bind(body.to_string())
        .bind(agent.as_ref().map(|a| a["id"].as_str().unwrap().to_owned()))
        .bind(agent.as_ref().map(|a| a["version"].as_i64().unwrap()))
        .bind(n as i64)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;

    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = SqlStore::connect(ConnectOptions::new(url), clock).await.unwrap();
    store.migrate().await.unwrap();
    let get = |id: &'static str| {
        let store = &store;
        async move { store.get_session("wrkspc_1", id).await.unwrap().unwrap() }
    };
    let (one, two, three, four) =
        (get("sesn_01").await, get("sesn_02").await, get("sesn_03").await, get("sesn_04").await);
    for (n, (session, (_, agent))) in [&one, &two, &three, &four].into_iter().zip(&rows).enumerate() {
        assert_eq!(session.body.get("agent"), agent.as_ref(), "{}: the same agent as before", session.id);
        assert_eq!(session.body["title"], json!(format!("t{n}")), "{}: the rest of the body is kept", session.id);
    }
    assert!(one.agent_snapshot_id.is_some());
    assert_eq!(one.agent_snapshot_id, two.agent_snapshot_id, "one snapshot per distinct agent");
    assert_ne!(one.agent_snapshot_id, three.agent_snapshot_id);
    assert_eq!(four.agent_snapshot_id, None);
    let listed = store.list_sessions("wrkspc_1", &SessionQuery { limit: 10, ..Default::default() }).await.unwrap();
    assert_eq!(listed.len(), 4);
    assert!(listed.iter().all(|s| s.body.get("agent").is_none()), "list bodies leave the agent out");
    let snapshot = store.agent_snapshot(one.agent_snapshot_id.as_deref().unwrap()).await.unwrap();
    assert_eq!(snapshot, Some(shared));
    store.close().await;
}

agentd_tests::dialect_tests!(migrates_existing_sessions, "agentd_migrate");
