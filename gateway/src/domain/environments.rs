//! Environments: creation (the managed route and the adapters' own environment).

use agentd_schema::{NewResource, Resource};
use serde_json::{Value, json};

use super::error::DomainResult;
use crate::AppState;
use crate::admission::Tenant;

/// An environment to create, its fields already validated.
#[derive(Debug, Clone)]
pub struct CreateEnvironment {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// The resolved `config` (see [`default_cloud`]).
    pub config: Value,
    /// Metadata.
    pub metadata: Value,
    /// `organization`.
    pub scope: String,
}

/// The config of a `cloud` environment nobody configured: unrestricted networking, no
/// packages.
pub fn default_cloud() -> Value {
    json!({
        "type": "cloud",
        "networking": { "type": "unrestricted" },
        "packages": { "apt": [], "cargo": [], "gem": [], "go": [], "npm": [], "pip": [], "type": "packages" },
    })
}

/// Creates an environment in the tenant's workspace.
pub async fn create(state: &AppState, tenant: &Tenant, request: CreateEnvironment) -> DomainResult<Resource> {
    let id = agentd_schema::ids::new_id("env");
    let now = agentd_schema::live::rfc3339(crate::managed::query::now_ms());
    let body = json!({
        "type": "environment",
        "id": id,
        "name": request.name,
        "description": request.description,
        "config": request.config,
        "metadata": request.metadata,
        "scope": request.scope,
        "created_at": now,
        "updated_at": now,
        "archived_at": null,
    });
    let new = NewResource {
        id,
        workspace_id: tenant.workspace_id.clone(),
        kind: "environment".into(),
        parent_id: None,
        body,
        versioned: false,
    };
    Ok(state.backends.store.create_resource(new).await?)
}
