//! The store seam's conformance suites, one module per store trait, run against SQLite
//! and PostgreSQL alike. Each case gets a fresh database (a temp SQLite file or a new
//! PostgreSQL database).

use agentd_schema::outbox::{RelayConfig, relay_once};
use agentd_schema::{
    Claim, ClaimOutcome, Clock, Heartbeat, IdempotencyBegin, KeyKind, ListQuery, NewEvent, NewResource, NewSession,
    ResourceUpdate, ResourcesReplacement, Settlement, Store, StoreError, Submission, WorkSource,
};
use agentd_tests::store_conformance as conformance;
use serde_json::json;

mod adapters;
mod agent_drafts;
mod app_tokens;
mod backfill;
mod capture;
mod deployments;
mod dreams;
mod durable;
mod erasure;
mod files;
mod idempotency;
mod inbox;
mod memory;
mod outbox;
mod outcomes;
mod protocol_config;
mod providers;
mod resources;
mod runs;
mod sandbox_policies;
mod session_threads;
mod sessions;
mod skills;
mod tenancy;
mod tool_calls;
mod user_profiles;
mod webhooks;
mod work;
mod workflows;

const LEASE_MS: i64 = 30_000;

async fn session(store: &dyn Store) -> (String, String) {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let id = agentd_schema::ids::new_id("sesn");
    store
        .create_session(NewSession {
            id: id.clone(),
            workspace_id: workspace.id.clone(),
            status: "idle".into(),
            body: json!({ "title": "t" }),
            agent_id: None,
            agent_version: None,
        })
        .await
        .unwrap();
    (workspace.id, id)
}

fn event(thread: &str, text: &str) -> NewEvent {
    NewEvent {
        event_id: agentd_schema::ids::new_id("sevt"),
        thread_id: thread.to_owned(),
        kind: "user.message".into(),
        body: json!({ "type": "user.message", "content": [{ "type": "text", "text": text }] }),
    }
}

async fn submit(store: &dyn Store, session: &str, text: &str) -> agentd_schema::Submitted {
    store
        .submit(Submission {
            session_id: session.to_owned(),
            thread_id: session.to_owned(),
            events: vec![event(session, text)],
            max_attempts: 5,
            trace_context: vec![],
            also_wake: vec![],
        })
        .await
        .unwrap()
}

async fn claim(store: &dyn Store, run: &str, owner: &str) -> Claim {
    match store.claim_run(run, owner, LEASE_MS).await.unwrap() {
        ClaimOutcome::Claimed(claim) => claim,
        other => panic!("expected a claim, got {other:?}"),
    }
}

fn agent_event(thread: &str, text: &str) -> NewEvent {
    NewEvent {
        event_id: agentd_schema::ids::new_id("sevt"),
        thread_id: thread.to_owned(),
        kind: "agent.message".into(),
        body: json!({ "type": "agent.message", "content": [{ "type": "text", "text": text }] }),
    }
}

fn status_event(thread: &str, kind: &str) -> NewEvent {
    NewEvent {
        event_id: agentd_schema::ids::new_id("sevt"),
        thread_id: thread.to_owned(),
        kind: kind.into(),
        body: json!({ "type": kind }),
    }
}
