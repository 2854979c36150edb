//! Skills (docs/api/skills.md): `POST /v1/skills` and `POST /v1/skills/{id}/versions`
//! (multipart `files[]`), retrieve, list, delete, version archives (`/content`) and the
//! extension that reads one file of a version. The rules are `domain::skills`; this
//! module parses the wire and renders `BetaSkill` / `BetaSkillVersion`.

use agentd_schema::ids::SkillId;
use agentd_schema::store::{SkillQuery, SkillRow, SkillVersionRow};
use axum::body::Body;
use axum::extract::multipart::Field;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::StreamExt;
use serde_json::{Value, json};

use super::query::{Query, cursor_page, decode_cursor, rfc3339};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::skills::{self, UploadBudget, UploadedFile};
use crate::error::{ApiError, ApiResult};

/// How much of a refused upload's remaining body is read (and dropped) so the client
/// sees the answer rather than a reset connection.
const DRAIN_BYTES: u64 = 64 * 1024 * 1024;

/// `BetaSkill`.
pub fn render_skill(skill: &SkillRow) -> Value {
    json!({
        "type": "skill",
        "id": skill.id,
        "display_name": skill.display_name,
        "source": { "type": skill.source },
        "latest_version_id": skill.latest_version_id,
        "created_at": rfc3339(skill.created_at_ms),
        "updated_at": rfc3339(skill.updated_at_ms),
    })
}

/// `BetaSkillVersion`.
pub fn render_version(version: &SkillVersionRow) -> Value {
    json!({
        "type": "skill_version",
        "id": version.id,
        "skill_id": version.skill_id,
        "name": version.name,
        "description": version.description,
        "created_at": rfc3339(version.created_at_ms),
    })
}

fn multipart_error(error: axum::extract::multipart::MultipartError) -> ApiError {
    ApiError::invalid(format!("multipart body: {}", error.body_text()))
}

/// What a skill upload carries.
struct Form {
    files: Vec<UploadedFile>,
    display_name: Option<String>,
}

/// Reads the parts of an upload: `files[]` (or `files`) file parts, each counted
/// against the version's limits as it arrives, and `display_name` where allowed.
async fn read_form(multipart: &mut Multipart, display_name_allowed: bool) -> ApiResult<Form> {
    let mut budget = UploadBudget::default();
    let mut form = Form { files: Vec::new(), display_name: None };
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or_default().to_owned();
        let outcome = match name.as_str() {
            "files[]" | "files" => read_file(&mut field, &mut budget).await.map(|file| form.files.push(file)),
            "display_name" if display_name_allowed => read_text(&mut field).await.map(|text| {
                form.display_name = Some(text);
            }),
            other => {
                let accepted = if display_name_allowed { "`files[]` and `display_name`" } else { "`files[]`" };
                Err(ApiError::invalid(format!("{other:?}: unknown part; a skill upload takes {accepted}")))
            }
        };
        if let Err(error) = outcome {
            let mut budget = DRAIN_BYTES;
            drain(&mut field, &mut budget).await;
            drop(field);
            while let Ok(Some(mut next)) = multipart.next_field().await {
                if !drain(&mut next, &mut budget).await {
                    break;
                }
            }
            return Err(error);
        }
    }
    Ok(form)
}

async fn read_file(field: &mut Field<'_>, budget: &mut UploadBudget) -> ApiResult<UploadedFile> {
    budget.add_file()?;
    let path = field.file_name().unwrap_or_default().to_owned();
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        budget.add_bytes(chunk.len())?;
        bytes.extend_from_slice(&chunk);
    }
    Ok(UploadedFile { path, bytes: bytes.into() })
}

async fn read_text(field: &mut Field<'_>) -> ApiResult<String> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > skills::MAX_DISPLAY_NAME_CHARS * 4 {
            return Err(ApiError::invalid(format!(
                "display_name: at most {} characters",
                skills::MAX_DISPLAY_NAME_CHARS
            )));
        }
    }
    String::from_utf8(bytes).map_err(|_| ApiError::invalid("display_name: must be UTF-8 text"))
}

/// Reads and drops what is left of a part of a refused upload, spending `budget`
/// (of [`DRAIN_BYTES`]); `false` once it is spent.
async fn drain(field: &mut Field<'_>, budget: &mut u64) -> bool {
    while let Ok(Some(chunk)) = field.chunk().await {
        let Some(left) = budget.checked_sub(chunk.len() as u64) else { return false };
        *budget = left;
    }
    true
}

/// `POST /v1/skills`: multipart `files[]` and optional `display_name`.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    mut multipart: Multipart,
) -> ApiResult<Json<Value>> {
    let form = read_form(&mut multipart, true).await?;
    let (skill, _) = skills::create(
        state.backends.store.as_ref(),
        &state.backends.blobs,
        &tenant.workspace_id,
        form.display_name,
        form.files,
    )
    .await?;
    Ok(Json(render_skill(&skill)))
}

/// `GET /v1/skills/{skill_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SkillId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render_skill(&skills::load(state.backends.store.as_ref(), &tenant.workspace_id, &id).await?)))
}

/// The page parameters of both lists: `limit` 1–1000 (default 20) and `page`.
fn page_query(query: &Query) -> ApiResult<(i64, Option<String>)> {
    let limit = query.int("limit", 1, 1000)?.unwrap_or(20);
    let before_id = query.string("page").map(decode_cursor).transpose()?;
    Ok((limit, before_id))
}

/// `GET /v1/skills`: newest first; `source` filter.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let (limit, before_id) = page_query(&query)?;
    let source = query.string("source").map(str::to_owned);
    let skill_query = SkillQuery { source, before_id, limit: limit + 1 };
    let rows = skills::list(state.backends.store.as_ref(), &tenant.workspace_id, &skill_query).await?;
    Ok(Json(cursor_page(rows, limit, |row| row.id.clone(), render_skill)))
}

/// `DELETE /v1/skills/{skill_id}`: the skill, its versions and their archives.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SkillId>,
) -> ApiResult<Json<Value>> {
    skills::delete(state.backends.store.as_ref(), &state.backends.blobs, &tenant.workspace_id, &id).await?;
    Ok(Json(json!({ "id": id, "type": "skill_deleted" })))
}

/// `POST /v1/skills/{skill_id}/versions`: multipart `files[]`.
pub async fn create_version(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SkillId>,
    mut multipart: Multipart,
) -> ApiResult<Json<Value>> {
    let form = read_form(&mut multipart, false).await?;
    let version = skills::add_version(
        state.backends.store.as_ref(),
        &state.backends.blobs,
        &tenant.workspace_id,
        &id,
        form.files,
    )
    .await?;
    Ok(Json(render_version(&version)))
}

/// `GET /v1/skills/{skill_id}/versions`: newest first.
pub async fn list_versions(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<SkillId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let (limit, before_id) = page_query(&Query::from_uri(&uri))?;
    let query = SkillQuery { source: None, before_id, limit: limit + 1 };
    let rows = skills::versions(state.backends.store.as_ref(), &tenant.workspace_id, &id, &query).await?;
    Ok(Json(cursor_page(rows, limit, |row| row.id.clone(), render_version)))
}

/// `GET /v1/skills/{skill_id}/versions/{version}` (`latest` allowed).
pub async fn retrieve_version(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, version)): Path<(SkillId, String)>,
) -> ApiResult<Json<Value>> {
    let row = skills::version(state.backends.store.as_ref(), &tenant.workspace_id, &id, &version).await?;
    Ok(Json(render_version(&row)))
}

/// `DELETE /v1/skills/{skill_id}/versions/{version}`: not the only version.
pub async fn delete_version(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, version)): Path<(SkillId, String)>,
) -> ApiResult<Json<Value>> {
    let row = skills::delete_version(
        state.backends.store.as_ref(),
        &state.backends.blobs,
        &tenant.workspace_id,
        &id,
        &version,
    )
    .await?;
    Ok(Json(json!({ "id": row.id, "type": "skill_version_deleted" })))
}

/// `GET /v1/skills/{skill_id}/versions/{version}/content`: the version's zip archive,
/// every file under `<name>/`.
pub async fn content(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, version)): Path<(SkillId, String)>,
) -> ApiResult<Response> {
    let (row, read) =
        skills::content(state.backends.store.as_ref(), &state.backends.blobs, &tenant.workspace_id, &id, &version)
            .await?;
    let body = Body::from_stream(read.stream.map(|chunk| chunk.map_err(std::io::Error::other)));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/zip"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(read.size));
    // The name is a kebab-case slug: always a valid header value.
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{}.zip\"", row.name)) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// `GET /v1/ext/skills/{skill_id}/versions/{version}/files/{*path}` (extension): one
/// file of a version, by its path inside the skill's directory.
pub async fn file(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((id, version, path)): Path<(SkillId, String, String)>,
) -> ApiResult<Response> {
    let bytes =
        skills::file(state.backends.store.as_ref(), &state.backends.blobs, &tenant.workspace_id, &id, &version, &path)
            .await?;
    let mime = mime_guess::from_path(&path).first_raw().unwrap_or("application/octet-stream");
    let mime =
        if mime == "application/octet-stream" && std::str::from_utf8(&bytes).is_ok() { "text/plain" } else { mime };
    Ok(([(header::CONTENT_TYPE, mime.to_owned())], bytes).into_response())
}
