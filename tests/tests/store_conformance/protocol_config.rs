//! MCP and A2A configuration (`ProtocolConfigStore`): a protocol's exposure is absent
//! until set and replaced whole; MCP servers are created at revision 1 and replaced with
//! their revision bumped, their names unique in a workspace; an agent's MCP servers are
//! recorded as last written. Every row is seen in its own workspace only.

use agentd_schema::ids::new_id;
use agentd_schema::{AgentMcpConfigRow, ExposedProtocol, ExposureMode, McpServerRow};

use super::*;

fn server(workspace: &str, id: &str, name: &str, url: &str) -> McpServerRow {
    McpServerRow {
        workspace_id: workspace.to_owned(),
        id: id.to_owned(),
        name: name.to_owned(),
        url: url.to_owned(),
        description: None,
        revision: 0,
        created_at_ms: 0,
        updated_at_ms: 0,
    }
}

conformance!(exposure_is_absent_until_set_and_replaced_whole, |store, clock| async move {
    assert_eq!(store.get_exposure("ws_1", ExposedProtocol::A2a).await.unwrap(), None);
    let listed = vec![new_id("agent"), new_id("agent")];
    let row = store.put_exposure("ws_1", ExposedProtocol::A2a, ExposureMode::Listed, &listed).await.unwrap();
    assert_eq!((row.mode, row.agent_ids.clone(), row.updated_at_ms), (ExposureMode::Listed, listed, clock.now_ms()));
    assert_eq!(store.get_exposure("ws_1", ExposedProtocol::A2a).await.unwrap(), Some(row));
    assert_eq!(store.get_exposure("ws_1", ExposedProtocol::Mcp).await.unwrap(), None, "per protocol");
    assert_eq!(store.get_exposure("ws_2", ExposedProtocol::A2a).await.unwrap(), None, "per workspace");
    clock.advance(1_000);
    let none = store.put_exposure("ws_1", ExposedProtocol::A2a, ExposureMode::None, &[]).await.unwrap();
    assert_eq!((none.mode, none.agent_ids.len()), (ExposureMode::None, 0), "replaced whole");
    assert_eq!(store.get_exposure("ws_1", ExposedProtocol::A2a).await.unwrap().unwrap().updated_at_ms, clock.now_ms());
});

conformance!(mcp_servers_are_upserted_with_unique_names_per_workspace, |store, clock| async move {
    let first = store.put_mcp_server(server("ws_1", "docs", "docs", "https://a.example/mcp")).await.unwrap();
    assert_eq!((first.revision, first.created_at_ms, first.updated_at_ms), (1, clock.now_ms(), clock.now_ms()));
    clock.advance(5_000);
    let mut changed = server("ws_1", "docs", "documents", "https://b.example/mcp");
    changed.description = Some("the docs".into());
    let second = store.put_mcp_server(changed).await.unwrap();
    assert_eq!((second.revision, second.name.as_str(), second.url.as_str()), (2, "documents", "https://b.example/mcp"));
    assert_eq!((second.created_at_ms, second.updated_at_ms), (first.created_at_ms, first.created_at_ms + 5_000));
    assert_eq!(store.get_mcp_server("ws_1", "docs").await.unwrap(), Some(second.clone()));
    assert_eq!(store.get_mcp_server("ws_2", "docs").await.unwrap(), None, "another workspace's server is missing");

    // A name is the workspace's once; another workspace may use it.
    let taken = store.put_mcp_server(server("ws_1", "other", "documents", "https://c.example/mcp")).await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");
    assert_eq!(store.get_mcp_server("ws_1", "other").await.unwrap(), None, "nothing written");
    store.put_mcp_server(server("ws_2", "docs", "documents", "https://c.example/mcp")).await.unwrap();

    for id in ["a", "b", "c"] {
        store.put_mcp_server(server("ws_1", id, id, "https://x.example/mcp")).await.unwrap();
    }
    let ids = |rows: Vec<McpServerRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(store.list_mcp_servers("ws_1", None, 10).await.unwrap()), ["a", "b", "c", "docs"]);
    assert_eq!(ids(store.list_mcp_servers("ws_1", None, 2).await.unwrap()), ["a", "b"]);
    assert_eq!(ids(store.list_mcp_servers("ws_1", Some("b"), 2).await.unwrap()), ["c", "docs"]);

    assert!(!store.delete_mcp_server("ws_2", "a").await.unwrap());
    assert!(store.delete_mcp_server("ws_1", "a").await.unwrap());
    assert!(!store.delete_mcp_server("ws_1", "a").await.unwrap());
    assert_eq!(store.get_mcp_server("ws_1", "a").await.unwrap(), None);
});

conformance!(an_agents_mcp_servers_are_recorded_as_last_written, |store, clock| async move {
    let agent = new_id("agent");
    let row = |servers: serde_json::Value, version: i64| AgentMcpConfigRow {
        workspace_id: "ws_1".into(),
        agent_id: agent.clone(),
        servers,
        agent_version: version,
        revision: 0,
        created_at_ms: 0,
        updated_at_ms: 0,
    };
    assert_eq!(store.get_agent_mcp_config("ws_1", &agent).await.unwrap(), None);
    let first = store.put_agent_mcp_config(row(json!([{ "server_id": "docs" }]), 2)).await.unwrap();
    assert_eq!((first.revision, first.agent_version, first.created_at_ms), (1, 2, clock.now_ms()));
    clock.advance(1_000);
    let second = store.put_agent_mcp_config(row(json!([]), 3)).await.unwrap();
    assert_eq!((second.revision, second.servers.clone(), second.agent_version), (2, json!([]), 3));
    assert_eq!(second.created_at_ms, first.created_at_ms);
    assert_eq!(store.get_agent_mcp_config("ws_1", &agent).await.unwrap(), Some(second.clone()));
    assert_eq!(store.get_agent_mcp_config("ws_2", &agent).await.unwrap(), None);
    assert_eq!(store.list_agent_mcp_configs("ws_1").await.unwrap(), vec![second]);
    assert!(store.list_agent_mcp_configs("ws_2").await.unwrap().is_empty());
});
