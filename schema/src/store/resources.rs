//! Generic versioned resources: most managed families store their wire body here.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;

/// A stored resource of one of the generic managed families.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// Prefixed id.
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Family, e.g. `agent`, `environment`, `vault`.
    pub kind: String,
    /// For sub-resources (a vault's credentials), the parent's id.
    pub parent_id: Option<String>,
    /// Starts at 1, bumped by every update.
    pub version: i64,
    /// The wire body.
    pub body: Value,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Last update, epoch ms.
    pub updated_at_ms: i64,
    /// Set once archived.
    pub archived_at_ms: Option<i64>,
}

/// What admitting a turn needs to know of a resource, without its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceState {
    /// Prefixed id.
    pub id: String,
    /// Family.
    pub kind: String,
    /// Set once archived.
    pub archived_at_ms: Option<i64>,
    /// The body has `disabled_at` set.
    pub disabled: bool,
}

/// A resource to create.
#[derive(Debug, Clone)]
pub struct NewResource {
    /// Prefixed id (see [`crate::ids::new_id`]).
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Family.
    pub kind: String,
    /// Parent for sub-resources.
    pub parent_id: Option<String>,
    /// The wire body.
    pub body: Value,
    /// Whether each version is kept as an immutable snapshot.
    pub versioned: bool,
}

/// A compare-and-swap replacement of a resource's body (see
/// [`ResourceStore::update_resource`]).
#[derive(Debug, Clone)]
pub struct ResourceUpdate {
    /// Owning workspace.
    pub workspace_id: String,
    /// Family.
    pub kind: String,
    /// The resource.
    pub id: String,
    /// The version the new body was computed from.
    pub expected_version: i64,
    /// The new wire body.
    pub body: Value,
    /// Whether the new version is kept as an immutable snapshot.
    pub versioned: bool,
}

/// A page request over one family, ordered by id (ids sort by creation time).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only this parent's children.
    pub parent_id: Option<String>,
    /// Return ids strictly after this one (in the listing order).
    pub after_id: Option<String>,
    /// Return ids strictly before this one (in the listing order).
    pub before_id: Option<String>,
    /// At most this many rows.
    pub limit: i64,
    /// Newest first when true.
    pub descending: bool,
    /// Include archived rows.
    pub include_archived: bool,
    /// Only rows created at or after this time (epoch ms).
    pub created_gte_ms: Option<i64>,
    /// Only rows created at or before this time (epoch ms).
    pub created_lte_ms: Option<i64>,
}

/// Generic resources (agents, environments, vaults, credentials …), scoped to a
/// workspace: another workspace's id reads as missing. Updates are compare-and-swap on
/// `version`; a versioned family keeps every version as an immutable snapshot written in
/// the same transaction.
#[async_trait]
pub trait ResourceStore: Send + Sync {
    /// Creates a resource at version 1 (and its first snapshot if versioned). A taken
    /// id is a `Conflict`.
    async fn create_resource(&self, new: NewResource) -> StoreResult<Resource>;

    /// Creates a child resource of `new.parent_id` (which must exist, of `parent_kind`, not
    /// archived) only while that parent has fewer than `max_active` children of
    /// `new.kind` that are not archived. The parent's row is locked for the check, so
    /// racing creators cannot pass the cap together. `Conflict` (nothing written) at the
    /// cap; `NotFound` without a live parent.
    async fn create_capped_child(&self, new: NewResource, parent_kind: &str, max_active: i64) -> StoreResult<Resource>;

    /// Reads a resource of `kind` in `workspace_id`.
    async fn get_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<Option<Resource>>;

    /// The state of each named resource of the workspace that exists (`(kind, id)`
    /// pairs), in one read that leaves the bodies in the store.
    async fn resource_states(&self, workspace_id: &str, wanted: &[(&str, &str)]) -> StoreResult<Vec<ResourceState>>;

    /// Replaces the body if the current version is `update.expected_version`; bumps the
    /// version (and snapshots it if `versioned`). `Conflict` (nothing written) if the
    /// version moved, `NotFound` if there is no such resource.
    async fn update_resource(&self, update: ResourceUpdate) -> StoreResult<Resource>;

    /// Marks a resource archived (idempotent; keeps the first archive time).
    async fn archive_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<Resource>;

    /// Deletes a resource and its snapshots; `false` if it did not exist.
    async fn delete_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<bool>;

    /// Lists one family of a workspace, ordered by id.
    async fn list_resources(&self, workspace_id: &str, kind: &str, query: &ListQuery) -> StoreResult<Vec<Resource>>;

    /// Reads one immutable snapshot of a versioned resource.
    async fn get_resource_version(&self, resource_id: &str, version: i64) -> StoreResult<Option<Value>>;

    /// Snapshots of a versioned resource as `(version, body)`, ordered by version,
    /// strictly past `after_version` in the listing order, at most `limit`.
    async fn list_resource_versions(
        &self,
        resource_id: &str,
        after_version: Option<i64>,
        limit: i64,
        descending: bool,
    ) -> StoreResult<Vec<(i64, Value)>>;
}
