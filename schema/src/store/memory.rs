//! Agent memory (docs/api/memory.md): memory stores, the memories in them (text at a
//! path) and the versions that record every change to a memory and who made it.
//!
//! Every write to a memory is one transaction that locks its store's row first, so the
//! writers of one store are serialized: the per-store cap, the path's uniqueness and a
//! `content_sha256` precondition are all decided on the state the write commits on, and
//! a racing writer either wins or gets a precondition failure — never a lost update.
//! A refused write changes nothing.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;
use crate::store::TimeBounds;

/// The most memories one store holds.
pub const MAX_MEMORIES_PER_STORE: i64 = 2_000;

/// A memory store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryStoreRow {
    /// `memstore_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Display name (its slug is the mount directory under `/mnt/memory/`).
    pub name: String,
    /// Free text for the agent's system prompt; empty when unset.
    pub description: String,
    /// A JSON object of string values.
    pub metadata: Value,
    /// How many memories it holds.
    pub memory_count: i64,
    /// Bumped by every change of name, description, metadata or archival: the
    /// precondition of [`AgentMemoryStore::update_memory_store`].
    pub revision: i64,
    /// When it was archived (irreversible), epoch ms.
    pub archived_at_ms: Option<i64>,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change of name, description, metadata or archival, epoch ms.
    pub updated_at_ms: i64,
}

/// A new memory store.
#[derive(Debug, Clone)]
pub struct NewMemoryStore {
    /// `memstore_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Display name.
    pub name: String,
    /// Description (may be empty).
    pub description: String,
    /// A JSON object of string values.
    pub metadata: Value,
}

/// The new values of a store's editable fields, written only if the store is still at
/// `expected_revision` (the caller merged a metadata patch into what it read).
#[derive(Debug, Clone)]
pub struct MemoryStoreUpdate {
    /// The revision the caller read.
    pub expected_revision: i64,
    /// New name.
    pub name: String,
    /// New description.
    pub description: String,
    /// New metadata (the whole object).
    pub metadata: Value,
}

/// A page of memory stores, newest first.
#[derive(Debug, Clone, Default)]
pub struct MemoryStoreQuery {
    /// Creation time bounds (`gte`, `lte` used).
    pub created: TimeBounds,
    /// Include archived stores.
    pub include_archived: bool,
    /// Strictly older than this id (the cursor).
    pub before_id: Option<String>,
    /// At most this many.
    pub limit: i64,
}

/// Who wrote or redacted a memory version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryActor {
    /// A direct API caller, by the id of its key (`apikey_…`).
    ApiKey(String),
    /// An agent writing through its session's mount (`sesn_…`).
    Session(String),
}

impl MemoryActor {
    /// The stored kind: `api_key` or `session`.
    pub fn kind(&self) -> &'static str {
        match self {
            MemoryActor::ApiKey(_) => "api_key",
            MemoryActor::Session(_) => "session",
        }
    }

    /// The key's or the session's id.
    pub fn id(&self) -> &str {
        match self {
            MemoryActor::ApiKey(id) | MemoryActor::Session(id) => id,
        }
    }

    /// From its stored kind and id; `None` for a kind this build does not know.
    pub fn from_stored(kind: &str, id: String) -> Option<Self> {
        match kind {
            "api_key" => Some(MemoryActor::ApiKey(id)),
            "session" => Some(MemoryActor::Session(id)),
            _ => None,
        }
    }
}

/// A memory's content with its digest and size, computed once by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryContent {
    /// UTF-8 text.
    pub text: String,
    /// Lowercase hex SHA-256 of `text`'s bytes.
    pub sha256: String,
    /// `text.len()`.
    pub size_bytes: i64,
}

/// A memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRow {
    /// `mem_…` (kept across renames).
    pub id: String,
    /// Its store.
    pub memory_store_id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Its path in the store (`/a/b.md`).
    pub path: String,
    /// The content; `None` when the read did not ask for it.
    pub content: Option<String>,
    /// SHA-256 of the content, lowercase hex.
    pub content_sha256: String,
    /// Size of the content in bytes.
    pub content_size_bytes: i64,
    /// The version holding the current content (`memver_…`).
    pub memory_version_id: String,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
}

/// What a memory version records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryOperation {
    /// The memory was created.
    Created,
    /// Its content or path changed.
    Modified,
    /// It was deleted.
    Deleted,
}

impl MemoryOperation {
    /// The wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryOperation::Created => "created",
            MemoryOperation::Modified => "modified",
            MemoryOperation::Deleted => "deleted",
        }
    }

    /// From the wire or stored name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "created" => Some(MemoryOperation::Created),
            "modified" => Some(MemoryOperation::Modified),
            "deleted" => Some(MemoryOperation::Deleted),
            _ => None,
        }
    }
}

/// One version of a memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryVersionRow {
    /// `memver_…`, increasing in time.
    pub id: String,
    /// Its store.
    pub memory_store_id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The memory (it may be deleted since).
    pub memory_id: String,
    /// What it records.
    pub operation: MemoryOperation,
    /// The path at that write; `None` once redacted.
    pub path: Option<String>,
    /// The content at that write; `None` when the read did not ask for it, for a
    /// `deleted` version and once redacted.
    pub content: Option<String>,
    /// Its digest; `None` for `deleted` and once redacted.
    pub content_sha256: Option<String>,
    /// Its size; `None` for `deleted` and once redacted.
    pub content_size_bytes: Option<i64>,
    /// Who made the change.
    pub created_by: MemoryActor,
    /// When it was redacted, epoch ms.
    pub redacted_at_ms: Option<i64>,
    /// Who redacted it.
    pub redacted_by: Option<MemoryActor>,
    /// When it was written, epoch ms.
    pub created_at_ms: i64,
}

/// A new memory.
#[derive(Debug, Clone)]
pub struct NewMemory {
    /// Owning workspace.
    pub workspace_id: String,
    /// Its store.
    pub memory_store_id: String,
    /// `mem_…`
    pub id: String,
    /// The id of its `created` version (`memver_…`).
    pub version_id: String,
    /// A valid, normalized path.
    pub path: String,
    /// Its content.
    pub content: MemoryContent,
    /// Who writes it.
    pub actor: MemoryActor,
}

/// A change to a memory: a new content, a new path (a rename) or both.
#[derive(Debug, Clone)]
pub struct MemoryUpdate {
    /// Owning workspace.
    pub workspace_id: String,
    /// Its store.
    pub memory_store_id: String,
    /// The memory.
    pub memory_id: String,
    /// The id of the `modified` version written if anything changes (`memver_…`).
    pub version_id: String,
    /// The new path, if renamed.
    pub path: Option<String>,
    /// The new content, if changed.
    pub content: Option<MemoryContent>,
    /// Applies only if the stored content has this digest (before the change).
    pub expected_sha256: Option<String>,
    /// Who writes it.
    pub actor: MemoryActor,
}

/// A memory's deletion.
#[derive(Debug, Clone)]
pub struct MemoryDeletion {
    /// Owning workspace.
    pub workspace_id: String,
    /// Its store.
    pub memory_store_id: String,
    /// The memory.
    pub memory_id: String,
    /// The id of the `deleted` version (`memver_…`).
    pub version_id: String,
    /// Applies only if the stored content has this digest.
    pub expected_sha256: Option<String>,
    /// Who deletes it.
    pub actor: MemoryActor,
}

/// The outcome of a write to a memory. Everything but `Written` changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryWrite {
    /// Committed: the memory as it is now (for a deletion, as it was), with content.
    /// An update that changes nothing writes no version and returns the memory as is.
    Written(MemoryRow),
    /// The workspace has no such store.
    StoreMissing,
    /// The store is archived (read-only).
    StoreArchived,
    /// The store has no such memory.
    MemoryMissing,
    /// Another memory of the store has this path.
    PathTaken,
    /// The store holds [`MAX_MEMORIES_PER_STORE`] memories.
    StoreFull,
    /// The stored content's digest is not the expected one.
    PreconditionFailed {
        /// The digest it has.
        current_sha256: String,
    },
}

/// A page of memories in path order.
#[derive(Debug, Clone, Default)]
pub struct MemoryQuery {
    /// Only paths starting with this (a whole-segment prefix ending with `/`).
    pub path_prefix: Option<String>,
    /// `0`: every memory below the prefix. `n > 0`: memories at most `n` segments
    /// below the prefix; deeper ones are rolled up into one [`MemoryListItem::Prefix`]
    /// per directory at depth `n`.
    pub depth: u32,
    /// Resume after this item's path: a memory's path, or a prefix (ending with `/`),
    /// in which case everything under it is skipped too.
    pub after: Option<String>,
    /// At most this many items (prefixes count).
    pub limit: i64,
    /// Read the content too.
    pub with_content: bool,
}

/// One item of a memory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryListItem {
    /// A memory.
    Memory(MemoryRow),
    /// A directory standing for the memories below it (ends with `/`).
    Prefix(String),
}

impl MemoryListItem {
    /// The item's path (the cursor of the next page).
    pub fn path(&self) -> &str {
        match self {
            MemoryListItem::Memory(memory) => &memory.path,
            MemoryListItem::Prefix(prefix) => prefix,
        }
    }
}

/// A page of memory versions, newest first.
#[derive(Debug, Clone, Default)]
pub struct MemoryVersionQuery {
    /// Only versions of this memory (also after its deletion).
    pub memory_id: Option<String>,
    /// Only this operation.
    pub operation: Option<MemoryOperation>,
    /// Only versions written by this session.
    pub session_id: Option<String>,
    /// Only versions written with this API key.
    pub api_key_id: Option<String>,
    /// Creation time bounds (`gte`, `lte` used).
    pub created: TimeBounds,
    /// Strictly older than this id (the cursor).
    pub before_id: Option<String>,
    /// At most this many.
    pub limit: i64,
    /// Read the content too.
    pub with_content: bool,
}

/// Memory stores, memories and memory versions. Every method commits before it returns;
/// every read and write is confined to `workspace_id`.
#[async_trait]
pub trait AgentMemoryStore: Send + Sync {
    /// Creates a store.
    async fn create_memory_store(&self, new: NewMemoryStore) -> StoreResult<MemoryStoreRow>;

    /// A store of the workspace.
    async fn get_memory_store(&self, workspace_id: &str, id: &str) -> StoreResult<Option<MemoryStoreRow>>;

    /// Stores of the workspace, newest first.
    async fn list_memory_stores(
        &self,
        workspace_id: &str,
        query: &MemoryStoreQuery,
    ) -> StoreResult<Vec<MemoryStoreRow>>;

    /// Writes a store's name, description and metadata if it is still at
    /// `expected_revision` and not archived. `Ok(None)`: no such store.
    /// `StoreError::Conflict`: the revision moved or the store is archived (re-read).
    async fn update_memory_store(
        &self,
        workspace_id: &str,
        id: &str,
        update: MemoryStoreUpdate,
    ) -> StoreResult<Option<MemoryStoreRow>>;

    /// Archives a store (idempotent: an archived store is returned as it is).
    async fn archive_memory_store(&self, workspace_id: &str, id: &str) -> StoreResult<Option<MemoryStoreRow>>;

    /// Deletes a store with its memories and versions. `false`: no such store.
    async fn delete_memory_store(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;

    /// Creates a memory and its `created` version.
    async fn create_memory(&self, new: NewMemory) -> StoreResult<MemoryWrite>;

    /// Changes a memory and writes its `modified` version, if its precondition holds.
    async fn update_memory(&self, update: MemoryUpdate) -> StoreResult<MemoryWrite>;

    /// Deletes a memory and writes its `deleted` version (its versions stay), if its
    /// precondition holds. Deleting from an archived store is allowed.
    async fn delete_memory(&self, deletion: MemoryDeletion) -> StoreResult<MemoryWrite>;

    /// A memory of the store.
    async fn get_memory(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        memory_id: &str,
        with_content: bool,
    ) -> StoreResult<Option<MemoryRow>>;

    /// Memories of the store in path order (bytewise), rolled up by `depth`.
    async fn list_memories(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        query: &MemoryQuery,
    ) -> StoreResult<Vec<MemoryListItem>>;

    /// A version of the store.
    async fn get_memory_version(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        version_id: &str,
        with_content: bool,
    ) -> StoreResult<Option<MemoryVersionRow>>;

    /// Versions of the store, newest first.
    async fn list_memory_versions(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        query: &MemoryVersionQuery,
    ) -> StoreResult<Vec<MemoryVersionRow>>;

    /// Redacts a version: its path, content, digest and size are erased for good
    /// (idempotent: a redacted version is returned as it is). `Ok(None)`: no such version.
    async fn redact_memory_version(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        version_id: &str,
        by: MemoryActor,
    ) -> StoreResult<Option<MemoryVersionRow>>;
}
