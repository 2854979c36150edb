//! Load driver for `tests/bench/files`: uploads one `--bytes` file through
//! `POST /v1/files` (multipart, streamed from a generator: the driver holds no copy of
//! it), sampling the resident memory of the process named by `--pid` (the gateway, or
//! `agentd dev`) every 10 ms; then marks the file downloadable in the database named by
//! `--database-url` (uploads through `POST /v1/files` are not downloadable — only files
//! written by a session's tools are — so the bench flips the column itself), downloads
//! it from `GET /v1/files/{id}/content` checking every byte, and deletes it. Prints one
//! JSON report.
//!
//! Usage: files_bench --url http://127.0.0.1:8080 --key sk-… --pid N \
//!          --database-url sqlite:///…/agentd.db|postgres://… [--bytes 1073741824]
//!
//! The body is 1 MiB blocks of random bytes, each stamped with its index, so a part
//! stored out of order or twice fails the check.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde_json::{Value, json};

const BLOCK: usize = 1024 * 1024;
const BOUNDARY: &str = "agentd-files-bench-boundary-7d1f0c";

struct Args {
    url: String,
    key: String,
    pid: u32,
    database_url: String,
    bytes: u64,
}

fn args() -> Args {
    let mut args = Args { url: String::new(), key: String::new(), pid: 0, database_url: String::new(), bytes: 1 << 30 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--url" => args.url = value,
            "--key" => args.key = value,
            "--pid" => args.pid = value.parse().expect("--pid N"),
            "--database-url" => args.database_url = value,
            "--bytes" => args.bytes = value.parse().expect("--bytes N"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!args.url.is_empty() && !args.key.is_empty() && args.pid != 0, "--url, --key and --pid are required");
    assert!(!args.database_url.is_empty(), "--database-url is required");
    args
}

/// The body's bytes: block `i` is `seed` with its first 8 bytes replaced by `i`.
struct Body {
    seed: Bytes,
    total: u64,
}

impl Body {
    fn new(total: u64) -> Self {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut seed = Vec::with_capacity(BLOCK);
        while seed.len() < BLOCK {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            seed.extend_from_slice(&state.to_le_bytes());
        }
        Self { seed: Bytes::from(seed), total }
    }

    fn block(&self, index: u64) -> Bytes {
        let start = index * BLOCK as u64;
        let len = (self.total - start).min(BLOCK as u64) as usize;
        let mut block = BytesMut::from(&self.seed[..len]);
        let stamp = index.to_le_bytes();
        let n = stamp.len().min(len);
        block[..n].copy_from_slice(&stamp[..n]);
        block.freeze()
    }

    fn blocks(&self) -> u64 {
        self.total.div_ceil(BLOCK as u64)
    }
}

/// The resident memory of `pid` sampled every 10 ms until `stop`: (first, peak) KiB.
fn sample_rss(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(u64, u64)> {
    std::thread::spawn(move || {
        let first = agentd_tests::bench::process(pid).map(|p| p.rss_kib).unwrap_or(0);
        let mut peak = first;
        while !stop.load(Ordering::Relaxed) {
            if let Some(stats) = agentd_tests::bench::process(pid) {
                peak = peak.max(stats.rss_kib);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        (first, peak)
    })
}

fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64()
}

#[tokio::main]
async fn main() {
    let args = args();
    let client = agentd_tests::http();
    let body = Arc::new(Body::new(args.bytes));
    let before = agentd_tests::bench::process(args.pid).expect("the --pid process is not running");

    // Upload: the multipart envelope around the generated body, streamed.
    let head = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"bench.bin\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    );
    let tail = format!("\r\n--{BOUNDARY}--\r\n");
    let blocks = {
        let body = body.clone();
        futures::stream::iter(0..body.blocks()).map(move |i| body.block(i))
    };
    let stream = futures::stream::once(async move { Bytes::from(head) })
        .chain(blocks)
        .chain(futures::stream::once(async move { Bytes::from(tail) }))
        .map(Ok::<Bytes, std::io::Error>);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_rss(args.pid, stop.clone());
    let started = Instant::now();
    let response = client
        .post(format!("{}/v1/files", args.url))
        .header("x-api-key", &args.key)
        .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .expect("upload request");
    let status = response.status();
    let file: Value = response.json().await.expect("upload answer");
    let upload_elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (rss_first, rss_peak) = sampler.join().unwrap();
    assert!(status.is_success(), "upload: {status} {file}");
    let id = file["id"].as_str().expect("file id").to_owned();
    assert_eq!(file["size_bytes"].as_u64(), Some(args.bytes), "{file}");
    let after = agentd_tests::bench::process(args.pid).expect("the --pid process went away");

    // The download leg needs a downloadable file (see the module doc).
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&args.database_url).await.expect("database");
    let marked = sqlx::query("UPDATE files SET downloadable = 1 WHERE id = $1").bind(&id).execute(&pool).await;
    assert_eq!(marked.expect("marking the file downloadable").rows_affected(), 1);
    pool.close().await;

    let started = Instant::now();
    let response = client
        .get(format!("{}/v1/files/{id}/content", args.url))
        .header("x-api-key", &args.key)
        .send()
        .await
        .expect("download request");
    assert!(response.status().is_success(), "download: {}", response.status());
    let mut downloaded = 0u64;
    let mut expected = body.block(0);
    let mut index = 0u64;
    let mut at = 0usize;
    let mut stream = response.bytes_stream();
    while let Some(piece) = stream.next().await {
        let mut piece = piece.expect("download body");
        downloaded += piece.len() as u64;
        while !piece.is_empty() {
            if at == expected.len() {
                index += 1;
                expected = body.block(index);
                at = 0;
            }
            let n = piece.len().min(expected.len() - at);
            assert!(piece[..n] == expected[at..at + n], "byte mismatch in block {index}");
            at += n;
            piece = piece.split_off(n);
        }
    }
    let download_elapsed = started.elapsed();
    assert_eq!(downloaded, args.bytes, "downloaded {downloaded} of {} bytes", args.bytes);

    let deleted = client
        .delete(format!("{}/v1/files/{id}", args.url))
        .header("x-api-key", &args.key)
        .send()
        .await
        .expect("delete request");
    assert!(deleted.status().is_success(), "delete: {}", deleted.status());

    let report = json!({
        "bytes": args.bytes,
        "upload_seconds": upload_elapsed.as_secs_f64(),
        "upload_mb_per_s": mb_per_s(args.bytes, upload_elapsed),
        "download_seconds": download_elapsed.as_secs_f64(),
        "download_mb_per_s": mb_per_s(args.bytes, download_elapsed),
        "download_byte_exact": true,
        "rss_kib_before_upload": rss_first,
        "rss_kib_peak_during_upload": rss_peak,
        "rss_growth_mib_during_upload": (rss_peak.saturating_sub(rss_first)) as f64 / 1024.0,
        "vm_hwm_kib_before": before.peak_rss_kib,
        "vm_hwm_kib_after_upload": after.peak_rss_kib,
        "server_cpu_seconds_upload_and_download": agentd_tests::bench::process(args.pid)
            .map(|p| p.cpu_seconds - before.cpu_seconds)
            .unwrap_or(0.0),
    });
    println!("{report}");
}
