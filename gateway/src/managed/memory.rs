//! Agent memory (docs/api/memory.md): `client.beta.memory_stores`, `.memories` and
//! `.memory_versions` (wire reference §2.11, §2B.9, §3.9). The rules are
//! `domain::memory`; this module parses the wire and renders `memory_store`, `memory`,
//! `memory_prefix` and `memory_version`. Admission has already checked the credential's
//! reach (`admission::scope`: a sessions token reaches only the stores attached to its
//! session) and the `agent-memory-2026-07-22` beta selector.

use agentd_schema::ids::{ApiKeyId, MemoryId, MemoryStoreId, MemoryVersionId, SessionId};
use agentd_schema::store::{
    MemoryActor, MemoryListItem, MemoryOperation, MemoryQuery, MemoryRow, MemoryStoreQuery, MemoryStoreRow,
    MemoryVersionQuery, MemoryVersionRow, TimeBounds,
};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::body::{self, kind};
use super::query::{Query, cursor_page, decode_cursor, rfc3339};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::memory::{self, MemoryChanges, StoreChanges};
use crate::error::{ApiError, ApiResult};

/// The most items of a memory or memory version page with `view=full` (a larger
/// `limit` is clamped to it).
pub const MAX_FULL_VIEW_ITEMS: i64 = 20;
/// The most items of any memory store, memory or memory version page.
pub const MAX_PAGE_ITEMS: i64 = 100;
/// Items of a page when `limit` is not given.
const DEFAULT_PAGE_ITEMS: i64 = 20;

/// `view`: whether memories and versions carry their `content`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    /// `content: null`.
    Basic,
    /// With `content`.
    Full,
}

impl View {
    /// `view=basic|full`, or `default` when absent.
    fn parse(query: &Query, default: View) -> ApiResult<View> {
        match query.string("view") {
            None => Ok(default),
            Some("basic") => Ok(View::Basic),
            Some("full") => Ok(View::Full),
            Some(other) => Err(ApiError::invalid(format!("view: expected basic or full, got {other:?}"))),
        }
    }

    fn full(self) -> bool {
        self == View::Full
    }
}

/// `BetaManagedAgentsMemoryStore` (its count and revision are internal).
pub fn render_store(store: &MemoryStoreRow) -> Value {
    json!({
        "type": "memory_store",
        "id": store.id,
        "name": store.name,
        "description": store.description,
        "metadata": store.metadata,
        "created_at": rfc3339(store.created_at_ms),
        "updated_at": rfc3339(store.updated_at_ms),
        "archived_at": store.archived_at_ms.map(rfc3339),
    })
}

/// `BetaManagedAgentsMemory`; `content` is `null` unless `full`.
fn render_memory(memory: &MemoryRow, view: View) -> Value {
    json!({
        "type": "memory",
        "id": memory.id,
        "memory_store_id": memory.memory_store_id,
        "path": memory.path,
        "content": if view.full() { memory.content.as_deref() } else { None },
        "content_sha256": memory.content_sha256,
        "content_size_bytes": memory.content_size_bytes,
        "memory_version_id": memory.memory_version_id,
        "created_at": rfc3339(memory.created_at_ms),
        "updated_at": rfc3339(memory.updated_at_ms),
    })
}

/// A `BetaManagedAgentsMemoryListItem`: a memory or a `memory_prefix`.
fn render_item(item: &MemoryListItem, view: View) -> Value {
    match item {
        MemoryListItem::Memory(memory) => render_memory(memory, view),
        MemoryListItem::Prefix(path) => json!({ "type": "memory_prefix", "path": path }),
    }
}

/// `created_by` / `redacted_by`.
fn render_actor(actor: &MemoryActor) -> Value {
    match actor {
        MemoryActor::ApiKey(id) => json!({ "type": "api_actor", "api_key_id": id }),
        MemoryActor::Session(id) => json!({ "type": "session_actor", "session_id": id }),
    }
}

/// `BetaManagedAgentsMemoryVersion`; `content` is `null` unless `full` (and always for a
/// `deleted` or redacted version).
fn render_version(version: &MemoryVersionRow, view: View) -> Value {
    json!({
        "type": "memory_version",
        "id": version.id,
        "memory_store_id": version.memory_store_id,
        "memory_id": version.memory_id,
        "operation": version.operation.as_str(),
        "path": version.path,
        "content": if view.full() { version.content.as_deref() } else { None },
        "content_sha256": version.content_sha256,
        "content_size_bytes": version.content_size_bytes,
        "created_by": render_actor(&version.created_by),
        "created_at": rfc3339(version.created_at_ms),
        "redacted_at": version.redacted_at_ms.map(rfc3339),
        "redacted_by": version.redacted_by.as_ref().map(render_actor),
    })
}

/// An optional string field: `None` when absent or `null`.
fn text<'a>(request: &'a Map<String, Value>, field: &str) -> ApiResult<Option<&'a str>> {
    match request.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(ApiError::invalid(format!("{field}: expected a string, got {}", kind(other)))),
    }
}

/// A required string field.
fn required_text<'a>(request: &'a Map<String, Value>, field: &str) -> ApiResult<&'a str> {
    text(request, field)?.ok_or_else(|| ApiError::invalid(format!("{field}: required")))
}

/// `limit` (1–100, default 20) and `page` of a list; with `view=full` at most 20 items.
fn page_limit(query: &Query, view: View) -> ApiResult<i64> {
    let limit = query.int("limit", 1, MAX_PAGE_ITEMS)?.unwrap_or(DEFAULT_PAGE_ITEMS);
    Ok(if view.full() { limit.min(MAX_FULL_VIEW_ITEMS) } else { limit })
}

/// `created_at[gte]` and `created_at[lte]`.
fn created_bounds(query: &Query) -> ApiResult<TimeBounds> {
    Ok(TimeBounds {
        gte: query.datetime_ms("created_at[gte]")?,
        lte: query.datetime_ms("created_at[lte]")?,
        ..TimeBounds::default()
    })
}

/// A typed id from a query parameter (400 naming it when it does not parse).
fn query_id<T>(
    query: &Query,
    key: &str,
    parse: fn(&str) -> Result<T, agentd_schema::ids::InvalidId>,
) -> ApiResult<Option<T>> {
    query
        .string(key)
        .map(|value| parse(value).map_err(|invalid| ApiError::invalid(format!("{key}: {invalid}, got {value:?}"))))
        .transpose()
}

// --- stores ------------------------------------------------------------------------------

/// `POST /v1/memory_stores`: `name` (required), `description`, `metadata`.
pub async fn create_store(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["name", "description", "metadata"], "")?;
    let name = required_text(&request, "name")?;
    let description = text(&request, "description")?.unwrap_or_default();
    let metadata = Value::Object(body::optional_metadata(request.get("metadata"))?);
    let created =
        memory::create_store(state.backends.store.as_ref(), &tenant.workspace_id, name, description, metadata).await?;
    Ok(Json(render_store(&created)))
}

/// `GET /v1/memory_stores/{memory_store_id}`.
pub async fn retrieve_store(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<MemoryStoreId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render_store(&memory::load_store(state.backends.store.as_ref(), &tenant.workspace_id, &id).await?)))
}

/// `POST /v1/memory_stores/{memory_store_id}`: `name`, `description` (`""` clears it) and
/// a `metadata` patch; `null` or absent leaves a field as it is.
pub async fn update_store(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<MemoryStoreId>,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let request = body::object(&bytes)?;
    body::only_known(&request, &["name", "description", "metadata"], "")?;
    let metadata = match request.get("metadata") {
        None | Some(Value::Null) => None,
        Some(Value::Object(patch)) => Some(patch.clone()),
        Some(other) => return Err(ApiError::invalid(format!("metadata: expected an object, got {}", kind(other)))),
    };
    let changes = StoreChanges {
        name: text(&request, "name")?.map(str::to_owned),
        description: text(&request, "description")?.map(str::to_owned),
        metadata,
    };
    let updated = memory::update_store(state.backends.store.as_ref(), &tenant.workspace_id, &id, &changes).await?;
    Ok(Json(render_store(&updated)))
}

/// `GET /v1/memory_stores`: newest first; `include_archived`, `created_at[gte|lte]`.
pub async fn list_stores(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = page_limit(&query, View::Basic)?;
    let store_query = MemoryStoreQuery {
        created: created_bounds(&query)?,
        include_archived: query.bool("include_archived")?.unwrap_or(false),
        before_id: query.string("page").map(decode_cursor).transpose()?,
        limit: limit + 1,
    };
    let rows = memory::list_stores(state.backends.store.as_ref(), &tenant.workspace_id, &store_query).await?;
    Ok(Json(cursor_page(rows, limit, |row| row.id.clone(), render_store)))
}

/// `POST /v1/memory_stores/{memory_store_id}/archive` (empty body): read-only for good.
pub async fn archive_store(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<MemoryStoreId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(render_store(&memory::archive_store(state.backends.store.as_ref(), &tenant.workspace_id, &id).await?)))
}

/// `DELETE /v1/memory_stores/{memory_store_id}`: the store, its memories and versions.
pub async fn delete_store(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<MemoryStoreId>,
) -> ApiResult<Json<Value>> {
    memory::delete_store(state.backends.store.as_ref(), &tenant.workspace_id, &id).await?;
    Ok(Json(json!({ "id": id, "type": "memory_store_deleted" })))
}

// --- memories ----------------------------------------------------------------------------

/// `POST /v1/memory_stores/{memory_store_id}/memories?view=`: `path` and `content` (both
/// required; `content: null` is the empty memory). `view` defaults to `basic`.
pub async fn create_memory(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(store_id): Path<MemoryStoreId>,
    uri: Uri,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let view = View::parse(&Query::from_uri(&uri), View::Basic)?;
    let request = body::object(&bytes)?;
    body::only_known(&request, &["path", "content"], "")?;
    let path = required_text(&request, "path")?.to_owned();
    if !request.contains_key("content") {
        return Err(ApiError::invalid("content: required (send \"\" for an empty memory)"));
    }
    let content = text(&request, "content")?.unwrap_or_default().to_owned();
    let created = memory::create_memory(state.backends.store.as_ref(), &tenant, &store_id, path, content).await?;
    Ok(Json(render_memory(&created, view)))
}

/// `GET /v1/memory_stores/{memory_store_id}/memories/{memory_id}?view=` (`full` by default).
pub async fn retrieve_memory(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((store_id, memory_id)): Path<(MemoryStoreId, MemoryId)>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let view = View::parse(&Query::from_uri(&uri), View::Full)?;
    let found =
        memory::get_memory(state.backends.store.as_ref(), &tenant.workspace_id, &store_id, &memory_id, view.full())
            .await?;
    Ok(Json(render_memory(&found, view)))
}

/// The `precondition` of an update: `{"type": "content_sha256", "content_sha256": …}`.
fn precondition(request: &Map<String, Value>) -> ApiResult<Option<String>> {
    let Some(value) = request.get("precondition").filter(|v| !v.is_null()) else { return Ok(None) };
    let map = body::as_object(value, "precondition")?;
    body::only_known(map, &["type", "content_sha256"], "precondition")?;
    match body::tag(map, "precondition")? {
        "content_sha256" => {}
        other => {
            return Err(ApiError::invalid(format!(
                "precondition.type: the only precondition is content_sha256, got {other:?}"
            )));
        }
    }
    match map.get("content_sha256") {
        Some(Value::String(digest)) => Ok(Some(digest.clone())),
        None | Some(Value::Null) => Err(ApiError::invalid("precondition.content_sha256: required")),
        Some(other) => {
            Err(ApiError::invalid(format!("precondition.content_sha256: expected a string, got {}", kind(other))))
        }
    }
}

/// `POST /v1/memory_stores/{memory_store_id}/memories/{memory_id}?view=`: `content`
/// (absent or `null`: unchanged), `path` (a rename; absent or `null`: unchanged),
/// `precondition`. `view` defaults to `basic`.
pub async fn update_memory(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((store_id, memory_id)): Path<(MemoryStoreId, MemoryId)>,
    uri: Uri,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let view = View::parse(&Query::from_uri(&uri), View::Basic)?;
    let request = body::object(&bytes)?;
    body::only_known(&request, &["path", "content", "precondition"], "")?;
    let changes = MemoryChanges {
        path: text(&request, "path")?.map(str::to_owned),
        content: text(&request, "content")?.map(str::to_owned),
        expected_sha256: precondition(&request)?,
    };
    let updated = memory::update_memory(state.backends.store.as_ref(), &tenant, &store_id, &memory_id, changes).await?;
    Ok(Json(render_memory(&updated, view)))
}

/// `GET /v1/memory_stores/{memory_store_id}/memories`: path order; `path_prefix` (a
/// directory: starts and ends with `/`), `depth` (0: everything below; n: n segments
/// below, deeper paths rolled into `memory_prefix` items, which count toward `limit`),
/// `view` (`basic` by default; `full` pages hold at most 20 items).
pub async fn list_memories(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(store_id): Path<MemoryStoreId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let view = View::parse(&query, View::Basic)?;
    let limit = page_limit(&query, view)?;
    let depth = query.int("depth", 0, i64::from(u32::MAX))?.unwrap_or(0);
    let memory_query = MemoryQuery {
        path_prefix: query.string("path_prefix").map(str::to_owned),
        depth: u32::try_from(depth).unwrap_or(u32::MAX),
        after: query.string("page").map(decode_cursor).transpose()?,
        limit: limit + 1,
        with_content: view.full(),
    };
    let items =
        memory::list_memories(state.backends.store.as_ref(), &tenant.workspace_id, &store_id, &memory_query).await?;
    Ok(Json(cursor_page(items, limit, |item| item.path().to_owned(), |item| render_item(item, view))))
}

/// `DELETE /v1/memory_stores/{memory_store_id}/memories/{memory_id}`:
/// `expected_content_sha256` makes it conditional (409 on a mismatch, nothing deleted).
pub async fn delete_memory(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((store_id, memory_id)): Path<(MemoryStoreId, MemoryId)>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let expected = query.string("expected_content_sha256");
    memory::delete_memory(state.backends.store.as_ref(), &tenant, &store_id, &memory_id, expected).await?;
    Ok(Json(json!({ "id": memory_id, "type": "memory_deleted" })))
}

// --- versions ----------------------------------------------------------------------------

/// `GET /v1/memory_stores/{memory_store_id}/memory_versions`: newest first; filters
/// `memory_id` (also after the memory's deletion), `operation`, `session_id`,
/// `api_key_id`, `service_account_id`, `created_at[gte|lte]`; `view` (`basic` by default;
/// `full` pages hold at most 20 items).
pub async fn list_versions(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(store_id): Path<MemoryStoreId>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let view = View::parse(&query, View::Basic)?;
    let limit = page_limit(&query, view)?;
    let operation = query
        .string("operation")
        .map(|name| {
            MemoryOperation::parse(name).ok_or_else(|| {
                ApiError::invalid(format!("operation: expected created, modified or deleted, got {name:?}"))
            })
        })
        .transpose()?;
    let version_query = MemoryVersionQuery {
        memory_id: query_id(&query, "memory_id", MemoryId::parse)?.map(String::from),
        operation,
        session_id: query_id(&query, "session_id", SessionId::parse)?.map(String::from),
        api_key_id: query_id(&query, "api_key_id", ApiKeyId::parse)?.map(String::from),
        created: created_bounds(&query)?,
        before_id: query.string("page").map(decode_cursor).transpose()?,
        limit: limit + 1,
        with_content: view.full(),
    };
    let store = state.backends.store.as_ref();
    // No version is written by a service account (agentd has none): the filter is
    // applied, and matches nothing.
    if let Some(account) = query.string("service_account_id") {
        if !account.starts_with("svac_") {
            return Err(ApiError::invalid(format!("service_account_id: expected a svac_… id, got {account:?}")));
        }
        memory::load_store(store, &tenant.workspace_id, &store_id).await?;
        return Ok(Json(json!({ "data": [], "next_page": null })));
    }
    let rows = memory::list_versions(store, &tenant.workspace_id, &store_id, &version_query).await?;
    Ok(Json(cursor_page(rows, limit, |row| row.id.clone(), |row| render_version(row, view))))
}

/// `GET /v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}?view=`
/// (`full` by default).
pub async fn retrieve_version(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((store_id, version_id)): Path<(MemoryStoreId, MemoryVersionId)>,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let view = View::parse(&Query::from_uri(&uri), View::Full)?;
    let version =
        memory::get_version(state.backends.store.as_ref(), &tenant.workspace_id, &store_id, &version_id, view.full())
            .await?;
    Ok(Json(render_version(&version, view)))
}

/// `POST /v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact`
/// (empty body): erases the version's path and content for good.
pub async fn redact_version(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path((store_id, version_id)): Path<(MemoryStoreId, MemoryVersionId)>,
) -> ApiResult<Json<Value>> {
    let version = memory::redact_version(state.backends.store.as_ref(), &tenant, &store_id, &version_id).await?;
    Ok(Json(render_version(&version, View::Basic)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str) -> Query {
        Query::from_uri(&format!("/x?{text}").parse::<Uri>().unwrap())
    }

    #[test]
    fn view_defaults_and_full_pages_hold_at_most_20() {
        assert_eq!(View::parse(&query(""), View::Full).unwrap(), View::Full);
        assert_eq!(View::parse(&query(""), View::Basic).unwrap(), View::Basic);
        assert_eq!(View::parse(&query("view=full"), View::Basic).unwrap(), View::Full);
        assert!(View::parse(&query("view=everything"), View::Basic).is_err());
        assert_eq!(page_limit(&query(""), View::Basic).unwrap(), 20);
        assert_eq!(page_limit(&query("limit=100"), View::Basic).unwrap(), 100);
        assert_eq!(page_limit(&query("limit=100"), View::Full).unwrap(), 20);
        assert_eq!(page_limit(&query("limit=5"), View::Full).unwrap(), 5);
        assert!(page_limit(&query("limit=0"), View::Basic).is_err());
        assert!(page_limit(&query("limit=101"), View::Full).is_err());
    }

    #[test]
    fn basic_views_send_a_null_content_key_and_never_the_internals() {
        let memory = MemoryRow {
            id: "mem_x".into(),
            memory_store_id: "memstore_x".into(),
            workspace_id: "ws".into(),
            path: "/a.md".into(),
            content: Some("text".into()),
            content_sha256: "0".repeat(64),
            content_size_bytes: 4,
            memory_version_id: "memver_x".into(),
            created_at_ms: 0,
            updated_at_ms: 0,
        };
        let basic = render_memory(&memory, View::Basic);
        assert!(basic.as_object().unwrap().contains_key("content") && basic["content"].is_null());
        assert_eq!(render_memory(&memory, View::Full)["content"], "text");
        assert!(basic.get("workspace_id").is_none());
        let store = MemoryStoreRow {
            id: "memstore_x".into(),
            workspace_id: "ws".into(),
            name: "n".into(),
            description: String::new(),
            metadata: json!({}),
            memory_count: 3,
            revision: 7,
            archived_at_ms: None,
            created_at_ms: 0,
            updated_at_ms: 0,
        };
        let rendered = render_store(&store);
        for internal in ["memory_count", "revision", "workspace_id"] {
            assert!(rendered.get(internal).is_none(), "{internal} is internal");
        }
        assert_eq!(
            render_actor(&MemoryActor::ApiKey("apikey_x".into())),
            json!({"type": "api_actor", "api_key_id": "apikey_x"})
        );
        assert_eq!(
            render_actor(&MemoryActor::Session("sesn_x".into())),
            json!({"type": "session_actor", "session_id": "sesn_x"})
        );
    }

    #[test]
    fn preconditions_have_one_shape() {
        let parse = |value: Value| precondition(value.as_object().unwrap());
        assert_eq!(parse(json!({})).unwrap(), None);
        assert_eq!(parse(json!({"precondition": null})).unwrap(), None);
        let digest = "a".repeat(64);
        assert_eq!(
            parse(json!({"precondition": {"type": "content_sha256", "content_sha256": digest}})).unwrap(),
            Some(digest)
        );
        for bad in [
            json!({"precondition": "x"}),
            json!({"precondition": {"content_sha256": "a"}}),
            json!({"precondition": {"type": "etag", "content_sha256": "a"}}),
            json!({"precondition": {"type": "content_sha256"}}),
            json!({"precondition": {"type": "content_sha256", "content_sha256": 5}}),
            json!({"precondition": {"type": "content_sha256", "content_sha256": "a", "extra": 1}}),
        ] {
            let refused = parse(bad.clone());
            assert!(
                matches!(&refused, Err(ApiError::InvalidRequest { message, .. }) if message.starts_with("precondition")),
                "{bad}: {refused:?}"
            );
        }
    }
}
