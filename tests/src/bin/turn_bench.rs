//! Load driver for `tests/bench/turn`: C concurrent sessions, each sending M turns and
//! waiting for `session.status_idle` on its own live stream. Reports turns/s and the
//! p50/p99 of send → idle and of send → first streamed event, plus the CPU time and
//! peak RSS of the agentd processes named by `--pid`.
//!
//! Usage: turn_bench --url http://127.0.0.1:8080 --key sk-… --model claude-sonnet-4-5 \
//!          --concurrency 32 --turns 50 [--pid N]…

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
}

fn args() -> Args {
    let mut args = Args {
        url: String::new(),
        key: String::new(),
        model: "claude-sonnet-4-5".into(),
        concurrency: 1,
        turns: 20,
        pids: Vec::new(),
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

/// One session: returns (send→idle, send→first event) per turn.
async fn session(
    client: reqwest::Client,
    args: &Args,
    agent: String,
    environment: String,
) -> Vec<(Duration, Duration)> {
    let session = post(&client, args, "/v1/sessions", json!({ "agent": agent, "environment_id": environment })).await;
    let id = session["id"].as_str().unwrap().to_owned();
    let stream = client
        .get(format!("{}/v1/sessions/{id}/events/stream", args.url))
        .header("x-api-key", &args.key)
        .header("anthropic-beta", "managed-agents-2026-04-01")
        .send()
        .await
        .expect("stream");
    let mut bytes = stream.bytes_stream();
    let mut buffer = String::new();
    let mut samples = Vec::with_capacity(args.turns);
    for turn in 0..args.turns {
        let sent = Instant::now();
        post(&client, args, &format!("/v1/sessions/{id}/events"), json!({ "events": [{ "type": "user.message", "content": [{ "type": "text", "text": format!("turn {turn}") }] }] })).await;
        let mut first = None;
        'turn: loop {
            while let Some(end) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..end + 2).collect();
                if frame.starts_with(':') {
                    continue;
                }
                first.get_or_insert_with(|| sent.elapsed());
                if frame.starts_with("event: session.status_idle") {
                    samples.push((sent.elapsed(), first.unwrap_or_default()));
                    break 'turn;
                }
            }
            match bytes.next().await {
                Some(Ok(chunk)) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
                other => panic!("stream ended: {other:?}"),
            }
        }
    }
    samples
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
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let (client, args, agent, environment) = (client.clone(), args.clone(), agent.clone(), environment.clone());
            tokio::spawn(async move { session(client, &args, agent, environment).await })
        })
        .collect();
    let mut idle = Vec::new();
    let mut first = Vec::new();
    for task in tasks {
        for (to_idle, to_first) in task.await.expect("session task") {
            idle.push(to_idle);
            first.push(to_first);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    idle.sort();
    first.sort();
    let turns = idle.len() as f64;
    let after: Vec<(f64, u64)> = args.pids.iter().map(|pid| process_stats(*pid)).collect();
    let cpu: f64 = before.iter().zip(&after).map(|(b, a)| a.0 - b.0).sum();
    let report = json!({
        "concurrency": args.concurrency,
        "turns": turns,
        "turns_per_second": turns / elapsed,
        "send_to_idle_ms": { "p50": percentile(&idle, 50.0), "p99": percentile(&idle, 99.0) },
        "send_to_first_event_ms": { "p50": percentile(&first, 50.0), "p99": percentile(&first, 99.0) },
        "server_cpu_ms_per_turn": cpu * 1000.0 / turns,
        "peak_rss_kib": args.pids.iter().zip(&after).map(|(pid, (_, rss))| json!({ "pid": pid, "rss_kib": rss })).collect::<Vec<_>>(),
    });
    println!("{report}");
}
