//! Dreams and dream policies (`dreams`, `dream_policies`, migration 0017).

use async_trait::async_trait;
use serde_json::Value;
use sqlx::FromRow;

use super::{Flag, JsonText, SqlStore, Tx};
use crate::error::{StoreError, StoreResult};
use crate::store::{
    DreamEnd, DreamPolicyRow, DreamQuery, DreamRow, DreamStatus, DreamStore, NewDream, ScheduleOutcome,
};

const COLUMNS: &str = "id, workspace_id, status, memory_store_id, session_ids, model, instructions, output_behavior, \
                       session_id, output_store_id, error, usage, policy_store_id, cutoff_ms, created_at_ms, \
                       updated_at_ms, ended_at_ms, archived_at_ms";

/// A `dreams` row as stored.
#[derive(Debug, FromRow)]
struct Row {
    id: String,
    workspace_id: String,
    status: String,
    memory_store_id: String,
    #[sqlx(try_from = "String")]
    session_ids: JsonText,
    #[sqlx(try_from = "String")]
    model: JsonText,
    instructions: Option<String>,
    output_behavior: String,
    session_id: Option<String>,
    output_store_id: Option<String>,
    error: Option<String>,
    usage: Option<String>,
    policy_store_id: Option<String>,
    cutoff_ms: Option<i64>,
    created_at_ms: i64,
    updated_at_ms: i64,
    ended_at_ms: Option<i64>,
    archived_at_ms: Option<i64>,
}

fn optional_json(text: Option<String>) -> StoreResult<Option<Value>> {
    text.map(|t| JsonText::try_from(t).map(|j| j.0)).transpose()
}

impl TryFrom<Row> for DreamRow {
    type Error = StoreError;

    fn try_from(row: Row) -> StoreResult<Self> {
        let status = DreamStatus::parse(&row.status)
            .ok_or_else(|| StoreError::Backend(format!("dream {}: unknown status {:?}", row.id, row.status)))?;
        let session_ids = serde_json::from_value(row.session_ids.0)
            .map_err(|e| StoreError::Backend(format!("dream {}: corrupt session_ids: {e}", row.id)))?;
        Ok(DreamRow {
            status,
            session_ids,
            model: row.model.0,
            instructions: row.instructions,
            update_existing: row.output_behavior == "update_existing",
            session_id: row.session_id,
            output_store_id: row.output_store_id,
            error: optional_json(row.error)?,
            usage: optional_json(row.usage)?,
            policy_store_id: row.policy_store_id,
            cutoff_ms: row.cutoff_ms,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
            ended_at_ms: row.ended_at_ms,
            archived_at_ms: row.archived_at_ms,
            memory_store_id: row.memory_store_id,
            workspace_id: row.workspace_id,
            id: row.id,
        })
    }
}

fn dream(row: Option<Row>) -> StoreResult<Option<DreamRow>> {
    row.map(DreamRow::try_from).transpose()
}

/// A `dream_policies` row as stored.
#[derive(Debug, FromRow)]
struct PolicyRow {
    memory_store_id: String,
    workspace_id: String,
    #[sqlx(try_from = "i64")]
    enabled: Flag,
    interval_seconds: i64,
    min_new_sessions: i64,
    max_sessions: i64,
    #[sqlx(try_from = "String")]
    model: JsonText,
    instructions: Option<String>,
    next_due_at_ms: Option<i64>,
    last_completed_cutoff_ms: Option<i64>,
}

impl From<PolicyRow> for DreamPolicyRow {
    fn from(row: PolicyRow) -> Self {
        DreamPolicyRow {
            memory_store_id: row.memory_store_id,
            workspace_id: row.workspace_id,
            enabled: row.enabled.0,
            interval_seconds: row.interval_seconds,
            min_new_sessions: row.min_new_sessions,
            max_sessions: row.max_sessions,
            model: row.model.0,
            instructions: row.instructions,
            next_due_at_ms: row.next_due_at_ms,
            last_completed_cutoff_ms: row.last_completed_cutoff_ms,
        }
    }
}

/// Inserts a dream inside `tx` (see `insert_dream.sql`).
async fn insert(tx: &mut Tx, new: &NewDream, policy: Option<(&str, i64)>, now_ms: i64) -> StoreResult<DreamRow> {
    let behavior = if new.update_existing { "update_existing" } else { "create_new" };
    let row: Row = sqlx::query_as(include_str!("../../queries/dreams/insert_dream.sql"))
        .bind(&new.id)
        .bind(&new.workspace_id)
        .bind(&new.memory_store_id)
        .bind(Value::from(new.session_ids.clone()).to_string())
        .bind(new.model.to_string())
        .bind(new.instructions.clone())
        .bind(behavior)
        .bind(policy.map(|(store, _)| store.to_owned()))
        .bind(policy.map(|(_, cutoff)| cutoff))
        .bind(now_ms)
        .fetch_one(&mut *tx)
        .await?;
    row.try_into()
}

#[async_trait]
impl DreamStore for SqlStore {
    async fn insert_dream(&self, new: NewDream) -> StoreResult<DreamRow> {
        let mut tx = self.primary.begin().await?;
        let row = insert(&mut tx, &new, None, self.now()).await?;
        tx.commit().await?;
        Ok(row)
    }

    async fn get_dream(&self, workspace_id: &str, id: &str) -> StoreResult<Option<DreamRow>> {
        let sql = format!("SELECT {COLUMNS} FROM dreams WHERE workspace_id = $1 AND id = $2");
        dream(sqlx::query_as(&sql).bind(workspace_id).bind(id).fetch_optional(&self.readers).await?)
    }

    async fn list_dreams(&self, workspace_id: &str, query: &DreamQuery) -> StoreResult<Vec<DreamRow>> {
        // $1 workspace, $2 include archived, $3 cursor, $4 created > , $5 created <, $6 limit,
        // then one parameter per status.
        let mut sql = format!(
            "SELECT {COLUMNS} FROM dreams WHERE workspace_id = $1 AND ($2 = 1 OR archived_at_ms IS NULL) \
             AND ($3 IS NULL OR id < $3) AND ($4 IS NULL OR created_at_ms > $4) \
             AND ($5 IS NULL OR created_at_ms < $5)"
        );
        if !query.statuses.is_empty() {
            let marks: Vec<String> = (7..7 + query.statuses.len()).map(|n| format!("${n}")).collect();
            sql.push_str(&format!(" AND status IN ({})", marks.join(", ")));
        }
        sql.push_str(" ORDER BY id DESC LIMIT $6");
        let mut statement = sqlx::query_as::<_, Row>(&sql)
            .bind(workspace_id)
            .bind(i64::from(query.include_archived))
            .bind(query.before_id.clone())
            .bind(query.created.gt)
            .bind(query.created.lt)
            .bind(query.limit);
        for status in &query.statuses {
            statement = statement.bind(status.as_str());
        }
        statement.fetch_all(&self.readers).await?.into_iter().map(DreamRow::try_from).collect()
    }

    async fn open_dreams(&self, limit: i64) -> StoreResult<Vec<DreamRow>> {
        let sql =
            format!("SELECT {COLUMNS} FROM dreams WHERE status IN ('pending', 'running') ORDER BY status, id LIMIT $1");
        sqlx::query_as::<_, Row>(&sql)
            .bind(limit)
            .fetch_all(&self.readers)
            .await?
            .into_iter()
            .map(DreamRow::try_from)
            .collect()
    }

    async fn claim_dream_start(&self, id: &str, now_ms: i64, lease_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query(include_str!("../../queries/dreams/claim_start.sql"))
            .bind(id)
            .bind(now_ms)
            .bind(now_ms + lease_ms)
            .execute(&self.primary)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_dream_start(&self, id: &str) -> StoreResult<()> {
        sqlx::query("UPDATE dreams SET start_lease_until_ms = NULL WHERE id = $1 AND status = 'pending'")
            .bind(id)
            .execute(&self.primary)
            .await?;
        Ok(())
    }

    async fn start_dream(&self, id: &str, session_id: &str, output_store_id: &str) -> StoreResult<Option<DreamRow>> {
        dream(
            sqlx::query_as(include_str!("../../queries/dreams/start_dream.sql"))
                .bind(id)
                .bind(session_id)
                .bind(output_store_id)
                .bind(self.now())
                .fetch_optional(&self.primary)
                .await?,
        )
    }

    async fn finish_dream(&self, id: &str, end: DreamEnd) -> StoreResult<Option<DreamRow>> {
        if !end.status.is_final() {
            return Err(StoreError::Backend(format!("dream {id}: {} is not a final status", end.status.as_str())));
        }
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let row: Option<Row> = sqlx::query_as(include_str!("../../queries/dreams/finish_dream.sql"))
            .bind(id)
            .bind(end.status.as_str())
            .bind(end.error.map(|e| e.to_string()))
            .bind(end.usage.map(|u| u.to_string()))
            .bind(now)
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = dream(row)? else { return Ok(None) };
        if row.status == DreamStatus::Completed
            && let (Some(store), Some(cutoff)) = (&row.policy_store_id, row.cutoff_ms)
        {
            sqlx::query(include_str!("../../queries/dreams/advance_cutoff.sql"))
                .bind(store)
                .bind(cutoff)
                .bind(now)
                .execute(&mut tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Some(row))
    }

    async fn archive_dream(&self, workspace_id: &str, id: &str) -> StoreResult<Option<DreamRow>> {
        dream(
            sqlx::query_as(include_str!("../../queries/dreams/archive_dream.sql"))
                .bind(workspace_id)
                .bind(id)
                .bind(self.now())
                .fetch_optional(&self.primary)
                .await?,
        )
    }

    async fn get_dream_policy(&self, workspace_id: &str, memory_store_id: &str) -> StoreResult<Option<DreamPolicyRow>> {
        let row: Option<PolicyRow> = sqlx::query_as(
            "SELECT memory_store_id, workspace_id, enabled, interval_seconds, min_new_sessions, max_sessions, model, \
             instructions, next_due_at_ms, last_completed_cutoff_ms FROM dream_policies \
             WHERE workspace_id = $1 AND memory_store_id = $2",
        )
        .bind(workspace_id)
        .bind(memory_store_id)
        .fetch_optional(&self.readers)
        .await?;
        Ok(row.map(Into::into))
    }

    async fn put_dream_policy(&self, policy: DreamPolicyRow) -> StoreResult<DreamPolicyRow> {
        let row: PolicyRow = sqlx::query_as(include_str!("../../queries/dreams/put_policy.sql"))
            .bind(policy.memory_store_id)
            .bind(policy.workspace_id)
            .bind(i64::from(policy.enabled))
            .bind(policy.interval_seconds)
            .bind(policy.min_new_sessions)
            .bind(policy.max_sessions)
            .bind(policy.model.to_string())
            .bind(policy.instructions)
            .bind(self.now())
            .fetch_one(&self.primary)
            .await?;
        Ok(row.into())
    }

    async fn due_dream_policies(&self, now_ms: i64, limit: i64) -> StoreResult<Vec<(String, String)>> {
        Ok(sqlx::query_as(
            "SELECT workspace_id, memory_store_id FROM dream_policies \
             WHERE enabled = 1 AND next_due_at_ms IS NOT NULL AND next_due_at_ms <= $1 \
             ORDER BY next_due_at_ms LIMIT $2",
        )
        .bind(now_ms)
        .bind(limit)
        .fetch_all(&self.readers)
        .await?)
    }

    async fn schedule_dream(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        now_ms: i64,
        dream_id: &str,
    ) -> StoreResult<ScheduleOutcome> {
        let mut tx = self.primary.begin().await?;
        let claimed: Option<PolicyRow> = sqlx::query_as(include_str!("../../queries/dreams/claim_policy.sql"))
            .bind(workspace_id)
            .bind(memory_store_id)
            .bind(now_ms)
            .fetch_optional(&mut tx)
            .await?;
        let Some(policy) = claimed.map(DreamPolicyRow::from) else { return Ok(ScheduleOutcome::NotDue) };
        let open: Option<(String,)> = sqlx::query_as(
            "SELECT id FROM dreams WHERE status IN ('pending', 'running') \
             AND (policy_store_id = $1 OR (memory_store_id = $1 AND output_behavior = 'update_existing')) LIMIT 1",
        )
        .bind(memory_store_id)
        .fetch_optional(&mut tx)
        .await?;
        let mut outcome = ScheduleOutcome::Advanced;
        if open.is_none() {
            let picked: Vec<(String,)> = sqlx::query_as(include_str!("../../queries/dreams/pick_sessions.sql"))
                .bind(workspace_id)
                .bind(memory_store_id)
                .bind(policy.last_completed_cutoff_ms)
                .bind(policy.max_sessions)
                .fetch_all(&mut tx)
                .await?;
            if !picked.is_empty() && picked.len() as i64 >= policy.min_new_sessions {
                let mut session_ids: Vec<String> = picked.into_iter().map(|(id,)| id).collect();
                session_ids.sort();
                let new = NewDream {
                    id: dream_id.to_owned(),
                    workspace_id: workspace_id.to_owned(),
                    memory_store_id: memory_store_id.to_owned(),
                    session_ids,
                    model: policy.model.clone(),
                    instructions: policy.instructions.clone(),
                    // A policy consolidates its store in place.
                    update_existing: true,
                };
                outcome = ScheduleOutcome::Dreamed(Box::new(
                    insert(&mut tx, &new, Some((memory_store_id, now_ms)), now_ms).await?,
                ));
            }
        }
        tx.commit().await?;
        Ok(outcome)
    }
}
