//! What starting a session's sandbox costs, per isolation level: `Sandbox::open` (workdir,
//! uid, tmpfs), the first `bash` call (starting the wrapped shell and running `true`), a
//! warm call, and `discard` (kill, unmount, remove). Run by `tests/bench/sandbox/run.sh`;
//! figures go to docs/benchmarks.md. Not a test: it asserts nothing about time.

use std::time::{Duration, Instant};

use agentd_runner::sandbox::{Isolation, Limits, Networking, Sandbox, SandboxConfig, SecretEnv, UidRange};
use serde_json::json;

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(50);
    println!("rounds per level: {rounds}; runner is root: {}", agentd_runner::sandbox::runner_is_root());
    println!(
        "| level | open p50 / p99 (ms) | first bash call p50 / p99 (ms) | warm call p50 (ms) | discard p50 (ms) |"
    );
    println!("|---|---|---|---|---|");
    // For scale: what starting a bare bash costs on this machine.
    let mut bare = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let status = std::process::Command::new("bash").args(["--noprofile", "--norc", "-c", "true"]).status();
        bare.push(started.elapsed());
        assert!(status.is_ok_and(|s| s.success()));
    }
    println!(
        "| (bare `bash -c true`, for scale) | — | {:.1} / {:.1} | — | — |",
        percentile(&mut bare, 0.5),
        percentile(&mut bare, 0.99)
    );
    for isolation in [Isolation::Workdir, Isolation::Namespace] {
        let root = tempfile::tempdir().expect("a temporary sandbox root");
        let config = SandboxConfig {
            root: root.path().to_path_buf(),
            isolation,
            limits: Limits::default(),
            networking: Networking::Unrestricted,
            uids: UidRange::default(),
            environment: SecretEnv::default(),
            mounts: Vec::new(),
            forwarder: None,
            cgroup_limits: Default::default(),
        };
        let (mut open, mut first, mut warm, mut discard) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let session = format!("sesn_bench{round}");
            let started = Instant::now();
            let mut sandbox = Sandbox::open(&config, &session).expect("the sandbox opens");
            open.push(started.elapsed());
            let started = Instant::now();
            let out = sandbox.call("bash", &json!({ "command": "true" })).await;
            first.push(started.elapsed());
            assert!(!out.is_error, "{out:?}");
            let started = Instant::now();
            sandbox.call("bash", &json!({ "command": "true" })).await;
            warm.push(started.elapsed());
            let started = Instant::now();
            sandbox.discard().await.expect("the workdir is removed");
            discard.push(started.elapsed());
        }
        println!(
            "| {} | {:.1} / {:.1} | {:.1} / {:.1} | {:.2} | {:.1} |",
            isolation.as_str(),
            percentile(&mut open, 0.5),
            percentile(&mut open, 0.99),
            percentile(&mut first, 0.5),
            percentile(&mut first, 0.99),
            percentile(&mut warm, 0.5),
            percentile(&mut discard, 0.5),
        );
    }
}
