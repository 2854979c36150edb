//! Agent drafts and publications (`agent_drafts`, `agent_publications`, migration 0022).

use async_trait::async_trait;
use serde_json::Value;
use sqlx::FromRow;

use super::{JsonText, SqlStore};
use crate::error::StoreResult;
use crate::store::{AgentDraftRow, AgentDraftStore, AgentPublicationRow};

const DRAFT_COLUMNS: &str = "workspace_id, agent_id, body, revision, created_at_ms, updated_at_ms";
const PUBLICATION_COLUMNS: &str = "workspace_id, fingerprint, agent_id, agent_version, config, created_at_ms";

/// An `agent_drafts` row as stored.
#[derive(Debug, FromRow)]
struct DraftRow {
    workspace_id: String,
    agent_id: String,
    #[sqlx(try_from = "String")]
    body: JsonText,
    revision: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl From<DraftRow> for AgentDraftRow {
    fn from(row: DraftRow) -> Self {
        AgentDraftRow {
            workspace_id: row.workspace_id,
            agent_id: row.agent_id,
            body: row.body.0,
            revision: row.revision,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        }
    }
}

/// An `agent_publications` row as stored.
#[derive(Debug, FromRow)]
struct PublicationRow {
    workspace_id: String,
    fingerprint: String,
    agent_id: String,
    agent_version: i64,
    #[sqlx(try_from = "String")]
    config: JsonText,
    created_at_ms: i64,
}

impl From<PublicationRow> for AgentPublicationRow {
    fn from(row: PublicationRow) -> Self {
        AgentPublicationRow {
            workspace_id: row.workspace_id,
            fingerprint: row.fingerprint,
            agent_id: row.agent_id,
            agent_version: row.agent_version,
            config: row.config.0,
            created_at_ms: row.created_at_ms,
        }
    }
}

#[async_trait]
impl AgentDraftStore for SqlStore {
    async fn put_agent_draft(&self, workspace_id: &str, agent_id: &str, body: &Value) -> StoreResult<AgentDraftRow> {
        let sql = include_str!("../../queries/agent_drafts/put_draft.sql").replace("{columns}", DRAFT_COLUMNS);
        let row: DraftRow = sqlx::query_as(&sql)
            .bind(workspace_id)
            .bind(agent_id)
            .bind(body.to_string())
            .bind(self.now())
            .fetch_one(&self.primary)
            .await?;
        Ok(row.into())
    }

    async fn get_agent_draft(&self, workspace_id: &str, agent_id: &str) -> StoreResult<Option<AgentDraftRow>> {
        let row: Option<DraftRow> = sqlx::query_as(&format!(
            "SELECT {DRAFT_COLUMNS} FROM agent_drafts WHERE workspace_id = $1 AND agent_id = $2"
        ))
        .bind(workspace_id)
        .bind(agent_id)
        .fetch_optional(&self.readers)
        .await?;
        Ok(row.map(Into::into))
    }

    async fn list_agent_drafts(
        &self,
        workspace_id: &str,
        after_agent_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<AgentDraftRow>> {
        let sql = include_str!("../../queries/agent_drafts/select_drafts.sql").replace("{columns}", DRAFT_COLUMNS);
        let rows: Vec<DraftRow> =
            sqlx::query_as(&sql).bind(workspace_id).bind(after_agent_id).bind(limit).fetch_all(&self.readers).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn delete_agent_draft(&self, workspace_id: &str, agent_id: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM agent_drafts WHERE workspace_id = $1 AND agent_id = $2")
            .bind(workspace_id)
            .bind(agent_id)
            .execute(&self.primary)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn agent_workspace(&self, agent_id: &str) -> StoreResult<Option<String>> {
        let owner: Option<(String,)> = sqlx::query_as(include_str!("../../queries/agent_drafts/agent_workspace.sql"))
            .bind(agent_id)
            .fetch_optional(&self.readers)
            .await?;
        Ok(owner.map(|(workspace,)| workspace))
    }

    async fn insert_agent_publication(&self, new: AgentPublicationRow) -> StoreResult<(AgentPublicationRow, bool)> {
        let sql =
            include_str!("../../queries/agent_drafts/insert_publication.sql").replace("{columns}", PUBLICATION_COLUMNS);
        let inserted: Option<PublicationRow> = sqlx::query_as(&sql)
            .bind(&new.workspace_id)
            .bind(&new.fingerprint)
            .bind(&new.agent_id)
            .bind(new.agent_version)
            .bind(new.config.to_string())
            .bind(self.now())
            .fetch_optional(&self.primary)
            .await?;
        if let Some(row) = inserted {
            return Ok((row.into(), true));
        }
        // Written before (publications never change or go away): read it on the primary,
        // where that write is certainly visible.
        let row: PublicationRow = sqlx::query_as(&format!(
            "SELECT {PUBLICATION_COLUMNS} FROM agent_publications WHERE workspace_id = $1 AND fingerprint = $2"
        ))
        .bind(&new.workspace_id)
        .bind(&new.fingerprint)
        .fetch_one(&self.primary)
        .await?;
        Ok((row.into(), false))
    }

    async fn get_agent_publication(
        &self,
        workspace_id: &str,
        fingerprint: &str,
    ) -> StoreResult<Option<AgentPublicationRow>> {
        let row: Option<PublicationRow> = sqlx::query_as(&format!(
            "SELECT {PUBLICATION_COLUMNS} FROM agent_publications WHERE workspace_id = $1 AND fingerprint = $2"
        ))
        .bind(workspace_id)
        .bind(fingerprint)
        .fetch_optional(&self.readers)
        .await?;
        Ok(row.map(Into::into))
    }
}
