//! Re-sealing every stored secret under the current key (`agentd keys rotate-secret`,
//! ADR 0004). The [`SecretBox`] opens with the current key or a previous one, so every
//! reader keeps working while rows move, one at a time, from old to new.
//!
//! Crash-safe and idempotent: each row is rewritten by its own compare-and-swap
//! ([`SealedStore::replace_sealed`](crate::store::SealedStore::replace_sealed)), so a rotation killed at any point leaves every row
//! either wholly old or wholly new, and both open. Running it again skips rows the
//! current key already opens. A pass that had to re-seal (or lost a race to a
//! concurrent writer) is followed by another; the rotation is complete after a pass that
//! found nothing under a previous key, and only then may the previous key be dropped.

use serde_json::Value;

use crate::error::StoreError;
use crate::faults;
use crate::secrets::SecretBox;
use crate::store::{SealedRow, SealedTable, Store};

/// Rows read per page.
pub const DEFAULT_BATCH: i64 = 100;

/// How a rotation runs.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Rows read per page.
    pub batch: i64,
    /// Stop after re-sealing this many values (the rest wait for the next run), e.g. to
    /// spread a large rotation over time; `None`: until complete.
    pub limit: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Self { batch: DEFAULT_BATCH, limit: None }
    }
}
/// Passes before giving up on rows that concurrent writers keep changing.
const MAX_PASSES: usize = 10;

/// What a rotation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Sealed values re-sealed under the current key.
    pub resealed: u64,
    /// Sealed values the current key already opened.
    pub current: u64,
    /// Rows whose compare-and-swap lost to a concurrent writer (visited again).
    pub raced: u64,
    /// Full passes made.
    pub passes: usize,
    /// A pass found nothing under a previous key: the previous key may be dropped.
    /// `false` when the run stopped at its `limit`.
    pub complete: bool,
}

/// The limit was reached (not an error: the next run continues).
struct LimitReached;

/// Why a rotation stopped.
#[derive(Debug, thiserror::Error)]
pub enum RotationError {
    /// The store failed; rows written so far stay written (run again).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sealed value opens with no configured key: nothing can re-seal it.
    #[error("{table} row {id}: a sealed value opens with neither AGENTD_SECRET_KEY nor AGENTD_SECRET_KEY_PREVIOUS")]
    Unopenable {
        /// The table.
        table: &'static str,
        /// The row.
        id: String,
    },
    /// Concurrent writers kept bringing values sealed with a previous key back: some
    /// process still seals with the old key.
    #[error(
        "values sealed with a previous key keep reappearing after {0} passes: is every process running with the new AGENTD_SECRET_KEY?"
    )]
    Unsettled(usize),
}

/// Re-seals every stored secret under `secrets`' current key, page by page, until a
/// pass finds nothing left under a previous key (or `options.limit` values were
/// re-sealed).
pub async fn rotate(store: &dyn Store, secrets: &SecretBox, options: Options) -> Result<Report, RotationError> {
    let mut report = Report::default();
    for pass in 1..=MAX_PASSES {
        let before = (report.resealed, report.raced);
        report.passes = pass;
        for table in SealedTable::ALL {
            if let Err(LimitReached) = rotate_table(store, secrets, table, options, &mut report).await? {
                return Ok(report);
            }
        }
        if (report.resealed, report.raced) == before {
            report.complete = true;
            return Ok(report);
        }
    }
    Err(RotationError::Unsettled(MAX_PASSES))
}

async fn rotate_table(
    store: &dyn Store,
    secrets: &SecretBox,
    table: SealedTable,
    options: Options,
    report: &mut Report,
) -> Result<Result<(), LimitReached>, RotationError> {
    let batch = options.batch.max(1);
    let mut after: Option<(String, String)> = None;
    loop {
        let page = store.sealed_page(table, after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())), batch).await?;
        let Some(last) = page.last() else { return Ok(Ok(())) };
        after = Some((last.id.clone(), last.sub_id.clone()));
        for row in &page {
            if options.limit.is_some_and(|limit| report.resealed >= limit) {
                return Ok(Err(LimitReached));
            }
            let unopenable = || RotationError::Unopenable { table: table.as_str(), id: row.id.clone() };
            let Some((replacement, resealed, current)) = resealed_text(secrets, row).map_err(|_| unopenable())? else {
                continue;
            };
            report.current += current;
            if resealed == 0 {
                continue;
            }
            if store.replace_sealed(row, &replacement).await? {
                report.resealed += resealed;
                faults::crash_point("rotate_secret.row");
            } else {
                // Changed since it was read: whatever is there now is visited next pass.
                report.raced += 1;
            }
        }
        if (page.len() as i64) < batch {
            return Ok(Ok(()));
        }
    }
}

/// The row's text with every sealed value under a previous key re-sealed, and how many
/// were re-sealed and how many were already current; `None` for a row holding none.
type Resealed = Option<(String, u64, u64)>;

fn resealed_text(secrets: &SecretBox, row: &SealedRow) -> Result<Resealed, crate::secrets::SecretError> {
    let (mut resealed, mut current) = (0, 0);
    let mut reseal = |owner: &str, sealed: &str| -> Result<Option<String>, crate::secrets::SecretError> {
        let out = secrets.reseal(owner, sealed)?;
        if out.is_some() {
            resealed += 1
        } else {
            current += 1
        }
        Ok(out)
    };
    let text = match row.table {
        SealedTable::A2aPushConfigs => {
            let owner = format!("a2a-push:{}:{}", row.id, row.sub_id);
            reseal(&owner, &row.text)?.unwrap_or_else(|| row.text.clone())
        }
        SealedTable::ProviderCredentials => reseal(&row.id, &row.text)?.unwrap_or_else(|| row.text.clone()),
        SealedTable::WebhookSubscriptions => {
            reseal(&crate::webhooks::secret_owner(&row.id, &row.sub_id), &row.text)?.unwrap_or_else(|| row.text.clone())
        }
        SealedTable::VaultCredentials => {
            let Ok(mut body) = serde_json::from_str::<Value>(&row.text) else { return Ok(None) };
            let Some(sealed) = body["_sealed"].as_str().map(str::to_owned) else { return Ok(None) };
            if let Some(new) = reseal(&row.id, &sealed)? {
                body["_sealed"] = Value::String(new);
            }
            body.to_string()
        }
        SealedTable::Sessions => {
            let Ok(mut body) = serde_json::from_str::<Value>(&row.text) else { return Ok(None) };
            let Some(resources) = body["resources"].as_array_mut() else { return Ok(None) };
            for resource in resources {
                let (Some(owner), Some(sealed)) = (resource["id"].as_str(), resource["_sealed"].as_str()) else {
                    continue;
                };
                if let Some(new) = reseal(owner, sealed)? {
                    resource["_sealed"] = Value::String(new);
                }
            }
            body.to_string()
        }
    };
    Ok(Some((text, resealed, current)))
}

/// How many stored sealed values open only with a previous key (0 once a rotation is
/// complete); an error names a value no configured key opens.
pub async fn pending(store: &dyn Store, secrets: &SecretBox) -> Result<u64, RotationError> {
    let mut pending = 0;
    for table in SealedTable::ALL {
        let mut after: Option<(String, String)> = None;
        loop {
            let page =
                store.sealed_page(table, after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())), DEFAULT_BATCH).await?;
            let Some(last) = page.last() else { break };
            after = Some((last.id.clone(), last.sub_id.clone()));
            for row in &page {
                let counted = resealed_text(secrets, row)
                    .map_err(|_| RotationError::Unopenable { table: table.as_str(), id: row.id.clone() })?;
                pending += counted.map_or(0, |(_, resealed, _)| resealed);
            }
        }
    }
    Ok(pending)
}
