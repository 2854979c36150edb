//! What the generic managed families (agents, environments, vaults, credentials) share:
//! scoped loads, newest-first cursor pages, archive, and the lifecycle fields rendered
//! from the row.

use agentd_schema::{ListQuery, NewResource, Resource, Store};
use axum::http::Uri;
use serde_json::{Value, json};

use super::query::{ChunkedPage, Query, decode_cursor, rfc3339};
use crate::admission::Tenant;
use crate::error::{ApiError, ApiResult};

/// A family stored in the generic resources table.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// The stored kind, e.g. `environment`.
    pub kind: &'static str,
    /// The noun used in messages, e.g. `environment`.
    pub noun: &'static str,
    /// The largest `limit` a list page takes.
    pub max_page: i64,
}

/// The stored body with its timestamps from the row (`created_at` where the body has
/// one), so what a resource shows is exactly what `created_at[gte|lte]` filters on.
pub fn with_lifecycle(resource: &Resource) -> Value {
    let mut out = resource.body.clone();
    if out.get("created_at").is_some() {
        out["created_at"] = json!(rfc3339(resource.created_at_ms));
    }
    out["updated_at"] = json!(rfc3339(resource.updated_at_ms));
    out["archived_at"] = json!(resource.archived_at_ms.map(rfc3339));
    out
}

impl Family {
    /// Loads a resource of the caller's workspace (and of `parent`, if given) or 404.
    pub async fn load(
        &self,
        store: &dyn Store,
        tenant: &Tenant,
        id: &str,
        parent: Option<&str>,
    ) -> ApiResult<Resource> {
        store
            .get_resource(&tenant.workspace_id, self.kind, id)
            .await?
            .filter(|r| parent.is_none() || r.parent_id.as_deref() == parent)
            .ok_or_else(|| ApiError::NotFound(format!("{} not found: {id}", self.noun)))
    }

    /// A newest-first cursor page (`limit` 1–`max_page`, `page`, `include_archived`, and
    /// `created_at[gte|lte]` when `created_bounds`).
    pub async fn page(
        &self,
        store: &dyn Store,
        tenant: &Tenant,
        uri: &Uri,
        parent: Option<String>,
        created_bounds: bool,
        render: fn(&Resource) -> Value,
    ) -> ApiResult<Value> {
        let query = Query::from_uri(uri);
        let limit = query.int("limit", 1, self.max_page)?.unwrap_or(20);
        let (created_gte_ms, created_lte_ms) = if created_bounds {
            (query.datetime_ms("created_at[gte]")?, query.datetime_ms("created_at[lte]")?)
        } else {
            (None, None)
        };
        let list = ListQuery {
            parent_id: parent,
            descending: true,
            include_archived: query.bool("include_archived")?.unwrap_or(false),
            created_gte_ms,
            created_lte_ms,
            ..ListQuery::default()
        };
        let after = query.string("page").map(decode_cursor).transpose()?;
        // Agents are up to 1 MiB each: a few rows at a time.
        let mut page = ChunkedPage::new(after, limit, 8);
        while let Some((after_id, n)) = page.next_fetch() {
            let chunk = ListQuery { after_id, limit: n, ..list.clone() };
            page.take(&store.list_resources(&tenant.workspace_id, self.kind, &chunk).await?, |r| r.id.clone(), render);
        }
        Ok(page.finish())
    }

    /// Stores a new resource of this family in the caller's workspace.
    pub async fn create(
        &self,
        store: &dyn Store,
        tenant: &Tenant,
        id: String,
        parent_id: Option<String>,
        body: Value,
        versioned: bool,
    ) -> ApiResult<Resource> {
        let new = NewResource {
            id,
            workspace_id: tenant.workspace_id.clone(),
            kind: self.kind.into(),
            parent_id,
            body,
            versioned,
        };
        Ok(store.create_resource(new).await?)
    }

    /// Archives a resource of the caller's workspace (idempotent).
    pub async fn archive(
        &self,
        store: &dyn Store,
        tenant: &Tenant,
        id: &str,
        parent: Option<&str>,
    ) -> ApiResult<Resource> {
        self.load(store, tenant, id, parent).await?;
        Ok(store.archive_resource(&tenant.workspace_id, self.kind, id).await?)
    }
}
