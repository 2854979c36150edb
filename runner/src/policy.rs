//! The sandbox execution policy a session pinned (docs/api/sandbox-policies.md), applied
//! to the runner's own sandbox settings: the result meets or exceeds the policy, or the
//! policy is refused with the reason and the session's tools do not run.
//!
//! - **Isolation**: `workdir` < `namespace` < `container`. A runner provides its configured
//!   level (`AGENTD_SANDBOX_ISOLATION`); it meets a policy asking for that level or a
//!   weaker one. `container` is not a level this runner provides.
//! - **Limits** take the lower of the policy's and the runner's own. Where the host lets
//!   the runner use cgroups (`crate::sandbox::cgroup`, v2 or v1), `memory_bytes`, `pids`
//!   and `cpu_millis` are also the session's totals there (memory of all its processes,
//!   processes at once, CPU rate). Otherwise rlimits: `memory_bytes` is the address space
//!   of each process (`RLIMIT_AS`, always set too); `pids` the processes of the session's
//!   uid (`RLIMIT_NPROC`), per session only when the runner is root (each session runs as
//!   its own uid); and `cpu_millis`, a rate no rlimit can cap, is refused. `disk_bytes` is
//!   the size of the workdir's tmpfs, which only a root runner mounts. Whatever cannot be
//!   enforced here fails closed; nothing is silently weakened.

use serde_json::Value;

use crate::sandbox::SandboxConfig;
use crate::sandbox::cgroup::Support;

/// The isolation levels a policy may ask for, weakest first.
const LEVELS: [&str; 3] = ["workdir", "namespace", "container"];

/// What this host can enforce beyond the configured level.
#[derive(Debug, Clone, Copy)]
pub struct Host {
    /// The runner runs as root: a uid per session, tmpfs workdirs.
    pub root: bool,
    /// The cgroup controllers the runner may use.
    pub cgroups: &'static Support,
}

impl Host {
    /// This process's host; `AGENTD_SANDBOX_CGROUPS=off` leaves cgroups unused.
    pub fn current() -> Self {
        let off = std::env::var("AGENTD_SANDBOX_CGROUPS").is_ok_and(|v| v.eq_ignore_ascii_case("off"));
        Host { root: crate::sandbox::runner_is_root(), cgroups: if off { &Support::NONE } else { Support::detect() } }
    }
}

/// Applies the session's pinned policy (`Null`: none; the runner's settings apply) to the
/// runner's sandbox settings. `Err` says why the policy cannot be met.
pub fn apply(pinned: &Value, base: &SandboxConfig, host: Host) -> Result<SandboxConfig, String> {
    if pinned.is_null() {
        return Ok(base.clone());
    }
    let name = format!(
        "sandbox execution policy {} version {}",
        pinned["policy_id"].as_str().unwrap_or("?"),
        pinned["version"].as_i64().unwrap_or(0)
    );
    let config = &pinned["config"];
    let asked = config["isolation"].as_str().unwrap_or("namespace");
    let rank = |level: &str| LEVELS.iter().position(|l| *l == level);
    let provided = base.isolation.as_str();
    match (rank(asked), rank(provided)) {
        (Some(asked_rank), Some(provided_rank)) if asked_rank <= provided_rank => {}
        (Some(_), _) => {
            return Err(format!(
                "{name} asks for isolation `{asked}`, and this runner provides `{provided}`{}",
                if asked == "container" { " (container isolation is not available on agentd's runners)" } else { "" }
            ));
        }
        (None, _) => return Err(format!("{name} asks for an unknown isolation level {asked:?}")),
    }
    let limits = &config["limits"];
    let known = ["cpu_millis", "memory_bytes", "disk_bytes", "pids"];
    if let Some(unknown) = limits.as_object().and_then(|l| l.keys().find(|k| !known.contains(&k.as_str()))) {
        return Err(format!("{name} sets a limit this runner does not know: {unknown}"));
    }
    let limit = |key: &str| limits[key].as_u64();
    let mut applied = base.clone();
    // Without root at the `workdir` level, the session's processes share the runner's uid
    // and could rewrite their own cgroup's files: cgroups hold nothing there.
    let host = if !host.root && base.isolation == crate::sandbox::Isolation::Workdir {
        Host { cgroups: &Support::NONE, ..host }
    } else {
        host
    };
    if let Some(millis) = limit("cpu_millis") {
        if !host.cgroups.caps_cpu() {
            return Err(format!(
                "{name} caps cpu_millis, a CPU rate this runner cannot enforce: it has no usable cgroup cpu \
                 controller (rlimits cap CPU time, not rate)"
            ));
        }
        applied.cgroup_limits.cpu_millis = Some(millis);
    }
    if let Some(bytes) = limit("memory_bytes") {
        applied.limits.memory_bytes = lower(base.limits.memory_bytes, bytes);
        if host.cgroups.caps_memory() {
            applied.cgroup_limits.memory_bytes = Some(bytes);
        }
    }
    if let Some(pids) = limit("pids") {
        if host.cgroups.caps_pids() {
            applied.cgroup_limits.pids = Some(pids);
        } else if !host.root {
            return Err(format!(
                "{name} caps pids, which a runner that is not root and has no usable cgroup pids controller cannot \
                 hold per session (its sessions share its uid)"
            ));
        }
        if host.root {
            applied.limits.processes = lower(base.limits.processes, pids);
        }
    }
    if let Some(bytes) = limit("disk_bytes") {
        if !host.root {
            return Err(format!(
                "{name} caps disk_bytes, which needs the size-limited tmpfs workdir only a root runner mounts"
            ));
        }
        applied.limits.disk_bytes = lower(base.limits.disk_bytes, bytes);
    }
    // A stronger level than asked stays: the runner meets the policy by exceeding it.
    Ok(applied)
}

/// The lower of two limits where 0 means none.
fn lower(runner: u64, policy: u64) -> u64 {
    if runner == 0 { policy } else { runner.min(policy) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sandbox::{Isolation, Limits, Networking, SecretEnv, UidRange};

    fn base(isolation: Isolation) -> SandboxConfig {
        SandboxConfig {
            root: "/tmp/x".into(),
            isolation,
            limits: Limits::default(),
            networking: Networking::Unrestricted,
            uids: UidRange::default(),
            environment: SecretEnv(Vec::new()),
            mounts: Vec::new(),
            forwarder: None,
            cgroup_limits: Default::default(),
        }
    }

    fn pinned(config: Value) -> Value {
        json!({"policy_id": "p", "version": 3, "config": config})
    }

    const ROOT: Host = Host { root: true, cgroups: &Support::NONE };

    #[test]
    fn no_policy_keeps_the_runners_settings() {
        let applied = apply(&Value::Null, &base(Isolation::Namespace), ROOT).unwrap();
        assert_eq!(applied.limits.memory_bytes, Limits::default().memory_bytes);
    }

    #[test]
    fn limits_take_the_lower_of_policy_and_runner() {
        let policy = pinned(
            json!({"isolation": "namespace", "limits": {"memory_bytes": 1 << 20, "pids": 10_000, "disk_bytes": 4096}}),
        );
        let applied = apply(&policy, &base(Isolation::Namespace), ROOT).unwrap();
        assert_eq!(applied.limits.memory_bytes, 1 << 20);
        assert_eq!(applied.limits.processes, Limits::default().processes, "the runner's lower cap stays");
        assert_eq!(applied.limits.disk_bytes, 4096);
    }

    #[test]
    fn a_level_above_the_runners_is_refused() {
        let container = apply(&pinned(json!({"isolation": "container"})), &base(Isolation::Namespace), ROOT);
        assert!(container.unwrap_err().contains("asks for isolation `container`"));
        let namespace = apply(&pinned(json!({"isolation": "namespace"})), &base(Isolation::Workdir), ROOT);
        assert!(namespace.unwrap_err().contains("this runner provides `workdir`"));
        let weaker = apply(&pinned(json!({"isolation": "workdir"})), &base(Isolation::Namespace), ROOT).unwrap();
        assert_eq!(weaker.isolation, Isolation::Namespace, "met by exceeding it");
    }

    #[test]
    fn cgroups_hold_session_totals_and_the_cpu_rate() {
        let cgroups: &'static Support = Box::leak(Box::new(Support::unified_at("/sys/fs/cgroup/runner".into())));
        let host = Host { root: false, cgroups };
        let policy = pinned(json!({"limits": {"cpu_millis": 500, "memory_bytes": 1 << 20, "pids": 9}}));
        let applied = apply(&policy, &base(Isolation::Namespace), host).unwrap();
        let wanted =
            crate::sandbox::cgroup::CgroupLimits { memory_bytes: Some(1 << 20), pids: Some(9), cpu_millis: Some(500) };
        assert_eq!(applied.cgroup_limits, wanted);
        assert_eq!(applied.limits.memory_bytes, 1 << 20, "each process is capped too");
        assert_eq!(
            applied.limits.processes,
            Limits::default().processes,
            "RLIMIT_NPROC is per uid: not for a shared one"
        );
    }

    #[test]
    fn limits_that_cannot_be_enforced_fail_closed() {
        let cpu = apply(&pinned(json!({"limits": {"cpu_millis": 500}})), &base(Isolation::Namespace), ROOT);
        assert!(cpu.unwrap_err().contains("cpu_millis"));
        let user = Host { root: false, cgroups: &Support::NONE };
        let pids = apply(&pinned(json!({"limits": {"pids": 5}})), &base(Isolation::Namespace), user);
        assert!(pids.unwrap_err().contains("pids"));
        let disk = apply(&pinned(json!({"limits": {"disk_bytes": 5}})), &base(Isolation::Namespace), user);
        assert!(disk.unwrap_err().contains("disk_bytes"));
        let memory = apply(&pinned(json!({"limits": {"memory_bytes": 5}})), &base(Isolation::Namespace), user);
        assert!(memory.is_ok(), "RLIMIT_AS needs no privilege");
    }
}
