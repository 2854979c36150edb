//! Load driver for `tests/bench/list`: N sessions of one agent of about `--agent-bytes`
//! of configuration, then `--concurrency` clients listing them all at once with
//! `GET /v1/sessions?limit=100` (following `next_page` as the SDK's auto-pagination
//! does), for `--rounds` rounds. Reports the pages and bytes the lists saw, whether every
//! session was seen exactly once, and the resident memory of the process named by
//! `--pid` (the gateway): at rest before the lists, and the peak while they ran.
//!
//! Usage: list_bench --url http://127.0.0.1:8080 --key sk-… --model claude-sonnet-4-5 \
//!          --pid N [--sessions 100] [--concurrency 16] [--rounds 3] \
//!          [--agent-bytes 1040000] [--rss-cap-mib 4096]
//!
//! `--rss-cap-mib` protects the machine: once the process passes it the driver stops
//! and reports `capped: true` (the caller then stops the process).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Args {
    url: String,
    key: String,
    model: String,
    pid: u32,
    sessions: usize,
    concurrency: usize,
    rounds: usize,
    agent_bytes: usize,
    rss_cap_mib: u64,
}

fn args() -> Args {
    let mut args = Args {
        url: String::new(),
        key: String::new(),
        model: "claude-sonnet-4-5".into(),
        pid: 0,
        sessions: 100,
        concurrency: 16,
        rounds: 3,
        agent_bytes: 1_040_000,
        rss_cap_mib: 4096,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--url" => args.url = value,
            "--key" => args.key = value,
            "--model" => args.model = value,
            "--pid" => args.pid = value.parse().expect("--pid N"),
            "--sessions" => args.sessions = value.parse().expect("--sessions N"),
            "--concurrency" => args.concurrency = value.parse().expect("--concurrency N"),
            "--rounds" => args.rounds = value.parse().expect("--rounds N"),
            "--agent-bytes" => args.agent_bytes = value.parse().expect("--agent-bytes N"),
            "--rss-cap-mib" => args.rss_cap_mib = value.parse().expect("--rss-cap-mib N"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!args.url.is_empty() && !args.key.is_empty() && args.pid > 0, "--url, --key and --pid are required");
    args
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn request(client: &reqwest::Client, args: &Args, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
    client
        .request(method, format!("{}{path}", args.url))
        .header("x-api-key", &args.key)
        .header("anthropic-beta", "managed-agents-2026-04-01")
}

async fn post(client: &reqwest::Client, args: &Args, path: &str, body: Value) -> Value {
    let response = request(client, args, reqwest::Method::POST, path).json(&body).send().await.expect("request");
    let status = response.status();
    let text = response.text().await.expect("body");
    assert!(status.is_success(), "{path}: {status} {}", &text[..text.len().min(500)]);
    serde_json::from_str(&text).expect("json body")
}

/// An agent of about `bytes` of configuration: the largest system prompt plus custom
/// tools with the longest descriptions.
fn large_agent(model: &str, bytes: usize) -> Value {
    const SYSTEM: usize = 100_000;
    const DESCRIPTION: usize = 10_000;
    const PER_TOOL: usize = DESCRIPTION + 130;
    let tools: Vec<Value> = (0..bytes.saturating_sub(SYSTEM + 1_000) / PER_TOOL)
        .map(|n| {
            json!({ "type": "custom", "name": format!("tool_{n}"), "description": "d".repeat(DESCRIPTION),
                    "input_schema": { "type": "object", "properties": { "q": { "type": "string" } } } })
        })
        .collect();
    json!({ "name": "list-bench", "model": model, "system": "s".repeat(SYSTEM), "tools": tools })
}

/// One client listing every session: (pages, largest page in bytes, session ids seen).
async fn list_all(client: reqwest::Client, args: Arc<Args>, agent: String) -> (usize, usize, Vec<String>) {
    let (mut pages, mut largest, mut seen) = (0, 0, Vec::new());
    let mut page: Option<String> = None;
    loop {
        let mut path = format!("/v1/sessions?limit=100&agent_id={agent}");
        if let Some(cursor) = &page {
            path.push_str(&format!("&page={cursor}"));
        }
        let response = request(&client, &args, reqwest::Method::GET, &path).send().await.expect("list");
        assert!(response.status().is_success(), "list: {}", response.status());
        let bytes = response.bytes().await.expect("list body");
        pages += 1;
        largest = largest.max(bytes.len());
        let body: Value = serde_json::from_slice(&bytes).expect("list json");
        seen.extend(body["data"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_owned()));
        match body["next_page"].as_str() {
            Some(next) => page = Some(next.to_owned()),
            None => return (pages, largest, seen),
        }
    }
}

#[tokio::main]
async fn main() {
    let args = Arc::new(args());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(600)).build().unwrap();
    let environment =
        post(&client, &args, "/v1/environments", json!({ "name": "list-bench", "config": { "type": "cloud" } })).await
            ["id"]
            .as_str()
            .unwrap()
            .to_owned();
    let agent_body = large_agent(&args.model, args.agent_bytes);
    let agent = post(&client, &args, "/v1/agents", agent_body).await;
    let agent_json_bytes = agent.to_string().len();
    let agent = agent["id"].as_str().unwrap().to_owned();
    for batch in (0..args.sessions).collect::<Vec<_>>().chunks(8) {
        let creates = batch
            .iter()
            .map(|_| post(&client, &args, "/v1/sessions", json!({ "agent": agent, "environment_id": environment })));
        futures::future::join_all(creates).await;
    }
    // Peak memory from here on: reset the high-water mark (Linux: clear_refs 5).
    let _ = std::fs::write(format!("/proc/{}/clear_refs", args.pid), "5");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_at_rest_kib = status_kib(args.pid, "VmRSS:");

    let peak = Arc::new(AtomicU64::new(rss_at_rest_kib));
    let capped = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, capped, done, pid, cap) = (peak.clone(), capped.clone(), done.clone(), args.pid, args.rss_cap_mib);
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let rss = status_kib(pid, "VmRSS:");
                peak.fetch_max(rss, Ordering::Relaxed);
                if rss > cap * 1024 {
                    capped.store(true, Ordering::Relaxed);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let started = Instant::now();
    let (mut pages, mut largest_page, mut complete, mut lists) = (0, 0, true, 0);
    for _ in 0..args.rounds {
        let listing =
            (0..args.concurrency).map(|_| tokio::spawn(list_all(client.clone(), args.clone(), agent.clone())));
        let round = futures::future::join_all(listing);
        let results = tokio::select! {
            results = round => results,
            _ = async { while !capped.load(Ordering::Relaxed) { tokio::time::sleep(Duration::from_millis(20)).await } } => break,
        };
        for result in results {
            let (p, largest, seen) = result.expect("list task");
            pages += p;
            lists += 1;
            largest_page = largest_page.max(largest);
            let mut unique = seen.clone();
            unique.sort();
            unique.dedup();
            complete &= seen.len() == args.sessions && unique.len() == args.sessions;
        }
    }
    let elapsed = started.elapsed();
    done.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    let hwm = status_kib(args.pid, "VmHWM:");
    let report = json!({
        "agent_json_bytes": agent_json_bytes,
        "sessions": args.sessions,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "lists_completed": lists,
        "pages_per_list": if lists > 0 { pages as f64 / lists as f64 } else { 0.0 },
        "largest_page_bytes": largest_page,
        "every_session_seen_once": complete && lists > 0,
        "seconds": elapsed.as_secs_f64(),
        "rss_at_rest_mib": rss_at_rest_kib / 1024,
        "peak_rss_mib": peak.load(Ordering::Relaxed).max(hwm) / 1024,
        "capped": capped.load(Ordering::Relaxed),
        "rss_cap_mib": args.rss_cap_mib,
    });
    println!("{report}");
}
