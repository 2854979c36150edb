//! Load driver for `tests/bench/turn/run.sh read`: C keep-alive HTTP/1.1 connections,
//! each sending `GET /v1/agents/{id}` back to back for a fixed time, like `wrk`.
//!
//! Usage: read_bench --url http://127.0.0.1:8080 --key sk-… [--concurrency 64]
//!          [--seconds 20] [--warmup 3] [--pid N]… [--backend-pid N]…
//!
//! The client is a minimal HTTP/1.1 writer and reader over `TcpStream` (one prebuilt
//! request, a `Content-Length` response), so the driver spends as little as possible of
//! the CPU it shares with the server. Reports requests/s, latency p50/p99, non-200
//! answers, CPU per request of the `--pid` processes (agentd), of the `--backend-pid`
//! processes (Redis, PostgreSQL) and of the driver itself.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    url: String,
    key: String,
    concurrency: usize,
    seconds: u64,
    warmup: u64,
    pids: Vec<u32>,
    backend_pids: Vec<u32>,
}

fn args() -> Args {
    let mut args = Args {
        url: String::new(),
        key: String::new(),
        concurrency: 64,
        seconds: 20,
        warmup: 3,
        pids: Vec::new(),
        backend_pids: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--url" => args.url = value,
            "--key" => args.key = value,
            "--concurrency" => args.concurrency = value.parse().expect("--concurrency N"),
            "--seconds" => args.seconds = value.parse().expect("--seconds N"),
            "--warmup" => args.warmup = value.parse().expect("--warmup N"),
            "--pid" => args.pids.push(value.parse().expect("--pid N")),
            "--backend-pid" => args.backend_pids.push(value.parse().expect("--backend-pid N")),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!args.url.is_empty() && !args.key.is_empty(), "--url and --key are required");
    args
}

/// User + system CPU seconds of a process (`self` for the driver).
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}

fn total_cpu(pids: &[u32]) -> f64 {
    pids.iter().map(|pid| cpu_seconds(&pid.to_string())).sum()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Sends one request and reads its answer: (status, body).
async fn exchange(stream: &mut TcpStream, request: &[u8], buffer: &mut Vec<u8>) -> std::io::Result<(u16, Vec<u8>)> {
    stream.write_all(request).await?;
    buffer.clear();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
        }
        buffer.extend_from_slice(&chunk[..n]);
        let Some(end) = find(buffer, b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
        let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if buffer.len() >= end + 4 + length {
            return Ok((status, buffer[end + 4..end + 4 + length].to_vec()));
        }
    }
}

/// One connection until `stop`: latencies (µs) of requests started after `measure_from`,
/// and the non-200 answers among them.
async fn connection(address: String, request: Vec<u8>, measure_from: Instant, stop: Instant) -> (Vec<u32>, usize) {
    let mut stream = TcpStream::connect(&address).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let mut buffer = Vec::with_capacity(16 * 1024);
    let mut latencies = Vec::new();
    let mut failures = 0;
    loop {
        let started = Instant::now();
        if started >= stop {
            break;
        }
        let (status, _) = exchange(&mut stream, &request, &mut buffer).await.expect("exchange");
        if started >= measure_from {
            latencies.push(started.elapsed().as_micros() as u32);
            if status != 200 {
                failures += 1;
            }
        }
    }
    (latencies, failures)
}

#[tokio::main]
async fn main() {
    let args = args();
    let address = args.url.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let setup = |method: &str, path: &str, body: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nhost: {address}\r\nx-api-key: {}\r\nanthropic-beta: managed-agents-2026-04-01\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            args.key,
            body.len()
        )
        .into_bytes()
    };
    let mut stream = TcpStream::connect(&address).await.expect("connect");
    let mut buffer = Vec::new();
    let (status, body) = exchange(
        &mut stream,
        &setup("POST", "/v1/agents", r#"{"name":"read-bench","model":"claude-sonnet-4-5"}"#),
        &mut buffer,
    )
    .await
    .expect("create agent");
    let agent: Value = serde_json::from_slice(&body).expect("agent json");
    assert_eq!(status, 200, "create agent: {agent}");
    let id = agent["id"].as_str().expect("agent id").to_owned();
    let request = format!(
        "GET /v1/agents/{id} HTTP/1.1\r\nhost: {address}\r\nx-api-key: {}\r\nanthropic-beta: managed-agents-2026-04-01\r\n\r\n",
        args.key
    )
    .into_bytes();
    let (status, body) = exchange(&mut stream, &request, &mut buffer).await.expect("read agent");
    assert_eq!(status, 200, "read agent: {}", String::from_utf8_lossy(&body));

    let start = Instant::now();
    let measure_from = start + Duration::from_secs(args.warmup);
    let stop = measure_from + Duration::from_secs(args.seconds);
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|_| tokio::spawn(connection(address.clone(), request.clone(), measure_from, stop)))
        .collect();
    tokio::time::sleep_until(measure_from.into()).await;
    let (server_0, backend_0, driver_0) = (total_cpu(&args.pids), total_cpu(&args.backend_pids), cpu_seconds("self"));
    tokio::time::sleep_until(stop.into()).await;
    let (server_1, backend_1, driver_1) = (total_cpu(&args.pids), total_cpu(&args.backend_pids), cpu_seconds("self"));
    let mut latencies = Vec::new();
    let mut failures = 0;
    for task in tasks {
        let (mine, failed) = task.await.expect("connection task");
        latencies.extend(mine);
        failures += failed;
    }
    latencies.sort_unstable();
    let requests = latencies.len() as f64;
    let seconds = args.seconds as f64;
    let at = |p: f64| {
        latencies.get(((p / 100.0) * (latencies.len().max(1) - 1) as f64).round() as usize).copied().unwrap_or(0) as f64
            / 1000.0
    };
    let per_request_us = |cpu: f64| if requests > 0.0 { cpu * 1e6 / requests } else { 0.0 };
    let report = json!({
        "concurrency": args.concurrency,
        "seconds": seconds,
        "requests": requests,
        "requests_per_second": requests / seconds,
        "latency_ms": { "p50": at(50.0), "p99": at(99.0), "max": at(100.0) },
        "non_200": failures,
        "server_cpu_us_per_request": per_request_us(server_1 - server_0),
        "server_cores": (server_1 - server_0) / seconds,
        "backend_cpu_us_per_request": per_request_us(backend_1 - backend_0),
        "backend_cores": (backend_1 - backend_0) / seconds,
        "driver_cpu_us_per_request": per_request_us(driver_1 - driver_0),
        "driver_cores": (driver_1 - driver_0) / seconds,
    });
    println!("{report}");
}
