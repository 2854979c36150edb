//! Worker fault cases driven in-process against the real store (SQLite and
//! PostgreSQL), the in-process queue and bus, and the scripted model: a submission
//! whose publish was lost is republished by the outbox relay, and a submission
//! delivered twice runs once; a parent thread's wait for its subagents survives a
//! consumer restart, and a child thread delivered twice replies once (ADR 0022).

use std::sync::Arc;
use std::time::Duration;

use agentd_proto::bus::memory::MemoryBus;
use agentd_proto::queue::memory::MemoryQueue;
use agentd_proto::v1::RunSubmission;
use agentd_proto::{Lifecycle, Queue, QueueConfig, QueueError};
use agentd_schema::outbox::{RelayConfig, relay_once};
use agentd_schema::store::prelude::*;
use agentd_schema::{NewEvent, NewSession, Submission, SystemClock, ThreadQuery};
use agentd_tests::stores::{Kind, TestStore};
use agentd_worker::consumer::{ConsumerConfig, run};
use agentd_worker::providers::Registry;
use agentd_worker::run::{HistoryCache, RunContext};
use bytes::Bytes;
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Rig {
    test: TestStore,
    store: Arc<dyn Store>,
    queue: Arc<MemoryQueue>,
    stop: CancellationToken,
    _blobs: tempfile::TempDir,
}

/// What a worker process runs with: the store, a bus, the scripted model.
fn context(store: &Arc<dyn Store>, blobs: &tempfile::TempDir) -> RunContext {
    RunContext {
        store: store.clone(),
        bus: Arc::new(MemoryBus::new()),
        providers: Registry::from_env(true),
        histories: Arc::new(HistoryCache::new(16 << 20)),
        catalogs: Arc::new(agentd_schema::catalogs::Catalogs::new(agentd_schema::catalog::current().clone())),
        secrets: None,
        blobs: agentd_schema::blobs::Blobs::filesystem(&blobs.path().join("blobs")).unwrap(),
        remote_allow_private: true,
        outcome_heartbeat: agentd_worker::run::OUTCOME_HEARTBEAT,
    }
}

fn memory_queue() -> Arc<MemoryQueue> {
    Arc::new(MemoryQueue::new(QueueConfig { ack_wait: Duration::from_secs(2), ..QueueConfig::default() }))
}

async fn rig(kind: Kind) -> Rig {
    let test = TestStore::new(kind, Arc::new(SystemClock)).await;
    let store: Arc<dyn Store> = test.store.clone();
    let queue = memory_queue();
    let blobs = tempfile::tempdir().unwrap();
    let ctx = context(&store, &blobs);
    let stop = CancellationToken::new();
    let consumer_queue: Arc<dyn Queue> = queue.clone();
    tokio::spawn(run(ctx, consumer_queue, ConsumerConfig::new(), Lifecycle::new(), stop.clone()));
    Rig { test, store, queue, stop, _blobs: blobs }
}

async fn session(store: &dyn Store) -> String {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let id = agentd_schema::ids::new_id("sesn");
    let agent = json!({ "type": "agent", "id": "agent_x", "version": 1, "name": "a", "model": { "id": "agentd-test-scripted" }, "tools": [], "system": null });
    store
        .create_session(NewSession {
            id: id.clone(),
            workspace_id: workspace.id,
            status: "idle".into(),
            body: json!({ "agent": agent, "environment_id": "env_none" }),
            agent_id: None,
            agent_version: None,
        })
        .await
        .unwrap();
    id
}

fn message(session: &str, text: &str) -> NewEvent {
    NewEvent {
        event_id: agentd_schema::ids::new_id("sevt"),
        thread_id: session.to_owned(),
        kind: "user.message".into(),
        body: json!({ "type": "user.message", "content": [{ "type": "text", "text": text }] }),
    }
}

/// Waits until the thread's last event is an idle, then returns the history.
async fn settled_history(store: &dyn Store, session: &str) -> Vec<agentd_schema::StoredEvent> {
    for _ in 0..200 {
        let events = store.list_events(session, 0, 1000).await.unwrap();
        if events.last().is_some_and(|e| e.kind == "session.status_idle") {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the turn never ended: {:?}",
        store.list_events(session, 0, 1000).await.unwrap().iter().map(|e| e.kind.clone()).collect::<Vec<_>>()
    );
}

fn assert_one_clean_turn(events: &[agentd_schema::StoredEvent]) {
    let ids: std::collections::HashSet<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids.len(), events.len(), "no event is committed twice");
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "user.message",
            "session.status_running",
            "span.model_request_start",
            "agent.message",
            "span.model_request_end",
            "session.usage",
            "session.status_idle"
        ],
    );
}

/// Routes the test model id to the scripted model.
fn scripted_catalog() {
    let path = std::env::temp_dir().join(format!("agentd-faults-{}.json", std::process::id()));
    std::fs::write(&path, r#"[{"id":"agentd-test-scripted","provider":"scripted"}]"#).unwrap();
    agentd_schema::catalog::install(agentd_schema::catalog::Catalog::with_file(&path).unwrap());
}

async fn cases(kind: Kind) {
    scripted_catalog();
    let rig = rig(kind).await;
    let store = rig.store.as_ref();

    // A submission whose publish was lost: only the outbox has it; the relay sends it.
    let lost = session(store).await;
    let submitted = store
        .submit(Submission {
            session_id: lost.clone(),
            thread_id: lost.clone(),
            events: vec![message(&lost, "hello")],
            max_attempts: 5,
            trace_context: vec![],
            also_wake: vec![],
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(store.list_events(&lost, 0, 100).await.unwrap().len(), 1, "nothing ran before the relay");
    let relay = RelayConfig { min_age: Duration::ZERO, ..RelayConfig::default() };
    assert_eq!(relay_once(store, rig.queue.as_ref(), &SystemClock, &relay).await.unwrap(), 1);
    assert_one_clean_turn(&settled_history(store, &lost).await);

    // The same submission delivered twice (distinct queue ids defeat the dedupe): one turn.
    let twice = session(store).await;
    let submitted_twice = store
        .submit(Submission {
            session_id: twice.clone(),
            thread_id: twice.clone(),
            events: vec![message(&twice, "hi")],
            max_attempts: 5,
            trace_context: vec![],
            also_wake: vec![],
        })
        .await
        .unwrap();
    let payload = Bytes::from(submitted_twice.outbox.payload.clone());
    rig.queue.publish("copy-1", payload.clone()).await.unwrap();
    rig.queue.publish("copy-2", payload).await.unwrap();
    let events = settled_history(store, &twice).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        store.list_events(&twice, 0, 100).await.unwrap().len(),
        events.len(),
        "the second delivery adds nothing"
    );
    assert_one_clean_turn(&events);
    let run = store.get_run(&submitted.run_id).await.unwrap().unwrap();
    assert_eq!(run.status, agentd_schema::RunStatus::Awaiting);

    rig.stop.cancel();
    rig.test.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_publishes_and_duplicate_deliveries_on_sqlite() {
    cases(Kind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_publishes_and_duplicate_deliveries_on_postgres() {
    cases(Kind::Postgres).await;
}

/// A queue that holds back the submissions of child threads (`sthr_…`), as if the
/// worker that would run them were gone; the rest goes to `inner`.
struct Gate {
    inner: Arc<MemoryQueue>,
    held: std::sync::Mutex<Vec<(String, Bytes)>>,
}

#[async_trait::async_trait]
impl Queue for Gate {
    async fn publish(&self, msg_id: &str, payload: Bytes) -> Result<(), QueueError> {
        let submission = <RunSubmission as prost::Message>::decode(payload.as_ref());
        if submission.is_ok_and(|s| s.thread_id.starts_with("sthr_")) {
            self.held.lock().unwrap().push((msg_id.to_owned(), payload));
            return Ok(());
        }
        self.inner.publish(msg_id, payload).await
    }

    async fn fetch(&self, max: usize, wait: Duration) -> Result<Vec<agentd_proto::Delivery>, QueueError> {
        self.inner.fetch(max, wait).await
    }

    async fn ping(&self) -> Result<(), QueueError> {
        self.inner.ping().await
    }

    async fn undelivered(&self) -> Result<u64, QueueError> {
        self.inner.undelivered().await
    }

    fn backend_name(&self) -> &'static str {
        "gate"
    }
}

/// A session whose agent may spawn copies of itself (a coordinator roster of `self`).
async fn multiagent_session(store: &dyn Store) -> String {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let id = agentd_schema::ids::new_id("sesn");
    let own = json!({ "type": "agent", "id": "agent_lead", "version": 1, "name": "lead", "description": null,
                      "model": { "id": "agentd-test-scripted" }, "tools": [], "mcp_servers": [], "skills": [],
                      "system": null, "execution_identity": { "type": "service_account" } });
    let mut agent = own.clone();
    agent["multiagent"] = json!({ "type": "coordinator", "agents": [own] });
    store
        .create_session(NewSession {
            id: id.clone(),
            workspace_id: workspace.id,
            status: "idle".into(),
            body: json!({ "agent": agent, "environment_id": "env_none" }),
            agent_id: None,
            agent_version: None,
        })
        .await
        .unwrap();
    id
}

/// Waits until the primary thread's last event is an idle and returns every thread's history.
async fn turn_ended(store: &dyn Store, session: &str) -> Vec<agentd_schema::StoredEvent> {
    for _ in 0..400 {
        let events = store.list_events(session, 0, 1000).await.unwrap();
        let primary = events.iter().rev().find(|e| e.thread_id == session);
        if primary.is_some_and(|e| e.kind == "session.status_idle") {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let events = store.list_events(session, 0, 1000).await.unwrap();
    panic!("the turn never ended: {:?}", events.iter().map(|e| (&e.thread_id, &e.kind)).collect::<Vec<_>>());
}

/// A parent's wait for its subagents is durable: the worker that dispatched them stops
/// before they run, another takes over, and each child's reply — delivered twice —
/// reaches the parent once.
async fn thread_cases(kind: Kind) {
    scripted_catalog();
    let test = TestStore::new(kind, Arc::new(SystemClock)).await;
    let store: Arc<dyn Store> = test.store.clone();
    let blobs = tempfile::tempdir().unwrap();
    let inner = memory_queue();
    let gate = Arc::new(Gate { inner: inner.clone(), held: Default::default() });
    let first = CancellationToken::new();
    let gated: Arc<dyn Queue> = gate.clone();
    tokio::spawn(run(context(&store, &blobs), gated, ConsumerConfig::new(), Lifecycle::new(), first.clone()));

    let session = multiagent_session(store.as_ref()).await;
    let text = r#"use spawn_thread {"agent":"self","message":"PING one"} and use spawn_thread {"agent":"self","message":"PING two"}"#;
    let submitted = store
        .submit(Submission {
            session_id: session.clone(),
            thread_id: session.clone(),
            events: vec![message(&session, text)],
            max_attempts: 5,
            trace_context: vec![],
            also_wake: vec![],
        })
        .await
        .unwrap();
    inner.publish(&submitted.outbox.msg_id, Bytes::from(submitted.outbox.payload.clone())).await.unwrap();
    // The parent dispatches both calls and parks; its children's submissions are held.
    for _ in 0..400 {
        let run = store.get_run(&submitted.run_id).await.unwrap().unwrap();
        if run.status == agentd_schema::RunStatus::Awaiting && gate.held.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(gate.held.lock().unwrap().len(), 2, "two children were woken");
    let waiting = store.list_threads(&session, &ThreadQuery { limit: 10, ..ThreadQuery::default() }).await.unwrap();
    let children: Vec<_> = waiting.iter().filter(|t| !t.is_primary()).collect();
    assert_eq!(children.len(), 2);
    assert!(children.iter().all(|t| t.awaited_by.is_some() && t.status == "running"), "{children:?}");

    // That worker stops; another one takes over, and each child is delivered twice.
    first.cancel();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = CancellationToken::new();
    let gated: Arc<dyn Queue> = gate.clone();
    tokio::spawn(run(context(&store, &blobs), gated, ConsumerConfig::new(), Lifecycle::new(), second.clone()));
    let held = std::mem::take(&mut *gate.held.lock().unwrap());
    for (msg_id, payload) in held {
        inner.publish(&msg_id, payload.clone()).await.unwrap();
        inner.publish(&format!("{msg_id}:again"), payload).await.unwrap();
    }

    let events = turn_ended(store.as_ref(), &session).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(store.list_events(&session, 0, 1000).await.unwrap().len(), events.len(), "nothing after the turn");
    let ids: std::collections::HashSet<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids.len(), events.len(), "no event is committed twice");
    let count = |thread: Option<&str>, kind: &str| {
        events.iter().filter(|e| e.kind == kind && thread.is_none_or(|t| e.thread_id == t)).count()
    };
    let primary = Some(session.as_str());
    assert_eq!(count(primary, "session.thread_created"), 2);
    assert_eq!(count(primary, "agent.thread_message_sent"), 2, "one request per call");
    assert_eq!(count(primary, "agent.thread_message_received"), 2, "one reply per call");
    assert_eq!(count(None, "agent.thread_message_sent"), 4);
    assert_eq!(count(None, "session.thread_status_idle"), 2, "each child idled once");
    assert_eq!(count(primary, "session.status_idle"), 1, "the parent idled once, at the end");
    let results: Vec<_> = events.iter().filter(|e| e.thread_id == session && e.kind == "agent.tool_result").collect();
    assert_eq!(results.len(), 2, "one result per call");
    for result in &results {
        assert_eq!(result.body["is_error"], false, "{}", result.body);
        let text = result.body["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("session_thread_id: sthr_") && text.contains("You said: PING"), "{text}");
    }
    let last_message = events.iter().rev().find(|e| e.thread_id == session && e.kind == "agent.message").unwrap();
    assert!(last_message.body["content"][0]["text"].as_str().unwrap().starts_with("The tool returned:"));
    let threads = store.list_threads(&session, &ThreadQuery { limit: 10, ..ThreadQuery::default() }).await.unwrap();
    assert_eq!(threads.len(), 3, "the primary and two children");
    assert!(threads.iter().all(|t| t.status == "idle" && t.awaited_by.is_none()), "{threads:?}");
    assert_eq!(store.load_session(&session).await.unwrap().unwrap().status, "idle");

    exhausted_child(store.as_ref(), &gate).await;
    interrupted_parent(store.as_ref(), &gate).await;
    second.cancel();
    test.cleanup().await;
}

/// Starts a turn of a new multiagent session that spawns one child (retry budget
/// `max_attempts`) and returns the session and the child's held submission.
async fn spawn_one(store: &dyn Store, gate: &Gate, max_attempts: i64) -> (String, (String, Bytes)) {
    let session = multiagent_session(store).await;
    let text = r#"use spawn_thread {"agent":"self","message":"PING three"}"#;
    let submitted = store
        .submit(Submission {
            session_id: session.clone(),
            thread_id: session.clone(),
            events: vec![message(&session, text)],
            max_attempts,
            trace_context: vec![],
            also_wake: vec![],
        })
        .await
        .unwrap();
    gate.inner.publish(&submitted.outbox.msg_id, Bytes::from(submitted.outbox.payload.clone())).await.unwrap();
    let mut held = Vec::new();
    for _ in 0..400 {
        held.append(&mut gate.held.lock().unwrap());
        let parked =
            store.get_run(&submitted.run_id).await.unwrap().unwrap().status == agentd_schema::RunStatus::Awaiting;
        if !held.is_empty() && parked {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    (session, held.pop().expect("the child was woken"))
}

/// An interrupted parent ends its turn and closes its wait with an error result; the
/// child runs on, and its later idle owes nothing.
async fn interrupted_parent(store: &dyn Store, gate: &Gate) {
    let (session, (msg_id, payload)) = spawn_one(store, gate, 5).await;
    let interrupt = NewEvent::new(&session, json!({ "type": "user.interrupt" }));
    let submitted = store
        .submit(Submission {
            session_id: session.clone(),
            thread_id: session.clone(),
            events: vec![interrupt],
            max_attempts: 5,
            trace_context: vec![],
            also_wake: vec![],
        })
        .await
        .unwrap();
    gate.inner.publish(&submitted.outbox.msg_id, Bytes::from(submitted.outbox.payload.clone())).await.unwrap();
    let events = turn_ended(store, &session).await;
    let result = events.iter().find(|e| e.thread_id == session && e.kind == "agent.tool_result").unwrap();
    assert_eq!(result.body["is_error"], true);
    let text = result.body["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("the turn ended before thread sthr_"), "{text}");

    let child = <RunSubmission as prost::Message>::decode(payload.as_ref()).unwrap();
    gate.inner.publish(&msg_id, payload).await.unwrap();
    for _ in 0..400 {
        let row = store.get_thread(&session, &child.thread_id).await.unwrap().unwrap();
        if row.status == "idle" {
            assert_eq!(row.awaited_by, None);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let events = store.list_events(&session, 0, 1000).await.unwrap();
    let on = |thread: &str, kind: &str| events.iter().filter(|e| e.thread_id == thread && e.kind == kind).count();
    assert_eq!(on(&child.thread_id, "session.thread_status_idle"), 1, "the child ran on");
    assert_eq!(on(&child.thread_id, "agent.thread_message_sent"), 0, "and owed no reply");
    assert_eq!(on(&session, "agent.tool_result"), 1, "the call was answered once");
}

/// A child whose retry budget is spent replies an error: the parent's call fails, it
/// does not hang.
async fn exhausted_child(store: &dyn Store, gate: &Gate) {
    let (session, (msg_id, payload)) = spawn_one(store, gate, 1).await;
    // A worker claims the child and is lost; the one recovery its budget allows is spent.
    let child = <RunSubmission as prost::Message>::decode(payload.as_ref()).unwrap();
    let ghost = store.claim_run(&child.run_id, "ghost", 50).await.unwrap();
    assert!(matches!(ghost, agentd_schema::ClaimOutcome::Claimed(_)), "{ghost:?}");
    tokio::time::sleep(Duration::from_millis(150)).await;
    gate.inner.publish(&msg_id, payload).await.unwrap();

    let events = turn_ended(store, &session).await;
    let on_child = |kind: &str| events.iter().filter(|e| e.thread_id == child.thread_id && e.kind == kind).count();
    assert_eq!((on_child("session.error"), on_child("session.thread_status_idle")), (1, 1));
    assert_eq!(on_child("session.status_idle"), 0, "a child's status is its thread's");
    let result = events.iter().find(|e| e.thread_id == session && e.kind == "agent.tool_result").unwrap();
    assert_eq!(result.body["is_error"], true);
    let text = result.body["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("stop_reason: retries_exhausted") && text.contains("thread stopped: retries_exhausted"),
        "{text}"
    );
    let row = store.get_thread(&session, &child.thread_id).await.unwrap().unwrap();
    assert_eq!((row.status.as_str(), row.awaited_by.as_deref()), ("idle", None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_waits_survive_a_restart_and_duplicates_on_sqlite() {
    thread_cases(Kind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_waits_survive_a_restart_and_duplicates_on_postgres() {
    thread_cases(Kind::Postgres).await;
}

/// A run waiting behind undelivered submissions (no worker consumes) is queued, not
/// stranded: the relay republishes it only once the queue has delivered everything, so
/// the backlog an autoscaler reads counts each waiting run once.
async fn queued_runs_are_not_stranded(kind: Kind) {
    let test = TestStore::new(kind, Arc::new(SystemClock)).await;
    let store: Arc<dyn Store> = test.store.clone();
    let queue = memory_queue();
    let relay = RelayConfig { min_age: Duration::ZERO, stranded_after: Duration::ZERO, ..RelayConfig::default() };
    let waiting = session(store.as_ref()).await;
    let submission = Submission {
        session_id: waiting.clone(),
        thread_id: waiting.clone(),
        events: vec![message(&waiting, "hello")],
        max_attempts: 5,
        trace_context: vec![],
        also_wake: vec![],
    };
    store.submit(submission).await.unwrap();
    assert_eq!(relay_once(store.as_ref(), queue.as_ref(), &SystemClock, &relay).await.unwrap(), 1);
    assert_eq!(queue.undelivered().await.unwrap(), 1);
    for _ in 0..3 {
        relay_once(store.as_ref(), queue.as_ref(), &SystemClock, &relay).await.unwrap();
    }
    assert_eq!(queue.undelivered().await.unwrap(), 1, "a queued run is not republished");

    // Its message delivered and lost (acked without the run moving): now it is stranded.
    let deliveries = queue.fetch(10, Duration::from_millis(100)).await.unwrap();
    assert_eq!(deliveries.len(), 1);
    for delivery in deliveries {
        delivery.ack().await.unwrap();
    }
    assert_eq!(queue.undelivered().await.unwrap(), 0);
    relay_once(store.as_ref(), queue.as_ref(), &SystemClock, &relay).await.unwrap();
    assert_eq!(queue.undelivered().await.unwrap(), 1, "a stranded run gets a fresh submission");
    test.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_runs_are_not_stranded_on_sqlite() {
    queued_runs_are_not_stranded(Kind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_runs_are_not_stranded_on_postgres() {
    queued_runs_are_not_stranded(Kind::Postgres).await;
}
