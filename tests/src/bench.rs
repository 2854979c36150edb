//! Measurements shared by the benchmark drivers in `src/bin/`: CPU time and memory of
//! processes read from `/proc`, the machine's busy time, and percentiles.
//!
//! CPU is counted in the kernel's clock ticks (`USER_HZ`, 100 on Linux), so a figure is
//! good to 10 ms per process; the drivers measure runs of seconds.

use std::collections::HashMap;
use std::time::Duration;

const TICKS_PER_SECOND: f64 = 100.0;

/// What `/proc/<pid>/stat` and `/proc/<pid>/status` say about one process.
#[derive(Clone, Debug, Default)]
pub struct ProcessStats {
    /// The command name (`comm`), e.g. `postgres`.
    pub name: String,
    /// The parent's pid.
    pub parent: u32,
    /// User + system CPU seconds of the process (all its threads).
    pub cpu_seconds: f64,
    /// User + system CPU seconds of its children that exited and were waited for.
    pub children_cpu_seconds: f64,
    /// Resident memory now.
    pub rss_kib: u64,
    /// Peak resident memory (`VmHWM`).
    pub peak_rss_kib: u64,
}

/// The process's figures, or `None` once it has gone.
pub fn process(pid: u32) -> Option<ProcessStats> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `comm` is in parentheses and may itself hold spaces or parentheses.
    let (head, tail) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_owned();
    let fields: Vec<&str> = tail.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Some(ProcessStats {
        name,
        parent: fields.get(1).and_then(|v| v.parse().ok()).unwrap_or(0),
        cpu_seconds: (field(11) + field(12)) / TICKS_PER_SECOND,
        children_cpu_seconds: (field(13) + field(14)) / TICKS_PER_SECOND,
        rss_kib: kib("VmRSS:"),
        peak_rss_kib: kib("VmHWM:"),
    })
}

fn all_processes() -> HashMap<u32, ProcessStats> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return HashMap::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, process(pid)?)))
        .collect()
}

/// CPU seconds of a process and all its descendants, including descendants that
/// already exited (their time is in their waiting parent's children figures).
pub fn tree_cpu_seconds(root: u32) -> f64 {
    let all = all_processes();
    let mut total = 0.0;
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if let Some(stats) = all.get(&pid) {
            total += stats.cpu_seconds + stats.children_cpu_seconds;
            stack.extend(all.iter().filter(|(_, s)| s.parent == pid).map(|(child, _)| *child));
        }
    }
    total
}

/// CPU seconds of every process named `name` (`postgres`, `nats-server`,
/// `redis-server`): the backend as a whole, however many processes it runs. A process
/// whose parent has another name is a root and adds its exited children's time too, so
/// PostgreSQL backends that ended during a run still count (the postmaster waits for
/// them). These are machine-wide services: whatever else uses them is counted as well.
pub fn backend_cpu_seconds(name: &str) -> f64 {
    let all = all_processes();
    all.values()
        .filter(|s| s.name == name)
        .map(|s| {
            let root = all.get(&s.parent).is_none_or(|parent| parent.name != name);
            s.cpu_seconds + if root { s.children_cpu_seconds } else { 0.0 }
        })
        .sum()
}

/// (busy, total) CPU seconds of the whole machine since boot, all cores (`/proc/stat`);
/// idle and I/O wait are not busy.
pub fn machine_cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: f64 = ticks.iter().sum();
    let idle = ticks.get(3).copied().unwrap_or(0.0) + ticks.get(4).copied().unwrap_or(0.0);
    ((total - idle) / TICKS_PER_SECOND, total / TICKS_PER_SECOND)
}

/// The p-th percentile (nearest rank) of sorted samples, in milliseconds.
pub fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank].as_secs_f64() * 1000.0
}

/// The beta selector the drivers send with every managed-API request.
pub const BETA: &str = "managed-agents-2026-04-01";

/// POSTs `body` to the managed API at `base` + `path` with the key; panics unless 2xx.
pub async fn post(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    path: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    let response = client
        .post(format!("{base}{path}"))
        .header("x-api-key", key)
        .header("anthropic-beta", BETA)
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = response.status();
    let body: serde_json::Value = response.json().await.expect("json body");
    assert!(status.is_success(), "{path}: {status} {body}");
    body
}
