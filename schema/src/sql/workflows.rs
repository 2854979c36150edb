//! Workflow revisions and project overrides (`workflow_revisions`, `workflow_overrides`,
//! `workflow_save_keys`, migration 0028). A save is one transaction: claim the idempotency
//! key, create or reuse the revision, move the override by compare-and-swap, record the
//! result under the key (`queries/workflows/*.sql` say why each step is race-free).

use async_trait::async_trait;
use sqlx::FromRow;

use super::{JsonText, SqlStore, Tx};
use crate::error::{StoreError, StoreResult};
use crate::store::{
    ClearOutcome, SaveOutcome, SaveWorkflowRevision, SavedWorkflowRevision, WorkflowKey, WorkflowOverrideRow,
    WorkflowRevisionRow, WorkflowStore,
};

const REVISION_COLUMNS: &str = "id, project, definition, content_sha256, declaration, resolved, created_at_ms";
const OVERRIDE_COLUMNS: &str = "project, definition, revision_id, override_version, updated_at_ms";

/// A `workflow_revisions` row as stored.
#[derive(Debug, FromRow)]
struct RevisionRow {
    id: String,
    project: String,
    definition: String,
    content_sha256: String,
    #[sqlx(try_from = "String")]
    declaration: JsonText,
    #[sqlx(try_from = "String")]
    resolved: JsonText,
    created_at_ms: i64,
}

impl From<RevisionRow> for WorkflowRevisionRow {
    fn from(row: RevisionRow) -> Self {
        WorkflowRevisionRow {
            id: row.id,
            project: row.project,
            definition: row.definition,
            content_sha256: row.content_sha256,
            declaration: row.declaration.0,
            resolved: row.resolved.0,
            created_at_ms: row.created_at_ms,
        }
    }
}

/// A `workflow_overrides` row as stored.
#[derive(Debug, FromRow)]
struct OverrideRow {
    project: String,
    definition: String,
    revision_id: Option<String>,
    override_version: i64,
    updated_at_ms: i64,
}

impl From<OverrideRow> for WorkflowOverrideRow {
    fn from(row: OverrideRow) -> Self {
        WorkflowOverrideRow {
            project: row.project,
            definition: row.definition,
            revision_id: row.revision_id,
            override_version: row.override_version,
            updated_at_ms: row.updated_at_ms,
        }
    }
}

/// A recorded save joined with its revision (`select_save_key.sql`).
#[derive(Debug, FromRow)]
struct SaveKeyRow {
    request_sha256: String,
    reused: Option<i64>,
    override_version: Option<i64>,
    override_updated_at_ms: Option<i64>,
    #[sqlx(flatten)]
    revision: RevisionRow,
}

impl SaveKeyRow {
    /// The request hash and the save's result. The result columns are written in the
    /// transaction that claimed the key, so a committed row without them is corrupt.
    fn into_saved(self) -> StoreResult<(String, SavedWorkflowRevision)> {
        let (Some(reused), Some(version), Some(updated)) =
            (self.reused, self.override_version, self.override_updated_at_ms)
        else {
            return Err(StoreError::Backend("workflow save key without its result".to_owned()));
        };
        let revision = WorkflowRevisionRow::from(self.revision);
        let override_row = WorkflowOverrideRow {
            project: revision.project.clone(),
            definition: revision.definition.clone(),
            revision_id: Some(revision.id.clone()),
            override_version: version,
            updated_at_ms: updated,
        };
        Ok((self.request_sha256, SavedWorkflowRevision { revision, reused: reused != 0, override_row }))
    }
}

/// The current override version of a definition (0: none yet), read in `tx`.
async fn current_version(tx: &mut Tx, key: &WorkflowKey) -> StoreResult<i64> {
    let version: Option<(i64,)> = sqlx::query_as(
        "SELECT override_version FROM workflow_overrides WHERE workspace_id = $1 AND project = $2 AND definition = $3",
    )
    .bind(&key.workspace_id)
    .bind(&key.project)
    .bind(&key.definition)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(version.map_or(0, |(v,)| v))
}

/// Moves the override of `key` from `expected` to the next version, pointing at
/// `revision_id` (`None`: cleared). `None` when the version was not `expected`.
async fn move_override(
    tx: &mut Tx,
    key: &WorkflowKey,
    revision_id: Option<&str>,
    expected: i64,
    now: i64,
) -> StoreResult<Option<OverrideRow>> {
    if expected == 0 {
        let sql = include_str!("../../queries/workflows/create_override.sql").replace("{columns}", OVERRIDE_COLUMNS);
        return Ok(sqlx::query_as(&sql)
            .bind(&key.workspace_id)
            .bind(&key.project)
            .bind(&key.definition)
            .bind(revision_id)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?);
    }
    let sql = include_str!("../../queries/workflows/move_override.sql").replace("{columns}", OVERRIDE_COLUMNS);
    Ok(sqlx::query_as(&sql)
        .bind(&key.workspace_id)
        .bind(&key.project)
        .bind(&key.definition)
        .bind(revision_id)
        .bind(expected)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?)
}

async fn select_save_key(
    executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
    key: &WorkflowKey,
    idempotency_key: &str,
) -> StoreResult<Option<(String, SavedWorkflowRevision)>> {
    let row: Option<SaveKeyRow> = sqlx::query_as(include_str!("../../queries/workflows/select_save_key.sql"))
        .bind(&key.workspace_id)
        .bind(&key.project)
        .bind(&key.definition)
        .bind(idempotency_key)
        .fetch_optional(executor)
        .await?;
    row.map(SaveKeyRow::into_saved).transpose()
}

#[async_trait]
impl WorkflowStore for SqlStore {
    async fn save_workflow_revision(&self, save: SaveWorkflowRevision) -> StoreResult<SaveOutcome> {
        let key = &save.key;
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let claimed: Option<(String,)> = sqlx::query_as(include_str!("../../queries/workflows/claim_save_key.sql"))
            .bind(&key.workspace_id)
            .bind(&key.project)
            .bind(&key.definition)
            .bind(&save.idempotency_key)
            .bind(&save.request_sha256)
            .bind(now)
            .fetch_optional(&mut tx)
            .await?;
        if claimed.is_none() {
            let (request_sha256, saved) = select_save_key(&mut tx, key, &save.idempotency_key)
                .await?
                .ok_or_else(|| StoreError::Backend("workflow save key claimed but not readable".to_owned()))?;
            return Ok(if request_sha256 == save.request_sha256 {
                SaveOutcome::Replayed(saved)
            } else {
                SaveOutcome::KeyReused
            });
        }
        let sql = include_str!("../../queries/workflows/insert_revision.sql").replace("{columns}", REVISION_COLUMNS);
        let inserted: Option<RevisionRow> = sqlx::query_as(&sql)
            .bind(&key.workspace_id)
            .bind(&key.project)
            .bind(&key.definition)
            .bind(&save.id)
            .bind(&save.content_sha256)
            .bind(save.declaration.to_string())
            .bind(save.resolved.to_string())
            .bind(now)
            .fetch_optional(&mut tx)
            .await?;
        let reused = inserted.is_none();
        let revision = match inserted {
            Some(row) => row,
            None => {
                sqlx::query_as(&format!(
                    "SELECT {REVISION_COLUMNS} FROM workflow_revisions \
                 WHERE workspace_id = $1 AND project = $2 AND definition = $3 AND id = $4"
                ))
                .bind(&key.workspace_id)
                .bind(&key.project)
                .bind(&key.definition)
                .bind(&save.id)
                .fetch_one(&mut tx)
                .await?
            }
        };
        let Some(moved) = move_override(&mut tx, key, Some(&save.id), save.expected_override_version, now).await?
        else {
            // Dropping the transaction rolls back the key's claim and any new revision.
            let current = current_version(&mut tx, key).await?;
            return Ok(SaveOutcome::VersionConflict { current });
        };
        sqlx::query(include_str!("../../queries/workflows/record_save_key.sql"))
            .bind(&key.workspace_id)
            .bind(&key.project)
            .bind(&key.definition)
            .bind(&save.idempotency_key)
            .bind(&save.id)
            .bind(i64::from(reused))
            .bind(moved.override_version)
            .bind(moved.updated_at_ms)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(SaveOutcome::Saved(SavedWorkflowRevision { revision: revision.into(), reused, override_row: moved.into() }))
    }

    async fn workflow_save_replay(
        &self,
        key: &WorkflowKey,
        idempotency_key: &str,
    ) -> StoreResult<Option<(String, SavedWorkflowRevision)>> {
        select_save_key(&self.readers, key, idempotency_key).await
    }

    async fn clear_workflow_override(
        &self,
        key: &WorkflowKey,
        expected_override_version: i64,
    ) -> StoreResult<ClearOutcome> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let current = current_version(&mut tx, key).await?;
        // No row: nothing of the definition was saved in the project (a clear never
        // creates one).
        if current == 0 {
            return Ok(ClearOutcome::NotFound);
        }
        if expected_override_version == 0 {
            return Ok(ClearOutcome::VersionConflict { current });
        }
        match move_override(&mut tx, key, None, expected_override_version, now).await? {
            Some(moved) => {
                tx.commit().await?;
                Ok(ClearOutcome::Cleared(moved.into()))
            }
            None => Ok(ClearOutcome::VersionConflict { current: current_version(&mut tx, key).await? }),
        }
    }

    async fn get_workflow_revision(&self, key: &WorkflowKey, id: &str) -> StoreResult<Option<WorkflowRevisionRow>> {
        let row: Option<RevisionRow> = sqlx::query_as(&format!(
            "SELECT {REVISION_COLUMNS} FROM workflow_revisions \
             WHERE workspace_id = $1 AND project = $2 AND definition = $3 AND id = $4"
        ))
        .bind(&key.workspace_id)
        .bind(&key.project)
        .bind(&key.definition)
        .bind(id)
        .fetch_optional(&self.readers)
        .await?;
        Ok(row.map(Into::into))
    }

    async fn get_workflow_override(&self, key: &WorkflowKey) -> StoreResult<Option<WorkflowOverrideRow>> {
        let row: Option<OverrideRow> = sqlx::query_as(&format!(
            "SELECT {OVERRIDE_COLUMNS} FROM workflow_overrides \
             WHERE workspace_id = $1 AND project = $2 AND definition = $3"
        ))
        .bind(&key.workspace_id)
        .bind(&key.project)
        .bind(&key.definition)
        .fetch_optional(&self.readers)
        .await?;
        Ok(row.map(Into::into))
    }
}
