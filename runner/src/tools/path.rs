//! Confinement of model-supplied paths to the session workdir.
//!
//! Two layers, because the runner may be root and the sandbox shell can change the tree at
//! any moment:
//! 1. [`Confinement::resolve`] gives a clear error for the obvious escapes: `..` that climbs
//!    out, absolute paths elsewhere, and symlinks (at any component) whose target lies outside.
//! 2. Every open goes through `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to
//!    a directory fd of the workdir, so a symlink swapped in after the check still cannot
//!    lead outside; writes add `O_NOFOLLOW` and refuse a symlink as the final component.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::{Mode, mkdirat};

use crate::mounts::MNT;

/// The outputs directory, relative to the workdir: always writable.
const OUTPUTS: &str = "mnt/session/outputs";

/// The session workdir as seen by the file tools.
#[derive(Debug)]
pub(crate) struct Confinement {
    root: PathBuf,
    dir: OwnedFd,
    owner: Option<(u32, u32)>,
    /// Under `mnt/`, the only directories that take writes (relative to the root): the
    /// outputs and the session's writable mounts (read-write memory stores). `None`:
    /// the root is not a workdir (a memory store's own directory), no such rule.
    writable_mounts: Option<Vec<PathBuf>>,
}

/// A model-supplied path that [`Confinement::resolve`] found inside the workdir.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The path as the model gave it, for messages.
    pub given: String,
    /// Lexically normalized path relative to the workdir; empty for the workdir itself.
    pub rel: PathBuf,
    /// `root.join(rel)`.
    pub abs: PathBuf,
    /// Whether the final component exists and is a symlink.
    pub final_is_symlink: bool,
}

impl Confinement {
    /// Opens a directory fd on `root` (which must be canonical) and checks that the kernel
    /// supports `openat2`; `Err` with `ErrorKind::Unsupported` when it does not.
    pub fn new(root: PathBuf, owner: Option<(u32, u32)>) -> io::Result<Self> {
        let dir = File::open(&root)?;
        let dir = OwnedFd::from(dir);
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_BENEATH);
        match openat2(&dir, ".", how) {
            Ok(_) => Ok(Self { root, dir, owner, writable_mounts: Some(vec![PathBuf::from(OUTPUTS)]) }),
            Err(Errno::ENOSYS) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the file tools need openat2 (Linux 5.6 or later), which this kernel does not provide",
            )),
            Err(e) => Err(io::Error::from(e)),
        }
    }

    /// Also takes writes in these mounts (`/mnt/…` paths of the session's writable
    /// resources, such as its read-write memory stores).
    pub fn with_writable_mounts<'a>(mut self, mounts: impl IntoIterator<Item = &'a str>) -> Self {
        if let Some(writable) = &mut self.writable_mounts {
            writable.extend(
                mounts.into_iter().filter_map(|m| m.strip_prefix("/mnt/")).map(|rest| Path::new(MNT).join(rest)),
            );
        }
        self
    }

    /// A root that is not a workdir (a memory store's directory): no `/mnt` rule, and
    /// `/…` paths are relative to the root.
    pub fn unmounted(mut self) -> Self {
        self.writable_mounts = None;
        self
    }

    /// The canonical workdir.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The session's uid and gid, when the runner is root.
    pub fn owner(&self) -> Option<(u32, u32)> {
        self.owner
    }

    /// Checks that `given` (relative to the workdir, or absolute inside it) stays inside.
    pub fn resolve(&self, given: &str) -> Result<Resolved, String> {
        if given.is_empty() {
            return Err("path must not be empty".into());
        }
        if given.contains('\0') {
            return Err(format!("path contains a NUL byte: {given:?}"));
        }
        let escape = || format!("path escapes the session workdir: {given}");
        let candidate = Path::new(given);
        // `/mnt/…` is the session's mounts, kept in the workdir (`crate::mounts`).
        let joined = match candidate.strip_prefix("/mnt") {
            _ if self.writable_mounts.is_none() => self.root.join(candidate.strip_prefix("/").unwrap_or(candidate)),
            Ok(rest) if candidate.is_absolute() && !candidate.starts_with(&self.root) => self.root.join(MNT).join(rest),
            _ if candidate.is_absolute() => candidate.to_path_buf(),
            _ => self.root.join(candidate),
        };
        let mut normalized = PathBuf::new();
        for component in joined.components() {
            match component {
                Component::RootDir => normalized.push("/"),
                Component::CurDir => {}
                Component::ParentDir => {
                    normalized.pop();
                }
                Component::Normal(part) => normalized.push(part),
                Component::Prefix(_) => return Err(escape()),
            }
        }
        let rel = normalized.strip_prefix(&self.root).map_err(|_| escape())?.to_path_buf();

        // Any symlink along the way must resolve inside the workdir. Checking every prefix is
        // enough: `symlink_metadata` follows the earlier components, so a link reached through
        // another link is still seen.
        let mut current = self.root.clone();
        let mut final_is_symlink = false;
        let count = rel.components().count();
        for (i, component) in rel.components().enumerate() {
            current.push(component);
            match std::fs::symlink_metadata(&current) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    match std::fs::canonicalize(&current) {
                        Ok(real) if real.starts_with(&self.root) => {}
                        Ok(_) => return Err(format!("path escapes the session workdir through a symlink: {given}")),
                        Err(_) => {
                            return Err(format!("path goes through a symlink that does not resolve: {given}"));
                        }
                    }
                    if i + 1 == count {
                        final_is_symlink = true;
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let abs = self.root.join(&rel);
        Ok(Resolved { given: given.to_owned(), rel, abs, final_is_symlink })
    }

    /// Opens an existing path for reading, confined to the workdir. Never blocks on FIFOs.
    pub fn open_read(&self, path: &Resolved) -> Result<(File, std::fs::Metadata), String> {
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK;
        let fd = self.openat(path, flags, Mode::empty())?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(|e| format!("cannot stat {}: {e}", path.given))?;
        self.check_hard_link(path, &meta)?;
        Ok((file, meta))
    }

    /// Opens `path` for writing (creating it and, if asked, its parent directories), truncated.
    /// Refuses a symlink as the final component and anything but a regular file.
    pub fn open_write(&self, path: &Resolved, create_parents: bool) -> Result<File, String> {
        if path.rel.as_os_str().is_empty() {
            return Err(format!("is a directory: {}", path.given));
        }
        if path.final_is_symlink {
            return Err(format!("refusing to write through a symlink: {}", path.given));
        }
        // Mounted files, skills and read-only memory stores are read-only; under /mnt only
        // the outputs and the writable mounts take writes.
        if let Some(writable) = &self.writable_mounts
            && path.rel.starts_with(MNT)
            && !writable.iter().any(|dir| path.rel.starts_with(dir))
        {
            let memory = path.rel.starts_with(Path::new(MNT).join("memory"));
            return Err(if memory {
                format!("read-only: {} is in a memory store mounted read-only into the session", path.given)
            } else {
                format!(
                    "read-only: {} is mounted into the session; write under /mnt/session/outputs/ instead",
                    path.given
                )
            });
        }
        if create_parents && let Some(parent) = path.rel.parent() {
            self.create_dirs(path, parent)?;
        }
        // Check the type before truncating so a directory or FIFO is reported, not clobbered.
        if let Ok(existing) = self.openat(path, OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty()) {
            let meta = File::from(existing).metadata().map_err(|e| format!("cannot stat {}: {e}", path.given))?;
            if meta.is_dir() {
                return Err(format!("is a directory: {}", path.given));
            }
            if !meta.is_file() {
                return Err(format!("not a regular file: {}", path.given));
            }
            self.check_hard_link(path, &meta)?;
        }
        let flags = OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_TRUNC
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC
            | OFlag::O_NOCTTY
            | OFlag::O_NONBLOCK;
        let fd = self.openat(path, flags, Mode::from_bits_truncate(0o644))?;
        let file = File::from(fd);
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::fchown(&file, Some(uid), Some(gid))
                .map_err(|e| format!("cannot set the owner of {}: {e}", path.given))?;
        }
        Ok(file)
    }

    /// Removes a file (never a directory), confined like the other opens: the parent is
    /// opened beneath the root, so a directory swapped for a symlink cannot lead outside.
    pub fn remove_file(&self, path: &Resolved) -> Result<(), String> {
        let (Some(parent), Some(name)) = (path.rel.parent(), path.rel.file_name()) else {
            return Err(format!("is a directory: {}", path.given));
        };
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let dir = self.openat_rel(parent, &path.given, flags, Mode::empty())?;
        match nix::unistd::unlinkat(&dir, name, nix::unistd::UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(format!("cannot remove {}: {}", path.given, e.desc())),
        }
    }

    /// A root-run runner must not read or rewrite a host file that the sandbox user
    /// hard-linked into the workdir.
    fn check_hard_link(&self, path: &Resolved, meta: &std::fs::Metadata) -> Result<(), String> {
        match self.owner {
            Some((uid, _)) if meta.is_file() && meta.nlink() > 1 && meta.uid() != uid => {
                Err(format!("refusing to use a hard link to a file the sandbox user does not own: {}", path.given))
            }
            _ => Ok(()),
        }
    }

    fn create_dirs(&self, path: &Resolved, parent: &Path) -> Result<(), String> {
        let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let mut prefix = PathBuf::new();
        for component in parent.components() {
            let Component::Normal(name) = component else { continue };
            let parent_fd = self.openat_rel(&prefix, &path.given, dir_flags, Mode::empty())?;
            prefix.push(name);
            match mkdirat(&parent_fd, name, Mode::from_bits_truncate(0o755)) {
                Ok(()) => {
                    if let Some((uid, gid)) = self.owner {
                        let created = self.openat_rel(&prefix, &path.given, dir_flags, Mode::empty())?;
                        std::os::unix::fs::fchown(&created, Some(uid), Some(gid))
                            .map_err(|e| format!("cannot set the owner of {}: {e}", prefix.display()))?;
                    }
                }
                Err(Errno::EEXIST) => {}
                Err(e) => return Err(format!("cannot create directory {}: {}", prefix.display(), e.desc())),
            }
        }
        // The last directory must itself be reachable without escaping.
        self.openat_rel(&prefix, &path.given, dir_flags, Mode::empty()).map(drop)
    }

    fn openat(&self, path: &Resolved, flags: OFlag, mode: Mode) -> Result<OwnedFd, String> {
        self.openat_rel(&path.rel, &path.given, flags, mode)
    }

    fn openat_rel(&self, rel: &Path, given: &str, flags: OFlag, mode: Mode) -> Result<OwnedFd, String> {
        let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        let how = OpenHow::new()
            .flags(flags)
            .mode(mode)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        openat2(&self.dir, rel, how).map_err(|e| match e {
            Errno::EXDEV => format!("path escapes the session workdir: {given}"),
            Errno::ELOOP if flags.contains(OFlag::O_NOFOLLOW) => {
                format!("refusing to write through a symlink: {given}")
            }
            Errno::ENOENT => format!("no such file or directory: {given}"),
            Errno::ENOTDIR => format!("not a directory: {given}"),
            Errno::EISDIR => format!("is a directory: {given}"),
            Errno::ENXIO => format!("not a regular file: {given}"),
            other => format!("cannot open {given}: {}", other.desc()),
        })
    }
}

/// `path` relative to the workdir root, for listing output.
pub(crate) fn display_rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confinement() -> (tempfile::TempDir, Confinement) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, Confinement::new(root, None).unwrap())
    }

    #[test]
    fn lexical_escapes_are_refused() {
        let (_d, c) = confinement();
        for bad in ["../x", "a/../../x", "/etc/passwd", "/"] {
            let err = c.resolve(bad).unwrap_err();
            assert_eq!(err, format!("path escapes the session workdir: {bad}"));
        }
        assert_eq!(c.resolve("a/./b/../c").unwrap().rel, PathBuf::from("a/c"));
        let inside = c.root().join("x/y");
        assert_eq!(c.resolve(inside.to_str().unwrap()).unwrap().rel, PathBuf::from("x/y"));
        assert_eq!(c.resolve(".").unwrap().rel, PathBuf::new());
    }

    #[test]
    fn symlinks_out_are_refused_and_in_are_allowed() {
        let (_d, c) = confinement();
        std::os::unix::fs::symlink("/etc", c.root().join("out")).unwrap();
        std::fs::create_dir(c.root().join("real")).unwrap();
        std::os::unix::fs::symlink("real", c.root().join("in")).unwrap();
        assert!(c.resolve("out/passwd").unwrap_err().contains("through a symlink"));
        assert!(c.resolve("out").unwrap_err().contains("through a symlink"));
        let ok = c.resolve("in/file").unwrap();
        assert!(!ok.final_is_symlink);
        assert!(c.resolve("in").unwrap().final_is_symlink);
    }

    #[test]
    fn openat2_refuses_a_swapped_symlink() {
        let (_d, c) = confinement();
        // Resolve while `sub` is a real directory, then swap it for a link to /etc.
        std::fs::create_dir(c.root().join("sub")).unwrap();
        let resolved = c.resolve("sub/passwd").unwrap();
        std::fs::remove_dir(c.root().join("sub")).unwrap();
        std::os::unix::fs::symlink("/etc", c.root().join("sub")).unwrap();
        let err = c.open_read(&resolved).unwrap_err();
        assert_eq!(err, "path escapes the session workdir: sub/passwd");
        let err = c.open_write(&resolved, true).unwrap_err();
        assert_eq!(err, "path escapes the session workdir: sub/passwd");
        assert_eq!(c.remove_file(&resolved).unwrap_err(), "path escapes the session workdir: sub/passwd");
    }

    #[test]
    fn under_mnt_only_outputs_and_writable_mounts_take_writes() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let c = Confinement::new(root, None).unwrap().with_writable_mounts(["/mnt/memory/notes"]);
        let write = |path: &str| c.open_write(&c.resolve(path).unwrap(), true).map(drop);
        write("/mnt/session/outputs/a.txt").unwrap();
        write("/mnt/memory/notes/deep/b.md").unwrap();
        assert!(c.root().join("mnt/memory/notes/deep/b.md").is_file());
        let refused = write("/mnt/memory/style/c.md").unwrap_err();
        assert!(refused.contains("memory store mounted read-only"), "{refused}");
        let refused = write("/mnt/session/uploads/d").unwrap_err();
        assert!(refused.contains("write under /mnt/session/outputs/"), "{refused}");
        // Prefixes are whole components: `notes-old` is not `notes`.
        assert!(write("/mnt/memory/notes-old/e.md").is_err());
    }

    #[test]
    fn an_unmounted_root_takes_slash_paths_as_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let c = Confinement::new(root.clone(), None).unwrap().unmounted();
        let resolved = c.resolve("/mnt/x.md").unwrap();
        assert_eq!(resolved.abs, root.join("mnt/x.md"));
        c.open_write(&resolved, true).unwrap();
        c.remove_file(&resolved).unwrap();
        assert!(!root.join("mnt/x.md").exists());
        c.remove_file(&resolved).unwrap();
        assert!(c.resolve("/../x").is_err());
    }
}
