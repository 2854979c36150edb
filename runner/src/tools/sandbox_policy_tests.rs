//! What a sandbox execution policy or an environment's networking asks of the sandbox,
//! end to end on this host: the session cgroup (`sandbox::cgroup`) joined before
//! anything runs, its caps holding and going with the sandbox; allow-lists only where an
//! egress proxy can hold them.

use super::tests::{Root, assert_ok, bash, config};
use super::*;

/// A session's cgroup caps the CPU rate of everything it runs (a root runner on a host
/// whose cgroups it may use; elsewhere there is nothing to test here, and policies that
/// ask for a rate fail closed: `policy::tests`).
#[tokio::test]
async fn a_session_cgroup_caps_the_cpu_rate_and_goes_with_the_sandbox() {
    let support = super::cgroup::Support::detect();
    if !nix::unistd::geteuid().is_root() || !support.caps_cpu() {
        eprintln!("skipped: this runner may not make cgroups");
        return;
    }
    let root = Root::new();
    let session = format!("cg_{}", std::process::id());
    let cgroup_limits = super::cgroup::CgroupLimits { cpu_millis: Some(200), ..Default::default() };
    let cfg = SandboxConfig { cgroup_limits, ..config(root.path(), Limits::default()) };
    let mut sandbox = Sandbox::open(&cfg, &session).unwrap();
    let mine = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let out =
        bash(&mut sandbox, "cat /proc/self/cgroup; end=$((SECONDS+2)); while [ $SECONDS -lt $end ]; do :; done; times")
            .await;
    let body = assert_ok(&out);
    assert!(
        body.contains(&format!("agentd-{session}")),
        "the shell is in the session's cgroup: {body}\nrunner: {mine}"
    );
    // `times`: the shell's own user and system time first, e.g. "0m0.301s 0m0.002s".
    let shell = body.lines().rev().nth(1).unwrap_or_default();
    let seconds: f64 = shell
        .split_whitespace()
        .map(|t| {
            let (m, s) = t.trim_end_matches('s').split_once('m').unwrap_or(("0", "0"));
            m.parse::<f64>().unwrap_or(0.0) * 60.0 + s.parse::<f64>().unwrap_or(0.0)
        })
        .sum();
    assert!(seconds < 0.9, "200 millicores over 1–2 s of busy loop, got {seconds} s of CPU: {body}");
    sandbox.close().await;
    drop(sandbox);
    let left = || -> Vec<_> {
        walkdir::WalkDir::new("/sys/fs/cgroup")
            .max_depth(6)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy() == format!("agentd-{session}"))
            .map(|e| e.path().to_path_buf())
            .collect()
    };
    // Removed on a thread of its own once its processes are gone.
    for _ in 0..100 {
        if left().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    assert!(left().is_empty(), "the session's cgroup is removed with its sandbox: {:?}", left());
}

/// An allow-list is enforced only by the egress proxy of the `namespace` level, which
/// needs the forwarder binary (`agentd`); without it, or at the `workdir` level, the
/// sandbox fails closed (the proxy itself: e2e `test_sandbox_egress.py`).
#[test]
fn an_allow_list_needs_the_namespace_level_and_its_forwarder() {
    let root = Root::new();
    for isolation in [Isolation::Workdir, Isolation::Namespace] {
        for networking in [
            Networking::Limited { allowed_hosts: vec!["api.example.com".into()], allow_package_managers: false },
            Networking::Limited { allowed_hosts: vec![], allow_package_managers: true },
        ] {
            let cfg = SandboxConfig { isolation, networking, ..config(root.path(), Limits::default()) };
            match Sandbox::open(&cfg, "s1") {
                Err(SandboxError::Unavailable(message)) => assert!(message.contains("egress proxy"), "{message}"),
                other => panic!("expected Unavailable, got {other:?}"),
            }
        }
    }
    assert!(!root.path().join("s1").exists());
}
