//! The session's memory stores at `/mnt/memory/<slug>/` (docs/api/memory.md, "Memory in
//! sessions"): each attached store's memories downloaded into files at their paths when
//! the work item is prepared, and what the session's tools change there written back
//! through the memory API after each tool call, with the work item's sessions token (so
//! every version names the session).
//!
//! Per store the runner keeps what it last synced: path → memory id, content digest and
//! the file's size, modification time and inode when it was synced. After a call, a scan
//! stats the directory; only files whose stat moved are read and hashed, and a new
//! digest is written back: a new file is created, a changed one updated with a
//! `content_sha256` precondition on the digest last synced, a removed one deleted with
//! `expected_content_sha256`. Someone else's change in between (409) wins: the file is
//! refreshed from the store and the agent is told, in that tool call's result; so are
//! the API's refusals (too large, bad path, store full) and files that cannot be
//! memories (not UTF-8 text, links). A refused file is not tried again until it changes.
//! The reserved marker `.anthropic-memory-store` is never synced.
//!
//! A `read_only` store is owned by the runner (files 0444, directories 0555) and bound
//! read-only in the `namespace` sandbox; it is never written back. A `read_write` store
//! belongs to the session's uid. When a work item of the session is prepared again, each
//! store's directory is replaced by the store's current memories.
//!
//! The runner reads and writes these directories through [`Confinement`] rooted at the
//! store: `openat2(RESOLVE_BENEATH)`, links never followed out, so what the session puts
//! there cannot lead a root runner elsewhere on the host.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::client::{Api, MemoryAnswer};
use crate::mounts::{MountAccess, chown, host_path, make_dir, seal};
use crate::tools::path::Confinement;

/// The reserved marker at a store's root (the SDK's `EnvironmentWorker` stamps it); never
/// synced either way.
pub const MARKER: &str = ".anthropic-memory-store";

/// The largest memory, in bytes of UTF-8 (the API refuses more).
pub const MAX_MEMORY_BYTES: u64 = 102_400;

/// The memory stores among a session's resources, as mounts for its sandbox: only
/// `/mnt/memory/<name>` paths (anything else could open another part of `/mnt` to
/// writes; [`MemoryMounts::prepare`] refuses such a store).
pub fn mounts_of(session: &Value) -> Vec<MountAccess> {
    session["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["type"] == "memory_store")
        .filter_map(|r| {
            let path = r["mount_path"].as_str().filter(|path| store_dir_name(path).is_some())?;
            Some(MountAccess { path: path.to_owned(), writable: r["access"] != "read_only" })
        })
        .collect()
}

/// `<name>` of a `/mnt/memory/<name>` mount path: one clean segment.
fn store_dir_name(mount_path: &str) -> Option<&str> {
    let name = mount_path.strip_prefix("/mnt/memory/")?;
    (!name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')).then_some(name)
}

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stat {
    fn of(meta: &std::fs::Metadata) -> Self {
        Stat { len: meta.len(), modified: meta.modified().ok(), inode: meta.ino() }
    }
}

/// A path as last synced with the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Synced {
    memory_id: String,
    sha256: String,
    /// The file's stat when it held that content; `None`: unknown, read it next time.
    stat: Option<Stat>,
}

/// What a scan found at a path of the store's directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// A regular file.
    File(Stat),
    /// Anything else (a link, a fifo): never a memory.
    Other(Stat),
    /// A name that is not UTF-8: never a memory path.
    BadName(Stat),
}

impl Found {
    fn stat(self) -> Stat {
        match self {
            Found::File(stat) | Found::Other(stat) | Found::BadName(stat) => stat,
        }
    }
}

/// One thing a sync looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Deleted locally: delete the memory if the store still has what was synced.
    Delete { path: String, memory_id: String, expected: String },
    /// New or touched since the last sync: read it (or report it).
    Check { path: String, found: Found },
}

/// The steps of a sync: deletions first (they make room), then every path whose stat
/// moved since it was synced or refused. Unchanged files cost nothing but their stat.
pub(crate) fn plan(
    synced: &BTreeMap<String, Synced>,
    refused: &HashMap<String, Stat>,
    local: &BTreeMap<String, Found>,
) -> Vec<Step> {
    let mut steps: Vec<Step> = synced
        .iter()
        .filter(|(path, _)| !local.contains_key(*path))
        .map(|(path, s)| Step::Delete {
            path: path.clone(),
            memory_id: s.memory_id.clone(),
            expected: s.sha256.clone(),
        })
        .collect();
    for (path, found) in local {
        let stat = found.stat();
        let unchanged = synced.get(path).is_some_and(|s| s.stat == Some(stat) && matches!(found, Found::File(_)));
        if unchanged || refused.get(path) == Some(&stat) {
            continue;
        }
        steps.push(Step::Check { path: path.clone(), found: *found });
    }
    steps
}

/// What a file's content calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// The store has it (only the stat moved).
    Unchanged,
    /// A new memory.
    Create,
    /// A new content for the memory, if it still has `expected`.
    Update { memory_id: String, expected: String },
}

/// Decides what to write for a file whose content has digest `sha256`.
pub(crate) fn decide(synced: Option<&Synced>, sha256: &str) -> Change {
    match synced {
        Some(s) if s.sha256 == sha256 => Change::Unchanged,
        Some(s) => Change::Update { memory_id: s.memory_id.clone(), expected: s.sha256.clone() },
        None => Change::Create,
    }
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// One attached store, mounted.
#[derive(Debug)]
struct Store {
    id: String,
    /// `/mnt/memory/<slug>`, as the agent sees it.
    mount_path: String,
    /// Its host directory.
    dir: PathBuf,
    read_only: bool,
    files: Confinement,
    synced: BTreeMap<String, Synced>,
    refused: HashMap<String, Stat>,
}

/// The memory stores of a session, mounted under its `/mnt/memory/`.
#[derive(Debug, Default)]
pub struct MemoryMounts {
    stores: Vec<Store>,
}

/// A memory as the API lists it.
struct Remote {
    id: String,
    path: String,
    content: String,
    sha256: String,
}

impl Remote {
    fn of(memory: &Value) -> Option<Remote> {
        let content = memory["content"].as_str()?.to_owned();
        Some(Remote {
            id: memory["id"].as_str()?.to_owned(),
            path: memory["path"].as_str()?.to_owned(),
            sha256: memory["content_sha256"].as_str().map_or_else(|| sha256_hex(&content), str::to_owned),
            content,
        })
    }
}

impl MemoryMounts {
    /// Downloads every memory of each store attached to `session` into
    /// `<mnt>/memory/<slug>/` (a directory left by an earlier item is replaced). A store
    /// that cannot be read fails the whole preparation, naming it.
    pub async fn prepare(
        api: &Api,
        token: &str,
        session: &Value,
        mnt: &Path,
        owner: Option<(u32, u32)>,
    ) -> Result<MemoryMounts> {
        let mut stores = Vec::new();
        for resource in session["resources"].as_array().into_iter().flatten() {
            if resource["type"] != "memory_store" {
                continue;
            }
            let id = resource["memory_store_id"].as_str().unwrap_or_default().to_owned();
            let mount_path = resource["mount_path"].as_str().unwrap_or_default().to_owned();
            let dir = store_dir_name(&mount_path)
                .and_then(|_| host_path(mnt, &mount_path))
                .with_context(|| format!("memory store {id}: mount path {mount_path:?} is not /mnt/memory/<name>"))?;
            make_dir(&mnt.join("memory"), 0o755)?;
            let memories =
                download(api, token, &id).await.with_context(|| format!("memory store {id} cannot be read"))?;
            let read_only = resource["access"] == "read_only";
            let store = place(&id, &mount_path, &dir, read_only, owner, memories)
                .with_context(|| format!("memory store {id} cannot be mounted at {mount_path}"))?;
            tracing::info!(memory_store = %id, %mount_path, memories = store.synced.len(), read_only, "memory store mounted");
            stores.push(store);
        }
        Ok(MemoryMounts { stores })
    }

    /// Writes back what the last tool call changed in the writable stores. Returns what the
    /// agent must be told (conflicts, refusals), one line each; empty when all went well.
    /// Nothing to do, and no cost, for a session without memory stores.
    pub async fn sync(&mut self, api: &Api, token: &str) -> Vec<String> {
        let mut reports = Vec::new();
        for store in self.stores.iter_mut().filter(|s| !s.read_only) {
            store.sync(api, token, &mut reports).await;
        }
        reports
    }
}

/// Every memory of a store, with content (`view=full`, pages of 20).
async fn download(api: &Api, token: &str, store: &str) -> Result<Vec<Remote>> {
    let mut memories = Vec::new();
    let mut page: Option<String> = None;
    loop {
        let mut query = vec![("view", "full"), ("limit", "20")];
        if let Some(page) = &page {
            query.push(("page", page.as_str()));
        }
        let body = api.memories_page(token, store, &query).await?;
        for item in body["data"].as_array().into_iter().flatten().filter(|i| i["type"] == "memory") {
            memories.push(Remote::of(item).context("a listed memory lacks its id, path or content")?);
        }
        match body["next_page"].as_str() {
            Some(next) if Some(next) != page.as_deref() => page = Some(next.to_owned()),
            Some(_) => bail!("the memory listing repeats its page cursor"),
            None => return Ok(memories),
        }
    }
}

/// Replaces whatever is at `dir` (and a stale staging directory) with nothing, even a
/// read-only tree.
fn clear(dir: &Path) -> Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return Ok(()) };
    if !meta.is_dir() {
        return Ok(std::fs::remove_file(dir)?);
    }
    for entry in
        walkdir::WalkDir::new(dir).follow_links(false).follow_root_links(false).into_iter().filter_map(Result::ok)
    {
        if entry.file_type().is_dir() {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o700));
        }
    }
    std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))
}

/// Places a store's memories at `dir`: a read-write store owned by the session, a
/// read-only one by the runner and sealed (staged next to it, then renamed into place).
fn place(
    id: &str,
    mount_path: &str,
    dir: &Path,
    read_only: bool,
    owner: Option<(u32, u32)>,
    memories: Vec<Remote>,
) -> Result<Store> {
    clear(dir)?;
    let name = dir.file_name().context("a store directory has a name")?.to_string_lossy().into_owned();
    let target = if read_only { dir.with_file_name(format!(".{name}.agentd-partial")) } else { dir.to_path_buf() };
    clear(&target)?;
    make_dir(&target, 0o755)?;
    let writer = if read_only { None } else { owner };
    if !read_only {
        chown(&target, owner)?;
    }
    let files = Confinement::new(std::fs::canonicalize(&target)?, writer)?.unmounted();
    let mut synced = BTreeMap::new();
    for memory in memories {
        if memory.path == format!("/{MARKER}") {
            continue;
        }
        match write_file(&files, &memory.path, &memory.content) {
            Ok(stat) => {
                synced.insert(memory.path, Synced { memory_id: memory.id, sha256: memory.sha256, stat: Some(stat) });
            }
            // Not in the baseline, so never deleted by a later sync: the store keeps it.
            Err(error) => tracing::warn!(memory_store = %id, path = %memory.path, %error, "a memory cannot be placed"),
        }
    }
    let files = if read_only {
        seal(&target)?;
        std::fs::rename(&target, dir)?;
        Confinement::new(std::fs::canonicalize(dir)?, None)?.unmounted()
    } else {
        files
    };
    Ok(Store {
        id: id.to_owned(),
        mount_path: mount_path.to_owned(),
        dir: dir.to_path_buf(),
        read_only,
        files,
        synced,
        refused: HashMap::new(),
    })
}

/// Writes `content` at the memory path `path` (creating directories), returning the stat
/// of the file written.
fn write_file(files: &Confinement, path: &str, content: &str) -> Result<Stat, String> {
    let resolved = files.resolve(path)?;
    let mut file = files.open_write(&resolved, true)?;
    file.write_all(content.as_bytes()).map_err(|e| format!("cannot write {path}: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot stat {path}: {e}"))?;
    Ok(Stat::of(&meta))
}

/// Why a file cannot be a memory.
enum Unusable {
    TooLarge(u64),
    NotText,
    Unreadable(String),
}

/// Reads a file that may be a memory: its text, digest and stat at the read.
fn read_file(files: &Confinement, path: &str) -> Result<(String, String, Stat), (Unusable, Option<Stat>)> {
    let resolved = files.resolve(path).map_err(|e| (Unusable::Unreadable(e), None))?;
    let (file, meta) = files.open_read(&resolved).map_err(|e| (Unusable::Unreadable(e), None))?;
    let stat = Stat::of(&meta);
    if !meta.is_file() {
        return Err((Unusable::Unreadable(format!("{path} is not a regular file")), Some(stat)));
    }
    if meta.len() > MAX_MEMORY_BYTES {
        return Err((Unusable::TooLarge(meta.len()), Some(stat)));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_MEMORY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| (Unusable::Unreadable(format!("cannot read {path}: {e}")), Some(stat)))?;
    if bytes.len() as u64 > MAX_MEMORY_BYTES {
        return Err((Unusable::TooLarge(bytes.len() as u64), Some(stat)));
    }
    let text = String::from_utf8(bytes).map_err(|_| (Unusable::NotText, Some(stat)))?;
    let sha = sha256_hex(&text);
    Ok((text, sha, stat))
}

impl Store {
    /// Regular files (and what else is there) under the store's directory, by memory path.
    fn scan(&self) -> BTreeMap<String, Found> {
        let mut found = BTreeMap::new();
        for entry in walkdir::WalkDir::new(&self.dir)
            .follow_links(false)
            .follow_root_links(false)
            .min_depth(1)
            .into_iter()
            .filter_map(Result::ok)
        {
            if entry.file_type().is_dir() {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            let stat = Stat::of(&meta);
            let rel = entry.path().strip_prefix(&self.dir).unwrap_or(entry.path());
            let (path, kind) = match rel.to_str() {
                Some(rel) if entry.file_type().is_file() => (format!("/{rel}"), Found::File(stat)),
                Some(rel) => (format!("/{rel}"), Found::Other(stat)),
                None => (format!("/{}", rel.to_string_lossy()), Found::BadName(stat)),
            };
            if path != format!("/{MARKER}") {
                found.insert(path, kind);
            }
        }
        found
    }

    /// `/mnt/memory/<slug>/a.md` for the memory path `/a.md`.
    fn shown(&self, path: &str) -> String {
        format!("{}{path}", self.mount_path)
    }

    async fn sync(&mut self, api: &Api, token: &str, reports: &mut Vec<String>) {
        let local = self.scan();
        for step in plan(&self.synced, &self.refused, &local) {
            match step {
                Step::Delete { path, memory_id, expected } => {
                    self.delete(api, token, &path, &memory_id, &expected, reports).await;
                }
                Step::Check { path, found: Found::File(_) } => self.check(api, token, &path, reports).await,
                Step::Check { path, found: Found::Other(stat) } => {
                    reports.push(format!(
                        "{} was not saved: only regular files are memories (links are not)",
                        self.shown(&path)
                    ));
                    self.refused.insert(path, stat);
                }
                Step::Check { path, found: Found::BadName(stat) } => {
                    reports.push(format!("{} was not saved: a memory's path must be UTF-8", self.shown(&path)));
                    self.refused.insert(path, stat);
                }
            }
        }
    }

    /// A file new or touched since the last sync.
    async fn check(&mut self, api: &Api, token: &str, path: &str, reports: &mut Vec<String>) {
        let (text, sha, stat) = match read_file(&self.files, path) {
            Ok(read) => read,
            Err((why, stat)) => {
                reports.push(match why {
                    Unusable::TooLarge(n) => format!(
                        "{} was not saved: it is {n} bytes, and a memory holds at most {MAX_MEMORY_BYTES} bytes",
                        self.shown(path)
                    ),
                    Unusable::NotText => {
                        format!("{} was not saved: a memory holds UTF-8 text, and this file is not", self.shown(path))
                    }
                    Unusable::Unreadable(e) => format!("{} was not saved: {e}", self.shown(path)),
                });
                if let Some(stat) = stat {
                    self.refused.insert(path.to_owned(), stat);
                }
                return;
            }
        };
        let answer = match decide(self.synced.get(path), &sha) {
            Change::Unchanged => {
                if let Some(synced) = self.synced.get_mut(path) {
                    synced.stat = Some(stat);
                }
                return;
            }
            Change::Create => api.create_memory(token, &self.id, path, &text).await,
            Change::Update { memory_id, expected } => {
                match api.update_memory(token, &self.id, &memory_id, &text, &expected).await {
                    // Deleted in the store meanwhile: the file is now the only copy.
                    Ok(MemoryAnswer::Missing) => api.create_memory(token, &self.id, path, &text).await,
                    Ok(MemoryAnswer::Conflict(_)) => {
                        reports.push(format!(
                            "{} was changed outside this session since it was last synced: your change was not \
                             saved, and the file now holds the store's version; read it again and redo your change \
                             if it still applies",
                            self.shown(path)
                        ));
                        self.refresh(api, token, path, &memory_id, reports).await;
                        return;
                    }
                    other => other,
                }
            }
        };
        match answer {
            Ok(MemoryAnswer::Done(memory)) => {
                self.refused.remove(path);
                let memory_id = memory["id"].as_str().unwrap_or_default().to_owned();
                let sha256 = memory["content_sha256"].as_str().map_or(sha, str::to_owned);
                self.synced.insert(path.to_owned(), Synced { memory_id, sha256, stat: Some(stat) });
            }
            Ok(MemoryAnswer::Conflict(message)) => {
                // A create whose path someone else took meanwhile: theirs wins.
                match self.find(api, token, path).await {
                    Some(memory_id) => {
                        reports.push(format!(
                            "{} was created outside this session meanwhile: your file was not saved, and it now \
                             holds the store's version; read it again and redo your change if it still applies",
                            self.shown(path)
                        ));
                        self.refresh(api, token, path, &memory_id, reports).await;
                    }
                    None => {
                        reports.push(format!("{} was not saved: {message}", self.shown(path)));
                        self.refused.insert(path.to_owned(), stat);
                    }
                }
            }
            Ok(MemoryAnswer::Refused(message)) => {
                reports.push(format!("{} was not saved: {message}", self.shown(path)));
                self.refused.insert(path.to_owned(), stat);
            }
            Ok(MemoryAnswer::Missing) => {
                reports.push(format!("{} was not saved: the memory store {} is gone", self.shown(path), self.id));
                self.refused.insert(path.to_owned(), stat);
            }
            Err(error) => reports.push(format!(
                "{} could not be saved now ({error}); it is tried again after the next tool call",
                self.shown(path)
            )),
        }
    }

    /// A file removed since the last sync.
    async fn delete(
        &mut self,
        api: &Api,
        token: &str,
        path: &str,
        memory_id: &str,
        expected: &str,
        reports: &mut Vec<String>,
    ) {
        match api.delete_memory(token, &self.id, memory_id, expected).await {
            Ok(MemoryAnswer::Done(_) | MemoryAnswer::Missing) => {
                self.synced.remove(path);
            }
            Ok(MemoryAnswer::Conflict(_)) => {
                reports.push(format!(
                    "{} was changed outside this session since it was last synced: it was not deleted, and the file \
                     is back with the store's version",
                    self.shown(path)
                ));
                self.refresh(api, token, path, memory_id, reports).await;
            }
            Ok(MemoryAnswer::Refused(message)) => {
                reports.push(format!("{} was not deleted from the store: {message}", self.shown(path)));
                self.synced.remove(path);
            }
            Err(error) => reports.push(format!(
                "{} could not be deleted from the store now ({error}); it is tried again after the next tool call",
                self.shown(path)
            )),
        }
    }

    /// The id of the store's memory at `path`, if there is one.
    async fn find(&self, api: &Api, token: &str, path: &str) -> Option<String> {
        let parent = match path.rfind('/') {
            Some(at) => &path[..=at],
            None => "/",
        };
        let mut page: Option<String> = None;
        loop {
            let mut query = vec![("view", "basic"), ("limit", "100"), ("depth", "1"), ("path_prefix", parent)];
            if let Some(page) = &page {
                query.push(("page", page.as_str()));
            }
            let body = api.memories_page(token, &self.id, &query).await.ok()?;
            let items = body["data"].as_array()?;
            if let Some(found) = items.iter().find(|i| i["type"] == "memory" && i["path"] == path) {
                return found["id"].as_str().map(str::to_owned);
            }
            match body["next_page"].as_str() {
                Some(next) if Some(next) != page.as_deref() => page = Some(next.to_owned()),
                _ => return None,
            }
        }
    }

    /// The store's version wins: the file at `path` is replaced by the memory as it is
    /// now (at its path now, which a rename may have changed), or removed if it is gone.
    async fn refresh(&mut self, api: &Api, token: &str, path: &str, memory_id: &str, reports: &mut Vec<String>) {
        let remote = match api.memory(token, &self.id, memory_id).await {
            Ok(MemoryAnswer::Done(memory)) => Remote::of(&memory),
            Ok(MemoryAnswer::Missing) => None,
            Ok(other) => {
                reports.push(format!("{} cannot be refreshed from the store: {other:?}", self.shown(path)));
                return;
            }
            Err(error) => {
                reports.push(format!("{} cannot be refreshed from the store now: {error}", self.shown(path)));
                return;
            }
        };
        self.synced.remove(path);
        let outcome = match remote {
            Some(remote) => {
                let moved = remote.path != path;
                let removed = if moved { self.remove(path) } else { Ok(()) };
                removed.and_then(|()| write_file(&self.files, &remote.path, &remote.content)).map(|stat| {
                    let synced = Synced { memory_id: remote.id, sha256: remote.sha256, stat: Some(stat) };
                    self.synced.insert(remote.path, synced);
                })
            }
            None => self.remove(path),
        };
        if let Err(error) = outcome {
            reports.push(format!("{} cannot be refreshed from the store: {error}", self.shown(path)));
        }
    }

    fn remove(&self, path: &str) -> Result<(), String> {
        self.files.remove_file(&self.files.resolve(path)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(len: u64, inode: u64) -> Stat {
        Stat { len, modified: Some(SystemTime::UNIX_EPOCH), inode }
    }

    fn synced(id: &str, sha: &str, at: Option<Stat>) -> Synced {
        Synced { memory_id: id.into(), sha256: sha.into(), stat: at }
    }

    #[test]
    fn only_files_whose_stat_moved_are_read_and_removed_ones_deleted() {
        let mut last = BTreeMap::new();
        last.insert("/kept.md".to_owned(), synced("mem_1", "aa", Some(stat(3, 1))));
        last.insert("/touched.md".to_owned(), synced("mem_2", "bb", Some(stat(3, 2))));
        last.insert("/gone.md".to_owned(), synced("mem_3", "cc", Some(stat(3, 3))));
        last.insert("/unknown.md".to_owned(), synced("mem_4", "dd", None));
        let mut local = BTreeMap::new();
        local.insert("/kept.md".to_owned(), Found::File(stat(3, 1)));
        local.insert("/touched.md".to_owned(), Found::File(stat(4, 2)));
        local.insert("/unknown.md".to_owned(), Found::File(stat(3, 4)));
        local.insert("/new.md".to_owned(), Found::File(stat(1, 5)));
        local.insert("/refused.bin".to_owned(), Found::File(stat(9, 6)));
        local.insert("/link".to_owned(), Found::Other(stat(1, 7)));
        let mut refused = HashMap::new();
        refused.insert("/refused.bin".to_owned(), stat(9, 6));
        let steps = plan(&last, &refused, &local);
        assert_eq!(
            steps,
            vec![
                Step::Delete { path: "/gone.md".into(), memory_id: "mem_3".into(), expected: "cc".into() },
                Step::Check { path: "/link".into(), found: Found::Other(stat(1, 7)) },
                Step::Check { path: "/new.md".into(), found: Found::File(stat(1, 5)) },
                Step::Check { path: "/touched.md".into(), found: Found::File(stat(4, 2)) },
                Step::Check { path: "/unknown.md".into(), found: Found::File(stat(3, 4)) },
            ]
        );
        // A refused file is looked at again once it changes.
        local.insert("/refused.bin".to_owned(), Found::File(stat(10, 6)));
        assert!(
            plan(&last, &refused, &local)
                .contains(&Step::Check { path: "/refused.bin".into(), found: Found::File(stat(10, 6)) })
        );
        // Nothing moved, nothing to do.
        last.remove("/unknown.md");
        let quiet: BTreeMap<String, Found> =
            last.iter().filter_map(|(p, s)| Some((p.clone(), Found::File(s.stat?)))).collect();
        assert!(plan(&last, &HashMap::new(), &quiet).is_empty());
    }

    #[test]
    fn a_new_digest_is_an_update_on_the_last_synced_one() {
        let last = synced("mem_1", "old", Some(stat(1, 1)));
        assert_eq!(decide(Some(&last), "old"), Change::Unchanged);
        assert_eq!(decide(Some(&last), "new"), Change::Update { memory_id: "mem_1".into(), expected: "old".into() });
        assert_eq!(decide(None, "new"), Change::Create);
    }

    #[test]
    fn memory_stores_are_mounts_writable_unless_read_only() {
        let session = serde_json::json!({ "resources": [
            { "type": "file", "file_id": "file_1", "mount_path": "/mnt/session/uploads/x" },
            { "type": "memory_store", "memory_store_id": "memstore_a", "access": "read_write", "mount_path": "/mnt/memory/a" },
            { "type": "memory_store", "memory_store_id": "memstore_b", "access": "read_only", "mount_path": "/mnt/memory/b" },
            { "type": "memory_store", "memory_store_id": "memstore_c", "mount_path": "/mnt/skills" },
            { "type": "memory_store", "memory_store_id": "memstore_d", "mount_path": "/mnt/memory/../skills" },
            { "type": "memory_store", "memory_store_id": "memstore_e", "mount_path": "/mnt/memory/x/y" },
        ]});
        assert_eq!(
            mounts_of(&session),
            vec![
                MountAccess { path: "/mnt/memory/a".into(), writable: true },
                MountAccess { path: "/mnt/memory/b".into(), writable: false },
            ]
        );
    }

    #[test]
    fn placing_a_store_writes_its_memories_and_seals_a_read_only_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("memory");
        std::fs::create_dir_all(&root).unwrap();
        let memories = || {
            vec![
                Remote {
                    id: "mem_1".into(),
                    path: "/a.md".into(),
                    content: "alpha".into(),
                    sha256: sha256_hex("alpha"),
                },
                Remote {
                    id: "mem_2".into(),
                    path: "/deep/b.md".into(),
                    content: "beta".into(),
                    sha256: sha256_hex("beta"),
                },
                Remote { id: "mem_3".into(), path: format!("/{MARKER}"), content: "x".into(), sha256: sha256_hex("x") },
            ]
        };
        let store = place("memstore_a", "/mnt/memory/a", &root.join("a"), false, None, memories()).unwrap();
        assert_eq!(std::fs::read_to_string(root.join("a/deep/b.md")).unwrap(), "beta");
        assert!(!root.join("a").join(MARKER).exists(), "the marker is never placed");
        assert_eq!(store.synced.keys().collect::<Vec<_>>(), ["/a.md", "/deep/b.md"]);
        // What was placed is what the next scan finds unchanged.
        assert!(plan(&store.synced, &store.refused, &store.scan()).is_empty());

        // Placed again (a later work item): replaced by the store's memories, read-only.
        std::fs::write(root.join("a/stale.md"), "left over").unwrap();
        let sealed = place("memstore_a", "/mnt/memory/a", &root.join("a"), true, None, memories()).unwrap();
        assert!(!root.join("a/stale.md").exists());
        assert_eq!(std::fs::read_to_string(root.join("a/a.md")).unwrap(), "alpha");
        let mode = |p: &str| std::fs::metadata(root.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode("a"), mode("a/deep"), mode("a/a.md")), (0o555, 0o555, 0o444));
        assert!(!root.join(".a.agentd-partial").exists());
        drop(sealed);
        // A sealed tree is replaced too.
        place("memstore_a", "/mnt/memory/a", &root.join("a"), false, None, vec![]).unwrap();
        assert_eq!(std::fs::read_dir(root.join("a")).unwrap().count(), 0);
    }

    #[test]
    fn files_that_cannot_be_memories_are_refused_with_why() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let files = Confinement::new(root.clone(), None).unwrap().unmounted();
        std::fs::write(root.join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        std::fs::write(root.join("big"), vec![b'x'; MAX_MEMORY_BYTES as usize + 1]).unwrap();
        std::fs::write(root.join("ok.md"), "fine").unwrap();
        assert!(matches!(read_file(&files, "/bin"), Err((Unusable::NotText, Some(_)))));
        assert!(
            matches!(read_file(&files, "/big"), Err((Unusable::TooLarge(n), Some(_))) if n == MAX_MEMORY_BYTES + 1)
        );
        let (text, sha, _) = read_file(&files, "/ok.md").ok().unwrap();
        assert_eq!((text.as_str(), sha), ("fine", sha256_hex("fine")));
        // A link out of the store is never followed.
        std::os::unix::fs::symlink("/etc/passwd", root.join("out")).unwrap();
        assert!(matches!(read_file(&files, "/out"), Err((Unusable::Unreadable(_), _))));
    }
}
