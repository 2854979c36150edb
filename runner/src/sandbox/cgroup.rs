//! Per-session resource caps with Linux control groups, for what a sandbox execution
//! policy asks (docs/api/sandbox-policies.md): `memory_bytes` as the session's total
//! memory, `pids` as its total processes, `cpu_millis` as its CPU rate. cgroup v2 (a
//! unified hierarchy with the controllers enabled for the runner's cgroup) or v1 (the
//! `memory`, `pids` and `cpu` hierarchies) — whichever this host has and lets the runner
//! write. Where neither is available, `crate::policy` falls back to rlimits or fails
//! closed.
//!
//! A session's cgroup is `agentd-<session>` under the runner's own cgroup of each
//! controller. The sandbox shell joins it before `exec`ing bubblewrap (a `sh` wrapper
//! writes its own pid into each `cgroup.procs`), so every process of the session is in it
//! from the start. The cgroup is removed when the sandbox closes.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where cgroup file systems are mounted.
const ROOT: &str = "/sys/fs/cgroup";
/// The CFS period the CPU rate is expressed in, µs.
const CPU_PERIOD_US: u64 = 100_000;

/// Totals a session's processes may use together (`None`: no cap).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Memory of all its processes, bytes.
    pub memory_bytes: Option<u64>,
    /// Processes (and threads) at once.
    pub pids: Option<u64>,
    /// CPU rate in thousandths of a CPU.
    pub cpu_millis: Option<u64>,
}

impl CgroupLimits {
    /// Whether any cap is set.
    pub fn any(&self) -> bool {
        self.memory_bytes.is_some() || self.pids.is_some() || self.cpu_millis.is_some()
    }
}

/// Which controllers this host lets the runner use, and where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Support {
    /// cgroup v2: the runner's cgroup directory (controllers enabled for its children).
    v2: Option<PathBuf>,
    /// cgroup v1: the runner's cgroup directory in each hierarchy.
    memory: Option<PathBuf>,
    pids: Option<PathBuf>,
    cpu: Option<PathBuf>,
}

impl Support {
    /// What this process may use (probed once: a child cgroup made and removed).
    pub fn detect() -> &'static Support {
        static DETECTED: OnceLock<Support> = OnceLock::new();
        DETECTED.get_or_init(|| {
            let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
            Support::probe(Path::new(ROOT), &own)
        })
    }

    /// Nothing (cgroups turned off, or a host without them).
    pub const NONE: Support = Support { v2: None, memory: None, pids: None, cpu: None };

    /// A unified hierarchy at `dir` (tests of what is decided from support).
    #[cfg(test)]
    pub(crate) fn unified_at(dir: PathBuf) -> Support {
        Support { v2: Some(dir), ..Support::NONE }
    }

    /// Nothing, owned.
    pub fn none() -> Support {
        Support::NONE
    }

    fn probe(root: &Path, own: &str) -> Support {
        let writable = |dir: PathBuf| {
            let probe = dir.join(format!("agentd-probe-{}", std::process::id()));
            (std::fs::create_dir(&probe).is_ok() && std::fs::remove_dir(&probe).is_ok()).then_some(dir)
        };
        let mut support = Support::default();
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let relative = path.trim_start_matches('/');
            if controllers.is_empty() {
                // Unified: usable where the controllers are enabled for children, or where
                // the runner may enable them itself (`delegate`).
                let dir = root.join(relative);
                let listed = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap_or_default();
                let has = |list: &str| V2_CONTROLLERS.iter().all(|name| list.split_whitespace().any(|c| c == *name));
                if has(&listed("cgroup.subtree_control")) {
                    support.v2 = writable(dir);
                } else if has(&listed("cgroup.controllers")) {
                    support.v2 = delegate(&dir, enable_controllers).and_then(writable);
                }
                continue;
            }
            for controller in controllers.split(',') {
                let dir = root.join(controller).join(relative);
                match controller {
                    "memory" => support.memory = writable(dir),
                    "pids" => support.pids = writable(dir),
                    "cpu" => support.cpu = writable(dir),
                    _ => {}
                }
            }
        }
        support
    }

    /// Whether every cap `limits` sets can be enforced.
    pub fn enforces(&self, limits: &CgroupLimits) -> bool {
        self.v2.is_some()
            || ((limits.memory_bytes.is_none() || self.memory.is_some())
                && (limits.pids.is_none() || self.pids.is_some())
                && (limits.cpu_millis.is_none() || self.cpu.is_some()))
    }

    /// Whether the CPU rate can be capped.
    pub fn caps_cpu(&self) -> bool {
        self.v2.is_some() || self.cpu.is_some()
    }

    /// Whether the session's total memory can be capped.
    pub fn caps_memory(&self) -> bool {
        self.v2.is_some() || self.memory.is_some()
    }

    /// Whether the session's processes can be capped together.
    pub fn caps_pids(&self) -> bool {
        self.v2.is_some() || self.pids.is_some()
    }

    /// Makes the session's cgroup(s) with `limits` written.
    pub fn create(&self, session: &str, limits: &CgroupLimits) -> io::Result<SessionCgroup> {
        let name = format!("agentd-{session}");
        let mut made = SessionCgroup { dirs: Vec::new() };
        let mut make = |parent: &Path, files: &[(&str, String)]| -> io::Result<()> {
            let dir = parent.join(&name);
            match std::fs::create_dir(&dir) {
                Err(error) if error.kind() != io::ErrorKind::AlreadyExists => return Err(error),
                _ => {}
            }
            made.dirs.push(dir.clone());
            for (file, value) in files {
                std::fs::write(dir.join(file), value)
                    .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", dir.join(file).display())))?;
            }
            Ok(())
        };
        if let Some(v2) = &self.v2 {
            let mut files = Vec::new();
            if let Some(bytes) = limits.memory_bytes {
                files.push(("memory.max", bytes.to_string()));
                // No swap beyond the cap (a kernel without swap accounting has no such file).
                if v2.join("memory.swap.max").exists() {
                    files.push(("memory.swap.max", "0".to_owned()));
                }
            }
            if let Some(pids) = limits.pids {
                files.push(("pids.max", pids.to_string()));
            }
            if let Some(millis) = limits.cpu_millis {
                files.push(("cpu.max", format!("{} {CPU_PERIOD_US}", quota_us(millis))));
            }
            make(v2, &files)?;
            return Ok(made);
        }
        let missing = |what: &str| io::Error::new(io::ErrorKind::Unsupported, format!("no writable {what} cgroup"));
        if let Some(bytes) = limits.memory_bytes {
            let parent = self.memory.as_ref().ok_or_else(|| missing("memory"))?;
            make(parent, &[("memory.limit_in_bytes", bytes.to_string())])?;
        }
        if let Some(pids) = limits.pids {
            let parent = self.pids.as_ref().ok_or_else(|| missing("pids"))?;
            make(parent, &[("pids.max", pids.to_string())])?;
        }
        if let Some(millis) = limits.cpu_millis {
            let parent = self.cpu.as_ref().ok_or_else(|| missing("cpu"))?;
            let quota = quota_us(millis);
            make(parent, &[("cpu.cfs_period_us", CPU_PERIOD_US.to_string()), ("cpu.cfs_quota_us", quota.to_string())])?;
        }
        Ok(made)
    }
}

/// The cgroup v2 controllers a session's cgroup needs.
const V2_CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];
/// The leaf the runner's own processes move into when it delegates to itself.
const RUNNER_LEAF: &str = "agentd-runner";

/// Enables [`V2_CONTROLLERS`] for the children of `dir`.
fn enable_controllers(dir: &Path) -> io::Result<()> {
    std::fs::write(dir.join("cgroup.subtree_control"), "+memory +pids +cpu")
}

/// Self-delegation on cgroup v2: the controllers are available to the runner's cgroup
/// `dir` (`cgroup.controllers`) but not enabled for its children, as in a container with
/// its own cgroup namespace. The kernel enables them only in a cgroup without processes
/// of its own ("no internal processes"), so when `enable` answers `EBUSY` every process of
/// `dir` moves into the leaf [`RUNNER_LEAF`] first (the runner and whatever shares its
/// cgroup, as a container's init does), then they are enabled. Sessions' cgroups are then
/// siblings of that leaf. `Some(dir)` when the controllers are enabled; `None` (and a
/// log line) when the host does not let the runner do it, which leaves cgroups unused.
fn delegate(dir: &Path, enable: impl Fn(&Path) -> io::Result<()>) -> Option<PathBuf> {
    let refused = |step: &str, error: io::Error| {
        tracing::info!(cgroup = %dir.display(), %error, "cgroup v2: cannot {step}; sandbox cgroups unused");
        None
    };
    match enable(dir) {
        Ok(()) => return Some(dir.to_owned()),
        Err(error) if error.raw_os_error() != Some(nix::errno::Errno::EBUSY as i32) => {
            return refused("enable the memory, pids and cpu controllers", error);
        }
        Err(_) => {}
    }
    let leaf = dir.join(RUNNER_LEAF);
    if let Err(error) = std::fs::create_dir(&leaf)
        && error.kind() != io::ErrorKind::AlreadyExists
    {
        return refused("make the runner's leaf cgroup", error);
    }
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let mut moved = 0;
    for pid in procs.split_whitespace() {
        match std::fs::write(leaf.join("cgroup.procs"), pid) {
            Ok(()) => moved += 1,
            // It exited meanwhile.
            Err(error) if error.raw_os_error() == Some(nix::errno::Errno::ESRCH as i32) => {}
            Err(error) => return refused("move the runner's processes into its leaf cgroup", error),
        }
    }
    if let Err(error) = enable(dir) {
        return refused("enable the memory, pids and cpu controllers after moving into a leaf", error);
    }
    tracing::info!(cgroup = %dir.display(), moved, leaf = RUNNER_LEAF,
        "cgroup v2: delegated the memory, pids and cpu controllers to the runner's sessions");
    Some(dir.to_owned())
}

/// The CFS quota per period for `millis` thousandths of a CPU: at least 1 ms (the
/// kernel's smallest), saturating rather than overflowing.
fn quota_us(millis: u64) -> u64 {
    millis.saturating_mul(CPU_PERIOD_US / 1000).max(1000)
}

/// A session's cgroup(s): one directory per hierarchy (one on v2).
#[derive(Debug)]
pub struct SessionCgroup {
    dirs: Vec<PathBuf>,
}

impl SessionCgroup {
    /// The `cgroup.procs` files the shell's first process writes itself into.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|dir| dir.join("cgroup.procs")).collect()
    }
}

impl Drop for SessionCgroup {
    /// Kills whatever of the session is still in its cgroup (a process that left the
    /// shell's process group) and removes the cgroup, on a thread of its own: removal
    /// waits for the processes to be gone, and a drop may happen on the async runtime.
    fn drop(&mut self) {
        let dirs = std::mem::take(&mut self.dirs);
        std::thread::spawn(move || {
            for dir in &dirs {
                let _ = std::fs::write(dir.join("cgroup.kill"), "1");
                for _ in 0..100 {
                    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                    for pid in procs.lines().filter_map(|line| line.trim().parse::<i32>().ok()) {
                        let _ =
                            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                    }
                    if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                if dir.exists() {
                    tracing::warn!(cgroup = %dir.display(), "a session's cgroup could not be removed");
                }
            }
        });
    }
}

/// The `sh` script that writes its own pid into each file given before `--`, then
/// `exec`s the rest (exit 97 when a file cannot be written: the shell does not start).
pub const JOIN_SCRIPT: &str = "while [ \"$1\" != -- ]; do echo $$ > \"$1\" || exit 97; shift; done; shift; exec \"$@\"";

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_root(dirs: &[&str]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for dir in dirs {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        root
    }

    #[test]
    fn v1_hierarchies_are_found_from_the_processs_own_cgroups() {
        let root = fake_root(&["memory/job/1", "pids", "cpu"]);
        let own = "9:name=systemd:/\n8:pids:/\n4:memory:/job/1\n2:cpu,cpuacct:/\n0::/\n";
        let support = Support::probe(root.path(), own);
        assert_eq!(support.memory.as_deref(), Some(root.path().join("memory/job/1").as_path()));
        assert!(support.pids.is_some() && support.cpu.is_some() && support.v2.is_none());
        assert!(support.caps_cpu() && support.caps_memory() && support.caps_pids());
        let limits = CgroupLimits { memory_bytes: Some(1 << 20), pids: Some(8), cpu_millis: Some(500) };
        let made = support.create("s1", &limits).unwrap();
        assert_eq!(made.procs_files().len(), 3);
        // A fake hierarchy's directories hold plain files and cannot be removed like a cgroup's.
        std::mem::forget(made);
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("memory/job/1/agentd-s1/memory.limit_in_bytes"), "1048576");
        assert_eq!(read("pids/agentd-s1/pids.max"), "8");
        assert_eq!(read("cpu/agentd-s1/cpu.cfs_quota_us"), "50000");
    }

    #[test]
    fn v2_needs_the_controllers_enabled_for_children() {
        let root = fake_root(&["runner"]);
        let own = "0::/runner\n";
        assert_eq!(Support::probe(root.path(), own), Support::none(), "no subtree_control: unusable");
        std::fs::write(root.path().join("runner/cgroup.subtree_control"), "cpu memory pids\n").unwrap();
        let support = Support::probe(root.path(), own);
        assert!(support.v2.is_some() && support.enforces(&CgroupLimits { cpu_millis: Some(1), ..Default::default() }));
        let limits = CgroupLimits { memory_bytes: Some(4096), pids: Some(3), cpu_millis: Some(250) };
        std::mem::forget(support.create("s2", &limits).unwrap());
        let read = |p: &str| std::fs::read_to_string(root.path().join("runner/agentd-s2").join(p)).unwrap();
        assert_eq!(
            (read("memory.max"), read("pids.max"), read("cpu.max")),
            ("4096".into(), "3".into(), "25000 100000".into())
        );
        assert!(!root.path().join("runner/agentd-s2/memory.swap.max").exists(), "no swap file: none written");
        assert_eq!(quota_us(1), 1000, "the kernel's smallest quota");
        assert_eq!(quota_us(u64::MAX), u64::MAX, "saturates");
    }

    /// A unified cgroup with the controllers available but not enabled, holding `procs`.
    fn undelegated(procs: &str) -> tempfile::TempDir {
        let root = fake_root(&["ctr"]);
        std::fs::write(root.path().join("ctr/cgroup.controllers"), "cpuset cpu io memory pids\n").unwrap();
        std::fs::write(root.path().join("ctr/cgroup.subtree_control"), "").unwrap();
        std::fs::write(root.path().join("ctr/cgroup.procs"), procs).unwrap();
        root
    }

    #[test]
    fn v2_controllers_available_to_the_runner_are_delegated_to_its_sessions() {
        let root = undelegated("1\n42\n");
        let support = Support::probe(root.path(), "0::/ctr\n");
        assert_eq!(support.v2.as_deref(), Some(root.path().join("ctr").as_path()));
        let enabled = std::fs::read_to_string(root.path().join("ctr/cgroup.subtree_control")).unwrap();
        assert_eq!(enabled, "+memory +pids +cpu");
        assert!(!root.path().join("ctr").join(RUNNER_LEAF).exists(), "an empty cgroup needs no leaf");
    }

    #[test]
    fn a_cgroup_with_processes_moves_them_into_a_leaf_first() {
        let root = undelegated("1\n42\n");
        let dir = root.path().join("ctr");
        // The kernel's rule: no controllers for children while the cgroup has processes.
        let tries = std::cell::Cell::new(0);
        let enable = |dir: &Path| {
            tries.set(tries.get() + 1);
            let leaf = std::fs::read_to_string(dir.join(RUNNER_LEAF).join("cgroup.procs")).unwrap_or_default();
            if leaf.is_empty() {
                Err(io::Error::from_raw_os_error(nix::errno::Errno::EBUSY as i32))
            } else {
                enable_controllers(dir)
            }
        };
        assert_eq!(delegate(&dir, enable).as_deref(), Some(dir.as_path()));
        assert_eq!(tries.get(), 2);
        assert_eq!(std::fs::read_to_string(dir.join(RUNNER_LEAF).join("cgroup.procs")).unwrap(), "42", "the last move");
        assert_eq!(std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap(), "+memory +pids +cpu");
        // A host that refuses outright (no permission) leaves cgroups unused.
        let denied = |_: &Path| Err(io::Error::from(io::ErrorKind::PermissionDenied));
        assert_eq!(delegate(&dir, denied), None);
        // Controllers the runner's cgroup does not have cannot be delegated.
        let root = undelegated("");
        std::fs::write(root.path().join("ctr/cgroup.controllers"), "cpu io\n").unwrap();
        assert_eq!(Support::probe(root.path(), "0::/ctr\n"), Support::none());
    }

    #[test]
    fn nothing_writable_enforces_nothing() {
        let support = Support::none();
        assert!(!support.caps_cpu() && !support.caps_memory() && !support.caps_pids());
        assert!(support.enforces(&CgroupLimits::default()));
        assert!(!support.enforces(&CgroupLimits { pids: Some(1), ..Default::default() }));
    }
}
