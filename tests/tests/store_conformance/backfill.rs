//! Migration 0013 (the tool-call ledger) on existing data, on SQLite and PostgreSQL:
//! histories written before the ledger existed answer `open_tool_calls` and
//! `tool_calls` as if the ledger had been kept all along.

use std::sync::Arc;

use agentd_schema::store::prelude::*;
use agentd_schema::{Confirmation, ConnectOptions, ManualClock, NewEvent, SqlStore, ToolUseKind};
use serde_json::{Value, json};

/// The migration under test; the ones before it build the old schema.
const VERSION: &str = "0013";

async fn backfills_existing_histories(url: &str, dialect: &str) {
    let pool = agentd_tests::stores::old_schema(url, dialect, VERSION).await;
    let history: [(&str, &str, Value); 10] = [
        ("sesn_a", "sevt_use_ask", json!({ "type": "agent.tool_use", "name": "bash", "evaluated_permission": "ask" })),
        ("sesn_a", "sevt_use_custom", json!({ "type": "agent.custom_tool_use", "name": "lookup" })),
        ("sesn_a", "sevt_use_mcp", json!({ "type": "agent.mcp_tool_use", "name": "search" })),
        (
            "sesn_a",
            "sevt_allow",
            json!({ "type": "user.tool_confirmation", "tool_use_id": "sevt_use_ask", "result": "allow" }),
        ),
        (
            "sesn_a",
            "sevt_deny",
            json!({ "type": "user.tool_confirmation", "tool_use_id": "sevt_use_ask", "result": "deny" }),
        ),
        ("sesn_a", "sevt_result", json!({ "type": "agent.tool_result", "tool_use_id": "sevt_use_ask" })),
        ("sesn_a", "sevt_result_again", json!({ "type": "user.tool_result", "tool_use_id": "sevt_use_ask" })),
        ("sesn_a", "sevt_mcp_result", json!({ "type": "agent.mcp_tool_result", "mcp_tool_use_id": "sevt_use_mcp" })),
        ("sesn_b", "sevt_use_b", json!({ "type": "agent.tool_use", "name": "read", "evaluated_permission": "allow" })),
        // Another session's answer does not answer sesn_a's custom call.
        ("sesn_b", "sevt_stray", json!({ "type": "user.custom_tool_result", "custom_tool_use_id": "sevt_use_custom" })),
    ];
    for (n, session) in ["sesn_a", "sesn_b"].into_iter().enumerate() {
        sqlx::query(
            "INSERT INTO sessions (id, workspace_id, status, body, next_seq, created_at_ms, updated_at_ms) \
             VALUES ($1, 'wrkspc_1', 'idle', '{}', $3, $2, $2)",
        )
        .bind(session)
        .bind(n as i64)
        .bind(history.len() as i64 + 1)
        .execute(&pool)
        .await
        .unwrap();
    }
    for (seq, (session, id, body)) in history.iter().enumerate() {
        sqlx::query(
            "INSERT INTO session_events (session_id, seq, event_id, thread_id, type, body, processed_at_ms) \
             VALUES ($1, $2, $3, $1, $4, $5, 0)",
        )
        .bind(*session)
        .bind(seq as i64 + 1)
        .bind(*id)
        .bind(body["type"].as_str().unwrap())
        .bind(body.to_string())
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;

    let store = SqlStore::connect(ConnectOptions::new(url), Arc::new(ManualClock::new(0))).await.unwrap();
    store.migrate().await.unwrap();
    let open = store.open_tool_calls("sesn_a").await.unwrap();
    assert_eq!(open.iter().map(|c| c.tool_use_id.as_str()).collect::<Vec<_>>(), ["sevt_use_custom"]);
    assert_eq!((open[0].use_kind, open[0].name.as_str(), open[0].use_seq), (ToolUseKind::Custom, "lookup", 2));
    let ids = ["sevt_use_ask", "sevt_use_mcp"].map(str::to_owned);
    let answered = store.tool_calls("sesn_a", &ids).await.unwrap();
    let ask = &answered[0];
    assert_eq!(ask.evaluated_permission.as_deref(), Some("ask"));
    assert_eq!(
        (ask.confirmation, ask.confirmation_event_id.as_deref()),
        (Some(Confirmation::Allow), Some("sevt_allow")),
        "the first confirmation counts"
    );
    assert_eq!(
        (ask.result_event_id.as_deref(), ask.result_kind.as_deref()),
        (Some("sevt_result"), Some("agent.tool_result")),
        "the first result counts"
    );
    assert_eq!((ask.confirmation_seq, ask.result_seq), (Some(4), Some(6)));
    assert_eq!(answered[1].result_event_id.as_deref(), Some("sevt_mcp_result"));
    let other = store.open_tool_calls("sesn_b").await.unwrap();
    assert_eq!((other.len(), other[0].evaluated_permission.as_deref()), (1, Some("allow")));
    // Appends after the migration keep the backfilled rows.
    let result = NewEvent::new(
        "sesn_a",
        json!({ "type": "user.custom_tool_result", "custom_tool_use_id": "sevt_use_custom", "content": [] }),
    );
    store.append_events("sesn_a", vec![result]).await.unwrap();
    assert!(store.open_tool_calls("sesn_a").await.unwrap().is_empty());
    store.close().await;
}

agentd_tests::dialect_tests!(backfills_existing_histories, "agentd_backfill");
