//! Per-session sandboxes for the built-in tools.
//!
//! Each session gets a workdir `<root>/<session_id>` and, on its first `bash` call, one
//! persistent bash process. What confines that shell depends on the isolation level:
//!
//! - [`Isolation::Workdir`]: the shell starts in the workdir with a scrubbed environment,
//!   `ulimit` resource limits applied before anything else, and — when the runner is root — a
//!   dropped uid/gid (`AGENTD_SANDBOX_UID`/`AGENTD_SANDBOX_GID`, default 65534) with no
//!   capabilities and `no_new_privs`, via `setpriv`. Nothing stops it from reading
//!   world-readable host files, using the network, or touching other sessions' workdirs,
//!   which run under the same uid; the process limit is likewise shared by all sessions.
//!   Processes that leave the shell's process group (`setsid`) survive a timeout kill.
//!   Treat this level as a guard against accidents, not against a hostile model.
//! - [`Isolation::Namespace`]: the shell additionally runs under bubblewrap in fresh pid, ipc
//!   and uts namespaces (and a network namespace when networking is cut off), sees the host's
//!   `/usr` and libraries read-only, a private `/tmp`, and only its own workdir.
//!
//! The file tools never go through the shell; [`crate::tools`] confines them to the workdir.
//! Whatever cannot be honoured on this host makes [`Sandbox::open`] fail: nothing is silently
//! weakened.

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::tools::bash::{self, Launch, SHELL_PATH, Shell};
use crate::tools::path::Confinement;
use crate::tools::{ToolOutput, files, search};

/// Uid and gid the sandbox shell runs as when the runner is root, unless overridden by
/// `AGENTD_SANDBOX_UID` / `AGENTD_SANDBOX_GID`.
pub const DEFAULT_SANDBOX_ID: u32 = 65534;

/// How strongly the sandbox shell is separated from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Own workdir, resource limits and (when root) an unprivileged uid.
    Workdir,
    /// [`Isolation::Workdir`] plus Linux namespaces via bubblewrap.
    Namespace,
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
    /// Processes of the sandbox uid (`RLIMIT_NPROC`).
    pub processes: u64,
    /// Largest file a process may write (`RLIMIT_FSIZE`), in bytes; `write` and `edit` obey it too.
    pub file_size_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 300,
            memory_bytes: 2 * 1024 * 1024 * 1024,
            processes: 256,
            file_size_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Network access for the sandbox shell.
#[derive(Debug, Clone)]
pub enum Networking {
    /// Whatever the host can reach.
    Unrestricted,
    /// Only the listed hosts; an empty list means no network at all.
    Limited { allowed_hosts: Vec<String> },
}

/// Settings shared by every session's sandbox on this runner.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Parent of all workdirs. When the runner is root, `open` adds search (not read)
    /// permission for others to it so the sandbox uid can reach its workdir.
    pub root: PathBuf,
    pub isolation: Isolation,
    pub limits: Limits,
    pub networking: Networking,
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
        let owner = sandbox_owner()?;
        // Work out how the shell will be started before touching the disk, so an unsupported
        // configuration leaves nothing behind.
        let plan = plan_launch(config, owner)?;

        std::fs::create_dir_all(&config.root)?;
        let workdir = config.root.join(session_id);
        match std::fs::symlink_metadata(&workdir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("workdir {} exists and is not a directory", workdir.display()),
                )
                .into());
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::create_dir(&workdir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        }
        std::fs::set_permissions(&workdir, std::fs::Permissions::from_mode(0o700))?;
        let workdir = std::fs::canonicalize(&workdir)?;
        if let Some((uid, gid)) = owner {
            chown_tree(&workdir, uid, gid)?;
            let root = std::fs::canonicalize(&config.root)?;
            let mode = std::fs::metadata(&root)?.permissions().mode();
            if mode & 0o001 == 0 {
                std::fs::set_permissions(&root, std::fs::Permissions::from_mode((mode & 0o7777) | 0o001))?;
            }
        }
        let confinement = Confinement::new(workdir.clone(), owner).map_err(|e| match e.kind() {
            io::ErrorKind::Unsupported => SandboxError::Unavailable(e.to_string()),
            _ => SandboxError::Io(e),
        })?;
        let launch = plan.into_launch(&workdir, &config.limits);
        Ok(Sandbox {
            confinement: std::sync::Arc::new(confinement),
            limits: config.limits.clone(),
            launch,
            shell: None,
        })
    }

    /// The session's workdir (canonical path).
    pub fn workdir(&self) -> &Path {
        self.confinement.root()
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
        match tokio::task::spawn_blocking(move || blocking(&confinement, file_size, &input)).await {
            Ok(output) => output,
            Err(e) => ToolOutput::error(format!("tool '{name}' failed internally: {e}")),
        }
    }

    /// Kills the persistent shell and its process group/children.
    pub async fn close(&mut self) {
        if let Some(shell) = self.shell.take() {
            shell.kill().await;
        }
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

/// The uid/gid to drop to, when the runner is root; `None` when it is not.
fn sandbox_owner() -> Result<Option<(u32, u32)>, SandboxError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let read = |var: &str| -> Result<u32, SandboxError> {
        match std::env::var(var) {
            Err(_) => Ok(DEFAULT_SANDBOX_ID),
            Ok(value) => match value.trim().parse::<u32>() {
                Ok(0) => {
                    Err(SandboxError::Unavailable(format!("{var} is 0, but the sandbox shell must not run as root")))
                }
                Ok(id) => Ok(id),
                Err(_) => Err(SandboxError::Unavailable(format!("{var} must be a numeric id, got {value:?}"))),
            },
        }
    };
    Ok(Some((read("AGENTD_SANDBOX_UID")?, read("AGENTD_SANDBOX_GID")?)))
}

/// The programs that will start the shell, found before anything is created.
struct LaunchPlan {
    bash: PathBuf,
    setpriv: Option<(PathBuf, u32, u32)>,
    bwrap: Option<(PathBuf, bool)>,
}

fn plan_launch(config: &SandboxConfig, owner: Option<(u32, u32)>) -> Result<LaunchPlan, SandboxError> {
    let unshare_net = match (&config.networking, config.isolation) {
        (Networking::Unrestricted, _) => false,
        (Networking::Limited { .. }, Isolation::Workdir) => {
            return Err(SandboxError::Unavailable(
                "networking `limited` needs namespace isolation; at the `workdir` level the sandbox shares the \
                 host network"
                    .into(),
            ));
        }
        (Networking::Limited { allowed_hosts }, Isolation::Namespace) if !allowed_hosts.is_empty() => {
            return Err(SandboxError::Unavailable(format!(
                "networking `limited` with allowed_hosts {allowed_hosts:?} cannot be enforced: namespace isolation can \
                 only cut the network off entirely (an empty allowed_hosts list)"
            )));
        }
        (Networking::Limited { .. }, Isolation::Namespace) => true,
    };
    let bwrap = match config.isolation {
        Isolation::Workdir => None,
        Isolation::Namespace => match find_program("bwrap", true) {
            Some(path) => Some((path, unshare_net)),
            None => {
                return Err(SandboxError::Unavailable(
                    "namespace isolation needs bubblewrap (bwrap), which is not installed on this host".into(),
                ));
            }
        },
    };
    let setpriv = match owner {
        None => None,
        Some((uid, gid)) => match find_program("setpriv", true) {
            Some(path) => Some((path, uid, gid)),
            None => {
                return Err(SandboxError::Unavailable(
                    "the runner runs as root, and dropping privileges for the sandbox shell needs setpriv \
                     (util-linux), which is not installed on this host"
                        .into(),
                ));
            }
        },
    };
    let bash = find_program("bash", false)
        .ok_or_else(|| SandboxError::Unavailable(format!("bash is not installed in {SHELL_PATH}")))?;
    Ok(LaunchPlan { bash, setpriv, bwrap })
}

impl LaunchPlan {
    /// The command line: `[bwrap ... --] [setpriv ... --] bash --noprofile --norc`.
    fn into_launch(self, workdir: &Path, limits: &Limits) -> Launch {
        let mut argv: Vec<OsString> = Vec::new();
        if let Some((bwrap, unshare_net)) = &self.bwrap {
            argv.push(bwrap.clone().into());
            argv.extend(bwrap_args(workdir, *unshare_net));
            argv.push("--".into());
        }
        if let Some((setpriv, uid, gid)) = &self.setpriv {
            argv.push(setpriv.clone().into());
            argv.extend(
                [
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
        Launch { program, args: argv, workdir: workdir.to_path_buf(), setup: ulimit_script(limits) }
    }
}

/// bubblewrap flags for [`Isolation::Namespace`]: a read-only view of the system, a private
/// `/tmp`, and the workdir as the only writable host directory.
fn bwrap_args(workdir: &Path, unshare_net: bool) -> Vec<OsString> {
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
    args.extend(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"].map(OsString::from));
    args.extend([OsString::from("--bind"), workdir.into(), workdir.into()]);
    args.extend([OsString::from("--chdir"), workdir.into()]);
    args
}

/// The shell's first command: hard and soft limits at once, before any user command runs.
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

/// Gives the sandbox uid everything in the workdir, without following symlinks.
fn chown_tree(workdir: &Path, uid: u32, gid: u32) -> io::Result<()> {
    for entry in walkdir::WalkDir::new(workdir).follow_links(false) {
        let entry = entry.map_err(io::Error::other)?;
        std::os::unix::fs::lchown(entry.path(), Some(uid), Some(gid))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "tools/sandbox_tests.rs"]
mod tests;
