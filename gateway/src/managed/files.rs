//! Files (docs/api/files.md): `POST /v1/files` (multipart, streamed to the object
//! store), metadata, list, delete and `/content`. The rules are `domain::files`; this
//! module parses the wire and renders `BetaFileMetadata`.

use agentd_schema::ids::{FileId, SessionId};
use agentd_schema::store::{FileQuery, FileRow};
use axum::body::Body;
use axum::extract::multipart::Field;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::StreamExt;
use serde_json::{Value, json};

use super::query::{Query, cursor_page, decode_cursor, rfc3339};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::files::{self, Upload};
use crate::error::{ApiError, ApiResult};

/// `files.list(ids=…)`: at most this many ids, always one page.
const MAX_LIST_IDS: usize = 100;

/// Multipart framing allowed on top of the file's own bytes before a declared
/// `content-length` is refused outright.
const FRAMING_BYTES: u64 = 1024 * 1024;

/// How much of a refused upload's remaining body is read (and dropped) so the client
/// sees the answer rather than a reset connection.
const DRAIN_BYTES: u64 = 64 * 1024 * 1024;

/// `BetaFileMetadata`.
pub fn render(file: &FileRow) -> Value {
    let mut out = json!({
        "type": "file",
        "id": file.id,
        "filename": file.filename,
        "mime_type": file.mime_type,
        "size_bytes": file.size_bytes,
        "created_at": rfc3339(file.created_at_ms),
        "downloadable": file.downloadable,
        "expires_at": file.expires_at_ms.map(rfc3339),
    });
    if let Some((kind, id)) = &file.scope {
        out["scope"] = json!({ "type": kind, "id": id });
    }
    out
}

fn multipart_error(error: axum::extract::multipart::MultipartError) -> ApiError {
    ApiError::invalid(format!("multipart body: {}", error.body_text()))
}

/// Reads a small text part (a form field such as `expires_in_seconds`).
async fn text_field(field: Field<'_>, name: &str) -> ApiResult<String> {
    let bytes = field.bytes().await.map_err(multipart_error)?;
    if bytes.len() > 64 {
        return Err(ApiError::invalid(format!("{name}: too long")));
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| ApiError::invalid(format!("{name}: must be UTF-8 text")))
}

/// Reads and drops what is left of a body, up to [`DRAIN_BYTES`].
async fn drain(field: &mut Field<'_>) {
    let mut read = 0u64;
    while let Ok(Some(chunk)) = field.chunk().await {
        read += chunk.len() as u64;
        if read > DRAIN_BYTES {
            break;
        }
    }
}

/// `POST /v1/files`: multipart `file` (required) and `expires_in_seconds` (before it).
pub async fn upload(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    headers: HeaderMap,
    mut multipart: Multipart,
) -> ApiResult<Json<Value>> {
    let limit = state.max_file_bytes;
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit.saturating_add(FRAMING_BYTES)) {
        return Err(ApiError::PayloadTooLarge(format!("file: the upload is larger than the limit of {limit} bytes")));
    }
    let mut expires_in_seconds = None;
    let mut stored: Option<FileRow> = None;
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or_default().to_owned();
        match name.as_str() {
            "expires_in_seconds" if stored.is_none() => {
                let text = text_field(field, "expires_in_seconds").await?;
                let seconds = text
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| ApiError::invalid(format!("expires_in_seconds: must be an integer, got {text:?}")))?;
                expires_in_seconds = Some(files::expires_in(seconds)?);
            }
            "file" if stored.is_none() => {
                let upload = Upload {
                    workspace_id: tenant.workspace_id.clone(),
                    filename: field.file_name().map(str::to_owned),
                    content_type: field.content_type().map(str::to_owned),
                    expires_in_seconds,
                    scope: None,
                    downloadable: false,
                };
                let result =
                    files::store(&state.backends.store, &state.backends.blobs, upload, &mut field, limit).await;
                match result {
                    Ok(row) => stored = Some(row),
                    Err(error) => {
                        drain(&mut field).await;
                        return Err(error.into());
                    }
                }
            }
            "file" => return Err(ApiError::invalid("file: only one file part is accepted")),
            "expires_in_seconds" => {
                // Too late to apply: the file is already stored. Nothing is kept.
                if let Some(row) = stored.take() {
                    files::delete(state.backends.store.as_ref(), &state.backends.blobs, &row.workspace_id, &row.id)
                        .await?;
                }
                return Err(ApiError::invalid("expires_in_seconds: must come before the file part"));
            }
            other => {
                if let Some(row) = stored.take() {
                    files::delete(state.backends.store.as_ref(), &state.backends.blobs, &row.workspace_id, &row.id)
                        .await?;
                }
                return Err(ApiError::invalid(format!(
                    "{other:?}: unknown part; a file upload takes `file` and `expires_in_seconds`"
                )));
            }
        }
    }
    let row = stored.ok_or_else(|| ApiError::invalid("file: a file part is required"))?;
    Ok(Json(render(&row)))
}

/// `GET /v1/files/{file_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<FileId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&files::load(state.backends.store.as_ref(), &tenant.workspace_id, &id).await?)))
}

/// `GET /v1/files`: newest first; `ids[]` (at most 100, one page) and `scope_id` filter.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let ids: Vec<String> = query.list("ids").into_iter().map(str::to_owned).collect();
    if ids.len() > MAX_LIST_IDS {
        return Err(ApiError::invalid(format!("ids: at most {MAX_LIST_IDS} ids, got {}", ids.len())));
    }
    if let Some(bad) = ids.iter().find(|id| FileId::parse(id).is_err()) {
        return Err(ApiError::invalid(format!("ids: {bad:?} is not a file id")));
    }
    if !ids.is_empty() && (query.string("page").is_some() || query.string("limit").is_some()) {
        return Err(ApiError::invalid("ids: cannot be combined with page or limit (an ids list is one page)"));
    }
    let limit = if ids.is_empty() { query.int("limit", 1, 1000)?.unwrap_or(20) } else { MAX_LIST_IDS as i64 };
    let before_id = query.string("page").map(decode_cursor).transpose()?;
    let scope_id = query.string("scope_id").map(str::to_owned);
    let file_query = FileQuery { ids, scope_id, before_id, limit: limit + 1 };
    let rows = files::list(state.backends.store.as_ref(), &tenant.workspace_id, &file_query).await?;
    let mut page = cursor_page(rows, limit, |row| row.id.clone(), render);
    if !file_query.ids.is_empty() {
        page["next_page"] = Value::Null;
    }
    Ok(Json(page))
}

/// `DELETE /v1/files/{file_id}`: the object and the row.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<FileId>,
) -> ApiResult<Json<Value>> {
    files::delete(state.backends.store.as_ref(), &state.backends.blobs, &tenant.workspace_id, &id).await?;
    Ok(Json(json!({ "id": id, "type": "file_deleted" })))
}

/// `GET /v1/files/{file_id}/content`: the bytes, streamed, for downloadable files.
pub async fn content(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<FileId>,
) -> ApiResult<Response> {
    let (row, read) =
        files::download(state.backends.store.as_ref(), &state.backends.blobs, &tenant.workspace_id, &id).await?;
    Ok(bytes_response(&row, read))
}

/// `GET /v1/ext/sessions/{session_id}/files/{file_id}/content`: a file the session
/// mounts (or wrote), for its hands (environment or runner key, sessions token).
pub async fn hands_content(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((session_id, file_id)): Path<(SessionId, FileId)>,
) -> ApiResult<Response> {
    let store = state.backends.store.as_ref();
    let session = super::sessions::load(store, &tenant, &session_id).await?;
    let (row, read) = files::read_for_hands(store, &state.backends.blobs, &session, &file_id).await?;
    Ok(bytes_response(&row, read))
}

/// `POST /v1/ext/sessions/{session_id}/files`: a file the session's tools wrote under
/// `/mnt/session/outputs/`, uploaded by its hands (multipart `file`). It is scoped to
/// the session and downloadable.
pub async fn hands_upload(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(session_id): Path<SessionId>,
    mut multipart: Multipart,
) -> ApiResult<Json<Value>> {
    let store = state.backends.store.as_ref();
    let session = super::sessions::load(store, &tenant, &session_id).await?;
    let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? else {
        return Err(ApiError::invalid("file: a file part is required"));
    };
    if field.name() != Some("file") {
        return Err(ApiError::invalid("a session output upload takes one `file` part"));
    }
    let upload = Upload {
        workspace_id: session.workspace_id.clone(),
        filename: field.file_name().map(str::to_owned),
        content_type: field.content_type().map(str::to_owned),
        expires_in_seconds: None,
        scope: Some(("session".to_owned(), session.id.clone())),
        downloadable: true,
    };
    let limit = state.max_file_bytes;
    match files::store(&state.backends.store, &state.backends.blobs, upload, &mut field, limit).await {
        Ok(row) => Ok(Json(render(&row))),
        Err(error) => {
            drain(&mut field).await;
            Err(error.into())
        }
    }
}

/// A file's bytes as a response: its type, length and name.
pub fn bytes_response(row: &FileRow, read: agentd_schema::blobs::BlobRead) -> Response {
    let body = Body::from_stream(read.stream.map(|chunk| chunk.map_err(std::io::Error::other)));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&row.mime_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(read.size));
    let ascii: String =
        row.filename.chars().map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' { c } else { '_' }).collect();
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{ascii}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}
