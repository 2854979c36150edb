//! `agentd keys …`: API key management for operators. Keys are stored hashed; a new
//! key is printed once, alone on stdout, and never again. `rotate-secret` re-seals the
//! secrets stored at rest under a new `AGENTD_SECRET_KEY` (ADR 0004).

use anyhow::{Context, Result, bail};
use clap::Subcommand;

use crate::config::Settings;
use crate::roles::connect_store;

/// Key management commands.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create an API key for a workspace (created if missing) and print it once.
    Create {
        /// Workspace name.
        #[arg(long)]
        workspace: String,
        /// Organization name (rate limits are per organization).
        #[arg(long, default_value = "default")]
        organization: String,
        /// A label shown by `keys list`.
        #[arg(long, default_value = "cli")]
        name: String,
        /// Create an environment key instead: it authenticates only that environment's
        /// work queue (poll, ack, heartbeat, stop, list, stats) and its sessions.
        #[arg(long, conflicts_with = "runner")]
        environment: Option<String>,
        /// Create a runner key instead: `agentd runner` serves every `cloud`
        /// environment of the workspace with it.
        #[arg(long)]
        runner: bool,
    },
    /// List keys (never their secrets).
    List {
        /// Only keys of this workspace (name or id).
        #[arg(long)]
        workspace: Option<String>,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by id (`apikey_…`); it stops authenticating at once.
    Revoke {
        /// The key id.
        key_id: String,
    },
    /// Re-seal every stored secret (vault credentials, session resource tokens, A2A
    /// push credentials) under AGENTD_SECRET_KEY, opening old values with
    /// AGENTD_SECRET_KEY_PREVIOUS. Safe to interrupt and to run again; drop the previous
    /// key only after it reports the rotation complete.
    RotateSecret {
        /// Rows read per batch.
        #[arg(long, default_value_t = agentd_schema::rotation::DEFAULT_BATCH)]
        batch: i64,
        /// Stop after re-sealing this many values (run again to continue).
        #[arg(long)]
        limit: Option<u64>,
        /// Only count the values still sealed with a previous key; write nothing. Exits
        /// non-zero while any remain.
        #[arg(long)]
        check: bool,
    },
}

/// Runs a keys command against AGENTD_DATABASE_URL, or the `agentd dev` database in
/// the data dir when none is configured (said on stderr).
pub async fn run(settings: Settings, command: KeysCommand) -> Result<()> {
    let url = match settings.database_url.clone() {
        Some(url) => url,
        None => {
            let database = crate::data_dir::prepare(&settings.data_dir())?;
            let url = format!("sqlite://{}", database.display());
            eprintln!("agentd keys: no AGENTD_DATABASE_URL; using the dev database {url}");
            url
        }
    };
    let store = connect_store(&url).await?;
    if url.starts_with("sqlite:") {
        store.migrate().await.context("migrating the dev database failed")?;
    }
    let store: &dyn agentd_schema::Store = store.as_ref();
    match command {
        KeysCommand::Create { workspace, organization, name, environment, runner } => {
            let workspace = store.ensure_workspace(&organization, &workspace).await?;
            let (kind, prefix) = match environment {
                Some(environment_id) => {
                    let found = store.get_resource(&workspace.id, "environment", &environment_id).await?;
                    if found.is_none() {
                        bail!("no environment {environment_id} in workspace {}", workspace.name);
                    }
                    (agentd_schema::KeyKind::Environment(environment_id), "sk-agentd-env")
                }
                None if runner => (agentd_schema::KeyKind::Runner, "sk-agentd-runner"),
                None => (agentd_schema::KeyKind::Api, "sk-agentd"),
            };
            let secret = agentd_schema::ids::new_secret(prefix);
            let info = store.insert_api_key(&workspace.id, &name, &secret, &kind).await?;
            eprintln!(
                "created {} {} key for workspace {} ({}); it is shown only now",
                info.id,
                kind.as_str(),
                workspace.name,
                workspace.id
            );
            println!("{secret}");
        }
        KeysCommand::List { workspace, json } => {
            let filter = match workspace {
                Some(named) => {
                    Some(store.find_workspace(&named).await?.with_context(|| format!("no workspace {named:?}"))?)
                }
                None => None,
            };
            let keys = store.list_api_keys(filter.as_ref().map(|w| w.id.as_str())).await?;
            let mut rows = Vec::new();
            for key in keys {
                let workspace = store.find_workspace(&key.workspace_id).await?.map(|w| w.name).unwrap_or_default();
                rows.push(serde_json::json!({
                    "id": key.id,
                    "workspace_id": key.workspace_id,
                    "workspace": workspace,
                    "name": key.name,
                    "hint": key.hint,
                    "created_at": key.created_at_ms,
                    "revoked_at": key.revoked_at_ms,
                    "kind": key.kind.as_str(),
                    "environment_id": match &key.kind {
                        agentd_schema::KeyKind::Environment(id) => Some(id.as_str()),
                        _ => None,
                    },
                }));
            }
            if json {
                println!("{}", serde_json::Value::Array(rows));
            } else {
                println!("{:<34} {:<16} {:<12} {:<8} STATE", "ID", "WORKSPACE", "NAME", "HINT");
                for row in rows {
                    let state = if row["revoked_at"].is_null() { "active" } else { "revoked" };
                    println!(
                        "{:<34} {:<16} {:<12} …{:<7} {state}",
                        row["id"].as_str().unwrap_or_default(),
                        row["workspace"].as_str().unwrap_or_default(),
                        row["name"].as_str().unwrap_or_default(),
                        row["hint"].as_str().unwrap_or_default(),
                    );
                }
            }
        }
        KeysCommand::Revoke { key_id } => {
            if !store.revoke_api_key(&key_id).await? {
                bail!("no active key {key_id}");
            }
            eprintln!("revoked {key_id}");
        }
        KeysCommand::RotateSecret { batch, limit, check } => {
            let Some(secrets) = settings.secret_box()? else {
                bail!(
                    "rotate-secret re-seals under AGENTD_SECRET_KEY (the new key), opening old values with AGENTD_SECRET_KEY_PREVIOUS: set both"
                );
            };
            if !secrets.has_previous() {
                eprintln!(
                    "agentd keys rotate-secret: no AGENTD_SECRET_KEY_PREVIOUS; only checking that every secret opens"
                );
            }
            if check {
                let pending = agentd_schema::rotation::pending(store, &secrets).await?;
                eprintln!("{pending} sealed values still open only with a previous key");
                if pending > 0 {
                    bail!("the rotation is not complete; run `agentd keys rotate-secret`");
                }
                return Ok(());
            }
            let options = agentd_schema::rotation::Options { batch, limit };
            let report = agentd_schema::rotation::rotate(store, &secrets, options).await?;
            eprintln!(
                "re-sealed {} values ({} already current, {} rows changed concurrently and revisited) in {} passes",
                report.resealed, report.current, report.raced, report.passes
            );
            if report.complete {
                eprintln!("rotation complete: AGENTD_SECRET_KEY_PREVIOUS may now be removed from every process");
            } else {
                eprintln!("stopped at --limit: run `agentd keys rotate-secret` again to continue");
            }
        }
    }
    Ok(())
}
