//! Load driver for `tests/bench/memory`: one memory store filled to the 2,000-memory cap
//! (`--memories`, 1 KiB each, spread over 40 directories), then sequential requests, one
//! at a time so each latency is the server's answer to a lone client:
//!
//! - `list basic`: `memories.list(limit=100)` pages, walking the whole store;
//! - `list full`: `memories.list(view=full, limit=20)` pages, as the SDK's worker syncs;
//! - `list depth=1`: the top-level listing, 40 `memory_prefix` roll-ups;
//! - `retrieve`: `memories.retrieve` (`view=full`) of random memories;
//! - `update`: `memories.update` with a `content_sha256` precondition — what one memory
//!   written back after a tool call costs the gateway.
//!
//! With `--tool-turns N` (a stack that runs the hands of `cloud` environments, such as
//! `agentd dev`, and a `--model` the offline `scripted` provider answers), the write-back
//! cost per tool call: N turns of one `bash` call each (send → idle, on the session's
//! live stream) in a session without a memory store, in one with the full store mounted
//! (the runner's scan after each call finds nothing changed), and in one whose call
//! appends to a memory (the scan, a hash and one conditional update).
//!
//! Prints one JSON report with p50/p99 per operation.
//!
//! Usage: memory_bench --url http://127.0.0.1:8080 --key sk-… [--memories 2000] [--samples 300]
//!          [--tool-turns 0] [--model bench-zero-latency]

use std::time::{Duration, Instant};

use agentd_tests::bench::percentile_ms;
use serde_json::{Value, json};
use sha2::Digest;

const BETA: &str = "agent-memory-2026-07-22";

struct Args {
    url: String,
    key: String,
    memories: usize,
    samples: usize,
    tool_turns: usize,
    model: String,
}

fn args() -> Args {
    let mut args = Args {
        url: String::new(),
        key: String::new(),
        memories: 2_000,
        samples: 300,
        tool_turns: 0,
        model: "bench-zero-latency".to_owned(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--url" => args.url = value,
            "--key" => args.key = value,
            "--memories" => args.memories = value.parse().expect("--memories N"),
            "--samples" => args.samples = value.parse().expect("--samples N"),
            "--tool-turns" => args.tool_turns = value.parse().expect("--tool-turns N"),
            "--model" => args.model = value,
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!args.url.is_empty() && !args.key.is_empty(), "--url and --key are required");
    assert!(args.samples <= args.memories, "each update sample writes another memory once: --samples <= --memories");
    args
}

struct Api {
    client: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    async fn send(&self, request: reqwest::RequestBuilder) -> Value {
        let response = request.header("x-api-key", &self.key).header("anthropic-beta", BETA).send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.expect("json body");
        assert!(status.is_success(), "{status} {body}");
        body
    }

    async fn get(&self, path: &str) -> Value {
        self.send(self.client.get(format!("{}{path}", self.base))).await
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.send(self.client.post(format!("{}{path}", self.base)).json(&body)).await
    }

    /// A session's live stream.
    async fn stream(&self, session: &str) -> futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>> {
        use futures::StreamExt;
        let response = self
            .client
            .get(format!("{}/v1/sessions/{session}/events/stream", self.base))
            .header("x-api-key", &self.key)
            .header("anthropic-beta", MANAGED_BETA)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "stream: {}", response.status());
        response.bytes_stream().boxed()
    }
}

const MANAGED_BETA: &str = "managed-agents-2026-04-01";

/// Sends `turns` messages asking for one `bash` call each and times send → idle.
async fn tool_turns(api: &Api, session: &str, turns: usize, command: impl Fn(usize) -> String) -> Vec<Duration> {
    use futures::StreamExt;
    let mut stream = api.stream(session).await;
    let mut buffer = String::new();
    let mut times = Vec::with_capacity(turns);
    for turn in 0..turns {
        let text = format!("use bash: {}", command(turn));
        let body = json!({ "events": [{ "type": "user.message", "content": [{ "type": "text", "text": text }] }] });
        let sent = Instant::now();
        let request = api.client.post(format!("{}/v1/sessions/{session}/events", api.base)).json(&body);
        let response = request.header("x-api-key", &api.key).header("anthropic-beta", MANAGED_BETA).send().await;
        assert!(response.unwrap().status().is_success(), "events.send");
        'turn: loop {
            while let Some(end) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..end + 2).collect();
                assert!(!frame.starts_with("event: session.error"), "the turn failed: {frame}");
                if frame.starts_with("event: session.status_idle") {
                    times.push(sent.elapsed());
                    break 'turn;
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), stream.next()).await;
            buffer.push_str(&String::from_utf8_lossy(&chunk.expect("idle within 60 s").expect("open").unwrap()));
        }
    }
    times.sort();
    times
}

/// Times `samples` runs of `op`, sorted.
async fn timed<F, Fut>(samples: usize, mut op: F) -> Vec<Duration>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples {
        let start = Instant::now();
        op(i).await;
        times.push(start.elapsed());
    }
    times.sort();
    times
}

fn summary(times: &[Duration]) -> Value {
    json!({ "samples": times.len(), "p50_ms": percentile_ms(times, 50.0), "p99_ms": percentile_ms(times, 99.0) })
}

#[tokio::main]
async fn main() {
    let args = args();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = Api { client: reqwest::Client::new(), base: args.url.trim_end_matches('/').to_owned(), key: args.key };
    let store = api.post("/v1/memory_stores", json!({ "name": "bench" })).await;
    let store_id = store["id"].as_str().unwrap().to_owned();
    let memories = format!("/v1/memory_stores/{store_id}/memories");

    let filler = "x".repeat(1024);
    let fill_start = Instant::now();
    let mut ids = Vec::with_capacity(args.memories);
    for chunk in (0..args.memories).collect::<Vec<_>>().chunks(32) {
        let writes = chunk.iter().map(|n| {
            let body = json!({ "path": format!("/dir{:02}/note{n:05}.md", n % 40), "content": filler });
            api.post(&memories, body)
        });
        for created in futures::future::join_all(writes).await {
            ids.push(created["id"].as_str().unwrap().to_owned());
        }
    }
    let fill = fill_start.elapsed();

    // Walk the whole store page by page, as many times as it takes to reach `samples` pages.
    let walk = |limit: usize, view: &'static str| {
        let (api, memories) = (&api, memories.clone());
        async move {
            let mut times = Vec::new();
            let mut page: Option<String> = None;
            let mut seen = 0;
            loop {
                let mut path = format!("{memories}?limit={limit}&view={view}");
                if let Some(cursor) = &page {
                    path.push_str(&format!("&page={cursor}"));
                }
                let start = Instant::now();
                let body = api.get(&path).await;
                times.push(start.elapsed());
                seen += body["data"].as_array().unwrap().len();
                page = body["next_page"].as_str().map(str::to_owned);
                if page.is_none() {
                    break;
                }
            }
            (times, seen)
        }
    };
    let mut list_basic = Vec::new();
    let mut list_full = Vec::new();
    while list_basic.len() < args.samples {
        let (times, seen) = walk(100, "basic").await;
        assert_eq!(seen, args.memories, "a walk of the basic listing sees every memory once");
        list_basic.extend(times);
    }
    while list_full.len() < args.samples {
        let (times, seen) = walk(20, "full").await;
        assert_eq!(seen, args.memories, "a walk of the full listing sees every memory once");
        list_full.extend(times);
    }
    list_basic.sort();
    list_full.sort();
    let top = timed(args.samples, |_| {
        let (api, memories) = (&api, &memories);
        async move {
            let body = api.get(&format!("{memories}?depth=1&limit=100")).await;
            assert_eq!(body["data"].as_array().unwrap().len(), 40.min(args.memories));
        }
    })
    .await;
    let retrieve = timed(args.samples, |i| {
        let path = format!("{memories}/{}", ids[(i * 7919) % ids.len()]);
        let api = &api;
        async move {
            let body = api.get(&path).await;
            assert_eq!(body["content"].as_str().map(str::len), Some(1024));
        }
    })
    .await;
    let update = timed(args.samples, |i| {
        let path = format!("{memories}/{}", ids[i % ids.len()]);
        let api = &api;
        let (old, new) = (filler.clone(), format!("{filler}{i}"));
        async move {
            let precondition = hex::encode(sha2::Sha256::digest(old.as_bytes()));
            let body =
                json!({ "content": new, "precondition": { "type": "content_sha256", "content_sha256": precondition } });
            api.post(&path, body).await;
        }
    })
    .await;

    let mut tools = Value::Null;
    if args.tool_turns > 0 {
        let post = |path: &'static str, body: Value| {
            let api = &api;
            async move {
                let request = api.client.post(format!("{}{path}", api.base)).json(&body);
                let response = request.header("x-api-key", &api.key).header("anthropic-beta", MANAGED_BETA).send();
                let response = response.await.unwrap();
                let status = response.status();
                let body: Value = response.json().await.unwrap();
                assert!(status.is_success(), "{path}: {status} {body}");
                body
            }
        };
        let agent = post(
            "/v1/agents",
            json!({ "name": "bench", "model": args.model, "tools": [{ "type": "agent_toolset_20260401" }] }),
        )
        .await;
        let environment = post("/v1/environments", json!({ "name": "bench", "config": { "type": "cloud" } })).await;
        let session = |resources: Value| {
            let body = json!({ "agent": agent["id"], "environment_id": environment["id"], "resources": resources });
            post("/v1/sessions", body)
        };
        let bare = session(json!([])).await;
        let mounted = session(json!([{ "type": "memory_store", "memory_store_id": store_id }])).await;
        let mount = mounted["resources"][0]["mount_path"].as_str().unwrap().to_owned();
        let without = tool_turns(&api, bare["id"].as_str().unwrap(), args.tool_turns, |_| "true".to_owned()).await;
        let unchanged = tool_turns(&api, mounted["id"].as_str().unwrap(), args.tool_turns, |_| "true".to_owned()).await;
        let target = format!("{mount}/dir00/note00000.md");
        let written =
            tool_turns(&api, mounted["id"].as_str().unwrap(), args.tool_turns, |i| format!("echo {i} >> {target}"))
                .await;
        let last = api.get(&format!("{memories}/{}", ids[0])).await;
        let expected_tail = format!("{}\n", args.tool_turns - 1);
        assert!(last["content"].as_str().unwrap().ends_with(&expected_tail), "every append was written back");
        tools = json!({
            "turns": args.tool_turns,
            "bash_without_store": summary(&without),
            "bash_with_store_unchanged": summary(&unchanged),
            "bash_appending_to_a_memory": summary(&written),
        });
    }

    let report = json!({
        "memories": args.memories,
        "fill_seconds": fill.as_secs_f64(),
        "list_basic_limit_100": summary(&list_basic),
        "list_full_limit_20": summary(&list_full),
        "list_depth_1": summary(&top),
        "retrieve_full": summary(&retrieve),
        "update_with_precondition": summary(&update),
        "tool_calls": tools,
    });
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}
