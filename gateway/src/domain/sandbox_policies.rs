//! Sandbox execution policies (docs/api/sandbox-policies.md): what the hands of a
//! `cloud` environment must provide when they run a session's built-in tools — an
//! isolation level and resource limits.
//!
//! A policy is a series of versions that never change once written; a new version is
//! written only on top of the one its author read (`expected_current`, else a conflict).
//! An environment's binding pins one exact version, and a session pins its environment's
//! binding when it is created (`pin`, called by `sessions::create`): rebinding applies to
//! the sessions created after it, never to one that runs. The runner enforces the pinned
//! version or refuses to run the session's tools (`agentd_runner::policy`).
//!
//! Two presets are built in, read-only and bindable like any policy: `standard` (the
//! `namespace` isolation, no limits of its own) and `locked-down` (`container` isolation,
//! 2 CPUs and 2 GiB).

use agentd_schema::ids::EnvironmentId;
use agentd_schema::{NewSandboxPolicyVersion, SandboxPolicyBindingRow, SandboxPolicyVersionRow, Store, StoreError};
use serde_json::{Map, Value, json};

use super::error::{DomainError, DomainResult};

/// The isolation levels, weakest first: a runner meets a level by providing it or a
/// stronger one.
pub const ISOLATION_LEVELS: [&str; 3] = ["workdir", "namespace", "container"];
/// The limits a policy may set (each a positive integer, or `null` for no cap).
pub const LIMITS: [&str; 4] = ["cpu_millis", "memory_bytes", "disk_bytes", "pids"];
/// The largest limit value taken (2^53 − 1: exact in every JSON reader).
const MAX_LIMIT: u64 = (1 << 53) - 1;
/// The largest CPU rate taken: 1,000 CPUs.
const MAX_CPU_MILLIS: u64 = 1_000_000;
/// The most policies one list page returns.
pub const MAX_PAGE: i64 = 100;

/// The built-in presets: (id, config).
fn presets() -> [(&'static str, Value); 2] {
    [
        (
            "standard",
            json!({"isolation": "namespace", "limits": {"cpu_millis": null, "memory_bytes": null, "disk_bytes": null, "pids": null}}),
        ),
        (
            "locked-down",
            json!({"isolation": "container", "limits": {"cpu_millis": 2000, "memory_bytes": 2u64 << 30, "disk_bytes": null, "pids": null}}),
        ),
    ]
}

/// The preset `id`, as a version row of no workspace.
fn preset(id: &str) -> Option<SandboxPolicyVersionRow> {
    presets().into_iter().find(|(name, _)| *name == id).map(|(name, config)| SandboxPolicyVersionRow {
        workspace_id: String::new(),
        policy_id: name.to_owned(),
        version: 1,
        config,
        provisioning: "eager".to_owned(),
        idle_retention: Value::Null,
        disabled: false,
        created_at_ms: 0,
    })
}

/// Whether `value` can be a policy's id: 1 to 64 lowercase ASCII letters, digits, `_`
/// and `-`, starting with a letter or digit.
pub fn is_policy_id(value: &str) -> bool {
    (1..=64).contains(&value.len())
        && value.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The fields of a version its author writes (the body of create, minus `id`, and of a
/// new version, minus `expected_current`).
#[derive(Debug, Clone, PartialEq)]
pub struct VersionContent {
    /// The validated config, every limit present.
    pub config: Value,
    /// `eager`.
    pub provisioning: String,
    /// `{"mode": "resident"}` or `Null`.
    pub idle_retention: Value,
    /// Whether the version may not be newly bound.
    pub disabled: bool,
}

/// Reads and checks a version's fields from a request body, naming the field at fault;
/// `extra` are the body's other fields (`id` or `expected_current`), checked by the caller.
pub fn content(body: &Map<String, Value>, extra: &str) -> DomainResult<VersionContent> {
    for key in body.keys() {
        if !["config", "provisioning", "idle_retention", "disabled", extra].contains(&key.as_str()) {
            return Err(DomainError::invalid(format!("{key}: unknown field")));
        }
    }
    let config = config(body.get("config").ok_or_else(|| DomainError::invalid("config: required"))?)?;
    let provisioning = match body.get("provisioning") {
        None | Some(Value::Null) => "eager".to_owned(),
        Some(Value::String(mode)) if mode == "eager" => mode.clone(),
        Some(Value::String(mode)) if mode == "on_tool_use" => {
            return Err(DomainError::invalid(
                "provisioning: `on_tool_use` is not supported: a session's hands are provisioned when the session \
                 starts (`eager`)",
            ));
        }
        Some(_) => return Err(DomainError::invalid("provisioning: expected \"eager\" or \"on_tool_use\"")),
    };
    let idle_retention = match body.get("idle_retention") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::Object(retention)) => idle_retention(retention)?,
        Some(_) => return Err(DomainError::invalid("idle_retention: expected an object")),
    };
    let disabled = match body.get("disabled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(disabled)) => *disabled,
        Some(_) => return Err(DomainError::invalid("disabled: expected a boolean")),
    };
    Ok(VersionContent { config, provisioning, idle_retention, disabled })
}

/// Checks a `config` and fills in its defaults: `isolation` (`namespace`) and every limit
/// (`null`). Unknown fields are refused at every level.
pub fn config(value: &Value) -> DomainResult<Value> {
    let Value::Object(config) = value else { return Err(DomainError::invalid("config: expected an object")) };
    for key in config.keys() {
        match key.as_str() {
            "isolation" | "limits" => {}
            "requests" => {
                return Err(DomainError::invalid(
                    "config.requests: resource reservations are not supported: agentd's runners do not schedule by \
                     reservation (use config.limits for caps)",
                ));
            }
            other => return Err(DomainError::invalid(format!("config.{other}: unknown field"))),
        }
    }
    let isolation = match config.get("isolation") {
        None | Some(Value::Null) => "namespace",
        Some(Value::String(level)) if ISOLATION_LEVELS.contains(&level.as_str()) => level.as_str(),
        Some(_) => {
            return Err(DomainError::invalid("config.isolation: expected \"workdir\", \"namespace\" or \"container\""));
        }
    };
    let mut limits = Map::new();
    match config.get("limits") {
        None | Some(Value::Null) => {}
        Some(Value::Object(given)) => {
            for (key, value) in given {
                if !LIMITS.contains(&key.as_str()) {
                    return Err(DomainError::invalid(format!("config.limits.{key}: unknown field")));
                }
                let max = if key == "cpu_millis" { MAX_CPU_MILLIS } else { MAX_LIMIT };
                let valid = value.is_null() || value.as_u64().is_some_and(|n| (1..=max).contains(&n));
                if !valid {
                    return Err(DomainError::invalid(format!(
                        "config.limits.{key}: expected an integer from 1 to {max}, or null for no cap"
                    )));
                }
                limits.insert(key.clone(), value.clone());
            }
        }
        Some(_) => return Err(DomainError::invalid("config.limits: expected an object")),
    }
    for key in LIMITS {
        limits.entry(key).or_insert(Value::Null);
    }
    Ok(json!({ "isolation": isolation, "limits": limits }))
}

/// `idle_retention`: only `{"mode": "resident"}` (a session's sandbox stays while its
/// work item is open); checkpointing and release is refused until the runner can do it.
fn idle_retention(retention: &Map<String, Value>) -> DomainResult<Value> {
    match retention.get("mode").and_then(Value::as_str) {
        Some("resident") => {}
        Some("checkpoint_and_release") => {
            return Err(DomainError::invalid(
                "idle_retention.mode: `checkpoint_and_release` is not supported: agentd's runners keep an idle \
                 session's sandbox resident",
            ));
        }
        _ => return Err(DomainError::invalid("idle_retention.mode: expected \"resident\"")),
    }
    if let Some(other) = retention.keys().find(|key| *key != "mode") {
        return Err(DomainError::invalid(format!("idle_retention.{other}: only `mode` applies to a resident sandbox")));
    }
    Ok(json!({ "mode": "resident" }))
}

fn not_found(id: &str) -> DomainError {
    DomainError::NotFound(format!("sandbox execution policy not found: {id}"))
}

/// Creates policy `id` at version 1. A preset's id, or one the workspace has, is a conflict.
pub async fn create(
    store: &dyn Store,
    workspace_id: &str,
    id: &str,
    content: VersionContent,
) -> DomainResult<SandboxPolicyVersionRow> {
    if !is_policy_id(id) {
        return Err(DomainError::invalid(
            "id: expected 1 to 64 lowercase letters, digits, `_` and `-`, starting with a letter or digit",
        ));
    }
    if preset(id).is_some() {
        return Err(DomainError::Conflict(format!("sandbox execution policy {id} is a built-in preset")));
    }
    Ok(store.create_sandbox_policy(new_version(workspace_id, id, content)).await?)
}

/// Writes the next version of policy `id` on top of `expected_current`.
pub async fn add_version(
    store: &dyn Store,
    workspace_id: &str,
    id: &str,
    expected_current: i64,
    content: VersionContent,
) -> DomainResult<SandboxPolicyVersionRow> {
    if preset(id).is_some() {
        return Err(DomainError::Conflict(format!("sandbox execution policy {id} is a built-in preset: read-only")));
    }
    match store.add_sandbox_policy_version(new_version(workspace_id, id, content), expected_current).await {
        Err(StoreError::NotFound { .. }) => Err(not_found(id)),
        other => Ok(other?),
    }
}

fn new_version(workspace_id: &str, id: &str, content: VersionContent) -> NewSandboxPolicyVersion {
    NewSandboxPolicyVersion {
        workspace_id: workspace_id.to_owned(),
        policy_id: id.to_owned(),
        config: content.config,
        provisioning: content.provisioning,
        idle_retention: content.idle_retention,
        disabled: content.disabled,
    }
}

/// Version `version` of policy `id` (its current one when `None`): a preset or the
/// workspace's.
pub async fn get(
    store: &dyn Store,
    workspace_id: &str,
    id: &str,
    version: Option<i64>,
) -> DomainResult<SandboxPolicyVersionRow> {
    if let Some(preset) = preset(id) {
        return version
            .is_none_or(|v| v == 1)
            .then_some(preset)
            .ok_or_else(|| not_found(&format!("{id} v{version:?}")));
    }
    let found = store.get_sandbox_policy(workspace_id, id, version).await?;
    found.ok_or_else(|| match version {
        Some(version) => DomainError::NotFound(format!("sandbox execution policy {id} has no version {version}")),
        None => not_found(id),
    })
}

/// One page of policies (their current versions) by id: the presets first, on the first
/// page. Returns the page and whether more follow.
pub async fn list(
    store: &dyn Store,
    workspace_id: &str,
    after_id: Option<&str>,
    limit: i64,
) -> DomainResult<(Vec<SandboxPolicyVersionRow>, bool)> {
    let limit = limit.clamp(1, MAX_PAGE);
    let mut page: Vec<SandboxPolicyVersionRow> = match after_id {
        None => presets().into_iter().filter_map(|(id, _)| preset(id)).collect(),
        Some(_) => Vec::new(),
    };
    page.extend(store.list_sandbox_policies(workspace_id, after_id, limit + 1).await?);
    let has_more = page.len() as i64 > limit;
    page.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok((page, has_more))
}

/// Binds environment `environment_id` to version `version` of policy `policy_id`. A
/// missing environment, policy or version is `NotFound`; an archived environment a
/// `Conflict`; a disabled version `Invalid` with code `sandbox_policy_disabled` (the
/// managed route answers it 422).
pub async fn bind(
    store: &dyn Store,
    workspace_id: &str,
    environment_id: &EnvironmentId,
    policy_id: &str,
    version: i64,
) -> DomainResult<SandboxPolicyBindingRow> {
    let environment = store
        .get_resource(workspace_id, "environment", environment_id.as_str())
        .await?
        .ok_or_else(|| DomainError::NotFound(format!("environment not found: {environment_id}")))?;
    if environment.archived_at_ms.is_some() {
        return Err(DomainError::Conflict(format!(
            "environment {environment_id} is archived: its sandbox execution policy cannot change"
        )));
    }
    // A self-hosted environment's hands are its owner's worker, which agentd cannot make
    // enforce anything: binding there would be a policy accepted and silently ignored.
    if agentd_schema::hands::hands_of(&environment.body) == "self_hosted" {
        return Err(DomainError::Conflict(format!(
            "environment {environment_id} is self_hosted: its hands are your own worker, which does not enforce \
             sandbox execution policies; bind policies to cloud environments"
        )));
    }
    let bound = get(store, workspace_id, policy_id, Some(version)).await?;
    if bound.disabled {
        return Err(DomainError::invalid_with_code(
            DISABLED,
            format!("sandbox execution policy {policy_id} version {version} is disabled and cannot be bound"),
        ));
    }
    Ok(store.bind_sandbox_policy(workspace_id, environment_id.as_str(), policy_id, version).await?)
}

/// The `error_code` of binding a disabled version.
pub const DISABLED: &str = "sandbox_policy_disabled";

/// An environment's binding (`None`: unbound) with its version's `provisioning`; a
/// missing environment is `NotFound`.
pub async fn binding(
    store: &dyn Store,
    workspace_id: &str,
    environment_id: &EnvironmentId,
) -> DomainResult<Option<(SandboxPolicyBindingRow, String)>> {
    if store.get_resource(workspace_id, "environment", environment_id.as_str()).await?.is_none() {
        return Err(DomainError::NotFound(format!("environment not found: {environment_id}")));
    }
    let Some(row) = store.sandbox_policy_binding(workspace_id, environment_id.as_str()).await? else {
        return Ok(None);
    };
    let version = get(store, workspace_id, &row.policy_id, Some(row.version)).await?;
    Ok(Some((row, version.provisioning)))
}

/// What a new session of environment `environment_id` pins: its bound version
/// `{policy_id, version, config}`, or `Null` when none is bound (the runner's own
/// settings apply). Kept in the session (`_sandbox_policy`) for its whole life.
pub async fn pin(store: &dyn Store, workspace_id: &str, environment_id: &str) -> DomainResult<Value> {
    let Some(binding) = store.sandbox_policy_binding(workspace_id, environment_id).await? else {
        return Ok(Value::Null);
    };
    let version = get(store, workspace_id, &binding.policy_id, Some(binding.version)).await.map_err(|error| {
        DomainError::Internal(format!("environment {environment_id}'s bound sandbox policy cannot be read: {error}"))
    })?;
    Ok(json!({ "policy_id": version.policy_id, "version": version.version, "config": version.config }))
}

/// Whether a policy id names a preset.
pub fn is_preset(id: &str) -> bool {
    preset(id).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(value: Value) -> String {
        match config(&value) {
            Err(DomainError::Invalid { message, .. }) => message,
            other => panic!("expected a refusal of {value}, got {other:?}"),
        }
    }

    #[test]
    fn a_config_gets_its_defaults() {
        assert_eq!(
            config(&json!({})).unwrap(),
            json!({"isolation": "namespace", "limits": {"cpu_millis": null, "memory_bytes": null, "disk_bytes": null, "pids": null}})
        );
        let full = config(&json!({"isolation": "workdir", "limits": {"pids": 8, "memory_bytes": null}})).unwrap();
        assert_eq!(full["isolation"], "workdir");
        assert_eq!(full["limits"]["pids"], 8);
    }

    #[test]
    fn unknown_fields_are_refused_at_every_level() {
        assert_eq!(refused(json!({"isolate": "workdir"})), "config.isolate: unknown field");
        assert_eq!(refused(json!({"limits": {"cpu": 1}})), "config.limits.cpu: unknown field");
        assert!(refused(json!({"requests": {"cpu_millis": 1}})).starts_with("config.requests: "));
        let body = json!({"config": {}, "colour": "red"});
        assert!(matches!(content(body.as_object().unwrap(), "id"), Err(DomainError::Invalid { .. })));
        let body = json!({"config": {}, "idle_retention": {"mode": "resident", "retention_secs": 5}});
        assert!(matches!(content(body.as_object().unwrap(), "id"), Err(DomainError::Invalid { .. })));
    }

    #[test]
    fn limits_are_positive_integers_or_null() {
        for bad in [json!(0), json!(-1), json!(1.5), json!("1"), json!(1u64 << 53)] {
            assert!(refused(json!({"limits": {"pids": bad}})).starts_with("config.limits.pids: expected"));
        }
        assert!(refused(json!({"isolation": "vm"})).starts_with("config.isolation: "));
    }

    #[test]
    fn presets_are_bindable_policies() {
        let locked = preset("locked-down").unwrap();
        assert_eq!(locked.config["isolation"], "container");
        assert_eq!(locked.config["limits"]["memory_bytes"], 2u64 << 30);
        assert_eq!(config(&locked.config).unwrap(), locked.config, "a preset is a valid config");
        assert!(is_preset("standard") && !is_preset("mine"));
        assert!(is_policy_id("ci-runners_2") && !is_policy_id("Caps") && !is_policy_id("-x") && !is_policy_id(""));
    }
}
