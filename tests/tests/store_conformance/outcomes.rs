//! The session's `outcome_evaluations` (docs/api/outcomes.md), kept by the append that
//! commits what it follows: `pending` when defined, `running` from the turn that takes
//! the outcome up (or at once when it is defined while the session runs), `evaluating`
//! in a cycle, the verdict at its end; below `full` content capture it keeps neither the
//! description nor the grader's explanation (ADR 0019).

use agentd_schema::capture::{Decision, Level, REDACTED};
use agentd_schema::events::{ModelUsage, OutcomeVerdict, define_outcomes};
use serde_json::Value;

use super::*;

fn define(session: &str, description: &str) -> NewEvent {
    let body = json!({ "type": "user.define_outcome", "description": description,
                       "rubric": { "type": "text", "content": "three lines" } });
    let mut events = vec![NewEvent::new(session, body)];
    define_outcomes(&mut events);
    events.remove(0)
}

fn end(session: &str, outcome: &str, iteration: i64, verdict: OutcomeVerdict, why: &str) -> NewEvent {
    NewEvent::outcome_evaluation_end(session, outcome, iteration, verdict, why, ModelUsage::default())
}

async fn evaluations(store: &dyn Store, session: &str) -> Vec<Value> {
    let session = store.load_session(session).await.unwrap().unwrap();
    session.body["outcome_evaluations"].as_array().cloned().unwrap_or_default()
}

/// Each entry's `(result, iteration)`.
async fn states(store: &dyn Store, session: &str) -> Vec<(String, i64)> {
    let list = evaluations(store, session).await;
    list.iter().map(|e| (e["result"].as_str().unwrap().to_owned(), e["iteration"].as_i64().unwrap())).collect()
}

fn state(result: &str, iteration: i64) -> (String, i64) {
    (result.to_owned(), iteration)
}

conformance!(an_outcome_runs_from_the_turn_that_takes_it_up, |store, _clock| async move {
    let store = store.as_ref();
    let (_, session) = session(store).await;
    let first = define(&session, "a haiku");
    let a = first.body["outcome_id"].as_str().unwrap().to_owned();
    store.append_events(&session, vec![first]).await.unwrap();
    assert_eq!(states(store, &session).await, [state("pending", 0)], "defined while idle: it waits");
    store.append_events(&session, vec![agent_event(&session, "not a turn")]).await.unwrap();
    assert_eq!(states(store, &session).await, [state("pending", 0)]);

    // The turn starts: the agent works on it.
    store.append_events(&session, vec![status_event(&session, "session.status_running")]).await.unwrap();
    assert_eq!(states(store, &session).await, [state("running", 0)]);
    // Defined while the session runs: the turn under way takes it up.
    let second = define(&session, "a limerick");
    store.append_events(&session, vec![second]).await.unwrap();
    assert_eq!(states(store, &session).await, [state("running", 0), state("running", 0)]);

    store.append_events(&session, vec![NewEvent::outcome_evaluation_start(&session, &a, 0)]).await.unwrap();
    assert_eq!(states(store, &session).await[0], state("evaluating", 0));
    let heartbeat = NewEvent::outcome_evaluation_ongoing(&session, &a, 0, 1);
    store.append_events(&session, vec![heartbeat]).await.unwrap();
    assert_eq!(states(store, &session).await[0], state("evaluating", 0), "a heartbeat changes nothing");
    let revise = end(&session, &a, 0, OutcomeVerdict::NeedsRevision, "no title");
    store.append_events(&session, vec![revise]).await.unwrap();
    assert_eq!(states(store, &session).await[0], state("running", 1));
    let done = end(&session, &a, 1, OutcomeVerdict::Satisfied, "all there");
    store.append_events(&session, vec![done, status_event(&session, "session.status_idle")]).await.unwrap();
    let list = evaluations(store, &session).await;
    assert_eq!((list[0]["result"].as_str(), list[0]["explanation"].as_str()), (Some("satisfied"), Some("all there")));
    assert!(list[0]["completed_at"].is_string());

    // Idle again: a new outcome waits for the next turn, which leaves the finished alone.
    store.append_events(&session, vec![define(&session, "an ode")]).await.unwrap();
    assert_eq!(states(store, &session).await[2], state("pending", 0));
    store.append_events(&session, vec![status_event(&session, "session.status_running")]).await.unwrap();
    assert_eq!(states(store, &session).await, [state("satisfied", 1), state("running", 0), state("running", 0)]);
});

async fn captured_session(store: &dyn Store, level: Level) -> String {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let id = agentd_schema::ids::new_id("sesn");
    let body = json!({ "title": "t", "content_capture": Decision::decide(level, Level::Full, None).to_json() });
    let session = NewSession {
        id: id.clone(),
        workspace_id: workspace.id,
        status: "idle".into(),
        body,
        agent_id: None,
        agent_version: None,
    };
    store.create_session(session).await.unwrap();
    id
}

conformance!(below_full_capture_the_entries_keep_no_content, |store, _clock| async move {
    let store = store.as_ref();
    for (level, kept) in [(Level::Structured, json!(REDACTED)), (Level::Off, Value::Null)] {
        let session = captured_session(store, level).await;
        let defined = define(&session, "CANARY the task");
        let outcome = defined.body["outcome_id"].as_str().unwrap().to_owned();
        store.append_events(&session, vec![defined]).await.unwrap();
        let running = status_event(&session, "session.status_running");
        let start = NewEvent::outcome_evaluation_start(&session, &outcome, 0);
        store.append_events(&session, vec![running, start]).await.unwrap();
        let verdict = end(&session, &outcome, 0, OutcomeVerdict::Failed, "CANARY the grader's reason");
        store.append_events(&session, vec![verdict]).await.unwrap();
        let list = evaluations(store, &session).await;
        assert!(!Value::Array(list.clone()).to_string().contains("CANARY"), "{level:?}: {list:?}");
        assert_eq!((&list[0]["description"], &list[0]["explanation"]), (&kept, &kept), "{level:?}");
        assert_eq!((list[0]["result"].as_str(), list[0]["outcome_id"].as_str()), (Some("failed"), Some(&*outcome)));
    }
});
