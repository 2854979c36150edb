//! Load driver for `tests/bench/peer`: the turn benchmark's design against a LangGraph
//! Agent Server (`langgraph dev`). C concurrent threads, each running M turns; a turn is
//! one run created on the thread and waited for (`POST /threads/{id}/runs/wait`, the
//! server's create-and-join endpoint). Reports turns/s, the p50/p99 of send → run done,
//! and the CPU time and RSS of the server's process tree (`--pid`).
//!
//! Usage: peer_bench --url http://127.0.0.1:2024 --assistant agent --concurrency 32 \
//!          --turns 10 --pid N
//!
//! A Rust binary rather than a Python script with httpx: the driver shares the two
//! cores with the server it measures, and this one costs what turn_bench costs (the same
//! runtime, client and loop), so neither side of the comparison pays for a heavier
//! driver than the other.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd_tests::bench::{self, percentile_ms};
use serde_json::{Value, json};

struct Args {
    url: String,
    assistant: String,
    concurrency: usize,
    turns: usize,
    pid: Option<u32>,
}

fn args() -> Args {
    let mut args = Args { url: String::new(), assistant: "agent".into(), concurrency: 1, turns: 20, pid: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--url" => args.url = value,
            "--assistant" => args.assistant = value,
            "--concurrency" => args.concurrency = value.parse().expect("--concurrency N"),
            "--turns" => args.turns = value.parse().expect("--turns N"),
            "--pid" => args.pid = Some(value.parse().expect("--pid N")),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!args.url.is_empty(), "--url is required");
    args
}

async fn post(client: &reqwest::Client, url: String, body: Value) -> Value {
    let response = client.post(&url).json(&body).send().await.expect("request");
    let status = response.status();
    let body: Value = response.json().await.expect("json body");
    assert!(status.is_success(), "{url}: {status} {body}");
    body
}

/// One thread: M turns, each timed from the request to the finished run's state.
async fn thread(client: reqwest::Client, args: Arc<Args>) -> Vec<Duration> {
    let created = post(&client, format!("{}/threads", args.url), json!({})).await;
    let id = created["thread_id"].as_str().expect("thread_id").to_owned();
    let mut samples = Vec::new();
    for turn in 1..=args.turns {
        let sent = Instant::now();
        let input = json!({ "messages": [{ "role": "user", "content": format!("turn {turn}") }] });
        let state = post(
            &client,
            format!("{}/threads/{id}/runs/wait", args.url),
            json!({ "assistant_id": args.assistant, "input": input }),
        )
        .await;
        samples.push(sent.elapsed());
        // The run must really have run: the graph's fixed reply ends the thread's state.
        let last = state["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        assert_eq!(last["type"], "ai", "turn {turn} of thread {id} did not end with the graph's reply: {state}");
    }
    samples
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Arc::new(args());
    let client = reqwest::Client::builder().tcp_nodelay(true).pool_max_idle_per_host(1024).build().unwrap();
    let cpu_before = args.pid.map(bench::tree_cpu_seconds).unwrap_or_default();
    let driver_before = bench::process(std::process::id()).unwrap_or_default().cpu_seconds;
    let machine_before = bench::machine_cpu_seconds();
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.concurrency).map(|_| tokio::spawn(thread(client.clone(), args.clone()))).collect();
    let mut done = Vec::new();
    for task in tasks {
        done.extend(task.await.expect("thread task"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = args.pid.map(bench::tree_cpu_seconds).unwrap_or_default() - cpu_before;
    let driver_cpu = bench::process(std::process::id()).unwrap_or_default().cpu_seconds - driver_before;
    let machine_after = bench::machine_cpu_seconds();
    let (busy, total) = (machine_after.0 - machine_before.0, machine_after.1 - machine_before.1);
    done.sort();
    let turns = done.len() as f64;
    let server = args.pid.and_then(bench::process).unwrap_or_default();
    let report = json!({
        "concurrency": args.concurrency,
        "turns": turns,
        "seconds": elapsed,
        "turns_per_second": turns / elapsed,
        "send_to_done_ms": { "p50": percentile_ms(&done, 50.0), "p99": percentile_ms(&done, 99.0) },
        "server_cpu_ms_per_turn": cpu * 1000.0 / turns,
        "rss_kib": server.rss_kib,
        "peak_rss_kib": server.peak_rss_kib,
        "driver_cpu_seconds": driver_cpu,
        "machine_busy_percent": if total > 0.0 { busy * 100.0 / total } else { 0.0 },
    });
    println!("{report}");
}
