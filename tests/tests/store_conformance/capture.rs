//! Content capture: the append that ends a turn rewrites the turn's content to what the
//! session's level keeps, in the same transaction; what it returns (what is published
//! live) keeps the content.

use agentd_schema::capture::{Decision, Level, REDACTED};
use agentd_schema::{EventQuery, StoredEvent};

use super::*;

async fn captured_session(store: &dyn Store, level: Level) -> String {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let id = agentd_schema::ids::new_id("sesn");
    let decision = Decision::decide(level, Level::Full, None);
    store
        .create_session(NewSession {
            id: id.clone(),
            workspace_id: workspace.id,
            status: "idle".into(),
            body: json!({ "title": "t", "content_capture": decision.to_json() }),
            agent_id: None,
            agent_version: None,
        })
        .await
        .unwrap();
    id
}

fn idle(thread: &str, stop: &str) -> NewEvent {
    let mut event = status_event(thread, "session.status_idle");
    event.body["stop_reason"] = json!({ "type": stop });
    event
}

fn tool_use(thread: &str, command: &str) -> NewEvent {
    NewEvent {
        event_id: agentd_schema::ids::new_id("sevt"),
        thread_id: thread.to_owned(),
        kind: "agent.tool_use".into(),
        body: json!({ "type": "agent.tool_use", "name": "bash", "input": { "command": command } }),
    }
}

async fn history(store: &dyn Store, session: &str) -> Vec<StoredEvent> {
    store.query_events(session, &EventQuery { limit: 100, ..Default::default() }).await.unwrap()
}

/// Runs one turn: a user message, a tool use, a pause for confirmation (`requires_action`),
/// then the agent's answer and the idle that ends it. Returns what the last settle returned.
async fn turn(store: &dyn Store, session: &str, word: &str) -> Vec<StoredEvent> {
    let submitted = submit(store, session, &format!("user {word}")).await;
    let held = claim(store, &submitted.run_id, "w").await;
    store.commit(&held, vec![tool_use(session, &format!("echo {word}"))]).await.unwrap();
    let mut waiting = idle(session, "requires_action");
    waiting.body["stop_reason"]["event_ids"] = json!([]);
    store.commit(&held, vec![waiting]).await.unwrap();
    let mid = history(store, session).await;
    assert!(mid.iter().any(|e| e.body.to_string().contains(word)), "a turn waiting for the caller keeps its content");
    let settled = store
        .settle(
            &held,
            vec![agent_event(session, &format!("agent {word}")), idle(session, "end_turn")],
            Settlement::Awaiting,
        )
        .await
        .unwrap();
    settled.events
}

conformance!(
    a_structured_session_keeps_the_shape_of_a_settled_turn_and_none_of_its_content,
    |store, _clock| async move {
        let session = captured_session(store.as_ref(), Level::Structured).await;
        let live = turn(store.as_ref(), &session, "CANARY1").await;
        assert!(live.iter().any(|e| e.body.to_string().contains("CANARY1")), "the live copy keeps the answer");
        let kept = history(store.as_ref(), &session).await;
        assert!(kept.iter().all(|e| !e.body.to_string().contains("CANARY1")), "{kept:#?}");
        let tool = kept.iter().find(|e| e.kind == "agent.tool_use").unwrap();
        assert_eq!(tool.body, json!({ "type": "agent.tool_use", "name": "bash", "input": {} }));
        let answer = kept.iter().find(|e| e.kind == "agent.message").unwrap();
        assert_eq!(answer.body["content"], json!([{ "type": "text", "text": REDACTED }]));
        assert!(kept.iter().any(|e| e.kind == "session.status_idle"), "structure stays");

        // The next turn is rewritten when it ends too; the first stays as it was.
        turn(store.as_ref(), &session, "CANARY2").await;
        let kept = history(store.as_ref(), &session).await;
        assert!(kept.iter().all(|e| !e.body.to_string().contains("CANARY")), "{kept:#?}");
        assert_eq!(kept.iter().filter(|e| e.kind == "agent.message").count(), 2);
    }
);

conformance!(an_off_session_keeps_only_types_and_links, |store, _clock| async move {
    let session = captured_session(store.as_ref(), Level::Off).await;
    turn(store.as_ref(), &session, "CANARY").await;
    let kept = history(store.as_ref(), &session).await;
    assert!(kept.iter().all(|e| !e.body.to_string().contains("CANARY")));
    let tool = kept.iter().find(|e| e.kind == "agent.tool_use").unwrap();
    assert_eq!(tool.body, json!({ "type": "agent.tool_use", "input": {} }), "not even the tool's name");
    let message = kept.iter().find(|e| e.kind == "user.message").unwrap();
    assert_eq!(message.body, json!({ "type": "user.message", "content": [] }));
});

conformance!(a_full_session_and_a_session_without_a_decision_keep_everything, |store, _clock| async move {
    let full = captured_session(store.as_ref(), Level::Full).await;
    let (_, plain) = session(store.as_ref()).await;
    for session in [full, plain] {
        turn(store.as_ref(), &session, "CANARY").await;
        let kept = history(store.as_ref(), &session).await;
        assert_eq!(kept.iter().filter(|e| e.body.to_string().contains("CANARY")).count(), 3, "{kept:#?}");
    }
});

conformance!(a_terminated_session_keeps_no_content_of_its_last_turn, |store, _clock| async move {
    let session = captured_session(store.as_ref(), Level::Structured).await;
    let submitted = submit(store.as_ref(), &session, "user CANARY").await;
    let held = claim(store.as_ref(), &submitted.run_id, "w").await;
    let end = vec![agent_event(&session, "agent CANARY"), status_event(&session, "session.status_terminated")];
    store.settle(&held, end, Settlement::Awaiting).await.unwrap();
    let kept = history(store.as_ref(), &session).await;
    assert!(kept.iter().all(|e| !e.body.to_string().contains("CANARY")), "{kept:#?}");
});
