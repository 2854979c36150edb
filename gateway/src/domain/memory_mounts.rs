//! Memory stores attached to sessions (docs/api/memory.md, "Memory in sessions"): the
//! rules of a `memory_store` resource, once, for every path that writes a session's
//! resources — session create and the manifest replace (`resources.add` takes files
//! only). Each store must be a live store of the workspace, attached once, at a mount
//! directory no other attached store has; the resource keeps a snapshot of the store's
//! `name` and `description` and its `mount_path`, `/mnt/memory/<slug of the name>`.
//!
//! The hands mount the store there (`agentd runner`: runner/src/memory.rs; the SDK's
//! `EnvironmentWorker` on its own host) and write changes back through the memory API
//! with the work item's sessions token, so every version they write names the session.

use std::collections::HashMap;

use agentd_schema::Store;
use agentd_schema::ids::MemoryStoreId;
use serde_json::{Value, json};

use super::{DomainError, DomainResult};

/// Where sessions see their memory stores: one directory per store.
pub const MEMORY_MOUNT_ROOT: &str = "/mnt/memory/";

/// How a session may use an attached store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Mounted read-only: the session reads, never writes.
    ReadOnly,
    /// Mounted writable; changes are written back as versions by the session.
    ReadWrite,
}

impl Access {
    /// `access` of a resource: absent or `null` is `read_write` (the default).
    pub fn parse(value: Option<&Value>) -> Result<Self, String> {
        match value {
            None | Some(Value::Null) => Ok(Access::ReadWrite),
            Some(Value::String(s)) if s == "read_write" => Ok(Access::ReadWrite),
            Some(Value::String(s)) if s == "read_only" => Ok(Access::ReadOnly),
            Some(other) => Err(format!("must be read_only or read_write, got {other}")),
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadOnly => "read_only",
            Access::ReadWrite => "read_write",
        }
    }
}

/// The mount path of a store named `name`.
pub fn mount_path(name: &str) -> String {
    format!("{MEMORY_MOUNT_ROOT}{}", super::memory::mount_slug(name))
}

/// Checks the `memory_store` entries of `resources` (a session's resources as parsed, in
/// the order given) and completes each with its snapshot: `name`, `description` and
/// `mount_path`. `attached` is the session's current resources (`Null` at creation): a
/// store already attached keeps the snapshot it was attached with and is not checked
/// again (a running session keeps its mount even once the store is archived); its
/// `access` and `instructions` are the new ones.
///
/// Refused, naming the entry (`resources[i]`): a store that is not in the workspace or
/// is archived, the same store twice, and two stores whose names give the same mount
/// directory.
pub async fn attach(
    store: &dyn Store,
    workspace_id: &str,
    resources: &mut Value,
    attached: &Value,
) -> DomainResult<()> {
    let before: HashMap<&str, &Value> = attached
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["type"] == "memory_store")
        .filter_map(|r| Some((r["memory_store_id"].as_str()?, r)))
        .collect();
    // Store id → index, and mount path → (index, id, name), of the entries seen so far.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut mounts: HashMap<String, (usize, String, String)> = HashMap::new();
    for (i, resource) in resources.as_array_mut().into_iter().flatten().enumerate() {
        if resource["type"] != "memory_store" {
            continue;
        }
        let at = format!("resources[{i}]");
        let id = resource["memory_store_id"].as_str().unwrap_or_default().to_owned();
        if MemoryStoreId::parse(&id).is_err() {
            return Err(DomainError::invalid(format!("{at}.memory_store_id: {id:?} is not a memory store id")));
        }
        let access =
            Access::parse(resource.get("access")).map_err(|why| DomainError::invalid(format!("{at}.access: {why}")))?;
        if let Some(first) = seen.insert(id.clone(), i) {
            return Err(DomainError::invalid(format!(
                "{at}.memory_store_id: memory store {id} is attached twice (resources[{first}] and resources[{i}])"
            )));
        }
        let (name, description, path) = match before.get(id.as_str()) {
            Some(kept) => (
                kept["name"].as_str().unwrap_or_default().to_owned(),
                kept["description"].as_str().unwrap_or_default().to_owned(),
                kept["mount_path"]
                    .as_str()
                    .map_or_else(|| mount_path(kept["name"].as_str().unwrap_or_default()), str::to_owned),
            ),
            None => {
                let row = store.get_memory_store(workspace_id, &id).await?.ok_or_else(|| {
                    DomainError::invalid(format!("{at}.memory_store_id: no memory store {id} in this workspace"))
                })?;
                if row.archived_at_ms.is_some() {
                    return Err(DomainError::invalid_with_code(
                        "memory_store_archived",
                        format!("{at}.memory_store_id: memory store {id} is archived and cannot be attached"),
                    ));
                }
                let path = mount_path(&row.name);
                (row.name, row.description, path)
            }
        };
        if let Some((first, other, other_name)) = mounts.get(&path) {
            return Err(DomainError::invalid(format!(
                "{at}.memory_store_id: memory store {id} ({name:?}) would be mounted at {path}, where memory store \
                 {other} ({other_name:?}, resources[{first}]) is mounted; their names give the same directory, \
                 rename one of them"
            )));
        }
        mounts.insert(path.clone(), (i, id.clone(), name.clone()));
        let instructions = resource.get("instructions").cloned().unwrap_or(Value::Null);
        *resource = json!({
            "type": "memory_store",
            "memory_store_id": id,
            "access": access.as_str(),
            "instructions": instructions,
            "name": name,
            "description": description,
            "mount_path": path,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_mounted_at_the_slug_of_its_name() {
        assert_eq!(mount_path("User Preferences"), "/mnt/memory/user-preferences");
        assert_eq!(mount_path("***"), "/mnt/memory/memory");
    }

    #[test]
    fn access_defaults_to_read_write_and_is_a_closed_set() {
        assert_eq!(Access::parse(None), Ok(Access::ReadWrite));
        assert_eq!(Access::parse(Some(&Value::Null)), Ok(Access::ReadWrite));
        assert_eq!(Access::parse(Some(&json!("read_only"))), Ok(Access::ReadOnly));
        assert!(Access::parse(Some(&json!("write"))).is_err());
        assert!(Access::parse(Some(&json!(1))).is_err());
    }
}
