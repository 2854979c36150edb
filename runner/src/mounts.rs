//! What a session sees under `/mnt/` (docs/api/files.md, docs/api/skills.md,
//! docs/api/memory.md): its `file` resources at their mount paths and the custom skills
//! of its agent and of its multiagent roster's agents at `/mnt/skills/<name>/`,
//! read-only; and `/mnt/session/outputs/`, where whatever its tools write becomes a file
//! scoped to the session when the tool call ends.
//! Its memory stores, at `/mnt/memory/<slug>/`, are `crate::memory`'s.
//!
//! On the host all of it lives in `<workdir>/mnt/`: the `namespace` sandbox binds that
//! directory at `/mnt` (uploads and skills read-only on top), the file tools read
//! `/mnt/…` from it, and at the `workdir` level (no mount namespace) `bash` finds it
//! at `./mnt/` in the workdir.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::client::Api;

/// The directory of the workdir that the sandbox sees as `/mnt`.
pub const MNT: &str = "mnt";

/// The outputs directory, relative to [`MNT`].
const OUTPUTS: &str = "session/outputs";

/// The largest skill archive unpacked (the gateway refuses more than 50 MB unpacked).
const MAX_SKILL_BYTES: u64 = 64 * 1024 * 1024;

/// A session's `/mnt`: what was placed there, and which outputs were already uploaded.
#[derive(Debug)]
pub struct Mounts {
    outputs: PathBuf,
    /// Uploaded outputs by path, with the size and modification time they had.
    uploaded: HashMap<PathBuf, (u64, Option<SystemTime>)>,
}

/// A directory the session's resources put under `/mnt` besides its files and skills (a
/// memory store's), and whether its tools may write there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountAccess {
    /// Its path in the sandbox, e.g. `/mnt/memory/notes`.
    pub path: String,
    /// Writable by the session (else bound read-only).
    pub writable: bool,
}

/// The host path of `mount_path` (`/mnt/…`) inside `mnt`; `None` when it is not under
/// `/mnt/` or not clean.
pub fn host_path(mnt: &Path, mount_path: &str) -> Option<PathBuf> {
    let rest = mount_path.strip_prefix("/mnt/")?;
    let clean = rest.split('/').all(|s| !s.is_empty() && s != "." && s != "..");
    clean.then(|| mnt.join(rest))
}

pub(crate) fn make_dir(path: &Path, mode: u32) -> Result<()> {
    std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

pub(crate) fn chown(path: &Path, owner: Option<(u32, u32)>) -> Result<()> {
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).with_context(|| format!("chown {}", path.display()))?;
    }
    Ok(())
}

impl Mounts {
    /// Places the session's files and skills under `<workdir>/mnt` and makes the outputs
    /// directory, owned by the session (`owner`). Files and skills are owned by the
    /// runner and read-only. A file or skill that cannot be placed fails the whole
    /// preparation, naming it: the session's tools must not run on a partial `/mnt`
    /// (its memory stores are placed next, by `crate::memory`).
    pub async fn prepare(
        api: &Api,
        token: &str,
        session: &Value,
        workdir: &Path,
        owner: Option<(u32, u32)>,
    ) -> Result<Mounts> {
        let mnt = workdir.join(MNT);
        make_dir(&mnt, 0o755)?;
        make_dir(&mnt.join("session"), 0o755)?;
        let outputs = mnt.join(OUTPUTS);
        make_dir(&outputs, 0o755)?;
        chown(&outputs, owner)?;
        for resource in session["resources"].as_array().into_iter().flatten() {
            if resource["type"] != "file" {
                continue;
            }
            let file_id = resource["file_id"].as_str().unwrap_or_default();
            let mount_path = resource["mount_path"].as_str().unwrap_or_default();
            let dest = host_path(&mnt, mount_path)
                .with_context(|| format!("file {file_id}: mount path {mount_path:?} is not under /mnt/"))?;
            if dest.exists() {
                continue;
            }
            if let Some(parent) = dest.parent() {
                make_dir(parent, 0o755)?;
            }
            let partial = dest.with_extension("agentd-partial");
            api.download_file(token, session["id"].as_str().unwrap_or_default(), file_id, &partial)
                .await
                .with_context(|| format!("file {file_id} cannot be mounted at {mount_path}"))?;
            std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o444))?;
            std::fs::rename(&partial, &dest)?;
        }
        for (skill_id, version) in custom_skills(&session["agent"]) {
            place_skill(api, token, &mnt, skill_id, version)
                .await
                .with_context(|| format!("skill {skill_id} (version {version}) cannot be mounted"))?;
        }
        // Outputs already there were uploaded before this runner (re)opened the sandbox.
        let mut mounts = Mounts { outputs, uploaded: HashMap::new() };
        for (path, seen) in mounts.scan() {
            mounts.uploaded.insert(path, seen);
        }
        Ok(mounts)
    }

    /// Regular files under the outputs directory (symlinks and others skipped), with
    /// their size and modification time.
    fn scan(&self) -> Vec<(PathBuf, (u64, Option<SystemTime>))> {
        walkdir::WalkDir::new(&self.outputs)
            .follow_links(false)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|entry| entry.file_type().is_file())
            .filter_map(|entry| {
                let meta = entry.metadata().ok()?;
                Some((entry.into_path(), (meta.len(), meta.modified().ok())))
            })
            .collect()
    }

    /// Uploads every output that is new or changed since the last look (after a tool
    /// call ends). Returns the ids of the files made. A failed upload is retried at
    /// the next look.
    pub async fn collect_outputs(&mut self, api: &Api, token: &str, session: &str) -> Vec<String> {
        let mut made = Vec::new();
        for (path, seen) in self.scan() {
            if self.uploaded.get(&path) == Some(&seen) {
                continue;
            }
            let name = path.strip_prefix(&self.outputs).unwrap_or(&path).to_string_lossy().into_owned();
            match api.upload_output(token, session, &name, &path).await {
                Ok(file) => {
                    tracing::info!(output = %name, file = file["id"].as_str().unwrap_or_default(), "session output uploaded");
                    made.push(file["id"].as_str().unwrap_or_default().to_owned());
                    self.uploaded.insert(path, seen);
                }
                Err(error) => {
                    tracing::warn!(output = %name, %error, "uploading a session output failed; retried later")
                }
            }
        }
        made
    }
}

/// The custom skills to mount for a session's agent (its snapshot), each `(skill_id,
/// version)` once: the agent's own, then those of each agent of its multiagent roster,
/// whose threads share the session's sandbox (docs/adr/0022 §10). The roster is a
/// `coordinator`'s `agents` but its advisors, or an enabled
/// `subagents.predefined_agents` of a `multiagent_20261001`; in a session each entry is
/// the agent's full definition, skills pinned (a `self` sentinel is the agent itself).
/// Skills share `/mnt/skills/<name>/`: of two versions of one skill, the first placed
/// (the primary's) is the one mounted.
fn custom_skills(agent: &Value) -> Vec<(&str, &str)> {
    let multiagent = &agent["multiagent"];
    let roster = match multiagent["type"].as_str() {
        Some("coordinator") => &multiagent["agents"],
        Some("multiagent_20261001") if multiagent["subagents"]["type"] == "enabled" => {
            &multiagent["subagents"]["predefined_agents"]
        }
        _ => &Value::Null,
    };
    let roster = roster.as_array().into_iter().flatten().filter(|a| a["type"] != "advisor" && a["type"] != "self");
    let mut skills: Vec<(&str, &str)> = Vec::new();
    for of in std::iter::once(agent).chain(roster) {
        for skill in of["skills"].as_array().into_iter().flatten().filter(|skill| skill["type"] == "custom") {
            let placed =
                (skill["skill_id"].as_str().unwrap_or_default(), skill["version"].as_str().unwrap_or("latest"));
            if !skills.contains(&placed) {
                skills.push(placed);
            }
        }
    }
    skills
}

/// Downloads a skill version and unpacks it at `<mnt>/skills/<name>/` (the archive's
/// wrapper directory is the name), read-only.
async fn place_skill(api: &Api, token: &str, mnt: &Path, skill_id: &str, version: &str) -> Result<()> {
    let described = api.skill_version(token, skill_id, version).await?;
    let name = described["name"].as_str().unwrap_or_default().to_owned();
    let version_id = described["id"].as_str().unwrap_or(version).to_owned();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        bail!("the skill's name {name:?} is not a directory name");
    }
    let target = mnt.join("skills").join(&name);
    if target.exists() {
        return Ok(());
    }
    let archive = api.skill_archive(token, skill_id, &version_id).await?;
    let skills = mnt.join("skills");
    make_dir(&skills, 0o755)?;
    let staging = skills.join(format!(".{name}.agentd-partial"));
    let _ = std::fs::remove_dir_all(&staging);
    let unpack_into = staging.clone();
    let wrapper = name.clone();
    tokio::task::spawn_blocking(move || unpack(&archive, &wrapper, &unpack_into)).await??;
    seal(&staging)?;
    std::fs::rename(&staging, &target)?;
    Ok(())
}

/// Unpacks a skill archive into `dest`, stripping the `wrapper/` directory. Entries
/// outside it, escaping paths, links and more than [`MAX_SKILL_BYTES`] are refused.
fn unpack(archive: &[u8], wrapper: &str, dest: &Path) -> Result<()> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(archive)).context("the skill archive is not a zip")?;
    let mut total = 0u64;
    make_dir(dest, 0o755)?;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i)?;
        let Some(path) = entry.enclosed_name() else { bail!("archive entry {:?} escapes its directory", entry.name()) };
        if entry.is_symlink() {
            bail!("archive entry {:?} is a link", entry.name());
        }
        let Ok(rel) = path.strip_prefix(wrapper) else {
            bail!("archive entry {:?} is outside {wrapper}/", entry.name())
        };
        let out = dest.join(rel);
        if entry.is_dir() {
            make_dir(&out, 0o755)?;
            continue;
        }
        if let Some(parent) = out.parent() {
            make_dir(parent, 0o755)?;
        }
        let mut file = std::fs::File::create(&out)?;
        let remaining = MAX_SKILL_BYTES.saturating_sub(total);
        let copied = std::io::copy(&mut (&mut entry).take(remaining + 1), &mut file)?;
        total += copied;
        if total > MAX_SKILL_BYTES {
            bail!("the skill archive unpacks to more than {MAX_SKILL_BYTES} bytes");
        }
    }
    Ok(())
}

/// Files 0444 and directories 0555 under `dir` (a skill is read-only in the sandbox).
pub(crate) fn seal(dir: &Path) -> Result<()> {
    for entry in walkdir::WalkDir::new(dir).contents_first(true).into_iter().filter_map(Result::ok) {
        let mode = if entry.file_type().is_dir() { 0o555 } else { 0o444 };
        std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_paths_stay_under_mnt() {
        let mnt = Path::new("/w/mnt");
        assert_eq!(host_path(mnt, "/mnt/session/uploads/file_x"), Some(PathBuf::from("/w/mnt/session/uploads/file_x")));
        for bad in ["/etc/passwd", "/mnt/../etc", "/mnt//x", "/mnt/./x", "mnt/x", "/mnt/"] {
            assert_eq!(host_path(mnt, bad), None, "{bad}");
        }
    }

    #[test]
    fn the_roster_agents_skills_are_mounted_too() {
        use serde_json::json;
        let skill = |id: &str, version: &str| json!({ "type": "custom", "skill_id": id, "version": version });
        let agent = |skills: Value| json!({ "type": "agent", "tools": [], "skills": skills });
        let mut primary = agent(json!([skill("skill_a", "1"), { "type": "anthropic", "skill_id": "xlsx" }]));
        primary["multiagent"] = json!({ "type": "coordinator", "agents": [
            { "type": "self" },
            agent(json!([skill("skill_b", "2"), skill("skill_a", "1")])),
            { "type": "advisor", "model": "m", "skills": [skill("skill_x", "1")] },
            agent(json!([{ "type": "custom", "skill_id": "skill_c" }])),
        ] });
        assert_eq!(custom_skills(&primary), [("skill_a", "1"), ("skill_b", "2"), ("skill_c", "latest")]);

        primary["multiagent"] = json!({ "type": "multiagent_20261001",
            "subagents": { "type": "enabled", "predefined_agents": [agent(json!([skill("skill_d", "3")]))] } });
        assert_eq!(custom_skills(&primary), [("skill_a", "1"), ("skill_d", "3")]);
        primary["multiagent"]["subagents"]["type"] = json!("disabled");
        assert_eq!(custom_skills(&primary), [("skill_a", "1")]);
        primary["multiagent"] = Value::Null;
        assert_eq!(custom_skills(&primary), [("skill_a", "1")]);
    }

    #[test]
    fn skill_archives_unpack_inside_their_wrapper_only() {
        use std::io::Write;
        let mut buffer = std::io::Cursor::new(Vec::new());
        {
            let mut zip = zip::ZipWriter::new(&mut buffer);
            let options = zip::write::SimpleFileOptions::default();
            zip.start_file("demo/SKILL.md", options).unwrap();
            zip.write_all(b"---\nname: demo\n---\n").unwrap();
            zip.start_file("demo/scripts/run.sh", options).unwrap();
            zip.write_all(b"echo hi").unwrap();
            zip.finish().unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        unpack(buffer.get_ref(), "demo", &dir.path().join("out")).unwrap();
        assert_eq!(std::fs::read(dir.path().join("out/scripts/run.sh")).unwrap(), b"echo hi");

        let mut outside = std::io::Cursor::new(Vec::new());
        {
            let mut zip = zip::ZipWriter::new(&mut outside);
            zip.start_file("other/x", zip::write::SimpleFileOptions::default()).unwrap();
            zip.finish().unwrap();
        }
        assert!(unpack(outside.get_ref(), "demo", &dir.path().join("out2")).is_err());
    }
}
