//! Agent memory (docs/api/memory.md): memory stores, the memories in them (UTF-8 text at
//! a path) and the versions that record every change. Every rule is here, once: names,
//! descriptions and metadata of stores; the shape of paths (NFC, no control or format
//! characters, whole segments); content size and digest; preconditions; what an
//! archived store still allows; which version may be redacted; who the actor of a write
//! is. The managed `/v1/memory_stores` routes parse the wire and call these; the session
//! service calls [`mount_slug`] for the directory a store is mounted in.
//!
//! The store (`AgentMemoryStore`) serializes the writers of one store, so the cap, the
//! path's uniqueness and a precondition are decided on the state the write commits on.

use agentd_schema::memory::{self as rules, shown};
use agentd_schema::store::{
    MemoryActor, MemoryContent, MemoryDeletion, MemoryListItem, MemoryQuery, MemoryRow, MemoryStoreQuery,
    MemoryStoreRow, MemoryStoreUpdate, MemoryUpdate, MemoryVersionQuery, MemoryVersionRow, MemoryWrite, NewMemory,
    NewMemoryStore,
};
use agentd_schema::{Store, StoreError};
use serde_json::Value;

pub use agentd_schema::memory::{MAX_CONTENT_BYTES, MAX_PATH_BYTES, MAX_PATH_SEGMENTS};
pub use agentd_schema::store::MAX_MEMORIES_PER_STORE;

use super::{DomainError, DomainResult};
use crate::admission::{Access, Tenant};

/// A store's `name`, in characters.
pub const MAX_STORE_NAME_CHARS: usize = 255;
/// A store's `description`, in characters.
pub const MAX_STORE_DESCRIPTION_CHARS: usize = 1024;
/// How often a store update re-reads and retries after a concurrent change.
const UPDATE_ATTEMPTS: usize = 5;

/// The directory a store is mounted in under `/mnt/memory/`: the name lowercased, every
/// run of characters other than ASCII letters and digits replaced by one `-`, leading
/// and trailing `-` trimmed; `memory` when nothing is left (a name of only punctuation
/// or non-ASCII letters). Names are not unique, so neither are slugs.
pub fn mount_slug(name: &str) -> String {
    let mut slug = String::with_capacity(name.len());
    for c in name.to_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    while slug.ends_with('-') {
        slug.pop();
    }
    if slug.is_empty() { "memory".to_owned() } else { slug }
}

/// Checks a store's `name`: 1 to 255 characters without control characters.
pub fn store_name(value: &str) -> DomainResult<String> {
    let count = value.chars().count();
    if count == 0 || count > MAX_STORE_NAME_CHARS {
        return Err(DomainError::invalid(format!("name: must be 1 to {MAX_STORE_NAME_CHARS} characters, got {count}")));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(DomainError::invalid(format!(
            "name: must not contain control characters, found U+{:04X}",
            u32::from(c)
        )));
    }
    Ok(value.to_owned())
}

/// Checks a store's `description`: at most 1,024 characters (empty means none).
pub fn store_description(value: &str) -> DomainResult<String> {
    let count = value.chars().count();
    if count > MAX_STORE_DESCRIPTION_CHARS {
        return Err(DomainError::invalid(format!(
            "description: at most {MAX_STORE_DESCRIPTION_CHARS} characters, got {count}"
        )));
    }
    Ok(value.to_owned())
}

/// Checks a memory path (`field` names it in the message) by the one rule every writer
/// of memories applies ([`agentd_schema::memory::check_path`]: `/`-rooted, 1–20 whole
/// segments, no control or format characters, at most 1,024 bytes, already NFC).
pub fn check_path(field: &str, path: &str) -> DomainResult<()> {
    rules::check_path(path).map_err(|why| DomainError::invalid(format!("{field}: {why}")))
}

/// Checks a listing's `path_prefix`: `/`, or a valid path followed by `/` (a directory;
/// it matches whole segments only).
pub fn check_path_prefix(field: &str, prefix: &str) -> DomainResult<()> {
    if prefix == "/" {
        return Ok(());
    }
    match prefix.strip_suffix('/') {
        Some(directory) if prefix.starts_with('/') => check_path(field, directory),
        _ => Err(DomainError::invalid(format!("{field}: must start and end with `/`, got {}", shown(prefix)))),
    }
}

/// A memory's content with its digest and size: at most 102,400 bytes of UTF-8.
pub fn content(text: String) -> DomainResult<MemoryContent> {
    rules::content(text).map_err(|why| DomainError::invalid(format!("content: {why}")))
}

/// Checks an expected digest (`field` names it): 64 lowercase hexadecimal characters.
pub fn sha256_hex(field: &str, value: &str) -> DomainResult<String> {
    if value.len() != 64 || !value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(DomainError::invalid(format!(
            "{field}: must be a SHA-256 digest as 64 lowercase hexadecimal characters, got {}",
            shown(value)
        )));
    }
    Ok(value.to_owned())
}

/// Who a request writes as: its session for a sessions token (an agent writing through
/// its mount), otherwise the API key that authenticated it.
pub fn actor(tenant: &Tenant) -> MemoryActor {
    match &tenant.access {
        Access::Session { session_id, .. } => MemoryActor::Session(session_id.clone()),
        Access::Workspace | Access::Environment(_) | Access::Runner | Access::App(_) => {
            MemoryActor::ApiKey(tenant.key_id.clone())
        }
    }
}

fn store_not_found(id: &str) -> DomainError {
    DomainError::NotFound(format!("memory store not found: {id}"))
}

fn memory_not_found(store_id: &str, id: &str) -> DomainError {
    DomainError::NotFound(format!("memory not found: {id} (in memory store {store_id})"))
}

fn archived(id: &str, what: &str) -> DomainError {
    DomainError::invalid(format!(
        "memory store {id} is archived and read-only: {what} (its memories can still be read and deleted, and their \
         versions redacted)"
    ))
}

/// Creates a store. `metadata` is a checked object of strings.
pub async fn create_store(
    store: &dyn Store,
    workspace_id: &str,
    name: &str,
    description: &str,
    metadata: Value,
) -> DomainResult<MemoryStoreRow> {
    let new = NewMemoryStore {
        id: agentd_schema::ids::new_id("memstore"),
        workspace_id: workspace_id.to_owned(),
        name: store_name(name)?,
        description: store_description(description)?,
        metadata,
    };
    Ok(store.create_memory_store(new).await?)
}

/// A store of the workspace (404 otherwise, as for another workspace's).
pub async fn load_store(store: &dyn Store, workspace_id: &str, id: &str) -> DomainResult<MemoryStoreRow> {
    store.get_memory_store(workspace_id, id).await?.ok_or_else(|| store_not_found(id))
}

/// Stores of the workspace, newest first.
pub async fn list_stores(
    store: &dyn Store,
    workspace_id: &str,
    query: &MemoryStoreQuery,
) -> DomainResult<Vec<MemoryStoreRow>> {
    Ok(store.list_memory_stores(workspace_id, query).await?)
}

/// The changes of a store update: `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct StoreChanges {
    /// A new name.
    pub name: Option<String>,
    /// A new description (empty clears it).
    pub description: Option<String>,
    /// A metadata patch: a string sets a key, `null` removes it, keys left out stay.
    pub metadata: Option<serde_json::Map<String, Value>>,
}

/// Applies a metadata patch to what was read and checks the result (at most 16 pairs,
/// keys 1–64 characters, values at most 512).
fn merge_metadata(stored: &Value, patch: &serde_json::Map<String, Value>) -> DomainResult<Value> {
    crate::managed::body::patch_metadata(stored, &Value::Object(patch.clone()), "metadata").map_err(|error| match error
    {
        crate::error::ApiError::InvalidRequest { message, code } => DomainError::Invalid { message, code },
        other => DomainError::invalid(other.to_string()),
    })
}

/// Updates a store's name, description and metadata. The metadata patch is merged into
/// what was read and written only if the store has not changed since
/// (`expected_revision`); a concurrent change makes it re-read and merge again. An
/// archived store takes no update (400); a change that changes nothing writes nothing.
pub async fn update_store(
    store: &dyn Store,
    workspace_id: &str,
    id: &str,
    changes: &StoreChanges,
) -> DomainResult<MemoryStoreRow> {
    let name = changes.name.as_deref().map(store_name).transpose()?;
    let description = changes.description.as_deref().map(store_description).transpose()?;
    for _ in 0..UPDATE_ATTEMPTS {
        let current = load_store(store, workspace_id, id).await?;
        if current.archived_at_ms.is_some() {
            return Err(archived(id, "the store cannot be updated"));
        }
        let metadata = match &changes.metadata {
            Some(patch) => merge_metadata(&current.metadata, patch)?,
            None => current.metadata.clone(),
        };
        let update = MemoryStoreUpdate {
            expected_revision: current.revision,
            name: name.clone().unwrap_or_else(|| current.name.clone()),
            description: description.clone().unwrap_or_else(|| current.description.clone()),
            metadata,
        };
        if update.name == current.name
            && update.description == current.description
            && update.metadata == current.metadata
        {
            return Ok(current);
        }
        match store.update_memory_store(workspace_id, id, update).await {
            Ok(Some(updated)) => return Ok(updated),
            Ok(None) => return Err(store_not_found(id)),
            // Changed or archived meanwhile: read it again.
            Err(StoreError::Conflict(_)) => continue,
            Err(other) => return Err(other.into()),
        }
    }
    Err(DomainError::Conflict(format!("memory store {id} kept changing while it was being updated; retry")))
}

/// Archives a store: it becomes read-only for good (idempotent).
pub async fn archive_store(store: &dyn Store, workspace_id: &str, id: &str) -> DomainResult<MemoryStoreRow> {
    store.archive_memory_store(workspace_id, id).await?.ok_or_else(|| store_not_found(id))
}

/// Deletes a store with its memories and versions.
pub async fn delete_store(store: &dyn Store, workspace_id: &str, id: &str) -> DomainResult<()> {
    if store.delete_memory_store(workspace_id, id).await? { Ok(()) } else { Err(store_not_found(id)) }
}

/// The refusals a memory write comes back with, as domain errors.
fn written(outcome: MemoryWrite, store_id: &str, memory_id: &str, path: Option<&str>) -> DomainResult<MemoryRow> {
    match outcome {
        MemoryWrite::Written(row) => Ok(row),
        MemoryWrite::StoreMissing => Err(store_not_found(store_id)),
        MemoryWrite::StoreArchived => Err(archived(store_id, "its memories cannot be created or changed")),
        MemoryWrite::MemoryMissing => Err(memory_not_found(store_id, memory_id)),
        MemoryWrite::PathTaken => Err(DomainError::MemoryPathConflict(format!(
            "path: memory store {store_id} already has a memory at {}",
            shown(path.unwrap_or_default())
        ))),
        MemoryWrite::StoreFull => Err(DomainError::invalid(format!(
            "memory store {store_id} holds {MAX_MEMORIES_PER_STORE} memories, the most a store holds; delete some \
             before creating more"
        ))),
        MemoryWrite::PreconditionFailed { current_sha256 } => Err(DomainError::MemoryPreconditionFailed(format!(
            "precondition: memory {memory_id} no longer has the expected content_sha256 (it is {current_sha256} now); \
             read it again"
        ))),
    }
}

/// Creates a memory at `path` (a `created` version records it). `content` may be empty.
pub async fn create_memory(
    store: &dyn Store,
    tenant: &Tenant,
    store_id: &str,
    path: String,
    text: String,
) -> DomainResult<MemoryRow> {
    check_path("path", &path)?;
    let content = content(text)?;
    let id = agentd_schema::ids::new_id("mem");
    let new = NewMemory {
        workspace_id: tenant.workspace_id.clone(),
        memory_store_id: store_id.to_owned(),
        id: id.clone(),
        version_id: agentd_schema::ids::new_id("memver"),
        path: path.clone(),
        content,
        actor: actor(tenant),
    };
    written(store.create_memory(new).await?, store_id, &id, Some(&path))
}

/// The changes of a memory update: `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct MemoryChanges {
    /// A new path: a rename (the memory keeps its id).
    pub path: Option<String>,
    /// New content.
    pub content: Option<String>,
    /// Apply only if the current content has this digest (checked as 64 lowercase hex).
    pub expected_sha256: Option<String>,
}

/// Changes a memory's content, path or both (a `modified` version records it), if its
/// precondition holds; the precondition refers to the content before the change.
pub async fn update_memory(
    store: &dyn Store,
    tenant: &Tenant,
    store_id: &str,
    memory_id: &str,
    changes: MemoryChanges,
) -> DomainResult<MemoryRow> {
    if let Some(path) = &changes.path {
        check_path("path", path)?;
    }
    let content = changes.content.map(content).transpose()?;
    let expected_sha256 =
        changes.expected_sha256.as_deref().map(|v| sha256_hex("precondition.content_sha256", v)).transpose()?;
    let update = MemoryUpdate {
        workspace_id: tenant.workspace_id.clone(),
        memory_store_id: store_id.to_owned(),
        memory_id: memory_id.to_owned(),
        version_id: agentd_schema::ids::new_id("memver"),
        path: changes.path.clone(),
        content,
        expected_sha256,
        actor: actor(tenant),
    };
    written(store.update_memory(update).await?, store_id, memory_id, changes.path.as_deref())
}

/// Deletes a memory (a `deleted` version records it; its versions stay), if its content
/// still has `expected_sha256`. Allowed in an archived store.
pub async fn delete_memory(
    store: &dyn Store,
    tenant: &Tenant,
    store_id: &str,
    memory_id: &str,
    expected_sha256: Option<&str>,
) -> DomainResult<MemoryRow> {
    let expected_sha256 = expected_sha256.map(|v| sha256_hex("expected_content_sha256", v)).transpose()?;
    let deletion = MemoryDeletion {
        workspace_id: tenant.workspace_id.clone(),
        memory_store_id: store_id.to_owned(),
        memory_id: memory_id.to_owned(),
        version_id: agentd_schema::ids::new_id("memver"),
        expected_sha256,
        actor: actor(tenant),
    };
    written(store.delete_memory(deletion).await?, store_id, memory_id, None)
}

/// A memory of the store (404 for a missing store or memory).
pub async fn get_memory(
    store: &dyn Store,
    workspace_id: &str,
    store_id: &str,
    memory_id: &str,
    with_content: bool,
) -> DomainResult<MemoryRow> {
    match store.get_memory(workspace_id, store_id, memory_id, with_content).await? {
        Some(memory) => Ok(memory),
        None => {
            load_store(store, workspace_id, store_id).await?;
            Err(memory_not_found(store_id, memory_id))
        }
    }
}

/// Memories of a store in path order (bytewise), rolled up by `depth`; `query.path_prefix`
/// is checked here.
pub async fn list_memories(
    store: &dyn Store,
    workspace_id: &str,
    store_id: &str,
    query: &MemoryQuery,
) -> DomainResult<Vec<MemoryListItem>> {
    if let Some(prefix) = &query.path_prefix {
        check_path_prefix("path_prefix", prefix)?;
    }
    load_store(store, workspace_id, store_id).await?;
    Ok(store.list_memories(workspace_id, store_id, query).await?)
}

/// A version of a store's memories.
pub async fn get_version(
    store: &dyn Store,
    workspace_id: &str,
    store_id: &str,
    version_id: &str,
    with_content: bool,
) -> DomainResult<MemoryVersionRow> {
    match store.get_memory_version(workspace_id, store_id, version_id, with_content).await? {
        Some(version) => Ok(version),
        None => {
            load_store(store, workspace_id, store_id).await?;
            Err(DomainError::NotFound(format!("memory version not found: {version_id} (in memory store {store_id})")))
        }
    }
}

/// Versions of a store's memories, newest first.
pub async fn list_versions(
    store: &dyn Store,
    workspace_id: &str,
    store_id: &str,
    query: &MemoryVersionQuery,
) -> DomainResult<Vec<MemoryVersionRow>> {
    load_store(store, workspace_id, store_id).await?;
    Ok(store.list_memory_versions(workspace_id, store_id, query).await?)
}

/// Redacts a version: its path, content, digest and size are erased for good
/// (idempotent). The version that holds a live memory's current content is refused:
/// redacting it would leave the memory without the history of what it holds; update or
/// delete the memory first, then redact.
pub async fn redact_version(
    store: &dyn Store,
    tenant: &Tenant,
    store_id: &str,
    version_id: &str,
) -> DomainResult<MemoryVersionRow> {
    let workspace_id = tenant.workspace_id.as_str();
    let version = get_version(store, workspace_id, store_id, version_id, false).await?;
    if version.redacted_at_ms.is_none() {
        let current = store.get_memory(workspace_id, store_id, &version.memory_id, false).await?;
        // A superseded version never becomes current again, so this check cannot go stale.
        if current.is_some_and(|memory| memory.memory_version_id == version.id) {
            return Err(DomainError::invalid(format!(
                "memory version {version_id} holds the current content of memory {}; update or delete the memory \
                 first, then redact this version",
                version.memory_id
            )));
        }
    }
    store.redact_memory_version(workspace_id, store_id, version_id, actor(tenant)).await?.ok_or_else(|| {
        DomainError::NotFound(format!("memory version not found: {version_id} (in memory store {store_id})"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(path: &str) -> String {
        match check_path("path", path) {
            Err(DomainError::Invalid { message, .. }) => message,
            other => panic!("{path:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn mount_slugs_are_lowercase_runs_joined_by_single_hyphens() {
        assert_eq!(mount_slug("Customer Notes"), "customer-notes");
        assert_eq!(mount_slug("  --Team__Alpha!! 2026 "), "team-alpha-2026");
        assert_eq!(mount_slug("a.b/c\\d"), "a-b-c-d");
        assert_eq!(mount_slug("already-a-slug"), "already-a-slug");
        assert_eq!(mount_slug("ABC123"), "abc123");
        // Non-ASCII letters are separators too; the Kelvin sign lowercases to `k`.
        assert_eq!(mount_slug("Café Über"), "caf-ber");
        assert_eq!(mount_slug("\u{212A}elvin"), "kelvin");
        // Nothing left: the fallback.
        assert_eq!(mount_slug("!!!"), "memory");
        assert_eq!(mount_slug("日本語"), "memory");
        assert_eq!(mount_slug(""), "memory");
        // Only single hyphens, never at either end.
        for name in ["x -- y", "--x--", "x\u{0}\u{1}y", "🙂x🙂🙂y🙂"] {
            let slug = mount_slug(name);
            assert!(!slug.contains("--") && !slug.starts_with('-') && !slug.ends_with('-'), "{name:?} → {slug}");
            assert!(slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'), "{slug}");
        }
    }

    #[test]
    fn valid_paths_pass() {
        for path in [
            "/a",
            "/notes.md",
            "/projects/foo/notes.md",
            "/Projects/Foo", // case is kept: a different path from /projects/foo
            "/with space/and-dash_underscore.txt",
            "/.hidden",
            "/..x/x..",
            "/café/naïve.md", // precomposed (NFC)
            "/日本語/メモ.md",
            "/emoji/🙂.md",
        ] {
            assert!(check_path("path", path).is_ok(), "{path:?}: {:?}", check_path("path", path));
        }
        let twenty = "/s".repeat(20);
        assert!(check_path("path", &twenty).is_ok());
        let longest = format!("/{}", "x".repeat(MAX_PATH_BYTES - 1));
        assert!(check_path("path", &longest).is_ok());
    }

    #[test]
    fn malformed_paths_are_refused_with_the_reason() {
        assert!(refused("").contains("start with `/`"));
        assert!(refused("notes.md").contains("start with `/`"));
        assert!(refused("/").contains("empty segments"));
        assert!(refused("/a/").contains("empty segments"));
        assert!(refused("//a").contains("empty segments"));
        assert!(refused("/a//b").contains("empty segments"));
        assert!(refused("/a/./b").contains("`.` segments"));
        assert!(refused("/.").contains("`.` segments"));
        assert!(refused("/a/../b").contains("`..` segments"));
        assert!(refused("/..").contains("`..` segments"));
        assert!(refused(&"/s".repeat(21)).contains("at most 20 segments"));
        let too_long = format!("/{}", "x".repeat(MAX_PATH_BYTES));
        assert!(refused(&too_long).contains("at most 1024 bytes"));
        // Bytes, not characters: 342 three-byte characters are 1,027 bytes.
        assert!(refused(&format!("/{}", "語".repeat(342))).contains("bytes"));
        for (path, what) in [
            ("/a\u{0}b", "control"),
            ("/a\nb", "control"),
            ("/a\tb", "control"),
            ("/a\u{7f}", "control"),
            ("/a\u{85}", "control"),
            ("/a\u{200b}b", "format"),       // zero-width space
            ("/a\u{200d}b", "format"),       // zero-width joiner
            ("/a\u{feff}", "format"),        // byte-order mark
            ("/a\u{202e}txt.exe", "format"), // right-to-left override
            ("/a\u{2028}b", "line separator"),
            ("/a\u{2029}b", "paragraph separator"),
        ] {
            let message = refused(path);
            assert!(message.starts_with("path: ") && message.contains(what), "{path:?}: {message}");
        }
        // Decomposed `é` (e + U+0301) is not NFC: refused, naming NFC, never normalized.
        let message = refused("/cafe\u{301}.md");
        assert!(message.contains("NFC") && message.contains("does not normalize"), "{message}");
        // A huge path is named by its head, not echoed whole.
        assert!(refused(&format!("x{}", "y".repeat(5000))).len() < 300);
    }

    #[test]
    fn path_prefixes_are_directories() {
        for prefix in ["/", "/a/", "/projects/foo/", "/日本/"] {
            assert!(check_path_prefix("path_prefix", prefix).is_ok(), "{prefix:?}");
        }
        for prefix in ["", "a/", "/a", "//", "/a//", "/./", "/a/../", "/a\u{0}/", "/cafe\u{301}/"] {
            let refused = check_path_prefix("path_prefix", prefix);
            assert!(
                matches!(&refused, Err(DomainError::Invalid { message, .. }) if message.starts_with("path_prefix: ")),
                "{prefix:?}: {refused:?}"
            );
        }
    }

    #[test]
    fn content_is_bounded_and_digested_once() {
        use sha2::Digest;
        let empty = content(String::new()).unwrap();
        assert_eq!(empty.sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(empty.size_bytes, 0);
        let hello = content("héllo".to_owned()).unwrap();
        assert_eq!(hello.size_bytes, 6, "UTF-8 bytes, not characters");
        assert_eq!(hello.sha256, hex::encode(sha2::Sha256::digest("héllo".as_bytes())));
        assert!(content("x".repeat(MAX_CONTENT_BYTES)).is_ok());
        let over = content("x".repeat(MAX_CONTENT_BYTES + 1));
        assert!(matches!(over, Err(DomainError::Invalid { message, .. }) if message.starts_with("content: ")));
        // Multi-byte characters count by their bytes.
        assert!(content("語".repeat(MAX_CONTENT_BYTES / 3 + 1)).is_err());
    }

    #[test]
    fn digests_are_64_lowercase_hex() {
        let good = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(sha256_hex("x", good).unwrap(), good);
        for bad in ["", &good[1..], &good.to_uppercase(), &format!("{good}0"), &good.replace('e', "g")] {
            assert!(
                matches!(sha256_hex("precondition.content_sha256", bad), Err(DomainError::Invalid { message, .. }) if message.starts_with("precondition.content_sha256: ")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn names_and_descriptions() {
        assert!(store_name("Customer notes").is_ok());
        assert!(store_name(&"n".repeat(255)).is_ok());
        assert!(store_name(&"語".repeat(255)).is_ok(), "characters, not bytes");
        for bad in ["", &"n".repeat(256), "a\nb", "a\u{7}b"] {
            assert!(
                matches!(store_name(bad), Err(DomainError::Invalid { message, .. }) if message.starts_with("name: ")),
                "{bad:?}"
            );
        }
        assert_eq!(store_description("").unwrap(), "");
        assert!(store_description(&"d".repeat(1024)).is_ok());
        assert!(store_description("line one\nline two").is_ok());
        assert!(
            matches!(store_description(&"d".repeat(1025)), Err(DomainError::Invalid { message, .. }) if message.starts_with("description: "))
        );
    }

    #[test]
    fn the_actor_is_the_session_for_a_sessions_token_and_the_key_otherwise() {
        let tenant = |access| Tenant {
            organization_id: "org".into(),
            workspace_id: "ws".into(),
            key_id: "apikey_x".into(),
            access,
        };
        assert_eq!(actor(&tenant(Access::Workspace)), MemoryActor::ApiKey("apikey_x".into()));
        let session =
            Access::Session { session_id: "sesn_x".into(), work_id: "work_x".into(), environment_id: "env_x".into() };
        assert_eq!(actor(&tenant(session)), MemoryActor::Session("sesn_x".into()));
    }

    #[test]
    fn metadata_patches_merge_and_stay_bounded() {
        let stored = serde_json::json!({"keep": "1", "drop": "2"});
        let patch = serde_json::json!({"drop": null, "new": "3"});
        let merged = merge_metadata(&stored, patch.as_object().unwrap()).unwrap();
        assert_eq!(merged, serde_json::json!({"keep": "1", "new": "3"}));
        let many: serde_json::Map<String, Value> = (0..16).map(|i| (format!("k{i}"), Value::from("v"))).collect();
        let over = merge_metadata(&stored, &many);
        assert!(matches!(over, Err(DomainError::Invalid { message, .. }) if message.starts_with("metadata")));
    }
}
