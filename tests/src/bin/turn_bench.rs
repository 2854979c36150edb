//! Load driver for `tests/bench/turn`: C concurrent sessions, each sending M turns and
//! waiting for `session.status_idle` on its own live stream. Reports turns/s and the
//! p50/p99 of send → idle and of send → first streamed event, plus the CPU time and
//! RSS of the processes named by `--pid`, the CPU time of the backends named by
//! `--backend`, the driver's own CPU and how busy the whole machine was.
//!
//! Usage: turn_bench --url http://127.0.0.1:8080 [--url URL]… --key sk-… --model M \
//!          --concurrency 32 --turns 50 [--pid [LABEL=]N]… [--backend NAME]… [--audit] \
//!          [--duration SECS | --total N] [--turn-timeout SECS] [--sessions-out FILE] \
//!          [--reuse FILE]
//!
//! Several `--url`s are gateways of one deployment: session i sends its turns to gateway
//! i mod n and opens its live stream on gateway i+1 mod n, so with two or more every
//! event reaches the client through the bus from another process than the one that
//! admitted the turn. Setup and the audit use the first.
//!
//! With `--duration` (soak) or `--total` (fill a store) every task runs sessions of
//! `--turns` turns one after another until the time is up or N turns were sent in all,
//! printing progress to stderr. `--sessions-out` writes the sessions' ids and the turns
//! each was sent, one a line; `--reuse` drives existing sessions from such a file (one
//! per task, so their history is as long as it already is) instead of creating them.
//!
//! With `--audit` (always with `--duration`) the report adds `lost_turns` (sent but
//! never idle in committed history), `duplicate_events` (event ids committed twice) and
//! `duplicate_turns` (a turn answered twice), checked against committed history.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentd_tests::bench::{self, percentile_ms};
use futures::StreamExt;
use serde_json::{Value, json};

struct Args {
    urls: Vec<String>,
    key: String,
    model: String,
    concurrency: usize,
    turns: usize,
    /// (label, pid): labels default to the pid.
    pids: Vec<(String, u32)>,
    backends: Vec<String>,
    audit: bool,
    duration: Option<Duration>,
    total: Option<usize>,
    turn_timeout: Duration,
    sessions_out: Option<String>,
    reuse: Vec<String>,
    /// This run's nonce, in every message it sends.
    run: u128,
}

fn args() -> Args {
    let mut args = Args {
        urls: Vec::new(),
        key: String::new(),
        model: "claude-sonnet-4-5".into(),
        concurrency: 1,
        turns: 20,
        pids: Vec::new(),
        backends: Vec::new(),
        audit: false,
        duration: None,
        total: None,
        turn_timeout: Duration::from_secs(120),
        sessions_out: None,
        reuse: Vec::new(),
        run: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--audit" {
            args.audit = true;
            continue;
        }
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--url" => args.urls.push(value),
            "--key" => args.key = value,
            "--model" => args.model = value,
            "--concurrency" => args.concurrency = value.parse().expect("--concurrency N"),
            "--turns" => args.turns = value.parse().expect("--turns N"),
            "--pid" => {
                let (label, pid) = value.split_once('=').unwrap_or(("", &value));
                let pid: u32 = pid.parse().expect("--pid [LABEL=]N");
                args.pids.push((if label.is_empty() { pid.to_string() } else { label.to_owned() }, pid));
            }
            "--backend" => args.backends.push(value),
            "--duration" => args.duration = Some(Duration::from_secs(value.parse().expect("--duration SECS"))),
            "--total" => args.total = Some(value.parse().expect("--total N")),
            "--turn-timeout" => args.turn_timeout = Duration::from_secs(value.parse().expect("--turn-timeout SECS")),
            "--sessions-out" => args.sessions_out = Some(value),
            "--reuse" => {
                let ids = std::fs::read_to_string(&value).unwrap_or_else(|e| panic!("--reuse {value}: {e}"));
                // The first column of `--sessions-out`'s lines (id, tab, turns sent).
                args.reuse = ids.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect();
            }
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!args.urls.is_empty() && !args.key.is_empty(), "--url and --key are required");
    assert!(
        args.reuse.is_empty() || args.reuse.len() >= args.concurrency,
        "--reuse: fewer sessions than --concurrency"
    );
    args.audit |= args.duration.is_some();
    args
}

/// One gateway pair for a session: where it sends and where it listens.
#[derive(Clone)]
struct Route {
    send: String,
    stream: String,
}

async fn post(client: &reqwest::Client, args: &Args, url: &str, path: &str, body: Value) -> Value {
    agentd_tests::bench::post(client, url, &args.key, path, body).await
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
    url: &str,
    id: &str,
) -> Option<futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>> {
    let response = client
        .get(format!("{url}/v1/sessions/{id}/events/stream"))
        .header("x-api-key", &args.key)
        .header("anthropic-beta", "managed-agents-2026-04-01")
        .send()
        .await
        .ok()?;
    response.status().is_success().then(|| response.bytes_stream().boxed())
}

/// Counters every session task shares.
#[derive(Default)]
struct Progress {
    /// Turns sent (a turn is claimed here before it is sent, so `--total` holds).
    sent: AtomicUsize,
    /// Turns whose idle arrived.
    done: AtomicUsize,
}

/// What a session works on: its own, new one or an existing one.
struct Setup<'a> {
    route: &'a Route,
    agent: &'a str,
    environment: &'a str,
    existing: Option<&'a str>,
}

/// One session: sends turns (a fixed number, until the deadline, or until the total is
/// reached) and times each.
async fn session(
    client: &reqwest::Client,
    args: &Args,
    setup: Setup<'_>,
    deadline: Option<Instant>,
    progress: &Progress,
) -> SessionReport {
    let route = setup.route;
    let id = match setup.existing {
        Some(id) => id.to_owned(),
        None => {
            let body = json!({ "agent": setup.agent, "environment_id": setup.environment });
            post(client, args, &route.send, "/v1/sessions", body).await["id"].as_str().unwrap().to_owned()
        }
    };
    let mut report = SessionReport { id: id.clone(), ..SessionReport::default() };
    let mut bytes = open_stream(client, args, &route.stream, &id).await.expect("stream");
    let mut buffer = String::new();
    let mut turn = 0;
    loop {
        if turn >= args.turns || deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            break;
        }
        if args.total.is_some_and(|total| progress.sent.fetch_add(1, Ordering::Relaxed) >= total) {
            break;
        }
        turn += 1;
        let sent = Instant::now();
        // Unique across runs, so the audit can tell a turn answered twice even in a
        // reused session.
        let text = format!("turn {turn} of run {}", args.run);
        let body = json!({ "events": [{ "type": "user.message", "content": [{ "type": "text", "text": text }] }] });
        post(client, args, &route.send, &format!("/v1/sessions/{id}/events"), body).await;
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
                    progress.done.fetch_add(1, Ordering::Relaxed);
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
                    if let Some(reopened) = open_stream(client, args, &route.stream, &id).await {
                        bytes = reopened;
                        buffer.clear();
                    }
                }
            }
        }
    }
    report
}

/// What the audit of committed history found in one session.
#[derive(Default)]
struct Audit {
    /// Event ids committed twice.
    duplicate_events: usize,
    /// User messages without a following idle.
    lost_turns: usize,
    /// Turns answered more than once (the scripted model echoes each turn's unique text).
    duplicate_turns: usize,
}

/// Checks a session's committed history.
async fn audit(client: &reqwest::Client, args: &Args, id: &str) -> Audit {
    let mut events = Vec::new();
    let mut page: Option<String> = None;
    loop {
        let mut request = client
            .get(format!("{}/v1/sessions/{id}/events", args.urls[0]))
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
    let sent = events.iter().filter(|e| e["type"] == "user.message").count();
    let ended = events.iter().filter(|e| e["type"] == "session.status_idle").count();
    let replies: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "agent.message")
        .filter_map(|e| e["content"][0]["text"].as_str())
        .collect();
    let distinct: std::collections::HashSet<&&str> = replies.iter().collect();
    Audit {
        duplicate_events: events.len() - ids.len(),
        lost_turns: sent.saturating_sub(ended),
        duplicate_turns: (replies.len() - distinct.len()) + ended.saturating_sub(sent),
    }
}

/// Prints turns done every 10 s to stderr until the run ends.
fn report_progress(progress: Arc<Progress>, goal: Option<usize>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(10)).await;
            let done = progress.done.load(Ordering::Relaxed);
            let rate = done as f64 / started.elapsed().as_secs_f64();
            let goal = goal.map(|g| format!(" of {g}")).unwrap_or_default();
            eprintln!(
                "turn_bench: {done}{goal} turns after {:.0} s ({rate:.0} turns/s)",
                started.elapsed().as_secs_f64()
            );
        }
    })
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = args();
    let client = reqwest::Client::builder().tcp_nodelay(true).pool_max_idle_per_host(1024).build().unwrap();
    let first = args.urls[0].clone();
    let (agent, environment) = if args.reuse.is_empty() {
        let agent = post(&client, &args, &first, "/v1/agents", json!({ "name": "bench", "model": args.model })).await;
        let environment = post(&client, &args, &first, "/v1/environments", json!({ "name": "bench" })).await;
        (agent["id"].as_str().unwrap().to_owned(), environment["id"].as_str().unwrap().to_owned())
    } else {
        (String::new(), String::new())
    };
    let routes: Vec<Route> = (0..args.urls.len())
        .map(|i| Route { send: args.urls[i].clone(), stream: args.urls[(i + 1) % args.urls.len()].clone() })
        .collect();
    let before: Vec<bench::ProcessStats> =
        args.pids.iter().map(|(_, pid)| bench::process(*pid).unwrap_or_default()).collect();
    let backends_before: Vec<f64> = args.backends.iter().map(|name| bench::backend_cpu_seconds(name)).collect();
    let driver_before = bench::process(std::process::id()).unwrap_or_default().cpu_seconds;
    let machine_before = bench::machine_cpu_seconds();
    let started = Instant::now();
    let args = Arc::new(args);
    let progress = Arc::new(Progress::default());
    let deadline = args.duration.map(|d| Instant::now() + d);
    let long_run = args.duration.is_some() || args.total.is_some();
    let ticker = long_run.then(|| report_progress(progress.clone(), args.total));
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|i| {
            let (client, args, agent, environment) = (client.clone(), args.clone(), agent.clone(), environment.clone());
            let (route, progress) = (routes[i % routes.len()].clone(), progress.clone());
            tokio::spawn(async move {
                let setup = || Setup {
                    route: &route,
                    agent: &agent,
                    environment: &environment,
                    existing: args.reuse.get(i).map(String::as_str),
                };
                if !long_run || !args.reuse.is_empty() {
                    return vec![session(&client, &args, setup(), deadline, &progress).await];
                }
                // Soak and fill: like real traffic, conversations end and new ones
                // start, so each session sends a bounded number of turns.
                let mut reports = Vec::new();
                loop {
                    let more_time = deadline.is_none_or(|deadline| Instant::now() < deadline);
                    let more_turns = args.total.is_none_or(|total| progress.sent.load(Ordering::Relaxed) < total);
                    if !(more_time && more_turns) {
                        break;
                    }
                    reports.push(session(&client, &args, setup(), deadline, &progress).await);
                }
                reports
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
            sessions.push((report.id, report.samples.len() + report.timed_out));
            for (to_idle, to_first) in report.samples {
                idle.push(to_idle);
                first.push(to_first);
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    if let Some(ticker) = ticker {
        ticker.abort();
    }
    idle.sort();
    first.sort();
    let turns = idle.len() as f64;
    let after: Vec<bench::ProcessStats> =
        args.pids.iter().map(|(_, pid)| bench::process(*pid).unwrap_or_default()).collect();
    let backends_after: Vec<f64> = args.backends.iter().map(|name| bench::backend_cpu_seconds(name)).collect();
    let driver_cpu = bench::process(std::process::id()).unwrap_or_default().cpu_seconds - driver_before;
    let machine_after = bench::machine_cpu_seconds();
    let cpu: f64 = before.iter().zip(&after).map(|(b, a)| a.cpu_seconds - b.cpu_seconds).sum();
    if let Some(path) = &args.sessions_out {
        let lines: String = sessions.iter().map(|(id, turns)| format!("{id}\t{turns}\n")).collect();
        std::fs::write(path, lines).unwrap_or_else(|e| panic!("--sessions-out {path}: {e}"));
    }
    // Give turns still in recovery a moment, then audit committed history.
    let mut found = Audit::default();
    if args.audit {
        tokio::time::sleep(Duration::from_secs(2)).await;
        for (id, _) in &sessions {
            let audit = audit(&client, &args, id).await;
            found.duplicate_events += audit.duplicate_events;
            found.lost_turns += audit.lost_turns;
            found.duplicate_turns += audit.duplicate_turns;
        }
    }
    let processes: Vec<Value> = args
        .pids
        .iter()
        .zip(before.iter().zip(&after))
        .map(|((label, pid), (b, a))| {
            json!({
                "label": label,
                "pid": pid,
                "cpu_seconds": a.cpu_seconds - b.cpu_seconds,
                "cpu_ms_per_turn": (a.cpu_seconds - b.cpu_seconds) * 1000.0 / turns,
                "rss_kib": a.rss_kib,
                "peak_rss_kib": a.peak_rss_kib,
            })
        })
        .collect();
    let backends: serde_json::Map<String, Value> = args
        .backends
        .iter()
        .zip(backends_before.iter().zip(&backends_after))
        .map(|(name, (b, a))| {
            (name.clone(), json!({ "cpu_seconds": a - b, "cpu_ms_per_turn": (a - b) * 1000.0 / turns }))
        })
        .collect();
    let (busy, total) = (machine_after.0 - machine_before.0, machine_after.1 - machine_before.1);
    let report = json!({
        "concurrency": args.concurrency,
        "gateways": args.urls.len(),
        "turns": turns,
        "seconds": elapsed,
        "turns_per_second": turns / elapsed,
        "send_to_idle_ms": { "p50": percentile_ms(&idle, 50.0), "p99": percentile_ms(&idle, 99.0) },
        "send_to_first_event_ms": { "p50": percentile_ms(&first, 50.0), "p99": percentile_ms(&first, 99.0) },
        "server_cpu_ms_per_turn": cpu * 1000.0 / turns,
        "timed_out_turns": timed_out,
        "audited_sessions": if args.audit { sessions.len() } else { 0 },
        "lost_turns": found.lost_turns,
        "duplicate_events": found.duplicate_events,
        "duplicate_turns": found.duplicate_turns,
        "peak_rss_kib": args.pids.iter().zip(&after).map(|((_, pid), a)| json!({ "pid": pid, "rss_kib": a.peak_rss_kib })).collect::<Vec<_>>(),
        "processes": processes,
        "backends": backends,
        "driver_cpu_seconds": driver_cpu,
        // All cores together: 100 % is every core busy for the whole run.
        "machine_busy_percent": if total > 0.0 { busy * 100.0 / total } else { 0.0 },
    });
    println!("{report}");
}
