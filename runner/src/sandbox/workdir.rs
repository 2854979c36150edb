//! The session workdir on the host: which uid owns it, the size-limited tmpfs that holds
//! it, and its removal when the session is deleted or archived.
//!
//! When the runner is root every session gets its own uid from [`UidRange`], so sessions
//! cannot read each other's files (workdirs are `0700`) and `RLIMIT_NPROC`, which the
//! kernel counts per real uid, becomes a per-session process limit. The uid is picked under
//! an exclusive lock on `<root>/.lock`: the hash of the session id is the first candidate,
//! and the first uid of the range that owns no other workdir of the root is taken, so two
//! live workdirs of one root never share a uid. A workdir that exists keeps its owner.
//!
//! The workdir is a tmpfs mounted with `size=` the disk quota: a write past it fails with
//! `ENOSPC` inside the session and never touches the host's disk. The mount outlives the
//! runner (a restarted runner finds the files again) and goes with the session.

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use nix::mount::{MntFlags, MsFlags};

/// The uids a root runner hands to sessions: `base .. base + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UidRange {
    /// First uid (and gid) of the range; never 0.
    pub base: u32,
    /// How many uids the range holds.
    pub count: u32,
}

impl Default for UidRange {
    /// Far above regular users and the usual subordinate-id ranges (100000–165535 per user),
    /// below 2^31 so no tool mistakes the uid for a negative number.
    fn default() -> Self {
        UidRange { base: 1_500_000_000, count: 1_000_000 }
    }
}

impl UidRange {
    /// Checks the range is usable: no root, no overflow, not empty.
    pub fn validate(&self) -> Result<(), String> {
        if self.base == 0 {
            return Err("the sandbox uid range must not start at 0 (root)".into());
        }
        if self.count == 0 {
            return Err("the sandbox uid range is empty".into());
        }
        if self.base.checked_add(self.count).is_none_or(|end| end > i32::MAX as u32) {
            return Err(format!(
                "the sandbox uid range {}..{} goes past 2^31 - 1",
                self.base,
                u64::from(self.base) + u64::from(self.count)
            ));
        }
        Ok(())
    }

    fn contains(&self, uid: u32) -> bool {
        uid >= self.base && uid - self.base < self.count
    }
}

/// A prepared workdir.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// Canonical path.
    pub path: PathBuf,
    /// The session's uid/gid when the runner is root.
    pub owner: Option<(u32, u32)>,
    /// Whether the workdir is its own size-limited tmpfs.
    pub mounted: bool,
}

/// Creates (or reopens) `<root>/<session_id>`, owned by the session's uid and, when root
/// and `quota > 0`, on a tmpfs of `quota` bytes.
pub(crate) fn prepare(
    root: &Path,
    session_id: &str,
    uids: Option<UidRange>,
    quota: u64,
) -> Result<Prepared, super::SandboxError> {
    std::fs::create_dir_all(root)?;
    let root = std::fs::canonicalize(root)?;
    let path = root.join(session_id);
    let Some(range) = uids else {
        make_dir(&path)?;
        return Ok(Prepared { path: std::fs::canonicalize(&path)?, owner: None, mounted: false });
    };
    // One allocation at a time per root, across processes sharing it.
    let lock_path = root.join(".lock");
    let lock_file = std::fs::OpenOptions::new().create(true).append(true).open(&lock_path)?;
    std::fs::set_permissions(&lock_path, std::fs::Permissions::from_mode(0o600))?;
    let _lock = Flock::lock(lock_file, FlockArg::LockExclusive).map_err(|(_, e)| io::Error::from(e))?;

    let existing = match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_dir() => Some(meta),
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("workdir {} exists and is not a directory", path.display()),
            )
            .into());
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let uid = match &existing {
        Some(meta) if range.contains(meta.uid()) => meta.uid(),
        _ => allocate(&root, session_id, range)?,
    };
    let owner = (uid, uid);
    make_dir(&path)?;
    let root_dev = std::fs::metadata(&root)?.dev();
    let mounted = std::fs::metadata(&path)?.dev() != root_dev;
    if quota > 0 && !mounted {
        if std::fs::read_dir(&path)?.next().is_some() {
            return Err(super::SandboxError::Unavailable(format!(
                "workdir {} holds files but is not on its own size-limited tmpfs (it predates the disk quota); \
                 move it away or set AGENTD_SANDBOX_DISK_QUOTA=0",
                path.display()
            )));
        }
        mount_tmpfs(&path, quota, owner, 0o700)?;
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
    chown_tree(&path, owner)?;
    // The sandbox uid must be able to pass through the root to reach its workdir; it
    // cannot list it.
    let mode = std::fs::metadata(&root)?.permissions().mode();
    if mode & 0o001 == 0 {
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode((mode & 0o7777) | 0o001))?;
    }
    Ok(Prepared { path, owner: Some(owner), mounted: quota > 0 || mounted })
}

/// Unmounts (if mounted) and removes a workdir and everything in it.
pub(crate) fn remove(path: &Path, mounted: bool) -> io::Result<()> {
    if mounted {
        // Detached: a process that still has its cwd there cannot keep the files alive
        // for anyone else, and the unmount cannot fail with EBUSY.
        match nix::mount::umount2(path, MntFlags::MNT_DETACH) {
            Ok(()) | Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Bytes still free under the workdir's quota: the tmpfs's free space when mounted, or
/// `quota` minus what the tree holds (a non-root runner cannot mount).
pub(crate) fn room(path: &Path, mounted: bool, quota: u64) -> Option<u64> {
    if quota == 0 {
        return None;
    }
    if mounted {
        let stat = nix::sys::statvfs::statvfs(path).ok()?;
        return Some(stat.blocks_available() as u64 * stat.fragment_size() as u64);
    }
    let used: u64 = walkdir::WalkDir::new(path)
        .follow_links(false)
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.blocks() * 512)
        .sum();
    Some(quota.saturating_sub(used))
}

fn make_dir(path: &Path) -> io::Result<()> {
    match std::fs::create_dir(path) {
        Ok(()) => std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            if std::fs::symlink_metadata(path)?.is_dir() {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("workdir {} exists and is not a directory", path.display()),
                ))
            }
        }
        Err(e) => Err(e),
    }
}

fn mount_tmpfs(path: &Path, size: u64, (uid, gid): (u32, u32), mode: u32) -> io::Result<()> {
    // Inodes cost kernel memory that `size` does not count; one per 4 KiB of quota.
    let inodes = (size / 4096).max(1024);
    let options = format!("size={size},nr_inodes={inodes},mode={mode:o},uid={uid},gid={gid}");
    nix::mount::mount(
        Some("agentd-sandbox"),
        path,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(|e| io::Error::other(format!("cannot mount the workdir's tmpfs on {}: {e}", path.display())))
}

/// The first uid of the range, starting at the session's hash, that owns no other entry
/// of the root.
fn allocate(root: &Path, session_id: &str, range: UidRange) -> io::Result<u32> {
    let taken: HashSet<u32> = std::fs::read_dir(root)?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name() != session_id)
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| meta.uid())
        .collect();
    let start = fnv1a(session_id.as_bytes()) % range.count;
    (0..range.count)
        .map(|step| range.base + (start + step) % range.count)
        .find(|uid| !taken.contains(uid))
        .ok_or_else(|| io::Error::other(format!("every uid of the sandbox range {range:?} owns a workdir")))
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |hash, &b| (hash ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Gives the session's uid everything in the workdir, without following symlinks.
fn chown_tree(workdir: &Path, (uid, gid): (u32, u32)) -> io::Result<()> {
    for entry in walkdir::WalkDir::new(workdir).follow_links(false) {
        let entry = entry.map_err(io::Error::other)?;
        std::os::unix::fs::lchown(entry.path(), Some(uid), Some(gid))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_refuse_root_and_overflow() {
        assert!(UidRange::default().validate().is_ok());
        assert!(UidRange { base: 0, count: 10 }.validate().is_err());
        assert!(UidRange { base: 10, count: 0 }.validate().is_err());
        assert!(UidRange { base: i32::MAX as u32 - 5, count: 10 }.validate().is_err());
    }

    #[test]
    fn allocation_skips_uids_that_own_other_workdirs() {
        let root = tempfile::tempdir().unwrap();
        let range = UidRange { base: 1000, count: 3 };
        let first = allocate(root.path(), "a", range).unwrap();
        assert!(range.contains(first));
        let dir = root.path().join("taken");
        std::fs::create_dir(&dir).unwrap();
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::lchown(&dir, Some(first), Some(first)).unwrap();
            assert_ne!(allocate(root.path(), "a", range).unwrap(), first);
        }
    }
}
