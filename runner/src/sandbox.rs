//! Per-session sandboxes for the built-in tools.
//!
//! Each session gets a workdir `<root>/<session_id>` and, on its first `bash` call, one
//! persistent bash process. What confines that shell depends on the isolation level
//! (`docs/SECURITY.md` lists what each stops and what it does not):
//!
//! - [`Isolation::Namespace`] (the default): the shell runs under bubblewrap in fresh pid,
//!   ipc, uts and mount namespaces (and a network namespace when networking is `limited`),
//!   sees the host's `/usr` and a few files of `/etc` read-only, a private size-limited
//!   `/tmp`, and only its own workdir: no other session's and no path of agentd's own.
//! - [`Isolation::Workdir`] (opt-in): no mount namespace, so the host's world-readable files
//!   are visible; when the runner is root the shell still gets its own pid namespace (and
//!   network namespace for `limited`), private `/tmp`, `/var/tmp`, `/dev/shm` and
//!   `/run/lock`, through `unshare`. A non-root runner can do none of that: its sandboxes
//!   share the runner's uid, so there it is a guard against accidents only.
//!
//! At both levels, when the runner is root: each session runs as its own uid
//! ([`workdir::UidRange`]), so workdirs (`0700`) are private and the process limit
//! (`RLIMIT_NPROC`, per real uid) is per session; the workdir is a tmpfs of the disk quota;
//! capabilities are dropped and `no_new_privs` set (`setpriv`); `ulimit` limits and
//! `umask 077` apply before anything else; and every process the session started dies with
//! the pid namespace when the shell is killed (timeout, close, session gone) or the runner
//! dies (parent-death signal), `setsid` or not.
//!
//! The file tools never go through the shell; [`crate::tools`] confines them to the workdir.
//! Whatever cannot be honoured on this host makes [`Sandbox::open`] fail: nothing is silently
//! weakened.

pub mod cgroup;
pub mod workdir;

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub use self::workdir::UidRange;
pub use crate::tools::bash::SecretEnv;
use crate::tools::bash::{self, Launch, SHELL_PATH, Shell};
use crate::tools::path::Confinement;
use crate::tools::{ToolOutput, files, search};

/// How strongly the sandbox shell is separated from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Own workdir and uid, resource limits; pid namespace when root. Explicit opt-in.
    Workdir,
    /// [`Isolation::Workdir`] plus mount, pid, ipc and uts namespaces via bubblewrap.
    Namespace,
}

impl Isolation {
    /// The name used in settings and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Workdir => "workdir",
            Isolation::Namespace => "namespace",
        }
    }
}

impl std::str::FromStr for Isolation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "workdir" => Ok(Isolation::Workdir),
            "namespace" => Ok(Isolation::Namespace),
            other => Err(format!("unknown isolation level {other:?}: expected \"workdir\" or \"namespace\"")),
        }
    }
}

/// Resource limits for the sandbox shell and everything it starts. Zero means unlimited.
#[derive(Debug, Clone)]
pub struct Limits {
    /// CPU seconds per process (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Address space per process (`RLIMIT_AS`), in bytes.
    pub memory_bytes: u64,
    /// Processes of the session's uid (`RLIMIT_NPROC`): per session when the runner is root.
    pub processes: u64,
    /// Largest file a process may write (`RLIMIT_FSIZE`), in bytes; `write` and `edit` obey it too.
    pub file_size_bytes: u64,
    /// Size of the workdir (and of each private scratch directory such as `/tmp`), in bytes.
    pub disk_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 300,
            memory_bytes: 2 * 1024 * 1024 * 1024,
            processes: 256,
            file_size_bytes: 64 * 1024 * 1024,
            disk_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// Network access for the sandbox shell.
#[derive(Debug, Clone)]
pub enum Networking {
    /// Whatever the host can reach.
    Unrestricted,
    /// Only the listed hosts (and package registries when allowed); nothing else.
    Limited {
        /// Hosts the sandbox may reach.
        allowed_hosts: Vec<String>,
        /// Whether public package registries are allowed too.
        allow_package_managers: bool,
    },
}

impl Networking {
    /// Whether the sandbox gets no network at all.
    pub fn is_cut_off(&self) -> bool {
        matches!(self, Networking::Limited { allowed_hosts, allow_package_managers: false } if allowed_hosts.is_empty())
    }
}

/// Names the sandbox sets itself; a credential cannot replace them.
pub const RESERVED_VARIABLES: [&str; 4] = ["PATH", "HOME", "LANG", "TERM"];

/// Settings of one session's sandbox: the runner's, plus the environment's networking and
/// the session's variables.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Parent of all workdirs. When the runner is root, `open` adds search (not read)
    /// permission for others to it so each session's uid can reach its workdir.
    pub root: PathBuf,
    pub isolation: Isolation,
    pub limits: Limits,
    pub networking: Networking,
    /// The uids sessions run as when the runner is root.
    pub uids: UidRange,
    /// Variables added to the shell's scrubbed environment.
    pub environment: SecretEnv,
    /// The session's mounts under `/mnt` besides its files and skills (its memory
    /// stores): the writable ones take the file tools' writes, the others are bound
    /// read-only in the `namespace` sandbox.
    pub mounts: Vec<crate::mounts::MountAccess>,
    /// The `agentd` binary, run inside a `namespace` sandbox as the forwarder to its
    /// egress proxy (`crate::egress`); without it, `limited` networking with allowed
    /// hosts cannot be enforced and fails closed.
    pub forwarder: Option<PathBuf>,
    /// Session totals a sandbox execution policy caps with cgroups (`crate::policy`
    /// sets them only where `cgroup::Support` can enforce them).
    pub cgroup_limits: cgroup::CgroupLimits,
}

/// Why a sandbox could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The requested isolation level or networking policy cannot be provided on this host.
    #[error("sandbox unavailable: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// One session's sandbox: its workdir, its persistent shell, and the tools that act on them.
pub struct Sandbox {
    confinement: std::sync::Arc<Confinement>,
    limits: Limits,
    launch: Launch,
    shell: Option<Shell>,
    mounted: bool,
    // Dropped after the shell (fields drop in order): its processes are gone first.
    /// The session's egress proxy (`limited` networking with allowed hosts).
    _egress: Option<crate::egress::EgressProxy>,
    /// The session's cgroup(s), removed with the sandbox.
    _cgroup: Option<cgroup::SessionCgroup>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("workdir", &self.confinement.root())
            .field("shell_running", &self.shell.is_some())
            .finish()
    }
}

impl Sandbox {
    /// Creates (or reopens) `<root>/<session_id>` as the workdir. Fails closed with
    /// [`SandboxError::Unavailable`] when the isolation level or networking policy cannot be
    /// honoured on this host. `session_id` may contain only `[A-Za-z0-9_-]`.
    pub fn open(config: &SandboxConfig, session_id: &str) -> Result<Sandbox, SandboxError> {
        validate_session_id(session_id)?;
        let root_user = nix::unistd::geteuid().is_root();
        if root_user {
            config.uids.validate().map_err(SandboxError::Unavailable)?;
        }
        // Work out how the shell will be started before touching the disk, so an unsupported
        // configuration leaves nothing behind.
        let plan = plan_launch(config, root_user)?;
        if root_user && config.isolation == Isolation::Workdir {
            reachable_by_others(&config.root)?;
        }
        let prepared =
            workdir::prepare(&config.root, session_id, root_user.then_some(config.uids), config.limits.disk_bytes)?;
        let confinement = Confinement::new(prepared.path.clone(), prepared.owner).map_err(|e| match e.kind() {
            io::ErrorKind::Unsupported => SandboxError::Unavailable(e.to_string()),
            _ => SandboxError::Io(e),
        })?;
        let confinement =
            confinement.with_writable_mounts(config.mounts.iter().filter(|m| m.writable).map(|m| m.path.as_str()));
        let egress = match &plan.egress {
            Some(allowlist) => Some(
                crate::egress::EgressProxy::start(&config.root, session_id, prepared.owner, allowlist.clone())
                    .map_err(SandboxError::Io)?,
            ),
            None => None,
        };
        let session_cgroup = if config.cgroup_limits.any() {
            let made = cgroup::Support::detect().create(session_id, &config.cgroup_limits).map_err(|error| {
                SandboxError::Unavailable(format!("the session's cgroup cannot be set up: {error}"))
            })?;
            Some(made)
        } else {
            None
        };
        let mut launch = plan.into_launch(&prepared.path, config, prepared.owner, egress.as_ref());
        if let Some(joined) = &session_cgroup {
            launch.join_cgroup(&joined.procs_files());
        }
        Ok(Sandbox {
            _egress: egress,
            _cgroup: session_cgroup,
            confinement: std::sync::Arc::new(confinement),
            limits: config.limits.clone(),
            launch,
            shell: None,
            mounted: prepared.mounted,
        })
    }

    /// The session's workdir (canonical path).
    pub fn workdir(&self) -> &Path {
        self.confinement.root()
    }

    /// The session's uid and gid, when the runner is root.
    pub fn owner(&self) -> Option<(u32, u32)> {
        self.confinement.owner()
    }

    /// Runs one tool call. Never panics on bad input; input errors become `is_error` results.
    pub async fn call(&mut self, name: &str, input: &Value) -> ToolOutput {
        let file_size = self.limits.file_size_bytes;
        let blocking: fn(&Confinement, u64, &Value) -> ToolOutput = match name {
            "bash" => return bash::call(&mut self.shell, &self.launch, input).await,
            "read" => |c, _, i| files::read(c, i),
            "write" => files::write,
            "edit" => files::edit,
            "glob" => |c, _, i| search::glob(c, i),
            "grep" => |c, _, i| search::grep(c, i),
            other => {
                return ToolOutput::error(format!(
                    "unknown tool {other:?}: this sandbox provides {}",
                    crate::tools::TOOL_NAMES.join(", ")
                ));
            }
        };
        let confinement = self.confinement.clone();
        let input = input.clone();
        let (mounted, quota, is_write) = (self.mounted, self.limits.disk_bytes, name == "write");
        let run = move || {
            if is_write && let Some(message) = over_quota(&confinement, mounted, quota, &input) {
                return ToolOutput::error(message);
            }
            blocking(&confinement, file_size, &input)
        };
        match tokio::task::spawn_blocking(run).await {
            Ok(output) => output,
            Err(e) => ToolOutput::error(format!("tool '{name}' failed internally: {e}")),
        }
    }

    /// Kills the persistent shell and every process the session started.
    pub async fn close(&mut self) {
        if let Some(shell) = self.shell.take() {
            shell.kill().await;
        }
    }

    /// Closes the sandbox and removes its workdir (the session was deleted or archived).
    pub async fn discard(mut self) -> io::Result<()> {
        self.close().await;
        let (path, mounted) = (self.workdir().to_path_buf(), self.mounted);
        drop(self);
        tokio::task::spawn_blocking(move || workdir::remove(&path, mounted)).await.map_err(io::Error::other)?
    }
}

fn validate_session_id(session_id: &str) -> Result<(), SandboxError> {
    let valid = !session_id.is_empty()
        && session_id.len() <= 128
        && session_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid session id {session_id:?}: expected 1-128 characters from [A-Za-z0-9_-]"),
        )
        .into())
    }
}

/// At the `workdir` level the session's uid reaches its workdir through the host's
/// directories, so every directory above the root must be searchable by others. agentd's
/// own data directory is `0700`: a root inside it is refused with the fix.
fn reachable_by_others(root: &Path) -> Result<(), SandboxError> {
    let mut dir = std::path::absolute(root)?;
    while dir.pop() {
        if let Ok(meta) = std::fs::metadata(&dir)
            && meta.permissions().mode() & 0o001 == 0
        {
            return Err(SandboxError::Unavailable(format!(
                "at the workdir isolation level every session's uid must pass through {} to reach its workdir, but \
                 it is not searchable by others (agentd's data directory is 0700); set AGENTD_SANDBOX_ROOT outside \
                 it, or use namespace isolation",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// A `write` whose content does not fit in what is left of the disk quota (the file it
/// replaces counts as free).
fn over_quota(confinement: &Confinement, mounted: bool, quota: u64, input: &Value) -> Option<String> {
    let content = input["content"].as_str()?;
    let given = input["file_path"].as_str()?;
    let room = workdir::room(confinement.root(), mounted, quota)?;
    let replaced = confinement
        .resolve(given)
        .ok()
        .and_then(|path| std::fs::symlink_metadata(&path.abs).ok())
        .filter(std::fs::Metadata::is_file)
        .map_or(0, |meta| meta.len());
    (content.len() as u64 > room.saturating_add(replaced)).then(|| {
        format!(
            "cannot write {given}: {} bytes do not fit in the session's disk quota of {quota} bytes ({room} bytes free)",
            content.len()
        )
    })
}

/// The programs that will start the shell, found before anything is created.
struct LaunchPlan {
    bash: PathBuf,
    /// `setpriv`, when the runner is root (drops to the session's uid).
    setpriv: Option<PathBuf>,
    /// Namespace level: bubblewrap, and whether to cut the network.
    bwrap: Option<(PathBuf, bool)>,
    /// Workdir level as root: `unshare` and `sh` (pid + mount namespaces), and whether to
    /// cut the network.
    unshare: Option<(PathBuf, PathBuf, bool)>,
    /// The hosts an egress proxy lets through (namespace level, no network otherwise).
    egress: Option<crate::egress::Allowlist>,
}

fn plan_launch(config: &SandboxConfig, root_user: bool) -> Result<LaunchPlan, SandboxError> {
    let (unshare_net, egress) = match &config.networking {
        Networking::Unrestricted => (false, None),
        networking if networking.is_cut_off() => (true, None),
        // Allowed hosts: no network but loopback, and an egress proxy that checks each
        // connection's host (`crate::egress`); only the namespace level can do that.
        Networking::Limited { allowed_hosts, allow_package_managers }
            if config.isolation == Isolation::Namespace && config.forwarder.is_some() =>
        {
            (true, Some(crate::egress::Allowlist::new(allowed_hosts, *allow_package_managers)))
        }
        Networking::Limited { allowed_hosts, allow_package_managers } => {
            return Err(SandboxError::Unavailable(format!(
                "networking `limited` with allowed_hosts {allowed_hosts:?} and allow_package_managers \
                 {allow_package_managers} needs the `namespace` isolation and its egress proxy (run by `agentd`); \
                 this sandbox can only cut the network off entirely"
            )));
        }
    };
    let setpriv = if root_user {
        Some(find_program("setpriv", true).ok_or_else(|| {
            SandboxError::Unavailable(
                "the runner runs as root, and dropping privileges for the sandbox shell needs setpriv (util-linux), \
                 which is not installed on this host"
                    .into(),
            )
        })?)
    } else {
        None
    };
    let (bwrap, unshare) = match config.isolation {
        Isolation::Namespace => match find_program("bwrap", true) {
            Some(path) => (Some((path, unshare_net)), None),
            None => {
                return Err(SandboxError::Unavailable(
                    "namespace isolation needs bubblewrap (bwrap), which is not installed on this host: install it \
                     (Debian: apt-get install bubblewrap) or set AGENTD_SANDBOX_ISOLATION=workdir"
                        .into(),
                ));
            }
        },
        Isolation::Workdir if root_user => {
            let found = find_program("unshare", true).zip(find_program("sh", false));
            let Some((unshare, sh)) = found else {
                return Err(SandboxError::Unavailable(
                    "workdir isolation as root needs unshare (util-linux) and sh for the session's pid namespace"
                        .into(),
                ));
            };
            (None, Some((unshare, sh, unshare_net)))
        }
        Isolation::Workdir if unshare_net => {
            return Err(SandboxError::Unavailable(
                "networking `limited` needs namespace isolation, or a root runner at the `workdir` level; this \
                 sandbox would share the host network"
                    .into(),
            ));
        }
        Isolation::Workdir => (None, None),
    };
    let bash = find_program("bash", false)
        .ok_or_else(|| SandboxError::Unavailable(format!("bash is not installed in {SHELL_PATH}")))?;
    Ok(LaunchPlan { bash, setpriv, bwrap, unshare, egress })
}

impl LaunchPlan {
    /// The command line: `[bwrap … -- | setpriv --pdeathsig KILL -- unshare … -- sh -c …]
    /// [setpriv … --] bash --noprofile --norc`.
    fn into_launch(
        self,
        workdir: &Path,
        config: &SandboxConfig,
        owner: Option<(u32, u32)>,
        egress: Option<&crate::egress::EgressProxy>,
    ) -> Launch {
        let (limits, env) = (&config.limits, &config.environment);
        let mut argv: Vec<OsString> = Vec::new();
        if let Some((bwrap, unshare_net)) = &self.bwrap {
            argv.push(bwrap.clone().into());
            let read_only = config.mounts.iter().filter(|m| !m.writable).map(|m| m.path.as_str());
            argv.extend(bwrap_args(workdir, *unshare_net, limits.disk_bytes, read_only));
            if let (Some(proxy), Some(forwarder)) = (egress, &config.forwarder) {
                // Passable by the session's uid (bubblewrap would make it with the runner's umask).
                argv.extend(["--perms", "0711", "--dir", "/run"].map(OsString::from));
                // Read-only: connecting to the socket needs no write access to the mount.
                argv.extend([OsString::from("--ro-bind"), proxy.dir().into(), "/run/agentd".into()]);
                argv.extend([
                    OsString::from("--ro-bind"),
                    forwarder.clone().into(),
                    crate::egress::FORWARDER_INSIDE.into(),
                ]);
            }
            argv.push("--".into());
        }
        if let (Some((unshare, sh, unshare_net)), Some(setpriv)) = (&self.unshare, &self.setpriv) {
            // The runner's death kills unshare (parent-death signal, kept across exec), whose
            // death kills the namespace's first process (--kill-child), whose death ends the
            // namespace. `sh` mounts the private scratch directories, then execs the rest.
            argv.extend([setpriv.clone().into(), "--pdeathsig".into(), "KILL".into(), "--".into()]);
            argv.push(unshare.clone().into());
            argv.extend(["--pid", "--fork", "--kill-child", "--mount", "--propagation", "private"].map(OsString::from));
            if *unshare_net {
                argv.push("--net".into());
            }
            argv.extend(["--".into(), sh.clone().into(), "-c".into(), scratch_script(limits.disk_bytes).into()]);
            argv.push("sh".into());
        }
        if let (Some(setpriv), Some((uid, gid))) = (&self.setpriv, owner) {
            argv.push(setpriv.clone().into());
            argv.extend(
                [
                    // Changing uid clears the parent-death signal; set it again after.
                    "--pdeathsig=KILL".into(),
                    format!("--reuid={uid}"),
                    format!("--regid={gid}"),
                    "--clear-groups".into(),
                    "--inh-caps=-all".into(),
                    "--bounding-set=-all".into(),
                    "--no-new-privs".into(),
                    "--".into(),
                ]
                .map(OsString::from),
            );
        }
        argv.push(self.bash.into());
        argv.extend(["--noprofile", "--norc"].map(OsString::from));
        let program = PathBuf::from(argv.remove(0));
        Launch {
            program,
            args: argv,
            workdir: workdir.to_path_buf(),
            setup: setup_script(limits, egress.is_some()),
            env: SecretEnv(
                env.0.iter().filter(|(name, _)| !RESERVED_VARIABLES.contains(&name.as_str())).cloned().collect(),
            ),
        }
    }
}

/// Directories every user may write to on a Debian host; at the `workdir` level each gets
/// a private tmpfs of the disk quota, so they are neither shared between sessions nor on
/// the host's disk.
const SCRATCH_DIRS: [&str; 4] = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock"];

fn scratch_script(size: u64) -> String {
    let size = if size == 0 { String::new() } else { format!("size={size},") };
    format!(
        "for d in {}; do [ -d \"$d\" ] && mount -t tmpfs -o {size}mode=1777,nosuid,nodev agentd-scratch \"$d\"; \
         done; exec \"$@\"",
        SCRATCH_DIRS.join(" ")
    )
}

/// bubblewrap flags for [`Isolation::Namespace`]: a read-only view of the system, a private
/// size-limited `/tmp`, and the workdir as the only writable host directory.
fn bwrap_args<'a>(
    workdir: &Path,
    unshare_net: bool,
    scratch_bytes: u64,
    read_only_mounts: impl Iterator<Item = &'a str>,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    .map(OsString::from)
    .to_vec();
    if unshare_net {
        args.push("--unshare-net".into());
    }
    // Merged-/usr systems have these as symlinks into /usr; recreate them as such.
    for dir in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        match std::fs::symlink_metadata(dir) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(dir) {
                    args.extend([OsString::from("--symlink"), target.into(), dir.into()]);
                }
            }
            Ok(meta) if meta.is_dir() => args.extend(["--ro-bind", dir, dir].map(OsString::from)),
            _ => {}
        }
    }
    for etc in [
        "/etc/alternatives",
        "/etc/ssl",
        "/etc/ca-certificates",
        "/etc/pki",
        "/etc/resolv.conf",
        "/etc/hosts",
        "/etc/nsswitch.conf",
        "/etc/passwd",
        "/etc/group",
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/localtime",
    ] {
        args.extend(["--ro-bind-try", etc, etc].map(OsString::from));
    }
    args.extend(["--proc", "/proc", "--dev", "/dev", "--perms", "1777"].map(OsString::from));
    if scratch_bytes > 0 {
        args.extend([OsString::from("--size"), scratch_bytes.to_string().into()]);
    }
    args.extend(["--tmpfs", "/tmp"].map(OsString::from));
    // bubblewrap would copy the modes of the host's directories above the workdir (agentd's
    // data directory is 0700): make them passable but not listable instead.
    let mut ancestors: Vec<&Path> =
        workdir.ancestors().skip(1).filter(|dir| !matches!(dir.to_str(), Some("/" | "/tmp"))).collect();
    ancestors.reverse();
    for dir in ancestors {
        args.extend([OsString::from("--perms"), "0711".into(), "--dir".into(), dir.into()]);
    }
    args.extend([OsString::from("--bind"), workdir.into(), workdir.into()]);
    // The session's mounts (`crate::mounts`): `/mnt` from the workdir, its uploads,
    // skills and read-only memory stores read-only on top. `-try`: absent until the
    // runner places them.
    let mnt = workdir.join(crate::mounts::MNT);
    args.extend([OsString::from("--bind-try"), mnt.clone().into(), "/mnt".into()]);
    for (host, inside) in [("session/uploads", "/mnt/session/uploads"), ("skills", "/mnt/skills")] {
        args.extend([OsString::from("--ro-bind-try"), mnt.join(host).into(), inside.into()]);
    }
    for inside in read_only_mounts {
        if let Some(host) = crate::mounts::host_path(&mnt, inside) {
            args.extend([OsString::from("--ro-bind-try"), host.into(), inside.into()]);
        }
    }
    args.extend([OsString::from("--chdir"), workdir.into()]);
    args
}

/// The shell's first command: hard and soft limits at once, before any user command runs,
/// and files private to the session unless it says otherwise. With an egress proxy, the
/// forwarder starts first (outside the limits, detached from the shell's jobs) and the
/// proxy variables are set once it listens.
pub(crate) fn setup_script(limits: &Limits, egress: bool) -> String {
    let limited = format!("{} && umask 077", ulimit_script(limits));
    if !egress {
        return limited;
    }
    let proxy = format!("http://{}", crate::egress::PROXY_ADDRESS);
    let (host, port) = crate::egress::PROXY_ADDRESS.split_once(':').unwrap_or(("127.0.0.1", "3128"));
    format!(
        "( {forwarder} sandbox-forward >/dev/null 2>&1 & ) ; \
         for _ in $(seq 100); do (exec 3<>/dev/tcp/{host}/{port}) 2>/dev/null && break; sleep 0.02; done ; \
         export HTTPS_PROXY={proxy} HTTP_PROXY={proxy} https_proxy={proxy} http_proxy={proxy} \
         NO_PROXY=localhost,127.0.0.1 no_proxy=localhost,127.0.0.1 && {limited}",
        forwarder = crate::egress::FORWARDER_INSIDE,
    )
}

/// bash counts `-v` and `-f` in KiB (see `help ulimit`); rounding down keeps within the limit.
pub(crate) fn ulimit_script(limits: &Limits) -> String {
    let value = |v: u64| if v == 0 { "unlimited".to_owned() } else { v.to_string() };
    format!(
        "ulimit -c 0 -t {} -v {} -u {} -f {} 2>&1",
        value(limits.cpu_seconds),
        if limits.memory_bytes == 0 { "unlimited".to_owned() } else { (limits.memory_bytes / 1024).to_string() },
        value(limits.processes),
        if limits.file_size_bytes == 0 { "unlimited".to_owned() } else { (limits.file_size_bytes / 1024).to_string() },
    )
}

/// Finds `name` in the shell's `PATH` (and, if `host_path`, the runner's own `PATH` first).
fn find_program(name: &str, host_path: bool) -> Option<PathBuf> {
    let host = host_path.then(|| std::env::var_os("PATH")).flatten().unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&host).chain(std::env::split_paths(SHELL_PATH)).collect();
    dirs.into_iter().map(|dir| dir.join(name)).find(|candidate| {
        std::fs::metadata(candidate).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

/// Removes the workdir of a session that is gone (deleted or archived) while no item of it
/// was open; nothing when there is none.
pub fn remove_workdir(root: &Path, session_id: &str) -> io::Result<()> {
    validate_session_id(session_id).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let path = root.join(session_id);
    let (Ok(root_meta), Ok(meta)) = (std::fs::metadata(root), std::fs::symlink_metadata(&path)) else {
        return Ok(());
    };
    use std::os::unix::fs::MetadataExt;
    workdir::remove(&path, meta.is_dir() && meta.dev() != root_meta.dev())
}

/// Whether the runner is root, so each session gets its own uid, pid namespace and quota.
pub fn runner_is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Starts bubblewrap once with the namespaces the sandbox uses (a session without network
/// included: its own network namespace with a loopback), so a host or container that
/// refuses them is reported at start-up, not at the first tool call. The error names what
/// is missing when the process's capabilities tell.
pub fn probe_bubblewrap() -> Result<(), String> {
    let bwrap = find_program("bwrap", true).ok_or("bubblewrap (bwrap) is not installed")?;
    let output = std::process::Command::new(&bwrap)
        .args(["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--die-with-parent"])
        .args(["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--", "true"])
        .env_clear()
        .env("PATH", SHELL_PATH)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let missing = missing_for_namespaces(runner_is_root(), effective_capabilities());
    Err(format!("{} failed ({}): {}; {missing}", bwrap.display(), output.status, stderr.trim()))
}

/// `CAP_NET_ADMIN` and `CAP_SYS_ADMIN`, as bits of a capability set.
const CAP_NET_ADMIN: u64 = 1 << 12;
const CAP_SYS_ADMIN: u64 = 1 << 21;

/// The process's effective capabilities (`CapEff` of /proc/self/status); none when unread.
fn effective_capabilities() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find_map(|line| line.strip_prefix("CapEff:"))?;
            u64::from_str_radix(line.trim(), 16).ok()
        })
        .unwrap_or(0)
}

/// What a runner needs for `namespace` isolation and lacks, given whether it is root and
/// its effective capabilities (ADR 0030).
fn missing_for_namespaces(root: bool, capabilities: u64) -> String {
    if !root {
        return "missing: root (as another user bubblewrap needs unprivileged user namespaces, which this host \
                or container refuses; run the runner as uid 0 with CAP_SYS_ADMIN and CAP_NET_ADMIN)"
            .to_owned();
    }
    let mut lacking = Vec::new();
    if capabilities & CAP_SYS_ADMIN == 0 {
        lacking.push("CAP_SYS_ADMIN (namespaces and the session's mounts)");
    }
    if capabilities & CAP_NET_ADMIN == 0 {
        lacking.push("CAP_NET_ADMIN (the loopback of a session without network)");
    }
    if lacking.is_empty() {
        "root with CAP_SYS_ADMIN and CAP_NET_ADMIN is not enough here: a seccomp or LSM profile refuses \
         unshare or mount (the container engine's default seccomp profile allows them once CAP_SYS_ADMIN is \
         granted)"
            .to_owned()
    } else {
        format!("missing: {}", lacking.join(", "))
    }
}

/// Whether bubblewrap is installed, so the default isolation level can be decided and
/// logged at start-up.
pub fn bubblewrap_available() -> bool {
    find_program("bwrap", true).is_some()
}

#[cfg(test)]
#[path = "tools/sandbox_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "tools/sandbox_escape_tests.rs"]
mod escape_tests;

#[cfg(test)]
#[path = "tools/sandbox_policy_tests.rs"]
mod policy_tests;
