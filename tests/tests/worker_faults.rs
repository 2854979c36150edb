//! Worker fault cases driven in-process against the real store (SQLite and
//! PostgreSQL), the in-process queue and bus, and the scripted model: a submission
//! whose publish was lost is republished by the outbox relay, and a submission
//! delivered twice runs once.

use std::sync::Arc;
use std::time::Duration;

use agentd_proto::bus::memory::MemoryBus;
use agentd_proto::queue::memory::MemoryQueue;
use agentd_proto::{Bus, Lifecycle, Queue, QueueConfig};
use agentd_schema::outbox::{RelayConfig, relay_once};
use agentd_schema::store::prelude::*;
use agentd_schema::{NewEvent, NewSession, Submission, SystemClock};
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

async fn rig(kind: Kind) -> Rig {
    let test = TestStore::new(kind, Arc::new(SystemClock)).await;
    let store: Arc<dyn Store> = test.store.clone();
    let queue = Arc::new(MemoryQueue::new(QueueConfig { ack_wait: Duration::from_secs(2), ..QueueConfig::default() }));
    let bus: Arc<dyn Bus> = Arc::new(MemoryBus::new());
    let blobs = tempfile::tempdir().unwrap();
    let ctx = RunContext {
        store: store.clone(),
        bus,
        providers: Registry::from_env(true),
        histories: Arc::new(HistoryCache::new(1_000)),
        catalogs: Arc::new(agentd_schema::catalogs::Catalogs::new(agentd_schema::catalog::current().clone())),
        secrets: None,
        blobs: agentd_schema::blobs::Blobs::filesystem(&blobs.path().join("blobs")).unwrap(),
        remote_allow_private: true,
    };
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

async fn cases(kind: Kind) {
    // The scripted model answers the test model id.
    let path = std::env::temp_dir().join(format!("agentd-faults-{}.json", std::process::id()));
    std::fs::write(&path, r#"[{"id":"agentd-test-scripted","provider":"scripted"}]"#).unwrap();
    agentd_schema::catalog::install(agentd_schema::catalog::Catalog::with_file(&path).unwrap());
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
            also_wake: vec![],
            trace_context: vec![],
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
            also_wake: vec![],
            trace_context: vec![],
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
