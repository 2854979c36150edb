//! How many SQL statements one turn costs, end to end (`events.send` of a user message
//! → the worker's model request → `session.status_idle`), in `agentd dev` against the
//! zero-latency model. Statements are what sqlx logs at `sqlx::query=debug`, one line
//! per request to the database. On the SQLite writer a transaction begins with its
//! first statement, in the same request (`BEGIN; SAVEPOINT agentd_group; <statement>`
//! or `SAVEPOINT agentd_member; <statement>`: ADR 0039, 0040), and transactions that
//! queue behind each other share one commit (`RELEASE agentd_group; COMMIT`). Neither
//! the beginnings nor the commits count as statements; both are checked against the
//! transactions.
//!
//! The ceiling is today's count, so a change that adds a statement to every turn fails
//! here and has to say why. Issue 17's target is 12; docs/benchmarks.md lists where the
//! statements go and which ones are next to fold.

use std::collections::BTreeMap;
use std::time::Duration;

use agentd_tests::process::Launch;
use futures::StreamExt;
use serde_json::{Value, json};

/// Statements per turn (the transactions' beginnings and commits excluded): gateway 5 (the session with its
/// agent's and environment's state; the submission's sequence allocation, event insert,
/// run and outbox row), worker 7 (the claim, which reads the session too; a page of
/// events; two commits of sequence allocation and event insert: the request's start,
/// its allocation fenced by the claim (ADR 0036), then the answer with its closed span
/// and the idle, with the settle;
/// the second allocation writes the usage too, known from the first,
/// `sessions/known_usage.rs`). The published outbox rows' DELETE is not a turn's own:
/// the sweeper gathers them for half a second (`outbox::Sweeper`), which the test
/// checks separately ([`SWEEP`]). It was 27 before issue 17, 21 before a turn's idle
/// was committed with the answer that ends it (`Attempt::turn_ends_with`), 17 before
/// the sweeper lingered and the session was read with its resources' state, 15 before
/// the usage was written with the allocation, 14 before the claim read the session,
/// and 13 before the allocation fenced the commit.
const CEILING: usize = 12;

/// Transactions per turn: the submission and the worker's two commits.
const TRANSACTIONS: usize = 3;

/// What a transaction's first statement is sent with, as sqlx's log summarizes it (its
/// first four words): the group's opening, or a member's
/// (`schema/src/sql/held/group.rs`).
const BEGINNINGS: &[&str] = &["BEGIN; SAVEPOINT agentd_group; ", "SAVEPOINT agentd_member; "];

/// A group's commit.
const COMMIT: &str = "RELEASE agentd_group; COMMIT";

/// `summary` without the beginning of a transaction sent with it, and whether it had one.
fn without_beginning(summary: &str) -> (&str, bool) {
    BEGINNINGS
        .iter()
        .find_map(|beginning| summary.strip_prefix(beginning))
        .map_or((summary, false), |statement| (statement, true))
}

const KEY: &str = "sk-agentd-statements-0123456789";
const BETA: &str = "managed-agents-2026-04-01";

/// Statements of background loops that run whether or not a turn does, told by their
/// summary (the first words of their file): the webhook deliverer's look for due
/// deliveries (`claim_deliveries.sql`, every 0.25–2 s per gateway) and the SQLite
/// store's WAL checkpoint (`schema/src/sql/checkpoint.rs`, every 100 ms while the WAL
/// changes, on its own connection; ADR 0038). They are not a turn's cost; counting
/// them would make the count depend on timing.
const BACKGROUND: &[&str] = &["-- Claims up to …", SWEEP, CHECKPOINT];

/// The checkpoint task's statement (on a reader, and on the writer once the WAL is long).
const CHECKPOINT: &str = "PRAGMA wal_checkpoint(PASSIVE)";

/// The outbox sweeper's removal of published rows: batched, so fewer than one per turn.
const SWEEP: &str = "DELETE FROM outbox WHERE …";

/// The summaries of the statements logged since `from` (lines of stderr), background
/// loops' left out.
fn statements(stderr: &str, from: usize) -> Vec<String> {
    stderr
        .lines()
        .skip(from)
        .filter(|line| line.contains("sqlx::query"))
        .map(|line| line.split("summary=\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or(line).to_owned())
        .filter(|summary| !BACKGROUND.contains(&summary.as_str()))
        .collect()
}

#[tokio::test]
async fn a_turn_costs_at_most_the_ceiling_of_sql_statements() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.json");
    let entry = json!([{ "id": "zero-latency", "provider": "scripted", "display_name": "z",
                         "prices": { "input": 0, "output": 0 } }]);
    std::fs::write(&catalog, entry.to_string()).unwrap();
    let mut dev = Launch::role("dev")
        .cwd(dir.path())
        .env("AGENTD_BOOTSTRAP_API_KEY", KEY)
        .env("AGENTD_MODEL_CATALOG", catalog.display().to_string())
        .env("RUST_LOG", "warn,sqlx::query=debug")
        .env("NO_COLOR", "1")
        .start()
        .await;
    dev.wait_ready(200, Duration::from_secs(10)).await;
    let client = agentd_tests::http();
    let base = dev.http.clone();
    let post = |path: String, body: Value| {
        let request = client.post(format!("{base}{path}")).header("x-api-key", KEY).header("anthropic-beta", BETA);
        async move {
            let response = request.json(&body).send().await.unwrap();
            assert!(response.status().is_success(), "{path}: {}", response.status());
            response.json::<Value>().await.unwrap()
        }
    };
    let agent = post("/v1/agents".into(), json!({ "name": "a", "model": "zero-latency" })).await;
    let environment = post("/v1/environments".into(), json!({ "name": "e" })).await;
    let session =
        post("/v1/sessions".into(), json!({ "agent": agent["id"], "environment_id": environment["id"] })).await;
    let id = session["id"].as_str().unwrap().to_owned();
    let stream = client
        .get(format!("{}/v1/sessions/{id}/events/stream", dev.http))
        .header("x-api-key", KEY)
        .header("anthropic-beta", BETA)
        .send()
        .await
        .unwrap();
    assert!(stream.status().is_success());
    let mut stream = stream.bytes_stream();
    let mut buffer = String::new();

    // The fewest statements of five turns: the outbox relay's pass (every 2 s) and the
    // API-key cache's refresh may fall into one turn's window, not into all of them.
    let mut fewest: Option<Vec<String>> = None;
    let start = dev.stderr_text().lines().count();
    for turn in 0..6 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let from = dev.stderr_text().lines().count();
        let message =
            json!({ "type": "user.message", "content": [{ "type": "text", "text": format!("turn {turn}") }] });
        post(format!("/v1/sessions/{id}/events"), json!({ "events": [message] })).await;
        while !buffer.contains("event: session.status_idle") {
            let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("idle within 10 s");
            buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap()));
        }
        buffer.clear();
        // The worker's settle commits before the idle is published; let the log catch up.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let seen = statements(&dev.stderr_text(), from);
        // The first turn also creates the thread's run; it is not the steady state.
        if turn > 0 && fewest.as_ref().is_none_or(|f| seen.len() < f.len()) {
            fewest = Some(seen);
        }
    }
    // Let the sweeper remove the last turns' rows, then count its DELETEs.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let sweeps = dev.stderr_text().lines().skip(start).filter(|line| line.contains(SWEEP)).count();
    assert!(
        (1..6).contains(&sweeps),
        "six turns' outbox rows, removed in {sweeps} DELETEs: batched, fewer than the turns"
    );
    let requests = fewest.unwrap();
    let begun = requests.iter().filter(|summary| without_beginning(summary).1).count();
    let commits = requests.iter().filter(|summary| *summary == COMMIT).count();
    let fewest: Vec<&str> =
        requests.iter().filter(|summary| *summary != COMMIT).map(|summary| without_beginning(summary).0).collect();
    let mut by_statement = BTreeMap::new();
    for summary in &fewest {
        *by_statement.entry(*summary).or_insert(0) += 1;
    }
    // One request per statement: no `BEGIN` or savepoint of its own. Every transaction
    // began with a statement (a single statement may open a group too, when another
    // checkout queued behind it), and at most one commit each.
    assert!(
        begun >= TRANSACTIONS && (1..=TRANSACTIONS).contains(&commits),
        "{TRANSACTIONS} transactions: {begun} began with a statement, {commits} commits: {requests:#?}"
    );
    assert!(
        fewest.len() <= CEILING,
        "a turn ran {} statements (+ {TRANSACTIONS} COMMITs), more than the ceiling of {CEILING}: {by_statement:#?}",
        fewest.len()
    );
    assert!(fewest.len() >= 5, "the statement log is not being read: {by_statement:#?}");
}
