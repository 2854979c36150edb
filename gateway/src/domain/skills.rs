//! Skills (docs/api/skills.md): turning an upload into a validated skill version, the
//! rules of names and versions, one zip archive per version in the object store, and
//! the skills an agent configuration may name. Every surface that creates, reads or
//! references a skill calls these: the managed `/v1/skills` routes, agent create and
//! update, and session create (which pins `latest` to a version id).
//!
//! A version's archive is written before its rows and removed when the rows cannot be
//! written, so a reader never finds a row without its archive.

use std::io::{Cursor, Read};

use agentd_schema::Store;
use agentd_schema::StoreError;
use agentd_schema::blobs::{BlobKey, Blobs};
use agentd_schema::ids::SkillId;
use agentd_schema::store::{NewSkill, NewSkillVersion, SkillQuery, SkillRow, SkillVersionRow};
use bytes::Bytes;
use serde_json::{Value, json};

use super::files::blob_error;
pub use super::skill_upload::{MAX_FILES, MAX_UNPACKED_BYTES, UploadBudget, UploadedFile};
use super::skill_upload::{archive, parse};
use super::{DomainError, DomainResult};

/// A `display_name`'s longest form, in characters.
pub const MAX_DISPLAY_NAME_CHARS: usize = 255;

/// The `source` values a list may filter on.
pub const SOURCES: &[&str] = &["custom", "anthropic", "anthropic_example", "plugin"];

/// A version id: the clock in epoch microseconds (the store raises it past the latest).
fn version_id() -> String {
    chrono::Utc::now().timestamp_micros().to_string()
}

/// Parses, archives (off the async threads) and stores the archive of an upload.
async fn store_archive(
    blobs: &Blobs,
    workspace_id: &str,
    skill_id: &str,
    files: Vec<UploadedFile>,
) -> DomainResult<(NewSkillVersion, BlobKey)> {
    let (parsed, archive) = tokio::task::spawn_blocking(move || {
        let parsed = parse(files)?;
        let archive = archive(&parsed)?;
        Ok::<_, DomainError>((parsed, archive))
    })
    .await
    .map_err(|e| DomainError::Internal(format!("the skill archive task failed: {e}")))??;
    let id = version_id();
    let key = BlobKey::skill_version(workspace_id, skill_id, &id);
    blobs.put(&key, archive).await.map_err(blob_error)?;
    let listing: Vec<Value> = parsed.files.iter().map(|(path, b)| json!({ "path": path, "size": b.len() })).collect();
    let version = NewSkillVersion {
        id,
        name: parsed.name,
        description: parsed.description,
        files: Value::Array(listing),
        blob_key: key.as_str().to_owned(),
    };
    Ok((version, key))
}

/// Removes an archive whose rows were not written (logged, not raised: the caller's
/// own error is the answer).
async fn discard(blobs: &Blobs, key: &BlobKey) {
    if let Err(error) = blobs.delete(key).await {
        tracing::warn!(%key, %error, "removing the archive of a refused skill version failed");
    }
}

/// Checks a `display_name`: 1 to 255 characters on one line.
pub fn display_name(value: &str) -> DomainResult<String> {
    if value.trim().is_empty() {
        return Err(DomainError::invalid("display_name: must not be empty"));
    }
    if value.chars().count() > MAX_DISPLAY_NAME_CHARS {
        return Err(DomainError::invalid(format!("display_name: at most {MAX_DISPLAY_NAME_CHARS} characters")));
    }
    if value.contains(['\n', '\r']) || value.chars().any(char::is_control) {
        return Err(DomainError::invalid("display_name: must be a single line without control characters"));
    }
    Ok(value.to_owned())
}

/// Creates a skill from an upload; `display_name` defaults to the skill's name. A
/// second skill of the same name in the workspace is `NameTaken` (409 `skill_name_taken`).
pub async fn create(
    store: &dyn Store,
    blobs: &Blobs,
    workspace_id: &str,
    display_name: Option<String>,
    files: Vec<UploadedFile>,
) -> DomainResult<(SkillRow, SkillVersionRow)> {
    let display_name = display_name.as_deref().map(self::display_name).transpose()?;
    let id = agentd_schema::ids::new_id("skill");
    let (version, key) = store_archive(blobs, workspace_id, &id, files).await?;
    let name = version.name.clone();
    let new = NewSkill {
        id,
        workspace_id: workspace_id.to_owned(),
        display_name: display_name.unwrap_or_else(|| name.clone()),
        version,
    };
    match store.create_skill(new).await {
        Ok(created) => Ok(created),
        Err(error) => {
            discard(blobs, &key).await;
            Err(match error {
                StoreError::Conflict(_) => DomainError::NameTaken(format!(
                    "a skill named {name:?} already exists in this workspace; add a version to it instead"
                )),
                other => other.into(),
            })
        }
    }
}

/// A skill of the workspace (404 otherwise).
pub async fn load(store: &dyn Store, workspace_id: &str, id: &str) -> DomainResult<SkillRow> {
    store.get_skill(workspace_id, id).await?.ok_or_else(|| DomainError::NotFound(format!("skill not found: {id}")))
}

/// Whether `version` can name a version: an epoch-microsecond id, or `latest` where allowed.
fn version_shape(skill_id: &str, version: &str, latest_allowed: bool) -> DomainResult<()> {
    if version == "latest" {
        if latest_allowed {
            return Ok(());
        }
        return Err(DomainError::invalid("version: `latest` names a version only when reading; give a version id"));
    }
    if version.is_empty() || version.len() > 20 || !version.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DomainError::NotFound(format!("skill {skill_id} has no version {version:?}")));
    }
    Ok(())
}

/// One version of a skill; `latest` resolves to the newest.
pub async fn version(
    store: &dyn Store,
    workspace_id: &str,
    skill_id: &str,
    version: &str,
) -> DomainResult<SkillVersionRow> {
    version_shape(skill_id, version, true)?;
    match store.get_skill_version(workspace_id, skill_id, version).await? {
        Some(row) => Ok(row),
        None => {
            load(store, workspace_id, skill_id).await?;
            Err(DomainError::NotFound(format!("skill {skill_id} has no version {version:?}")))
        }
    }
}

/// Skills of the workspace, newest first; `query.limit` rows (ask one more to learn
/// whether a next page exists).
pub async fn list(store: &dyn Store, workspace_id: &str, query: &SkillQuery) -> DomainResult<Vec<SkillRow>> {
    if let Some(source) = query.source.as_ref().filter(|s| !SOURCES.contains(&s.as_str())) {
        return Err(DomainError::invalid(format!("source: must be one of {SOURCES:?}, got {source:?}")));
    }
    Ok(store.list_skills(workspace_id, query).await?)
}

/// Versions of a skill, newest first.
pub async fn versions(
    store: &dyn Store,
    workspace_id: &str,
    skill_id: &str,
    query: &SkillQuery,
) -> DomainResult<Vec<SkillVersionRow>> {
    load(store, workspace_id, skill_id).await?;
    Ok(store.list_skill_versions(workspace_id, skill_id, query).await?)
}

/// Adds a version from an upload; its name must be the skill's.
pub async fn add_version(
    store: &dyn Store,
    blobs: &Blobs,
    workspace_id: &str,
    skill_id: &str,
    files: Vec<UploadedFile>,
) -> DomainResult<SkillVersionRow> {
    let skill = load(store, workspace_id, skill_id).await?;
    let (version, key) = store_archive(blobs, workspace_id, skill_id, files).await?;
    if version.name != skill.name {
        discard(blobs, &key).await;
        return Err(DomainError::invalid(format!(
            "files: SKILL.md names {:?}, but skill {skill_id} is {:?}; every version of a skill keeps its name",
            version.name, skill.name
        )));
    }
    match store.add_skill_version(workspace_id, skill_id, version).await {
        Ok(Some(row)) => Ok(row),
        Ok(None) => {
            discard(blobs, &key).await;
            Err(DomainError::NotFound(format!("skill not found: {skill_id}")))
        }
        Err(error) => {
            discard(blobs, &key).await;
            Err(error.into())
        }
    }
}

/// Deletes a skill with every version, then their archives.
pub async fn delete(store: &dyn Store, blobs: &Blobs, workspace_id: &str, id: &str) -> DomainResult<()> {
    let keys = store
        .delete_skill(workspace_id, id)
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("skill not found: {id}")))?;
    for key in keys {
        discard_deleted(blobs, &BlobKey::from_stored(&key)).await;
    }
    Ok(())
}

/// Deletes one version (not `latest`, not the only one), then its archive.
pub async fn delete_version(
    store: &dyn Store,
    blobs: &Blobs,
    workspace_id: &str,
    skill_id: &str,
    version: &str,
) -> DomainResult<SkillVersionRow> {
    version_shape(skill_id, version, false)?;
    match store.delete_skill_version(workspace_id, skill_id, version).await? {
        Some(row) => {
            discard_deleted(blobs, &BlobKey::from_stored(&row.blob_key)).await;
            Ok(row)
        }
        None => {
            load(store, workspace_id, skill_id).await?;
            Err(DomainError::NotFound(format!("skill {skill_id} has no version {version:?}")))
        }
    }
}

/// The rows are gone: a failure to remove the archive is logged (the bytes are
/// unreachable), not answered.
async fn discard_deleted(blobs: &Blobs, key: &BlobKey) {
    if let Err(error) = blobs.delete(key).await {
        tracing::warn!(%key, %error, "removing a deleted skill version's archive failed; it stays unreachable");
    }
}

/// The archive of a version (`latest` allowed): the row and the zip's bytes as a stream.
pub async fn content(
    store: &dyn Store,
    blobs: &Blobs,
    workspace_id: &str,
    skill_id: &str,
    version: &str,
) -> DomainResult<(SkillVersionRow, agentd_schema::blobs::BlobRead)> {
    let row = self::version(store, workspace_id, skill_id, version).await?;
    let read = blobs.read(&BlobKey::from_stored(&row.blob_key)).await.map_err(blob_error)?;
    Ok((row, read))
}

/// One file of a version, by its path inside the skill's directory (`SKILL.md`,
/// `scripts/run.py`).
pub async fn file(
    store: &dyn Store,
    blobs: &Blobs,
    workspace_id: &str,
    skill_id: &str,
    version: &str,
    path: &str,
) -> DomainResult<Bytes> {
    let row = self::version(store, workspace_id, skill_id, version).await?;
    let path = path.trim_start_matches('/');
    let listed = row.files.as_array().is_some_and(|files| files.iter().any(|f| f["path"] == path));
    if !listed {
        return Err(DomainError::NotFound(format!("skill {skill_id} version {} has no file {path:?}", row.id)));
    }
    let archive = blobs.get(&BlobKey::from_stored(&row.blob_key)).await.map_err(blob_error)?;
    let entry = format!("{}/{path}", row.name);
    tokio::task::spawn_blocking(move || {
        let mut zip = zip::ZipArchive::new(Cursor::new(archive))
            .map_err(|e| DomainError::Internal(format!("skill archive unreadable: {e}")))?;
        let mut file =
            zip.by_name(&entry).map_err(|e| DomainError::Internal(format!("skill archive lacks {entry}: {e}")))?;
        let mut out = Vec::with_capacity(usize::try_from(file.size()).unwrap_or(0));
        file.read_to_end(&mut out).map_err(|e| DomainError::Internal(format!("skill archive entry {entry}: {e}")))?;
        Ok(Bytes::from(out))
    })
    .await
    .map_err(|e| DomainError::Internal(format!("the skill file task failed: {e}")))?
}

/// Checks the `skills` of an agent configuration (normalized: `{type, skill_id,
/// version}`) against the workspace and returns them with every `latest` replaced by
/// the version it names now. `anthropic` skills are refused: their files are
/// Anthropic's and a self-hosted agentd cannot serve them. `field` prefixes messages
/// (`skills` or `agent.skills`).
pub async fn resolve(store: &dyn Store, workspace_id: &str, skills: &Value, field: &str) -> DomainResult<Value> {
    let mut out = Vec::new();
    for (i, skill) in skills.as_array().map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
        let id = skill["skill_id"].as_str().unwrap_or_default();
        let version = skill["version"].as_str().unwrap_or("latest");
        match skill["type"].as_str() {
            Some("custom") => {}
            Some("anthropic") => {
                return Err(DomainError::invalid(format!(
                    "{field}[{i}]: anthropic skill {id:?} cannot be served by a self-hosted agentd (Anthropic's skill files are not available here); upload its files as a custom skill (POST /v1/skills) and reference that"
                )));
            }
            other => {
                return Err(DomainError::invalid(format!("{field}[{i}].type: must be custom, got {other:?}")));
            }
        }
        if SkillId::parse(id).is_err() {
            return Err(DomainError::invalid(format!("{field}[{i}].skill_id: {id:?} is not a skill id")));
        }
        let Some(skill_row) = store.get_skill(workspace_id, id).await? else {
            return Err(DomainError::invalid(format!("{field}[{i}].skill_id: no skill {id} in this workspace")));
        };
        let pinned = if version == "latest" {
            skill_row.latest_version_id
        } else {
            let known = version.bytes().all(|b| b.is_ascii_digit())
                && store.get_skill_version(workspace_id, id, version).await?.is_some();
            if !known {
                return Err(DomainError::invalid(format!(
                    "{field}[{i}].version: skill {id} has no version {version:?}"
                )));
            }
            version.to_owned()
        };
        out.push(json!({ "type": "custom", "skill_id": id, "version": pinned }));
    }
    Ok(Value::Array(out))
}

/// Checks the `skills` of an agent configuration (see [`resolve`]) without pinning.
pub async fn require_usable(store: &dyn Store, workspace_id: &str, skills: &Value) -> DomainResult<()> {
    resolve(store, workspace_id, skills, "skills").await.map(drop)
}
