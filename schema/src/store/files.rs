//! Files: the metadata of uploaded and tool-written files. Their bytes are blobs
//! (`crate::blobs`); a row names its blob by `blob_key`.

use async_trait::async_trait;

use crate::error::StoreResult;

/// Where a file is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState {
    /// The row exists, its bytes are being stored; invisible to the API.
    Uploading,
    /// Readable.
    Ready,
    /// Past `expires_at`: its bytes are gone, the row answers `file_expired`.
    Expired,
    /// Deleted: invisible; its bytes are being removed.
    Deleting,
}

impl FileState {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            FileState::Uploading => "uploading",
            FileState::Ready => "ready",
            FileState::Expired => "expired",
            FileState::Deleting => "deleting",
        }
    }

    /// Parses the stored text.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "uploading" => FileState::Uploading,
            "ready" => FileState::Ready,
            "expired" => FileState::Expired,
            "deleting" => FileState::Deleting,
            _ => return None,
        })
    }
}

/// A file's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRow {
    /// `file_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The final path component of the uploaded name.
    pub filename: String,
    /// Its MIME type.
    pub mime_type: String,
    /// Size in bytes (0 while uploading).
    pub size_bytes: i64,
    /// Whether `/content` serves it (files written by tools in a session).
    pub downloadable: bool,
    /// The scope it was created in (`session`), with the scoping resource's id.
    pub scope: Option<(String, String)>,
    /// Where its bytes are (`crate::blobs::BlobKey::as_str`).
    pub blob_key: String,
    /// Its state.
    pub state: FileState,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// When it expires, epoch ms.
    pub expires_at_ms: Option<i64>,
    /// Last state change, epoch ms.
    pub changed_at_ms: i64,
}

impl FileRow {
    /// Whether the API may show it at `now_ms`: ready and not past its expiry.
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.state == FileState::Ready && self.expires_at_ms.is_none_or(|at| at > now_ms)
    }

    /// Whether it has expired at `now_ms` (its tombstone, or a ready row past its time).
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.state == FileState::Expired
            || (self.state == FileState::Ready && self.expires_at_ms.is_some_and(|at| at <= now_ms))
    }
}

/// A new file's row, written in state `uploading` before its bytes.
#[derive(Debug, Clone)]
pub struct NewFile {
    /// `file_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Final path component.
    pub filename: String,
    /// MIME type.
    pub mime_type: String,
    /// Whether `/content` serves it.
    pub downloadable: bool,
    /// `(type, id)` of its scope.
    pub scope: Option<(String, String)>,
    /// Where its bytes go.
    pub blob_key: String,
    /// When it expires, epoch ms.
    pub expires_at_ms: Option<i64>,
}

/// A page of a workspace's live files, newest first.
#[derive(Debug, Clone, Default)]
pub struct FileQuery {
    /// Only these ids (empty: any).
    pub ids: Vec<String>,
    /// Only files of this scope id.
    pub scope_id: Option<String>,
    /// Strictly older than this id (the cursor).
    pub before_id: Option<String>,
    /// At most this many.
    pub limit: i64,
}

/// File metadata. Every method is one statement, durable when it returns.
#[async_trait]
pub trait FileStore: Send + Sync {
    /// Writes a new row in state `uploading`.
    async fn insert_file(&self, new: NewFile) -> StoreResult<FileRow>;

    /// `uploading` → `ready` with its size; `None` if the row is no longer uploading
    /// (the sweeper took it).
    async fn finish_file(&self, id: &str, size_bytes: i64) -> StoreResult<Option<FileRow>>;

    /// A file of the workspace in any state.
    async fn get_file(&self, workspace_id: &str, id: &str) -> StoreResult<Option<FileRow>>;

    /// Up to `limit` files of the workspace scoped to `scope_id`, in any state (erasure
    /// removes uploading, expired and deleting ones too).
    async fn scoped_files(&self, workspace_id: &str, scope_id: &str, limit: i64) -> StoreResult<Vec<FileRow>>;

    /// Ready, unexpired files of the workspace, newest first.
    async fn list_files(&self, workspace_id: &str, query: &FileQuery) -> StoreResult<Vec<FileRow>>;

    /// Compare-and-swap of a file's state; `false`: it was not in `from`.
    async fn set_file_state(&self, id: &str, from: FileState, to: FileState) -> StoreResult<bool>;

    /// Files the sweeper must finish at `now_ms`: ready and past their expiry, or
    /// `uploading`/`deleting` unchanged since `stale_before_ms`. At most `limit`.
    async fn files_to_sweep(&self, now_ms: i64, stale_before_ms: i64, limit: i64) -> StoreResult<Vec<FileRow>>;

    /// Removes a row in state `from`; `false` if it was not.
    async fn remove_file(&self, id: &str, from: FileState) -> StoreResult<bool>;
}
