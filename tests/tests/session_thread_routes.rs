//! The managed thread routes and the input routing of a session with a child thread
//! (ADR 0022 §6, §8, §9), in process through `app(state)`. The child is made the way the
//! worker makes one — a `RunStore::handoff` spawning it from a `spawn_thread` call of the
//! primary — so these pin the gateway's side alone: listing and paging threads, a child's
//! own events and the session's primary view, an interrupt of one thread and of every
//! one, an answer going to its call's thread, and archiving (refused while running; the
//! awaiting parent's call answered with an error, released and its run woken).

use agentd_schema::events::{StopReason, call_event_id, thread_id_for};
use agentd_schema::store::prelude::*;
use agentd_schema::{ClaimOutcome, Handoff, NewEvent, NewThread, RunStatus, Settlement};
use agentd_tests::gateway::TestGateway;
use axum::http::StatusCode;
use serde_json::{Value, json};

struct Fixture {
    gateway: TestGateway,
    key: String,
    session: String,
    child: String,
    call: String,
}

/// A session of a coordinator whose primary spawned one child (running, awaited by the
/// primary's `spawn_thread` call).
async fn fixture() -> Fixture {
    let gateway = TestGateway::new().await;
    let (_, key) = gateway.workspace("threads").await;
    let member = gateway
        .create(&key, "/v1/agents", json!({"name": "researcher", "model": "claude-sonnet-4-5", "system": "Research."}))
        .await;
    let roster = json!({"type": "coordinator", "agents": [member["id"]]});
    let agent = gateway
        .create(&key, "/v1/agents", json!({"name": "lead", "model": "claude-sonnet-4-5", "multiagent": roster}))
        .await;
    let environment =
        gateway.create(&key, "/v1/environments", json!({"name": "threads-env", "config": {"type": "cloud"}})).await;
    let session =
        gateway.create(&key, "/v1/sessions", json!({"agent": agent["id"], "environment_id": environment["id"]})).await;
    assert_eq!(session["agent"]["multiagent"]["agents"][0]["system"], "Research.", "{session}");
    let session = session["id"].as_str().unwrap().to_owned();
    let store = gateway.store.store.clone();
    let input = json!({"agent": "researcher", "message": "look it up"});
    let spawn = NewEvent::custom_tool_use(&session, "spawn_thread", input);
    let call = spawn.event_id.clone();
    store.append_events(&session, vec![spawn]).await.unwrap();
    let child = thread_id_for(&call);
    let snapshot = gateway.call(&key, "GET", &format!("/v1/agents/{}", member["id"].as_str().unwrap()), None).await;
    let handoff = Handoff {
        session_id: session.clone(),
        events: vec![
            NewEvent::thread_created(&session, &child, "researcher").with_id(call_event_id(&call, "created")),
            NewEvent::status_running(&child).for_thread("researcher"),
            NewEvent::user_message(&child, "look it up"),
            NewEvent::agent_message(&child, "a child's own message"),
        ],
        new_threads: vec![NewThread {
            id: child.clone(),
            parent_id: session.clone(),
            agent: snapshot.body,
            agent_name: "researcher".into(),
        }],
        awaits: vec![(child.clone(), call.clone())],
        wake: vec![child.clone()],
        ..Handoff::default()
    };
    store.handoff(None, handoff).await.unwrap();
    Fixture { gateway, key, session, child, call }
}

impl Fixture {
    async fn get(&self, path: &str) -> Value {
        let answer = self.gateway.call(&self.key, "GET", &format!("/v1/sessions/{}{path}", self.session), None).await;
        assert_eq!(answer.status, StatusCode::OK, "GET {path}: {:?}", answer.body);
        answer.body
    }

    async fn send(&self, events: Value) -> (StatusCode, Value) {
        let path = format!("/v1/sessions/{}/events", self.session);
        let answer = self.gateway.call(&self.key, "POST", &path, Some(json!({ "events": events }))).await;
        (answer.status, answer.body)
    }

    async fn archive(&self, thread: &str) -> (StatusCode, Value) {
        let path = format!("/v1/sessions/{}/threads/{thread}/archive", self.session);
        let answer = self.gateway.call(&self.key, "POST", &path, None).await;
        (answer.status, answer.body)
    }

    /// The stored events of a thread, as (type, event id).
    async fn on_thread(&self, thread: &str) -> Vec<(String, String)> {
        let events = self.gateway.store.store.list_events(&self.session, 0, 1000).await.unwrap();
        events.into_iter().filter(|e| e.thread_id == thread).map(|e| (e.kind, e.event_id)).collect()
    }
}

fn types(page: &Value) -> Vec<&str> {
    page["data"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn threads_are_listed_paged_and_retrieved_with_their_own_events() {
    let f = fixture().await;
    let listed = f.get("/threads").await;
    let ids: Vec<&str> = listed["data"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [f.session.as_str(), f.child.as_str()], "the primary first: {listed}");
    assert_eq!(listed["next_page"], Value::Null);
    let child = &listed["data"][1];
    assert_eq!(
        (child["parent_thread_id"].as_str(), child["status"].as_str()),
        (Some(f.session.as_str()), Some("running"))
    );
    assert_eq!(
        (child["agent"]["name"].as_str(), child["agent"]["system"].as_str()),
        (Some("researcher"), Some("Research."))
    );
    assert_eq!(child["stats"]["startup_seconds"], 0.0);
    assert!(listed["data"][0]["agent"].get("multiagent").is_none(), "the roster is the session's to show");

    // Statuses filter; pages go forward by id.
    let running = f.get("/threads?statuses[]=running").await;
    assert_eq!(running["data"].as_array().unwrap().len(), 1);
    assert_eq!(running["data"][0]["id"], f.child.as_str());
    let first = f.get("/threads?limit=1").await;
    assert_eq!(first["data"][0]["id"], f.session.as_str());
    let cursor = first["next_page"].as_str().expect("a next page");
    let second = f.get(&format!("/threads?limit=1&page={cursor}")).await;
    assert_eq!((second["data"][0]["id"].as_str(), &second["next_page"]), (Some(f.child.as_str()), &Value::Null));
    let bad =
        f.gateway.call(&f.key, "GET", &format!("/v1/sessions/{}/threads?statuses[]=asleep", f.session), None).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{:?}", bad.body);

    let retrieved = f.get(&format!("/threads/{}", f.child)).await;
    assert_eq!(retrieved["id"], f.child.as_str());
    // The child's own events carry its id; the session's view shows its status only.
    let own = f.get(&format!("/threads/{}/events", f.child)).await;
    assert_eq!(types(&own), ["session.thread_status_running", "user.message", "agent.message"]);
    assert!(own["data"].as_array().unwrap().iter().all(|e| e["session_thread_id"] == f.child.as_str()), "{own}");
    let session_view = f.get("/events").await;
    assert_eq!(
        types(&session_view),
        ["agent.custom_tool_use", "session.thread_created", "session.thread_status_running"]
    );
    let primary = f.get(&format!("/threads/{}/events", f.session)).await;
    assert_eq!(types(&primary), ["agent.custom_tool_use", "session.thread_created"]);
    f.gateway.cleanup().await;
}

#[tokio::test]
async fn interrupts_reach_the_named_thread_or_every_thread() {
    let f = fixture().await;
    let (status, body) = f.send(json!([{"type": "user.interrupt", "session_thread_id": f.child}])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"][0]["session_thread_id"], f.child.as_str());
    let on_child = f.on_thread(&f.child).await;
    assert_eq!(on_child.last().unwrap().0, "user.interrupt", "committed on the child");
    assert_eq!(f.on_thread(&f.session).await.iter().filter(|(kind, _)| kind == "user.interrupt").count(), 0);

    // Without a thread: the client's event on the primary, a copy on the child.
    let (status, body) = f.send(json!([{"type": "user.interrupt"}])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let echoed = body["data"][0]["id"].as_str().unwrap().to_owned();
    assert!(body["data"][0].get("session_thread_id").is_none(), "{body}");
    let primary = f.on_thread(&f.session).await;
    assert_eq!(primary.last().unwrap(), &("user.interrupt".to_owned(), echoed.clone()));
    let copy = f.on_thread(&f.child).await.last().unwrap().clone();
    assert_eq!(copy.0, "user.interrupt");
    assert!(copy.1.ends_with(echoed.split_once('_').unwrap().1) && copy.1 != echoed, "{copy:?}");
    // Every interrupted thread's run was made runnable: a parked one re-decides.
    let runs = f.gateway.store.store.thread_runs(&f.session).await.unwrap();
    assert!(runs.iter().any(|run| run.status == RunStatus::Pending), "{runs:?}");

    // A thread that is not one of the session's is named as the field at fault.
    for bad in ["sthr_00000000000000000000000000", "sesn_00000000000000000000000000", "nonsense"] {
        let (status, body) = f.send(json!([{"type": "user.interrupt", "session_thread_id": bad}])).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().starts_with("events[0].session_thread_id:"), "{body}");
    }
    f.gateway.cleanup().await;
}

#[tokio::test]
async fn an_answer_goes_to_its_calls_thread_and_archiving_answers_the_parent() {
    let f = fixture().await;
    let store = f.gateway.store.store.clone();
    let custom = NewEvent::custom_tool_use(&f.child, "get_time", json!({}));
    let custom_id = custom.event_id.clone();
    store.append_events(&f.session, vec![custom]).await.unwrap();

    // A running child is not archived; the primary never is.
    let (status, body) = f.archive(&f.child).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("interrupt it first"), "{body}");
    let (status, body) = f.archive(&f.session).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("primary"), "{body}");

    // The answer is committed on the child, whose run becomes runnable.
    let result = json!([{"type": "user.custom_tool_result", "custom_tool_use_id": custom_id, "content": [{"type": "text", "text": "noon"}]}]);
    let (status, body) = f.send(result.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"][0]["session_thread_id"], f.child.as_str(), "routed to the child: {body}");
    assert_eq!(f.on_thread(&f.child).await.last().unwrap().0, "user.custom_tool_result");
    let child_runs = store.thread_runs(&f.child).await.unwrap();
    assert!(child_runs.iter().any(|run| run.status == RunStatus::Pending), "{child_runs:?}");

    // The child's row goes idle while the answer still waits for its run: archiving now
    // would leave a thread that runs, so the store refuses it.
    store
        .append_events(&f.session, vec![NewEvent::status_idle(&f.child, StopReason::EndTurn).for_thread("researcher")])
        .await
        .unwrap();
    let (status, body) = f.archive(&f.child).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("has not taken yet"), "{body}");

    // A worker takes the input and parks: now the child can be archived. Its parent awaited
    // it: the call gets an error result, is released, and the primary's run wakes.
    let pending = child_runs.iter().find(|run| run.status == RunStatus::Pending).unwrap();
    let ClaimOutcome::Claimed(claim) = store.claim_run(&pending.id, "worker", 60_000).await.unwrap() else {
        panic!("the child's run is claimable");
    };
    store.settle(&claim, Vec::new(), Settlement::Awaiting).await.unwrap();
    let (status, body) = f.archive(&f.child).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "terminated");
    assert!(body["archived_at"].is_string(), "{body}");
    assert_eq!(f.on_thread(&f.child).await.last().unwrap().0, "session.thread_status_terminated");
    let primary = f.on_thread(&f.session).await;
    assert_eq!(primary.last().unwrap(), &("agent.tool_result".to_owned(), call_event_id(&f.call, "result")));
    let events = f.get("/events?types[]=agent.tool_result").await;
    let answer = &events["data"][0];
    assert_eq!((answer["tool_use_id"].as_str(), answer["is_error"].as_bool()), (Some(f.call.as_str()), Some(true)));
    let row = store.get_thread(&f.session, &f.child).await.unwrap().unwrap();
    assert_eq!(row.awaited_by, None, "released");
    let runs = store.thread_runs(&f.session).await.unwrap();
    assert!(runs.iter().any(|run| run.status == RunStatus::Pending), "the parent woke: {runs:?}");
    // Archiving again answers the archived thread; the listing can filter it.
    let (status, again) = f.archive(&f.child).await;
    assert_eq!((status, &again["archived_at"]), (StatusCode::OK, &body["archived_at"]));
    let terminated = f.get("/threads?statuses[]=terminated").await;
    assert_eq!(terminated["data"][0]["id"], f.child.as_str());

    // An archived thread takes no answer, nor an interrupt naming it; one naming no
    // thread reaches the primary alone.
    let late = NewEvent::custom_tool_use(&f.child, "get_time", json!({}));
    let late_id = late.event_id.clone();
    store.append_events(&f.session, vec![late]).await.unwrap();
    let answer = json!([{"type": "user.custom_tool_result", "custom_tool_use_id": late_id, "content": []}]);
    let (status, body) = f.send(answer).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("archived"), "{body}");
    let (status, body) = f.send(json!([{"type": "user.interrupt", "session_thread_id": f.child}])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let before = f.on_thread(&f.child).await.len();
    let (status, body) = f.send(json!([{"type": "user.interrupt"}])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(f.on_thread(&f.child).await.len(), before, "no copy on an archived thread");
    f.gateway.cleanup().await;
}
