//! The tool-call ledger (`ToolCallStore`): kept by every append path, answered by the
//! first confirmation and the first result, scoped to its session.

use agentd_schema::{Confirmation, ToolCall, ToolUseKind};
use serde_json::Value;

use super::*;

fn tool_use(thread: &str, kind: &str, name: &str, permission: Option<&str>) -> NewEvent {
    let mut body = json!({ "type": kind, "name": name, "input": {} });
    if let Some(permission) = permission {
        body["evaluated_permission"] = json!(permission);
    }
    NewEvent::new(thread, body)
}

fn answer(thread: &str, body: Value) -> NewEvent {
    NewEvent::new(thread, body)
}

fn ids(calls: &[ToolCall]) -> Vec<&str> {
    calls.iter().map(|c| c.tool_use_id.as_str()).collect()
}

conformance!(every_append_path_keeps_the_ledger, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let uses = vec![
        tool_use(&session, "agent.tool_use", "bash", Some("ask")),
        tool_use(&session, "agent.custom_tool_use", "lookup", None),
        tool_use(&session, "agent.mcp_tool_use", "search", Some("allow")),
    ];
    let stored = store.append_events(&session, uses).await.unwrap();
    let (builtin, custom, mcp) = (stored[0].event_id.clone(), stored[1].event_id.clone(), stored[2].event_id.clone());
    let open = store.open_tool_calls(&session).await.unwrap();
    assert_eq!(ids(&open), [builtin.as_str(), custom.as_str(), mcp.as_str()], "oldest first");
    let first = &open[0];
    assert_eq!(
        (first.use_kind, first.name.as_str(), first.evaluated_permission.as_deref(), first.use_seq),
        (ToolUseKind::Builtin, "bash", Some("ask"), stored[0].seq)
    );
    assert_eq!((first.thread_id.as_str(), first.session_id.as_str()), (session.as_str(), session.as_str()));
    assert_eq!(open[1].use_kind, ToolUseKind::Custom);
    assert_eq!((open[2].use_kind, open[2].evaluated_permission.as_deref()), (ToolUseKind::Mcp, Some("allow")));
    let awaiting: Vec<&str> = open.iter().filter(|c| c.awaits_confirmation()).map(|c| c.tool_use_id.as_str()).collect();
    assert_eq!(awaiting, [builtin.as_str()]);

    // A submission's confirmation: the first one counts, a later one changes nothing.
    let confirm = |result: &str| {
        answer(&session, json!({ "type": "user.tool_confirmation", "tool_use_id": builtin, "result": result }))
    };
    let submitted = store
        .submit(Submission {
            session_id: session.clone(),
            thread_id: session.clone(),
            events: vec![confirm("allow"), confirm("deny")],
            max_attempts: 5,
            trace_context: vec![],
            also_wake: vec![],
        })
        .await
        .unwrap();
    let call = &store.tool_calls(&session, std::slice::from_ref(&builtin)).await.unwrap()[0];
    assert_eq!(call.confirmation, Some(Confirmation::Allow));
    assert_eq!(call.confirmation_event_id.as_deref(), Some(submitted.events[0].event_id.as_str()));
    assert_eq!(call.confirmation_seq, Some(submitted.events[0].seq), "the answer can be read back by its seq");
    assert!(call.is_open() && !call.awaits_confirmation(), "confirmed, not yet answered");

    // A fenced commit's result; a settlement's MCP result (named by mcp_tool_use_id).
    let held = claim(store.as_ref(), &submitted.run_id, "worker-a").await;
    let result = answer(&session, json!({ "type": "agent.tool_result", "tool_use_id": builtin, "content": [] }));
    let result_id = result.event_id.clone();
    let result_seq = store.commit(&held, vec![result]).await.unwrap()[0].seq;
    let mcp_result =
        answer(&session, json!({ "type": "agent.mcp_tool_result", "mcp_tool_use_id": mcp, "content": [] }));
    store.commit_with_inbox(&held, vec![mcp_result]).await.unwrap();
    assert_eq!(ids(&store.open_tool_calls(&session).await.unwrap()), [custom.as_str()]);
    let custom_result =
        answer(&session, json!({ "type": "user.custom_tool_result", "custom_tool_use_id": custom, "content": [] }));
    store.settle(&held, vec![custom_result], Settlement::Awaiting).await.unwrap();
    assert!(store.open_tool_calls(&session).await.unwrap().is_empty(), "every call has its result");

    let all = store.tool_calls(&session, &[mcp.clone(), builtin.clone(), "sevt_unknown".into()]).await.unwrap();
    assert_eq!(ids(&all), [builtin.as_str(), mcp.as_str()], "known ids only, oldest first");
    assert_eq!(
        (all[0].result_event_id.as_deref(), all[0].result_kind.as_deref()),
        (Some(result_id.as_str()), Some("agent.tool_result"))
    );
    assert_eq!(all[0].result_seq, Some(result_seq));
    let read_back = agentd_schema::EventQuery { after_seq: Some(result_seq - 1), limit: 1, ..Default::default() };
    assert_eq!(store.query_events(&session, &read_back).await.unwrap()[0].event_id, result_id);
    assert_eq!(all[1].result_kind.as_deref(), Some("agent.mcp_tool_result"));
    assert!(store.tool_calls(&session, &[]).await.unwrap().is_empty());
});

conformance!(answers_count_once_in_their_own_session, |store, _clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let (_, other) = super::session(store.as_ref()).await;
    // A use and its answer in one batch; a second result and a stray answer change nothing.
    let call = tool_use(&session, "agent.tool_use", "bash", None);
    let id = call.event_id.clone();
    let first = answer(&session, json!({ "type": "user.tool_result", "tool_use_id": id, "content": [] }));
    let first_id = first.event_id.clone();
    let open_call = tool_use(&session, "agent.custom_tool_use", "lookup", None);
    let open_id = open_call.event_id.clone();
    store.append_events(&session, vec![call, first, open_call]).await.unwrap();
    let again = answer(&session, json!({ "type": "agent.tool_result", "tool_use_id": id, "content": [] }));
    let stray = answer(&session, json!({ "type": "user.tool_result", "tool_use_id": "sevt_nothing", "content": [] }));
    store.append_events(&session, vec![again, stray]).await.unwrap();
    let call = &store.tool_calls(&session, std::slice::from_ref(&id)).await.unwrap()[0];
    assert_eq!(call.result_event_id.as_deref(), Some(first_id.as_str()), "the first result counts");
    assert_eq!(call.result_kind.as_deref(), Some("user.tool_result"));
    // An answer committed to another session does not answer this session's call.
    let elsewhere =
        answer(&other, json!({ "type": "user.custom_tool_result", "custom_tool_use_id": open_id, "content": [] }));
    store.append_events(&other, vec![elsewhere]).await.unwrap();
    assert_eq!(ids(&store.open_tool_calls(&session).await.unwrap()), [open_id.as_str()]);
    assert!(store.tool_calls(&other, std::slice::from_ref(&open_id)).await.unwrap().is_empty());
    // A repeated event id fails the whole append: the ledger gains nothing either.
    let mut repeat = tool_use(&session, "agent.tool_use", "bash", None);
    repeat.event_id = open_id.clone();
    let fresh = tool_use(&session, "agent.tool_use", "fresh", None);
    assert!(matches!(store.append_events(&session, vec![fresh, repeat]).await, Err(StoreError::Conflict(_))));
    assert_eq!(store.open_tool_calls(&session).await.unwrap().len(), 1);
    // Deleting the session deletes its ledger.
    let workspace = store.ensure_workspace("acme", "default").await.unwrap().id;
    assert!(store.delete_session(&workspace, &session).await.unwrap());
    assert!(store.open_tool_calls(&session).await.unwrap().is_empty());
});

conformance!(a_fenced_commit_records_no_tool_calls, |store, clock| async move {
    let (_, session) = session(store.as_ref()).await;
    let run = submit(store.as_ref(), &session, "hi").await.run_id;
    let old = claim(store.as_ref(), &run, "worker-a").await;
    clock.advance(LEASE_MS + 1);
    let new = claim(store.as_ref(), &run, "worker-b").await;
    let late = store.commit(&old, vec![tool_use(&session, "agent.tool_use", "bash", None)]).await;
    assert!(matches!(late, Err(StoreError::Fenced { .. })), "{late:?}");
    assert!(store.open_tool_calls(&session).await.unwrap().is_empty(), "nothing of a fenced commit is recorded");
    store.commit(&new, vec![tool_use(&session, "agent.tool_use", "bash", None)]).await.unwrap();
    assert_eq!(store.open_tool_calls(&session).await.unwrap().len(), 1);
});
