//! An outcome's evaluation driven in-process against the real store (SQLite and
//! PostgreSQL) with a model whose answers the test holds (docs/api/outcomes.md): the
//! session's entry is `pending` until the turn takes the outcome up, `running` while the
//! agent works, `evaluating` while the grader is asked; meanwhile a
//! `span.outcome_evaluation_ongoing` is committed every interval under the run's claim.
//! A worker that lost its claim is stopped by its next heartbeat's fence, and the attempt
//! that took over asks the grader again, numbering its heartbeats on: one start, one end,
//! no heartbeat twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentd_proto::bus::memory::MemoryBus;
use agentd_schema::events::define_outcomes;
use agentd_schema::store::prelude::*;
use agentd_schema::{Claim, ClaimOutcome, NewEvent, NewSession, StoredEvent, Submission, SystemClock};
use agentd_tests::stores::{Kind, TestStore};
use agentd_worker::providers::{
    BlockKind, ModelEvent, ModelRequest, ModelStream, Provider, ProviderError, Registry, Usage,
};
use agentd_worker::run::{AttemptEnd, HistoryCache, RunContext, drive};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const HEARTBEAT: Duration = Duration::from_millis(50);
const LEASE_MS: i64 = 400;

/// The agent's and the grader's model: each answer waits for its gate.
struct Held {
    agent: watch::Receiver<bool>,
    grader: watch::Receiver<bool>,
    graded: AtomicUsize,
}

#[async_trait]
impl Provider for Held {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let grading = request.tool_choice.as_deref() == Some("outcome_verdict");
        let mut gate = if grading { self.grader.clone() } else { self.agent.clone() };
        let events = if grading {
            self.graded.fetch_add(1, Ordering::SeqCst);
            let verdict = json!({ "result": "satisfied", "explanation": "Three lines." }).to_string();
            let call = BlockKind::ToolUse { id: "toolu_1".into(), name: "outcome_verdict".into() };
            vec![
                ModelEvent::BlockStart { index: 0, kind: call },
                ModelEvent::InputDelta { index: 0, json: verdict },
                ModelEvent::BlockStop { index: 0 },
                ModelEvent::Done { stop_reason: "tool_use".into() },
            ]
        } else {
            vec![
                ModelEvent::BlockStart { index: 0, kind: BlockKind::Text },
                ModelEvent::TextDelta { index: 0, text: "An old pond.".into() },
                ModelEvent::BlockStop { index: 0 },
                ModelEvent::Usage(Usage { input_tokens: 10, output_tokens: 3, ..Usage::default() }),
                ModelEvent::Done { stop_reason: "end_turn".into() },
            ]
        };
        let _ = gate.wait_for(|open| *open).await;
        Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed())
    }

    fn name(&self) -> &'static str {
        "held"
    }
}

async fn session(store: &dyn Store) -> String {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let id = agentd_schema::ids::new_id("sesn");
    let agent = json!({ "type": "agent", "id": "agent_x", "version": 1, "name": "a",
                        "model": { "id": "claude-sonnet-4-6" }, "tools": [], "system": null });
    let body = json!({ "agent": agent, "environment_id": "env_none" });
    let new = NewSession {
        id: id.clone(),
        workspace_id: workspace.id,
        status: "idle".into(),
        body,
        agent_id: None,
        agent_version: None,
    };
    store.create_session(new).await.unwrap();
    id
}

async fn claim(store: &dyn Store, run: &str, owner: &str) -> Claim {
    for _ in 0..200 {
        match store.claim_run(run, owner, LEASE_MS).await.unwrap() {
            ClaimOutcome::Claimed(claim) => return claim,
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    panic!("{owner} never claimed {run}");
}

/// Waits until the session's history satisfies `done`, then returns it.
async fn history_until(
    store: &dyn Store,
    session: &str,
    what: &str,
    done: impl Fn(&[StoredEvent]) -> bool,
) -> Vec<StoredEvent> {
    for _ in 0..500 {
        let events = store.list_events(session, 0, 1000).await.unwrap();
        if done(&events) {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let events = store.list_events(session, 0, 1000).await.unwrap();
    panic!("{what} never happened: {:?}", events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>());
}

fn heartbeats(events: &[StoredEvent]) -> Vec<&StoredEvent> {
    events.iter().filter(|e| e.kind == "span.outcome_evaluation_ongoing").collect()
}

/// The entry's `result` in the session's `outcome_evaluations`.
async fn entry(store: &dyn Store, session: &str) -> Value {
    let session = store.load_session(session).await.unwrap().unwrap();
    session.body["outcome_evaluations"][0]["result"].clone()
}

fn spawn_attempt(ctx: &RunContext, mut claim: Claim) -> tokio::task::JoinHandle<AttemptEnd> {
    let ctx = ctx.clone();
    tokio::spawn(async move { drive(&ctx, None, &mut claim, None, CancellationToken::new()).await })
}

async fn heartbeats_under_the_claim(kind: Kind) {
    let test = TestStore::new(kind, Arc::new(SystemClock)).await;
    let store: Arc<dyn Store> = test.store.clone();
    let blobs = tempfile::tempdir().unwrap();
    let (open_agent, agent) = watch::channel(false);
    let (open_grader, grader) = watch::channel(false);
    let model = Arc::new(Held { agent, grader, graded: AtomicUsize::new(0) });
    let ctx = RunContext {
        store: store.clone(),
        bus: Arc::new(MemoryBus::new()),
        providers: Registry::only(model.clone()),
        histories: Arc::new(HistoryCache::new(16 << 20)),
        catalogs: Arc::new(agentd_schema::catalogs::Catalogs::new(agentd_schema::catalog::current().clone())),
        secrets: None,
        blobs: agentd_schema::blobs::Blobs::filesystem(&blobs.path().join("blobs")).unwrap(),
        remote_allow_private: true,
        outcome_heartbeat: HEARTBEAT,
    };
    let store = store.as_ref();
    let session = session(store).await;
    let body = json!({ "type": "user.define_outcome", "description": "a haiku",
                       "rubric": { "type": "text", "content": "three lines" }, "max_iterations": 2 });
    let mut events = vec![NewEvent::new(&session, body)];
    define_outcomes(&mut events);
    let outcome = events[0].body["outcome_id"].as_str().unwrap().to_owned();
    let submission = Submission {
        session_id: session.clone(),
        thread_id: session.clone(),
        events,
        max_attempts: 5,
        trace_context: vec![],
        also_wake: vec![],
    };
    let run = store.submit(submission).await.unwrap().run_id;
    assert_eq!(entry(store, &session).await, "pending", "defined, not taken up yet");

    // The turn starts: the agent is at work on it.
    let first = spawn_attempt(&ctx, claim(store, &run, "w1").await);
    history_until(store, &session, "the agent's request", |h| h.iter().any(|e| e.kind == "span.model_request_start"))
        .await;
    assert_eq!(entry(store, &session).await, "running");
    open_agent.send_replace(true);

    // The grader is held: heartbeats come, under the first claim.
    history_until(store, &session, "two heartbeats", |h| heartbeats(h).len() >= 2).await;
    assert_eq!(entry(store, &session).await, "evaluating");
    // The claim is lost (not renewed, then taken): the next heartbeat is fenced.
    let second = claim(store, &run, "w2").await;
    let ended = tokio::time::timeout(Duration::from_secs(5), first).await.expect("the first attempt stops").unwrap();
    assert_eq!(ended, AttemptEnd::Fenced);
    let before = heartbeats(&store.list_events(&session, 0, 1000).await.unwrap()).len();

    // The attempt that took over asks the grader again and numbers its heartbeats on.
    let second = spawn_attempt(&ctx, second);
    history_until(store, &session, "the second attempt's heartbeats", |h| heartbeats(h).len() >= before + 2).await;
    open_grader.send_replace(true);
    let ended = tokio::time::timeout(Duration::from_secs(10), second).await.expect("the second attempt ends").unwrap();
    assert!(matches!(ended, AttemptEnd::Settled(_)), "{ended:?}");
    assert_eq!(model.graded.load(Ordering::SeqCst), 2, "each attempt asked the grader");

    let events = store.list_events(&session, 0, 1000).await.unwrap();
    let ids: std::collections::HashSet<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids.len(), events.len(), "no event is committed twice");
    let count = |kind: &str| events.iter().filter(|e| e.kind == kind).count();
    assert_eq!((count("span.outcome_evaluation_start"), count("span.outcome_evaluation_end")), (1, 1));
    let at = |kind: &str| events.iter().position(|e| e.kind == kind).unwrap();
    let (start, end) = (at("span.outcome_evaluation_start"), at("span.outcome_evaluation_end"));
    let beats = heartbeats(&events);
    let suffix = outcome.strip_prefix("outc_").unwrap();
    let expected: Vec<String> = (1..=beats.len()).map(|n| format!("sevt_outcongoing_{suffix}_0_{n}")).collect();
    assert_eq!(beats.iter().map(|e| e.event_id.clone()).collect::<Vec<_>>(), expected, "numbered on, none twice");
    for beat in &beats {
        assert_eq!(
            beat.body,
            json!({ "type": "span.outcome_evaluation_ongoing", "outcome_id": outcome, "iteration": 0 })
        );
        let seq = events.iter().position(|e| e.event_id == beat.event_id).unwrap();
        assert!(start < seq && seq < end, "between the cycle's start and end");
    }
    assert_eq!(events[end].body["result"], "satisfied");
    assert_eq!(events.last().unwrap().kind, "session.status_idle");
    assert_eq!(entry(store, &session).await, "satisfied");
    test.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_under_the_claim_sqlite() {
    heartbeats_under_the_claim(Kind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_under_the_claim_postgres() {
    heartbeats_under_the_claim(Kind::Postgres).await;
}
