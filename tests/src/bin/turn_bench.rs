//! Load driver for `tests/bench/turn`: C concurrent sessions, each sending M turns and
//! waiting for `session.status_idle` on its own live stream. Reports turns/s and the
//! p50/p99 of send → idle and of send → first streamed event, plus the CPU time and
//! peak RSS of the agentd processes named by `--pid`.
//!
//! Usage: turn_bench --url http://127.0.0.1:8080 --key sk-… --model claude-sonnet-4-5 \
//!          --concurrency 32 --turns 50 [--pid N]… [--duration SECS] [--turn-timeout SECS]
//!
//! With `--duration` (soak mode) every session sends turns until the time is up, and
//! the report adds `lost_turns` (sent but never idle, or idle missing from history) and
//! `duplicate_events` (event ids committed twice), checked against committed history.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

struct Args {
    url: String,
    key: String,
    model: String,
    concurrency: usize,
    turns: usize,
    pids: Vec<u32>,
    duration: Option<Duration>,
    turn_timeout: Duration,
}

fn args() -> Args {
    let mut args = Args {
        url: String::new(),
        key: String::new(),
        model: "claude-sonnet-4-5".into(),
        concurrency: 1,
        turns: 20,
        pids: Vec::new(),
        duration: None,
        turn_timeout: Duration::from_secs(120),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--url" => args.url = value,
            "--key" => args.key = value,
            "--model" => args.model = value,
            "--concurrency" => args.concurrency = value.parse().expect("--concurrency N"),
            "--turns" => args.turns = value.parse().expect("--turns N"),
            "--pid" => args.pids.push(value.parse().expect("--pid N")),
            "--duration" => args.duration = Some(Duration::from_secs(value.parse().expect("--duration SECS"))),
            "--turn-timeout" => args.turn_timeout = Duration::from_secs(value.parse().expect("--turn-timeout SECS")),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!args.url.is_empty() && !args.key.is_empty(), "--url and --key are required");
    args
}

/// (user + system CPU seconds, peak RSS in KiB) of a process.
fn process_stats(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (ticks / 100.0, hwm)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank].as_secs_f64() * 1000.0
}

async fn post(client: &reqwest::Client, args: &Args, path: &str, body: Value) -> Value {
    let response = client
        .post(format!("{}{path}", args.url))
        .header("x-api-key", &args.key)
        .header("anthropic-beta", "managed-agents-2026-04-01")
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = response.status();
    let body: Value = response.json().await.expect("json body");
    assert!(status.is_success(), "{path}: {status} {body}");
    body
}

/// What one session measured.
#[derive(Default)]
struct SessionReport {
    /// (send→idle, send→first event) per completed turn.
    samples: Vec<(Duration, Duration)>,
    /// Turns sent whose idle never arrived on the stream within the timeout.
    timed_out: usize,
    /// The session, for the history check.
    id: String,
}

async fn open_stream(
    client: &reqwest::Client,
    args: &Args,
    id: &str,
) -> Option<futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>> {
    let response = client
        .get(format!("{}/v1/sessions/{id}/events/stream", args.url))
        .header("x-api-key", &args.key)
        .header("anthropic-beta", "managed-agents-2026-04-01")
        .send()
        .await
        .ok()?;
    response.status().is_success().then(|| response.bytes_stream().boxed())
}

/// One session: sends turns (a fixed number, or until the deadline) and times each.
async fn session(
    client: reqwest::Client,
    args: &Args,
    agent: String,
    environment: String,
    deadline: Option<Instant>,
) -> SessionReport {
    let session = post(&client, args, "/v1/sessions", json!({ "agent": agent, "environment_id": environment })).await;
    let id = session["id"].as_str().unwrap().to_owned();
    let mut report = SessionReport { id: id.clone(), ..SessionReport::default() };
    let mut bytes = open_stream(&client, args, &id).await.expect("stream");
    let mut buffer = String::new();
    let mut turn = 0;
    loop {
        if turn >= args.turns || deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            break;
        }
        turn += 1;
        let sent = Instant::now();
        post(&client, args, &format!("/v1/sessions/{id}/events"), json!({ "events": [{ "type": "user.message", "content": [{ "type": "text", "text": format!("turn {turn}") }] }] })).await;
        let mut first = None;
        let give_up = sent + args.turn_timeout;
        'turn: loop {
            while let Some(end) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..end + 2).collect();
                if frame.starts_with(':') {
                    continue;
                }
                first.get_or_insert_with(|| sent.elapsed());
                if frame.starts_with("event: session.status_idle") {
                    report.samples.push((sent.elapsed(), first.unwrap_or_default()));
                    break 'turn;
                }
            }
            match tokio::time::timeout_at(give_up.into(), bytes.next()).await {
                Ok(Some(Ok(chunk))) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Err(_) => {
                    report.timed_out += 1;
                    break 'turn;
                }
                // The gateway closed the stream: reopen it (history stays authoritative).
                Ok(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if let Some(reopened) = open_stream(&client, args, &id).await {
                        bytes = reopened;
                        buffer.clear();
                    }
                }
            }
        }
    }
    report
}

/// Checks a session's committed history: (duplicate event ids, turns without an idle).
async fn audit(client: &reqwest::Client, args: &Args, id: &str) -> (usize, usize) {
    let mut events = Vec::new();
    let mut page: Option<String> = None;
    loop {
        let mut request = client
            .get(format!("{}/v1/sessions/{id}/events", args.url))
            .header("x-api-key", &args.key)
            .header("anthropic-beta", "managed-agents-2026-04-01")
            .query(&[("limit", "1000")]);
        if let Some(page) = &page {
            request = request.query(&[("page", page.as_str())]);
        }
        let body: Value = request.send().await.expect("list events").json().await.expect("json");
        events.extend(body["data"].as_array().cloned().unwrap_or_default());
        match body["next_page"].as_str() {
            Some(next) => page = Some(next.to_owned()),
            None => break,
        }
    }
    let ids: std::collections::HashSet<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
    let duplicates = events.len() - ids.len();
    let sent = events.iter().filter(|e| e["type"] == "user.message").count();
    let ended = events.iter().filter(|e| e["type"] == "session.status_idle").count();
    (duplicates, sent.saturating_sub(ended))
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = args();
    let client = reqwest::Client::builder().tcp_nodelay(true).pool_max_idle_per_host(1024).build().unwrap();
    let agent = post(&client, &args, "/v1/agents", json!({ "name": "bench", "model": args.model })).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let environment =
        post(&client, &args, "/v1/environments", json!({ "name": "bench" })).await["id"].as_str().unwrap().to_owned();
    let before: Vec<(f64, u64)> = args.pids.iter().map(|pid| process_stats(*pid)).collect();
    let started = Instant::now();
    let args = std::sync::Arc::new(args);
    let deadline = args.duration.map(|d| Instant::now() + d);
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let (client, args, agent, environment) = (client.clone(), args.clone(), agent.clone(), environment.clone());
            tokio::spawn(async move {
                match deadline {
                    // Soak: like real traffic, conversations end and new ones start, so
                    // each session sends a bounded number of turns.
                    Some(deadline) => {
                        let mut reports = Vec::new();
                        while Instant::now() < deadline {
                            reports.push(
                                session(client.clone(), &args, agent.clone(), environment.clone(), Some(deadline))
                                    .await,
                            );
                        }
                        reports
                    }
                    None => vec![session(client, &args, agent, environment, None).await],
                }
            })
        })
        .collect();
    let mut idle = Vec::new();
    let mut first = Vec::new();
    let mut timed_out = 0;
    let mut sessions = Vec::new();
    for task in tasks {
        for report in task.await.expect("session task") {
            timed_out += report.timed_out;
            sessions.push(report.id);
            for (to_idle, to_first) in report.samples {
                idle.push(to_idle);
                first.push(to_first);
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    idle.sort();
    first.sort();
    let turns = idle.len() as f64;
    let after: Vec<(f64, u64)> = args.pids.iter().map(|pid| process_stats(*pid)).collect();
    let cpu: f64 = before.iter().zip(&after).map(|(b, a)| a.0 - b.0).sum();
    // Give turns still in recovery a moment, then audit committed history.
    let (mut duplicate_events, mut lost_turns) = (0, 0);
    if args.duration.is_some() {
        tokio::time::sleep(Duration::from_secs(2)).await;
        for id in &sessions {
            let (duplicates, unended) = audit(&client, &args, id).await;
            duplicate_events += duplicates;
            lost_turns += unended;
        }
    }
    let report = json!({
        "concurrency": args.concurrency,
        "turns": turns,
        "turns_per_second": turns / elapsed,
        "send_to_idle_ms": { "p50": percentile(&idle, 50.0), "p99": percentile(&idle, 99.0) },
        "send_to_first_event_ms": { "p50": percentile(&first, 50.0), "p99": percentile(&first, 99.0) },
        "server_cpu_ms_per_turn": cpu * 1000.0 / turns,
        "timed_out_turns": timed_out,
        "lost_turns": lost_turns,
        "duplicate_events": duplicate_events,
        "peak_rss_kib": args.pids.iter().zip(&after).map(|(pid, (_, rss))| json!({ "pid": pid, "rss_kib": rss })).collect::<Vec<_>>(),
    });
    println!("{report}");
}
