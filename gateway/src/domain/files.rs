//! Files (docs/api/files.md): storing an upload, the rules of names, types, expiry and
//! downloads, deletion, and the sweeper that finishes what expiry, crashes and lost
//! clients leave. Every surface that creates or reads a file calls these: the managed
//! `/v1/files` routes, session resources, the hands' output uploads and the skills'
//! mounts.
//!
//! A file row is written before its bytes (`uploading`) and made `ready` after them, so
//! a crash at any point leaves a row the sweeper can finish: no object without a row,
//! no readable row without its object.

use std::sync::Arc;
use std::time::Duration;

use agentd_schema::Store;
use agentd_schema::blobs::{BlobError, BlobKey, BlobRead, Blobs};
use agentd_schema::store::{FileQuery, FileRow, FileState, NewFile};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{DomainError, DomainResult};

/// The default largest upload (`AGENTD_MAX_FILE_BYTES`): 500 MB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 500_000_000;

/// `expires_in_seconds` bounds: one hour to ninety days.
pub const EXPIRES_IN_SECONDS: std::ops::RangeInclusive<i64> = 3_600..=7_776_000;

/// A filename's longest kept form, in characters.
const MAX_FILENAME_CHARS: usize = 255;

/// How long an upload or a deletion may stay unfinished before the sweeper finishes it.
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// How often the sweeper looks.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// What the caller knows of an upload before its bytes.
#[derive(Debug, Clone, Default)]
pub struct Upload {
    /// The workspace it belongs to.
    pub workspace_id: String,
    /// The part's filename, as sent (any path is reduced to its final component).
    pub filename: Option<String>,
    /// The part's content type, as sent.
    pub content_type: Option<String>,
    /// Seconds until it expires.
    pub expires_in_seconds: Option<i64>,
    /// `(type, id)` of its scope (files written in a session).
    pub scope: Option<(String, String)>,
    /// Whether `/content` serves it: files written by tools are downloadable, uploads
    /// are not (the reference's `file_not_downloadable` rule).
    pub downloadable: bool,
}

/// Checks `expires_in_seconds` (3600–7776000).
pub fn expires_in(seconds: i64) -> DomainResult<i64> {
    if EXPIRES_IN_SECONDS.contains(&seconds) {
        Ok(seconds)
    } else {
        Err(DomainError::invalid(format!(
            "expires_in_seconds: must be between {} and {}, got {seconds}",
            EXPIRES_IN_SECONDS.start(),
            EXPIRES_IN_SECONDS.end()
        )))
    }
}

/// The final path component of a part's filename (either separator); `None` when
/// nothing is left.
fn final_component(name: &str) -> Option<String> {
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default().trim();
    let clean: String = last.chars().filter(|c| !c.is_control()).take(MAX_FILENAME_CHARS).collect();
    (!clean.is_empty() && clean != "." && clean != "..").then_some(clean)
}

/// The MIME type: the part's own, unless absent or the generic octet stream; else
/// sniffed from the first bytes; else from the name's extension; else the octet stream.
fn mime_type(content_type: Option<&str>, head: &[u8], filename: Option<&str>) -> String {
    let declared = content_type
        .map(|value| value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
        .filter(|value| !value.is_empty() && value != "application/octet-stream" && value.contains('/'));
    if let Some(declared) = declared {
        return declared;
    }
    if let Some(kind) = infer::get(head) {
        return kind.mime_type().to_owned();
    }
    if let Some(guess) = filename.and_then(|name| mime_guess::from_path(name).first_raw()) {
        return guess.to_owned();
    }
    if !head.is_empty() && std::str::from_utf8(head).is_ok_and(|text| !text.contains('\0')) {
        return "text/plain".to_owned();
    }
    "application/octet-stream".to_owned()
}

/// `unnamed` plus the extension of `mime`, when one is known.
fn unnamed(mime: &str) -> String {
    let extension = match mime {
        "text/plain" => Some("txt"),
        "application/octet-stream" => None,
        other => mime_guess::get_mime_extensions_str(other).and_then(|all| all.first().copied()),
    };
    match extension {
        Some(extension) => format!("unnamed.{extension}"),
        None => "unnamed".to_owned(),
    }
}

/// One piece of an upload handed to the writer task.
enum Piece {
    Bytes(Bytes),
    Failed(String),
    End,
}

/// Stores an upload: the row, then the bytes streamed to the object store, then the
/// row made ready. The writing runs in its own task fed through a small channel, so a
/// caller that goes away mid-body (its future dropped) cuts the stream short and the
/// writer removes the object and the row instead of keeping a truncated file.
pub async fn store<S, E>(
    store: &Arc<dyn Store>,
    blobs: &Blobs,
    upload: Upload,
    body: S,
    limit: u64,
) -> DomainResult<FileRow>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    let first = match body.next().await {
        Some(Ok(bytes)) => Some(bytes),
        Some(Err(error)) => return Err(DomainError::invalid(format!("file: the upload was cut short: {error}"))),
        None => None,
    };
    let named = upload.filename.as_deref().and_then(final_component);
    let mime = mime_type(upload.content_type.as_deref(), first.as_deref().unwrap_or_default(), named.as_deref());
    let filename = named.unwrap_or_else(|| unnamed(&mime));
    let expires_at_ms = upload.expires_in_seconds.map(|seconds| now_ms() + seconds * 1000);
    let id = agentd_schema::ids::new_id("file");
    let key = BlobKey::file(&upload.workspace_id, &id);
    let row = store
        .insert_file(NewFile {
            id,
            workspace_id: upload.workspace_id,
            filename,
            mime_type: mime,
            downloadable: upload.downloadable,
            scope: upload.scope,
            blob_key: key.as_str().to_owned(),
            expires_at_ms,
        })
        .await?;
    let (pieces, inbox) = mpsc::channel::<Piece>(4);
    let writer = tokio::spawn(write(store.clone(), blobs.clone(), row, key, inbox, limit));
    let mut next = first.map(Ok);
    loop {
        let piece = match next.take() {
            Some(Ok(bytes)) => Piece::Bytes(bytes),
            Some(Err(error)) => Piece::Failed(error),
            None => match body.next().await {
                Some(Ok(bytes)) => Piece::Bytes(bytes),
                Some(Err(error)) => Piece::Failed(error.to_string()),
                None => Piece::End,
            },
        };
        let last = !matches!(piece, Piece::Bytes(_));
        // A closed channel: the writer stopped early (too large, store down); its
        // answer says why.
        if pieces.send(piece).await.is_err() || last {
            break;
        }
    }
    drop(pieces);
    writer.await.map_err(|error| DomainError::Internal(format!("the upload task failed: {error}")))?
}

/// The writer task of [`store`].
async fn write(
    store: Arc<dyn Store>,
    blobs: Blobs,
    row: FileRow,
    key: BlobKey,
    inbox: mpsc::Receiver<Piece>,
    limit: u64,
) -> DomainResult<FileRow> {
    let stream = futures::stream::unfold((inbox, false), |(mut inbox, done)| async move {
        if done {
            return None;
        }
        match inbox.recv().await {
            Some(Piece::Bytes(bytes)) => Some((Ok(bytes), (inbox, false))),
            Some(Piece::End) => None,
            Some(Piece::Failed(error)) => Some((Err(error), (inbox, true))),
            None => Some((Err("the client went away".to_owned()), (inbox, true))),
        }
    });
    let failure = match blobs.put_stream(&key, stream, limit).await {
        Ok(size) => match store.finish_file(&row.id, i64::try_from(size).unwrap_or(i64::MAX)).await {
            Ok(Some(ready)) => return Ok(ready),
            Ok(None) => DomainError::Internal(format!("file {}: the row left `uploading` during the upload", row.id)),
            Err(error) => DomainError::from(error),
        },
        Err(error) => blob_error(error),
    };
    // Nothing of a failed upload stays: the object (if any), then the row.
    if let Err(error) = blobs.delete(&key).await {
        tracing::warn!(file = %row.id, %error, "removing the object of a failed upload failed; the sweeper retries");
        return Err(failure);
    }
    if let Err(error) = store.remove_file(&row.id, FileState::Uploading).await {
        tracing::warn!(file = %row.id, %error, "removing the row of a failed upload failed; the sweeper retries");
    }
    Err(failure)
}

/// The domain's reading of a blob error.
pub fn blob_error(error: BlobError) -> DomainError {
    match error {
        BlobError::TooLarge { limit } => {
            DomainError::TooLarge(format!("file: the upload is larger than the limit of {limit} bytes"))
        }
        BlobError::Source(cause) => DomainError::invalid(format!("file: the upload was cut short: {cause}")),
        BlobError::NotFound(key) => DomainError::Internal(format!("a file's object is missing: {key}")),
        BlobError::Unavailable(cause) => {
            tracing::warn!(%cause, "object store unavailable");
            DomainError::Unavailable("the object store is unavailable; retry once it is back".to_owned())
        }
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A live file of the workspace: 404 when absent (or being uploaded or deleted), 404
/// `file_expired` past its expiry.
pub async fn load(store: &dyn Store, workspace_id: &str, id: &str) -> DomainResult<FileRow> {
    let not_found = || DomainError::NotFound(format!("file not found: {id}"));
    let row = store.get_file(workspace_id, id).await?.ok_or_else(not_found)?;
    let now = now_ms();
    if row.is_expired(now) {
        return Err(DomainError::Expired(format!("file {id} has expired; its content is no longer available")));
    }
    if !row.is_live(now) {
        return Err(not_found());
    }
    Ok(row)
}

/// A page of live files, newest first; one more than `query.limit` tells the caller
/// there is a next page.
pub async fn list(store: &dyn Store, workspace_id: &str, query: &FileQuery) -> DomainResult<Vec<FileRow>> {
    Ok(store.list_files(workspace_id, query).await?)
}

/// The bytes of a downloadable file. Uploaded files are not downloadable (they are
/// inputs; only files written by tools in a session are): 400 `file_not_downloadable`.
pub async fn download(
    store: &dyn Store,
    blobs: &Blobs,
    workspace_id: &str,
    id: &str,
) -> DomainResult<(FileRow, BlobRead)> {
    let row = load(store, workspace_id, id).await?;
    if !row.downloadable {
        return Err(DomainError::invalid_with_code(
            "file_not_downloadable",
            format!("file {id} is not downloadable: only files written by tools in a session are"),
        ));
    }
    let read = blobs.read(&BlobKey::from_stored(&row.blob_key)).await.map_err(blob_error)?;
    Ok((row, read))
}

/// The bytes of a file for a session's use (mounting it, sending it to the model):
/// every live file, downloadable or not.
pub async fn read_for_session(
    store: &dyn Store,
    blobs: &Blobs,
    workspace_id: &str,
    id: &str,
) -> DomainResult<(FileRow, BlobRead)> {
    let row = load(store, workspace_id, id).await?;
    let read = blobs.read(&BlobKey::from_stored(&row.blob_key)).await.map_err(blob_error)?;
    Ok((row, read))
}

/// The bytes of a file the hands of `session` may read: one its resources mount, or one
/// written in it. A file outside both is a 404, as if it did not exist.
pub async fn read_for_hands(
    store: &dyn Store,
    blobs: &Blobs,
    session: &agentd_schema::Session,
    file_id: &str,
) -> DomainResult<(FileRow, BlobRead)> {
    let mounted = mounted_ids(&session.body["resources"]).contains(&file_id);
    let row = store
        .get_file(&session.workspace_id, file_id)
        .await?
        .filter(|row| mounted || row.scope.as_ref().is_some_and(|(_, id)| *id == session.id))
        .ok_or_else(|| DomainError::NotFound(format!("file not found in session {}: {file_id}", session.id)))?;
    read_for_session(store, blobs, &row.workspace_id, &row.id).await
}

/// Deletes a file: invisible at once, then its object, then its row. A failure after
/// the first step is finished by the sweeper. An expired file's tombstone goes too.
pub async fn delete(store: &dyn Store, blobs: &Blobs, workspace_id: &str, id: &str) -> DomainResult<()> {
    let not_found = || DomainError::NotFound(format!("file not found: {id}"));
    let row = store.get_file(workspace_id, id).await?.ok_or_else(not_found)?;
    let from = match row.state {
        FileState::Ready | FileState::Expired => row.state,
        FileState::Uploading | FileState::Deleting => return Err(not_found()),
    };
    if !store.set_file_state(&row.id, from, FileState::Deleting).await? {
        return Err(not_found());
    }
    finish_delete(store, blobs, &row).await
}

async fn finish_delete(store: &dyn Store, blobs: &Blobs, row: &FileRow) -> DomainResult<()> {
    blobs.delete(&BlobKey::from_stored(&row.blob_key)).await.map_err(blob_error)?;
    store.remove_file(&row.id, FileState::Deleting).await?;
    Ok(())
}

/// Where sessions see their files: every mount is under `/mnt/`, except the outputs,
/// skills and memory directories, which agentd owns.
pub const MOUNT_ROOT: &str = "/mnt/";

/// A `file` resource's `mount_path` in canonical form: absolute, under `/mnt/`, no
/// `.`/`..`/empty segments, not inside `/mnt/session/outputs/`, `/mnt/skills/` or
/// `/mnt/memory/` (a file there would be synced into a memory store).
pub fn mount_path(path: &str) -> Result<String, String> {
    let Some(rest) = path.strip_prefix(MOUNT_ROOT) else {
        return Err(format!("must be an absolute path under {MOUNT_ROOT}, got {path:?}"));
    };
    let segments: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    if segments.iter().any(|s| s.is_empty() || *s == "." || *s == ".." || s.contains('\\') || s.contains('\0')) {
        return Err(format!("must be a clean path (no empty, `.` or `..` segments), got {path:?}"));
    }
    if matches!(segments.as_slice(), ["session", "outputs", ..] | ["skills", ..] | ["memory", ..]) {
        return Err(format!(
            "{path:?} is inside a directory agentd manages (/mnt/session/outputs/, /mnt/skills/, /mnt/memory/)"
        ));
    }
    Ok(format!("{MOUNT_ROOT}{}", segments.join("/")))
}

/// The file ids that `resources` (a session's resources, as parsed) mount.
pub fn mounted_ids(resources: &Value) -> Vec<&str> {
    resources
        .as_array()
        .map(|list| {
            list.iter().filter(|r| r["type"] == "file").filter_map(|r| r["file_id"].as_str()).collect::<Vec<_>>()
        })
        .unwrap_or_default()
}

/// Every `file` resource names a live file of the workspace (at session create,
/// `resources.add` and the manifest replace). Files in `kept` (those the session already
/// mounts) stay even once deleted: a running session keeps its copy.
pub async fn require_mountable(
    store: &dyn Store,
    workspace_id: &str,
    resources: &Value,
    kept: &[&str],
) -> DomainResult<()> {
    for (i, resource) in resources.as_array().into_iter().flatten().enumerate() {
        let Some(file_id) = resource["file_id"].as_str().filter(|_| resource["type"] == "file") else { continue };
        if kept.contains(&file_id) {
            continue;
        }
        let at = format!("resources[{i}].file_id");
        if agentd_schema::ids::FileId::parse(file_id).is_err() {
            return Err(DomainError::invalid(format!("{at}: {file_id:?} is not a file id")));
        }
        require_live(store, workspace_id, file_id, &at).await?;
    }
    Ok(())
}

/// Every file a message's content names (`image`/`document` blocks with a `file`
/// source) is a live file of the workspace, so a bad reference is a 400 when it is sent,
/// not a failed turn later. `path` names the content for messages (`events[0].content`).
pub async fn require_readable(store: &dyn Store, workspace_id: &str, path: &str, content: &Value) -> DomainResult<()> {
    for (j, block) in content.as_array().into_iter().flatten().enumerate() {
        if block["source"]["type"] == "file" {
            let file_id = block["source"]["file_id"].as_str().unwrap_or_default();
            require_live(store, workspace_id, file_id, &format!("{path}[{j}].source.file_id")).await?;
        }
    }
    Ok(())
}

/// A reference at `at` (a field path) to a live file: a missing one is a 400 naming the
/// field, an expired one a 400 `file_expired`.
pub async fn require_live(store: &dyn Store, workspace_id: &str, file_id: &str, at: &str) -> DomainResult<()> {
    match load(store, workspace_id, file_id).await {
        Ok(_) => Ok(()),
        Err(DomainError::NotFound(_)) => Err(DomainError::invalid(format!("{at}: file not found: {file_id}"))),
        Err(DomainError::Expired(_)) => {
            Err(DomainError::invalid_with_code("file_expired", format!("{at}: file {file_id} has expired")))
        }
        Err(other) => Err(other),
    }
}

/// The sweeper: expires files past their time (their objects removed, their rows kept
/// as `file_expired` tombstones) and finishes uploads and deletions left unfinished by
/// a crash or a lost client. Every gateway runs one; the state changes are
/// compare-and-swaps, so two sweepers never both act on a row.
pub fn spawn_sweeper(store: Arc<dyn Store>, blobs: Blobs, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(error) = sweep(store.as_ref(), &blobs, now_ms()).await {
                tracing::warn!(%error, "file sweep failed; retrying later");
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(SWEEP_EVERY) => {}
            }
        }
    })
}

/// One pass of the sweeper at `now`; returns how many files it finished.
pub async fn sweep(store: &dyn Store, blobs: &Blobs, now: i64) -> DomainResult<usize> {
    let stale_before = now - STALE_AFTER.as_millis() as i64;
    let mut done = 0;
    for row in store.files_to_sweep(now, stale_before, 100).await? {
        let key = BlobKey::from_stored(&row.blob_key);
        match row.state {
            FileState::Ready => {
                // Past its time it is already refused (`load`); the bytes go first, so a
                // failure leaves a row this sweep finds again.
                blobs.delete(&key).await.map_err(blob_error)?;
                if store.set_file_state(&row.id, FileState::Ready, FileState::Expired).await? {
                    done += 1;
                }
            }
            FileState::Uploading => {
                if store.set_file_state(&row.id, FileState::Uploading, FileState::Deleting).await? {
                    finish_delete(store, blobs, &row).await?;
                    done += 1;
                }
            }
            FileState::Deleting => {
                finish_delete(store, blobs, &row).await?;
                done += 1;
            }
            FileState::Expired => {}
        }
    }
    Ok(done)
}
