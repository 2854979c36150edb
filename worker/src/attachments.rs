//! Files named in `user.message` content (`image` and `document` blocks whose source is
//! `{"type":"file","file_id":…}`) turned into what a model reads: a base64 source for
//! images and PDFs, a text source for text documents. Both providers take that form:
//! the Anthropic Messages API as is, the OpenAI-compatible provider as data URLs and
//! text (`providers::openai`). A file that cannot be sent — gone, expired, too large, of
//! a type the block cannot carry — fails the request with a `session.error` naming it.
//!
//! And the system prompt's sections about what the session's hands mount: the agent's
//! custom skills (`skills_prompt`) and the memory stores attached to the session
//! (`memory_prompt`).

use std::collections::HashMap;
use std::sync::Arc;

use agentd_schema::Store;
use agentd_schema::blobs::{BlobKey, Blobs};
use base64::Engine;
use serde_json::{Value, json};

use crate::providers::{Block, ModelRequest, ProviderError};

/// The largest file sent to a model, in bytes (the Messages API's request limit is 32 MB
/// and base64 grows a file by a third).
pub const MAX_ATTACHMENT_BYTES: i64 = 20 * 1024 * 1024;

/// Image types both providers accept.
const IMAGE_TYPES: &[&str] = &["image/jpeg", "image/png", "image/gif", "image/webp"];

/// Resolved sources by file id, kept for an attempt so a file is read once.
pub type Resolved = HashMap<String, Value>;

/// Replaces every file source in `request` with the file's content. Sources already
/// resolved in `cache` are not read again.
pub async fn resolve(
    store: &dyn Store,
    blobs: &Blobs,
    workspace_id: &str,
    request: &mut ModelRequest,
    cache: &mut Resolved,
) -> Result<(), ProviderError> {
    // The conversation is shared with the thread's fold: copied only when it has a file.
    let blocks = request.messages.iter().flat_map(|message| &message.content);
    if !blocks.filter_map(raw_block).any(is_file_source) {
        return Ok(());
    }
    for message in Arc::make_mut(&mut request.messages) {
        for raw in message.content.iter_mut().filter_map(raw_block_mut).filter(|raw| is_file_source(raw)) {
            let kind = raw["type"].as_str().unwrap_or_default().to_owned();
            let file_id = raw["source"]["file_id"].as_str().unwrap_or_default().to_owned();
            let key = format!("{kind}:{file_id}");
            if !cache.contains_key(&key) {
                let source = source_of(store, blobs, workspace_id, &kind, &file_id).await?;
                cache.insert(key.clone(), source);
            }
            raw["source"] = cache[&key].clone();
        }
    }
    Ok(())
}

/// Whether `raw` is an image or document block whose source is a file of the workspace.
fn is_file_source(raw: &Value) -> bool {
    raw["source"]["type"] == "file" && matches!(raw["type"].as_str(), Some("image" | "document"))
}

fn raw_block(block: &Block) -> Option<&Value> {
    if let Block::Raw(raw) = block { Some(raw) } else { None }
}

fn raw_block_mut(block: &mut Block) -> Option<&mut Value> {
    if let Block::Raw(raw) = block { Some(raw) } else { None }
}

/// The text of a file rubric (docs/api/outcomes.md): a text file of the workspace, read
/// like a text `document` block's file; any other file is refused, saying why.
pub async fn rubric_text(
    store: &dyn Store,
    blobs: &Blobs,
    workspace_id: &str,
    file_id: &str,
) -> Result<String, ProviderError> {
    let source = source_of(store, blobs, workspace_id, "document", file_id).await?;
    match (source["type"].as_str(), source["data"].as_str()) {
        (Some("text"), Some(text)) => Ok(text.to_owned()),
        _ => Err(refused(format!("file {file_id} is not a text file; a rubric file must be text"))),
    }
}

fn refused(message: String) -> ProviderError {
    ProviderError { kind: crate::providers::ErrorKind::RequestFailed, retryable: false, message }
}

async fn source_of(
    store: &dyn Store,
    blobs: &Blobs,
    workspace_id: &str,
    kind: &str,
    file_id: &str,
) -> Result<Value, ProviderError> {
    let now = chrono::Utc::now().timestamp_millis();
    let row = match store.get_file(workspace_id, file_id).await {
        Ok(Some(row)) if row.is_live(now) => row,
        Ok(Some(row)) if row.is_expired(now) => {
            return Err(refused(format!("the {kind} block names file {file_id}, which has expired")));
        }
        Ok(_) => return Err(refused(format!("the {kind} block names file {file_id}, which does not exist"))),
        Err(error) => return Err(ProviderError::transport(format!("reading file {file_id}: {error}"))),
    };
    if row.size_bytes > MAX_ATTACHMENT_BYTES {
        return Err(refused(format!(
            "file {file_id} is {} bytes; a model reads files of at most {MAX_ATTACHMENT_BYTES} bytes",
            row.size_bytes
        )));
    }
    let mime = row.mime_type.as_str();
    let text_like = mime.starts_with("text/") || matches!(mime, "application/json" | "application/xml");
    let supported = match kind {
        "image" => IMAGE_TYPES.contains(&mime),
        _ => mime == "application/pdf" || text_like,
    };
    if !supported {
        let accepted = if kind == "image" { IMAGE_TYPES.join(", ") } else { "application/pdf and text".to_owned() };
        return Err(refused(format!(
            "file {file_id} is {mime}; an {kind} block carries {accepted} (send other files with a file resource \
             and let the agent read them in its sandbox)"
        )));
    }
    let bytes = blobs
        .get(&BlobKey::from_stored(&row.blob_key))
        .await
        .map_err(|error| ProviderError::transport(format!("reading file {file_id}: {error}")))?;
    if kind == "document" && text_like {
        let text = String::from_utf8(bytes.to_vec())
            .map_err(|_| refused(format!("file {file_id} is labelled {mime} but is not UTF-8 text")))?;
        return Ok(json!({ "type": "text", "media_type": "text/plain", "data": text }));
    }
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(json!({ "type": "base64", "media_type": mime, "data": data }))
}

/// The system prompt's list of the agent's custom skills: each one's name and
/// description and where its `SKILL.md` is, so the model reads it when a task calls for
/// the skill. `None` without custom skills. A skill that cannot be read is listed by id
/// with why, rather than silently left out. `agent` is the thread's (a child thread
/// lists its own agent's skills).
pub async fn skills_prompt(store: &dyn Store, session: &agentd_schema::Session, agent: &Value) -> Option<String> {
    let skills: Vec<&Value> =
        agent["skills"].as_array().into_iter().flatten().filter(|skill| skill["type"] == "custom").collect();
    if skills.is_empty() {
        return None;
    }
    // Our runner mounts skills at /mnt/skills/; the SDK's EnvironmentWorker unpacks them
    // into `skills/` under its working directory.
    let environment = session.body["environment_id"].as_str().unwrap_or_default();
    let self_hosted = match store.get_resource(&session.workspace_id, "environment", environment).await {
        Ok(Some(environment)) => environment.body["config"]["type"] == "self_hosted",
        _ => false,
    };
    let mut lines = vec![
        "## Skills".to_owned(),
        "You have these skills. Each is a directory whose SKILL.md says when and how to use it; read a skill's \
         SKILL.md with your tools before you use it."
            .to_owned(),
    ];
    for skill in skills {
        let skill_id = skill["skill_id"].as_str().unwrap_or_default();
        let version = skill["version"].as_str().unwrap_or("latest");
        match store.get_skill_version(&session.workspace_id, skill_id, version).await {
            Ok(Some(found)) => {
                let path = if self_hosted {
                    format!("skills/{}/SKILL.md (in your working directory)", found.name)
                } else {
                    format!("/mnt/skills/{}/SKILL.md", found.name)
                };
                lines.push(format!("- {}: {} — {path}", found.name, found.description.trim()));
            }
            Ok(None) => lines.push(format!("- {skill_id} (version {version}): no longer available")),
            Err(error) => lines.push(format!("- {skill_id} (version {version}): cannot be read now ({error})")),
        }
    }
    Some(lines.join("\n"))
}

/// The system prompt's memory section: for each memory store attached to the session
/// (its `memory_store` resources, snapshotted when attached), where it is mounted, its
/// name, whether the agent may change it, its description and the attachment's
/// instructions. `None` without memory stores. Read from the session alone: no store
/// read, so sessions without memory pay nothing.
pub fn memory_prompt(session: &Value) -> Option<String> {
    let stores: Vec<&Value> =
        session["resources"].as_array().into_iter().flatten().filter(|r| r["type"] == "memory_store").collect();
    if stores.is_empty() {
        return None;
    }
    let mut lines = vec![
        "## Memory".to_owned(),
        "You have persistent memory: each directory below is a memory store, text files that outlive this session. \
         Other sessions with the same store attached read what is there, and earlier sessions may have left notes: \
         look at a store before you start, and in a read-write store write down, one topic per file, what a later \
         session should know. Your changes are saved to the store as you work; if someone else changed the same \
         file meanwhile, their version is kept."
            .to_owned(),
    ];
    for store in stores {
        let text = |key: &str| store[key].as_str().map(str::trim).filter(|s| !s.is_empty());
        let id = text("memory_store_id").unwrap_or_default();
        let path = text("mount_path").map_or_else(|| format!("(the memory store {id})"), str::to_owned);
        let access = if store["access"] == "read_only" { "read-only: you cannot change it" } else { "read-write" };
        let mut line = format!("- {path} ({access}): {}", text("name").unwrap_or(id));
        if let Some(description) = text("description") {
            line.push_str(&format!(" — {description}"));
        }
        lines.push(line);
        if let Some(instructions) = text("instructions") {
            lines.push(format!("  Instructions for this store: {instructions}"));
        }
    }
    Some(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::memory_prompt;

    #[test]
    fn the_memory_section_names_each_store_its_access_and_instructions() {
        let session = json!({ "resources": [
            { "type": "file", "id": "sres_1", "file_id": "file_1", "mount_path": "/mnt/session/uploads/x" },
            { "type": "memory_store", "memory_store_id": "memstore_a", "access": "read_write", "name": "Team Notes",
              "description": "What the team decided.", "mount_path": "/mnt/memory/team-notes",
              "instructions": "Record every decision with its date." },
            { "type": "memory_store", "memory_store_id": "memstore_b", "access": "read_only", "name": "Style",
              "description": "", "mount_path": "/mnt/memory/style", "instructions": null },
        ]});
        let prompt = memory_prompt(&session).expect("a memory section");
        assert!(prompt.starts_with("## Memory\n"), "{prompt}");
        assert!(
            prompt.contains("- /mnt/memory/team-notes (read-write): Team Notes — What the team decided.\n  Instructions for this store: Record every decision with its date."),
            "{prompt}"
        );
        assert!(prompt.ends_with("- /mnt/memory/style (read-only: you cannot change it): Style"), "{prompt}");
        assert!(!prompt.contains("uploads"), "files are not memory: {prompt}");
    }

    #[test]
    fn no_memory_stores_no_section() {
        assert_eq!(memory_prompt(&json!({ "resources": [] })), None);
        assert_eq!(memory_prompt(&json!({})), None);
    }
}
