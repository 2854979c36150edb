//! Load driver for `tests/bench/turn/run.sh streams`: live SSE streams of the managed API
//! (`GET /v1/sessions/{id}/events/stream`) held open against one gateway.
//!
//! Usage: stream_bench --url http://127.0.0.1:8080 --key sk-… --model M --pid N \
//!          --mode idle --streams 10000 --sessions 10000 [--idle-seconds 30]
//!        stream_bench … --mode fanout --streams 1000 --events 20
//!
//! `idle`: opens `--streams` streams spread round-robin over `--sessions` idle sessions,
//! and reports the gateway's resident memory per stream (VmRSS with the streams open
//! minus VmRSS before, over the number of streams) and its CPU while every stream stays
//! idle for `--idle-seconds` (only keep-alives should flow; the driver counts them).
//!
//! `fanout`: opens `--streams` streams on ONE session, then sends `--events` turns one
//! after another (a `user.message` each, waiting until every stream has seen the turn's
//! `session.status_idle`). For every event every stream receives, commit → receipt is
//! the receipt's wall-clock time minus the event's `processed_at` (set at commit, in
//! whole milliseconds, so each figure is up to 1 ms high); send → receipt of the
//! `user.message` is measured from the start of the POST. `--streams 1` is the C=1
//! first-event figure.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Mutex;

struct Args {
    url: String,
    key: String,
    model: String,
    mode: String,
    streams: usize,
    sessions: usize,
    events: usize,
    idle_seconds: u64,
    pids: Vec<u32>,
}

fn args() -> Args {
    let mut args = Args {
        url: String::new(),
        key: String::new(),
        model: "claude-sonnet-4-5".into(),
        mode: "idle".into(),
        streams: 1000,
        sessions: 0,
        events: 20,
        idle_seconds: 30,
        pids: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--url" => args.url = value,
            "--key" => args.key = value,
            "--model" => args.model = value,
            "--mode" => args.mode = value,
            "--streams" => args.streams = value.parse().expect("--streams N"),
            "--sessions" => args.sessions = value.parse().expect("--sessions N"),
            "--events" => args.events = value.parse().expect("--events N"),
            "--idle-seconds" => args.idle_seconds = value.parse().expect("--idle-seconds SECS"),
            "--pid" => args.pids.push(value.parse().expect("--pid N")),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!args.url.is_empty() && !args.key.is_empty(), "--url and --key are required");
    if args.sessions == 0 {
        args.sessions = args.streams;
    }
    args
}

/// (user + system CPU seconds, VmRSS KiB) of a process.
fn process_stats(pid: &str) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (ticks / 100.0, rss)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((p / 100.0) * (sorted.len() - 1) as f64).round() as usize]
}

fn summary(mut values: Vec<f64>) -> Value {
    values.sort_by(f64::total_cmp);
    json!({
        "n": values.len(),
        "p50": percentile(&values, 50.0),
        "p99": percentile(&values, 99.0),
        "max": values.last().copied().unwrap_or(0.0),
    })
}

fn wall_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64() * 1000.0
}

async fn post(client: &reqwest::Client, args: &Args, path: &str, body: Value) -> Value {
    agentd_tests::bench::post(client, &args.url, &args.key, path, body).await
}

async fn open(client: &reqwest::Client, args: &Args, session: &str) -> Option<reqwest::Response> {
    let response = client
        .get(format!("{}/v1/sessions/{session}/events/stream", args.url))
        .header("x-api-key", &args.key)
        .header("anthropic-beta", "managed-agents-2026-04-01")
        .send()
        .await
        .ok()?;
    response.status().is_success().then_some(response)
}

/// One received data frame: its event type, `processed_at` (ms since the epoch) and
/// the receipt's wall-clock time (ms).
struct Frame {
    kind: String,
    /// How many `user.message` frames this stream had seen, this one included.
    turn: usize,
    processed_ms: f64,
    received_ms: f64,
}

/// What every stream's reader adds to.
#[derive(Default)]
struct Counters {
    keepalives: AtomicUsize,
    frames: AtomicUsize,
    idles: AtomicUsize,
    closed: AtomicUsize,
}

/// Reads one stream until it ends; with `frames`, records every data frame.
async fn read(response: reqwest::Response, counters: Arc<Counters>, frames: Option<Arc<Mutex<Vec<Frame>>>>) {
    let mut bytes = response.bytes_stream();
    let mut buffer = String::new();
    let mut mine = Vec::new();
    let mut turn = 0;
    while let Some(Ok(chunk)) = bytes.next().await {
        let received_ms = wall_ms();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            if frame.starts_with(':') {
                counters.keepalives.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let kind = frame.strip_prefix("event: ").and_then(|rest| rest.lines().next()).unwrap_or("").to_owned();
            if frames.is_some() {
                let processed = frame.split("\"processed_at\":\"").nth(1).and_then(|rest| rest.split('"').next());
                let processed_ms = processed
                    .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
                    .map_or(f64::NAN, |at| at.timestamp_micros() as f64 / 1000.0);
                if kind == "user.message" {
                    turn += 1;
                }
                mine.push(Frame { kind: kind.clone(), turn, processed_ms, received_ms });
            }
            counters.frames.fetch_add(1, Ordering::Relaxed);
            if kind == "session.status_idle" {
                // Published after the frame is recorded, so the driver's wait sees it.
                if let Some(frames) = &frames {
                    frames.lock().await.append(&mut mine);
                }
                counters.idles.fetch_add(1, Ordering::Release);
            }
        }
    }
    if let Some(frames) = &frames {
        frames.lock().await.append(&mut mine);
    }
    counters.closed.fetch_add(1, Ordering::Relaxed);
}

/// Opens one stream per entry of `sessions` (at most 64 opening at once); returns how
/// many opened and how many were refused or failed.
async fn open_all(
    client: &reqwest::Client,
    args: &Arc<Args>,
    sessions: Vec<String>,
    counters: &Arc<Counters>,
    frames: Option<Arc<Mutex<Vec<Frame>>>>,
) -> (usize, usize) {
    let opened = futures::stream::iter(sessions)
        .map(|session| {
            let (client, args) = (client.clone(), args.clone());
            async move { open(&client, &args, &session).await }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
    let (mut ok, mut failed) = (0, 0);
    for response in opened {
        match response {
            Some(response) => {
                ok += 1;
                tokio::spawn(read(response, counters.clone(), frames.clone()));
            }
            None => failed += 1,
        }
    }
    (ok, failed)
}

async fn create_sessions(client: &reqwest::Client, args: &Arc<Args>, n: usize) -> Vec<String> {
    let agent = post(client, args, "/v1/agents", json!({ "name": "stream-bench", "model": args.model })).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let environment = post(client, args, "/v1/environments", json!({ "name": "stream-bench" })).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    futures::stream::iter(0..n)
        .map(|_| {
            let (client, args, agent, environment) = (client.clone(), args.clone(), agent.clone(), environment.clone());
            async move {
                let body = json!({ "agent": agent, "environment_id": environment });
                post(&client, &args, "/v1/sessions", body).await["id"].as_str().unwrap().to_owned()
            }
        })
        .buffer_unordered(16)
        .collect()
        .await
}

async fn idle(client: reqwest::Client, args: Arc<Args>) -> Value {
    let pid = args.pids.first().expect("--pid of the gateway").to_string();
    let started = Instant::now();
    let sessions = create_sessions(&client, &args, args.sessions).await;
    let created_s = started.elapsed().as_secs_f64();
    let targets: Vec<String> = (0..args.streams).map(|i| sessions[i % sessions.len()].clone()).collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, rss_before) = process_stats(&pid);
    let counters = Arc::new(Counters::default());
    let opening = Instant::now();
    let (opened, failed) = open_all(&client, &args, targets, &counters, None).await;
    let open_s = opening.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (cpu_0, rss_with) = process_stats(&pid);
    let (driver_0, _) = process_stats("self");
    let keepalives_0 = counters.keepalives.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
    let (cpu_1, rss_after) = process_stats(&pid);
    let (driver_1, _) = process_stats("self");
    let keepalives = counters.keepalives.load(Ordering::Relaxed) - keepalives_0;
    let idle_s = args.idle_seconds as f64;
    json!({
        "mode": "idle",
        "streams": opened,
        "failed_opens": failed,
        "sessions": sessions.len(),
        "sessions_created_in_s": created_s,
        "opened_in_s": open_s,
        "gateway_rss_kib": { "before": rss_before, "with_streams": rss_with, "after_idle": rss_after },
        "rss_per_stream_kib": (rss_with.saturating_sub(rss_before)) as f64 / opened.max(1) as f64,
        "idle_seconds": idle_s,
        "gateway_idle_cpu_ms_per_s": (cpu_1 - cpu_0) * 1000.0 / idle_s,
        "keepalives_per_s": keepalives as f64 / idle_s,
        "gateway_cpu_us_per_keepalive": if keepalives > 0 { (cpu_1 - cpu_0) * 1e6 / keepalives as f64 } else { 0.0 },
        "data_frames_while_idle": counters.frames.load(Ordering::Relaxed),
        "streams_closed_by_gateway": counters.closed.load(Ordering::Relaxed),
        "driver_idle_cpu_ms_per_s": (driver_1 - driver_0) * 1000.0 / idle_s,
    })
}

async fn fanout(client: reqwest::Client, args: Arc<Args>) -> Value {
    let pid = args.pids.first().expect("--pid of the gateway").to_string();
    let session = create_sessions(&client, &args, 1).await.remove(0);
    let counters = Arc::new(Counters::default());
    let frames = Arc::new(Mutex::new(Vec::new()));
    let (opened, failed) =
        open_all(&client, &args, vec![session.clone(); args.streams], &counters, Some(frames.clone())).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (cpu_0, _) = process_stats(&pid);
    let mut sends = Vec::new();
    let mut timed_out = 0;
    let started = Instant::now();
    for turn in 1..=args.events {
        let sent_ms = wall_ms();
        let body = json!({ "events": [{ "type": "user.message", "content": [{ "type": "text", "text": format!("turn {turn}") }] }] });
        post(&client, &args, &format!("/v1/sessions/{session}/events"), body).await;
        sends.push(sent_ms);
        let give_up = Instant::now() + Duration::from_secs(30);
        while counters.idles.load(Ordering::Acquire) < opened * turn {
            if Instant::now() > give_up {
                timed_out += 1;
                break;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (cpu_1, rss) = process_stats(&pid);
    let frames = std::mem::take(&mut *frames.lock().await);
    let mut user = Vec::new();
    let mut all = Vec::new();
    let mut send_to_user = Vec::new();
    for frame in &frames {
        let latency = frame.received_ms - frame.processed_ms;
        if latency.is_finite() {
            all.push(latency);
        }
        if frame.kind == "user.message" {
            if latency.is_finite() {
                user.push(latency);
            }
            if let Some(sent) = frame.turn.checked_sub(1).and_then(|i| sends.get(i)) {
                send_to_user.push(frame.received_ms - sent);
            }
        }
    }
    json!({
        "mode": "fanout",
        "streams": opened,
        "failed_opens": failed,
        "turns": args.events,
        "turns_timed_out": timed_out,
        "frames_received": frames.len(),
        "frames_per_stream": frames.len() as f64 / opened.max(1) as f64,
        "commit_to_receipt_ms": { "user_message": summary(user), "every_event": summary(all) },
        "send_to_user_message_receipt_ms": summary(send_to_user),
        "gateway_cpu_ms_per_turn": (cpu_1 - cpu_0) * 1000.0 / args.events.max(1) as f64,
        "turns_per_second": args.events as f64 / elapsed,
        "gateway_rss_kib": rss,
    })
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Arc::new(args());
    let client = reqwest::Client::builder().tcp_nodelay(true).http1_only().pool_max_idle_per_host(64).build().unwrap();
    let report = match args.mode.as_str() {
        "idle" => idle(client, args.clone()).await,
        "fanout" => fanout(client, args.clone()).await,
        other => panic!("unknown --mode {other}: idle or fanout"),
    };
    println!("{report}");
}
