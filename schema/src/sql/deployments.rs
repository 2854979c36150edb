//! Deployments and deployment runs (`deployments`, `deployment_runs`, migration 0018).

use async_trait::async_trait;
use serde_json::Value;
use sqlx::FromRow;

use super::{JsonText, SqlStore, Tx};
use crate::capture;
use crate::error::{StoreError, StoreResult};
use crate::store::{
    DeploymentConfig, DeploymentQuery, DeploymentRow, DeploymentRunQuery, DeploymentRunRow, DeploymentStore,
    NewDeployment, NewDeploymentRun, RunTrigger, ScheduleRow, SlotClaim,
};
use crate::webhooks::Fact;

const COLUMNS: &str = "id, workspace_id, organization_id, name, description, agent_id, agent_version, environment_id, \
                       initial_events, resources, vault_ids, metadata, budget, schedule_expression, schedule_timezone, \
                       user_profile_id, content_capture_ceiling, next_slot_ms, last_run_at_ms, paused_reason, created_at_ms, updated_at_ms, archived_at_ms";
const RUN_COLUMNS: &str = "id, workspace_id, deployment_id, agent, trigger_type, scheduled_at_ms, planned_session_id, \
                           session_id, error, created_at_ms";

/// A `deployments` row as stored.
#[derive(Debug, FromRow)]
struct Row {
    id: String,
    workspace_id: String,
    organization_id: String,
    name: String,
    description: Option<String>,
    agent_id: String,
    agent_version: i64,
    environment_id: String,
    #[sqlx(try_from = "String")]
    initial_events: JsonText,
    #[sqlx(try_from = "String")]
    resources: JsonText,
    #[sqlx(try_from = "String")]
    vault_ids: JsonText,
    #[sqlx(try_from = "String")]
    metadata: JsonText,
    budget: Option<String>,
    schedule_expression: Option<String>,
    schedule_timezone: Option<String>,
    user_profile_id: Option<String>,
    content_capture_ceiling: Option<String>,
    next_slot_ms: Option<i64>,
    last_run_at_ms: Option<i64>,
    paused_reason: Option<String>,
    created_at_ms: i64,
    updated_at_ms: i64,
    archived_at_ms: Option<i64>,
}

fn optional_json(text: Option<String>) -> StoreResult<Option<Value>> {
    text.map(|t| JsonText::try_from(t).map(|j| j.0)).transpose()
}

impl TryFrom<Row> for DeploymentRow {
    type Error = StoreError;

    fn try_from(row: Row) -> StoreResult<Self> {
        let vault_ids = serde_json::from_value(row.vault_ids.0)
            .map_err(|e| StoreError::Backend(format!("deployment {}: corrupt vault_ids: {e}", row.id)))?;
        let schedule = match (row.schedule_expression, row.schedule_timezone) {
            (Some(expression), Some(timezone)) => Some(ScheduleRow { expression, timezone }),
            _ => None,
        };
        Ok(DeploymentRow {
            config: DeploymentConfig {
                name: row.name,
                description: row.description,
                agent_id: row.agent_id,
                agent_version: row.agent_version,
                environment_id: row.environment_id,
                initial_events: row.initial_events.0,
                resources: row.resources.0,
                vault_ids,
                metadata: row.metadata.0,
                budget: optional_json(row.budget)?,
                schedule,
                user_profile_id: row.user_profile_id,
                content_capture_ceiling: match row.content_capture_ceiling {
                    None => None,
                    Some(level) => Some(capture::Level::parse(&level).ok_or_else(|| {
                        StoreError::Backend(format!("deployment {}: corrupt content_capture_ceiling {level:?}", row.id))
                    })?),
                },
            },
            next_slot_ms: row.next_slot_ms,
            last_run_at_ms: row.last_run_at_ms,
            paused_reason: optional_json(row.paused_reason)?,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
            archived_at_ms: row.archived_at_ms,
            organization_id: row.organization_id,
            workspace_id: row.workspace_id,
            id: row.id,
        })
    }
}

fn deployment(row: Option<Row>) -> StoreResult<Option<DeploymentRow>> {
    row.map(DeploymentRow::try_from).transpose()
}

/// A `deployment_runs` row as stored.
#[derive(Debug, FromRow)]
struct RunRow {
    id: String,
    workspace_id: String,
    deployment_id: String,
    #[sqlx(try_from = "String")]
    agent: JsonText,
    trigger_type: String,
    scheduled_at_ms: Option<i64>,
    planned_session_id: String,
    session_id: Option<String>,
    error: Option<String>,
    created_at_ms: i64,
}

impl TryFrom<RunRow> for DeploymentRunRow {
    type Error = StoreError;

    fn try_from(row: RunRow) -> StoreResult<Self> {
        let trigger = match (row.trigger_type.as_str(), row.scheduled_at_ms) {
            ("schedule", Some(slot)) => RunTrigger::Schedule(slot),
            ("manual", None) => RunTrigger::Manual,
            (other, slot) => {
                return Err(StoreError::Backend(format!("deployment run {}: bad trigger {other:?} {slot:?}", row.id)));
            }
        };
        Ok(DeploymentRunRow {
            agent: row.agent.0,
            trigger,
            error: optional_json(row.error)?,
            id: row.id,
            workspace_id: row.workspace_id,
            deployment_id: row.deployment_id,
            planned_session_id: row.planned_session_id,
            session_id: row.session_id,
            created_at_ms: row.created_at_ms,
        })
    }
}

fn run(row: Option<RunRow>) -> StoreResult<Option<DeploymentRunRow>> {
    row.map(DeploymentRunRow::try_from).transpose()
}

fn slot_of(trigger: RunTrigger) -> Option<i64> {
    match trigger {
        RunTrigger::Schedule(slot) => Some(slot),
        RunTrigger::Manual => None,
    }
}

async fn insert_run_in(tx: &mut Tx, new: &NewDeploymentRun, now_ms: i64) -> StoreResult<DeploymentRunRow> {
    let row: RunRow = sqlx::query_as(include_str!("../../queries/deployments/insert_run.sql"))
        .bind(&new.id)
        .bind(&new.workspace_id)
        .bind(&new.deployment_id)
        .bind(new.agent.to_string())
        .bind(new.trigger.as_str())
        .bind(slot_of(new.trigger))
        .bind(&new.planned_session_id)
        .bind(now_ms)
        .fetch_one(&mut *tx)
        .await?;
    let row: DeploymentRunRow = row.try_into()?;
    super::webhooks::record(tx, &[Fact::new(&row.workspace_id, "deployment_run.started", &row.id)], now_ms).await?;
    Ok(row)
}

/// Reports a deployment fact inside `tx` when `row` is the deployment it happened to.
async fn report(tx: &mut Tx, row: &Option<DeploymentRow>, event_type: &'static str, now_ms: i64) -> StoreResult<()> {
    match row {
        Some(row) => super::webhooks::record(tx, &[Fact::new(&row.workspace_id, event_type, &row.id)], now_ms).await,
        None => Ok(()),
    }
}

fn vault_ids_text(ids: &[String]) -> String {
    Value::from(ids.to_vec()).to_string()
}

/// Binds a deployment's configuration, in the column order `insert_deployment.sql` and
/// `update_deployment.sql` share (name … content capture ceiling).
fn bind_config<'q, O>(
    statement: sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments<'q>>,
    c: &'q DeploymentConfig,
) -> sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments<'q>> {
    statement
        .bind(&c.name)
        .bind(c.description.clone())
        .bind(&c.agent_id)
        .bind(c.agent_version)
        .bind(&c.environment_id)
        .bind(c.initial_events.to_string())
        .bind(c.resources.to_string())
        .bind(vault_ids_text(&c.vault_ids))
        .bind(c.metadata.to_string())
        .bind(c.budget.as_ref().map(Value::to_string))
        .bind(c.schedule.as_ref().map(|s| s.expression.clone()))
        .bind(c.schedule.as_ref().map(|s| s.timezone.clone()))
        .bind(c.user_profile_id.clone())
        .bind(c.content_capture_ceiling.map(capture::Level::as_str))
}

#[async_trait]
impl DeploymentStore for SqlStore {
    async fn insert_deployment(&self, new: NewDeployment) -> StoreResult<DeploymentRow> {
        let c = &new.config;
        let sql = include_str!("../../queries/deployments/insert_deployment.sql").replace("{columns}", COLUMNS);
        let statement = sqlx::query_as(&sql).bind(&new.id).bind(&new.workspace_id).bind(&new.organization_id);
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let row: Row = bind_config(statement, c).bind(new.next_slot_ms).bind(now).fetch_one(&mut tx).await?;
        let row = DeploymentRow::try_from(row)?;
        let fact = Fact::new(&row.workspace_id, "deployment.created", &row.id);
        super::webhooks::record(&mut tx, &[fact], now).await?;
        tx.commit().await?;
        Ok(row)
    }

    async fn get_deployment(&self, workspace_id: &str, id: &str) -> StoreResult<Option<DeploymentRow>> {
        let sql = format!("SELECT {COLUMNS} FROM deployments WHERE workspace_id = $1 AND id = $2");
        deployment(sqlx::query_as(&sql).bind(workspace_id).bind(id).fetch_optional(&self.readers).await?)
    }

    async fn list_deployments(&self, workspace_id: &str, query: &DeploymentQuery) -> StoreResult<Vec<DeploymentRow>> {
        // $1 workspace, $2 include archived, $3 cursor, $4 agent, $5 paused (1, 0 or NULL),
        // $6 created >=, $7 created <=, $8 limit.
        let sql = format!(
            "SELECT {COLUMNS} FROM deployments WHERE workspace_id = $1 AND ($2 = 1 OR archived_at_ms IS NULL) \
             AND ($3 IS NULL OR id < $3) AND ($4 IS NULL OR agent_id = $4) \
             AND ($5 IS NULL OR ($5 = 1 AND paused_reason IS NOT NULL) OR ($5 = 0 AND paused_reason IS NULL)) \
             AND ($6 IS NULL OR created_at_ms >= $6) AND ($7 IS NULL OR created_at_ms <= $7) \
             ORDER BY id DESC LIMIT $8"
        );
        sqlx::query_as::<_, Row>(&sql)
            .bind(workspace_id)
            .bind(i64::from(query.include_archived))
            .bind(query.before_id.clone())
            .bind(query.agent_id.clone())
            .bind(query.paused.map(i64::from))
            .bind(query.created.gte)
            .bind(query.created.lte)
            .bind(query.limit)
            .fetch_all(&self.readers)
            .await?
            .into_iter()
            .map(DeploymentRow::try_from)
            .collect()
    }

    async fn update_deployment(
        &self,
        workspace_id: &str,
        id: &str,
        config: DeploymentConfig,
        next_slot_ms: Option<Option<i64>>,
    ) -> StoreResult<Option<DeploymentRow>> {
        let c = &config;
        let sql = include_str!("../../queries/deployments/update_deployment.sql").replace("{columns}", COLUMNS);
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let row = deployment(
            bind_config(sqlx::query_as(&sql).bind(workspace_id).bind(id), c)
                .bind(next_slot_ms.flatten())
                .bind(i64::from(next_slot_ms.is_some()))
                .bind(now)
                .fetch_optional(&mut tx)
                .await?,
        )?;
        report(&mut tx, &row, "deployment.updated", now).await?;
        tx.commit().await?;
        Ok(row)
    }

    async fn archive_deployment(&self, workspace_id: &str, id: &str) -> StoreResult<Option<DeploymentRow>> {
        let sql = format!(
            "UPDATE deployments SET archived_at_ms = COALESCE(archived_at_ms, $3), next_slot_ms = NULL, \
             paused_reason = NULL, updated_at_ms = CASE WHEN archived_at_ms IS NULL THEN $3 ELSE updated_at_ms END \
             WHERE workspace_id = $1 AND id = $2 RETURNING {COLUMNS}"
        );
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let row =
            deployment(sqlx::query_as(&sql).bind(workspace_id).bind(id).bind(now).fetch_optional(&mut tx).await?)?;
        // Archiving an archived deployment changes nothing and reports nothing.
        if row.as_ref().is_some_and(|row| row.archived_at_ms == Some(now)) {
            report(&mut tx, &row, "deployment.archived", now).await?;
        }
        tx.commit().await?;
        Ok(row)
    }

    async fn set_deployment_paused(
        &self,
        workspace_id: &str,
        id: &str,
        reason: Option<Value>,
        next_slot_ms: Option<i64>,
    ) -> StoreResult<Option<DeploymentRow>> {
        // Pausing keeps the next slot (the claim skips paused deployments); unpausing
        // sets the one the caller computed from now, so missed slots do not fire.
        let sql = format!(
            "UPDATE deployments SET paused_reason = $3, \
             next_slot_ms = CASE WHEN $3 IS NULL THEN $4 ELSE next_slot_ms END, updated_at_ms = $5 \
             WHERE workspace_id = $1 AND id = $2 AND archived_at_ms IS NULL RETURNING {COLUMNS}"
        );
        let now = self.now();
        let event_type = if reason.is_some() { "deployment.paused" } else { "deployment.unpaused" };
        let mut tx = self.primary.begin().await?;
        // Whether it was paused before: only a change of state is reported.
        let before: Option<(Option<String>,)> =
            sqlx::query_as("SELECT paused_reason FROM deployments WHERE workspace_id = $1 AND id = $2")
                .bind(workspace_id)
                .bind(id)
                .fetch_optional(&mut tx)
                .await?;
        let was_paused = before.is_some_and(|(reason,)| reason.is_some());
        let row = deployment(
            sqlx::query_as(&sql)
                .bind(workspace_id)
                .bind(id)
                .bind(reason.map(|r| r.to_string()))
                .bind(next_slot_ms)
                .bind(now)
                .fetch_optional(&mut tx)
                .await?,
        )?;
        if row.as_ref().is_some_and(|row| row.paused_reason.is_some() != was_paused) {
            report(&mut tx, &row, event_type, now).await?;
        }
        tx.commit().await?;
        Ok(row)
    }

    async fn due_deployments(&self, now_ms: i64, limit: i64) -> StoreResult<Vec<DeploymentRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM deployments WHERE next_slot_ms IS NOT NULL AND next_slot_ms <= $1 \
             AND paused_reason IS NULL AND archived_at_ms IS NULL ORDER BY next_slot_ms LIMIT $2"
        );
        sqlx::query_as::<_, Row>(&sql)
            .bind(now_ms)
            .bind(limit)
            .fetch_all(&self.readers)
            .await?
            .into_iter()
            .map(DeploymentRow::try_from)
            .collect()
    }

    async fn claim_deployment_slot(
        &self,
        deployment_id: &str,
        claim: SlotClaim,
    ) -> StoreResult<Option<DeploymentRunRow>> {
        if claim.run.deployment_id != deployment_id || slot_of(claim.run.trigger) != Some(claim.slot_ms) {
            return Err(StoreError::Backend(format!("deployment {deployment_id}: the claimed run names another slot")));
        }
        let mut tx = self.primary.begin().await?;
        let claimed: Option<(String,)> = sqlx::query_as(include_str!("../../queries/deployments/claim_slot.sql"))
            .bind(deployment_id)
            .bind(claim.expected_next_ms)
            .bind(claim.next_ms)
            .bind(claim.now_ms)
            .fetch_optional(&mut tx)
            .await?;
        if claimed.is_none() {
            return Ok(None);
        }
        let row = insert_run_in(&mut tx, &claim.run, self.now()).await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    async fn insert_deployment_run(&self, new: NewDeploymentRun) -> StoreResult<DeploymentRunRow> {
        let mut tx = self.primary.begin().await?;
        let row = insert_run_in(&mut tx, &new, self.now()).await?;
        tx.commit().await?;
        Ok(row)
    }

    async fn record_deployment_run_session(
        &self,
        run_id: &str,
        session_id: &str,
    ) -> StoreResult<Option<DeploymentRunRow>> {
        let mut tx = self.primary.begin().await?;
        let row = run(sqlx::query_as(include_str!("../../queries/deployments/record_run.sql"))
            .bind(run_id)
            .bind(session_id)
            .bind(None::<String>)
            .fetch_optional(&mut tx)
            .await?)?;
        if let Some(row) = &row {
            let fact = Fact::new(&row.workspace_id, "deployment_run.succeeded", &row.id);
            super::webhooks::record(&mut tx, &[fact], self.now()).await?;
        }
        tx.commit().await?;
        Ok(row)
    }

    async fn record_deployment_run_error(
        &self,
        run_id: &str,
        error: Value,
        pause: bool,
    ) -> StoreResult<Option<DeploymentRunRow>> {
        let mut tx = self.primary.begin().await?;
        let row: Option<RunRow> = sqlx::query_as(include_str!("../../queries/deployments/record_run.sql"))
            .bind(run_id)
            .bind(None::<String>)
            .bind(error.to_string())
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = run(row)? else { return Ok(None) };
        let now = self.now();
        let mut facts = vec![Fact::new(&row.workspace_id, "deployment_run.failed", &row.id)];
        if pause {
            let reason = serde_json::json!({ "type": "error", "error": error });
            let paused = sqlx::query(include_str!("../../queries/deployments/pause_on_error.sql"))
                .bind(&row.deployment_id)
                .bind(reason.to_string())
                .bind(now)
                .execute(&mut tx)
                .await?;
            if paused.rows_affected() == 1 {
                facts.push(Fact::new(&row.workspace_id, "deployment.paused", &row.deployment_id));
            }
        }
        super::webhooks::record(&mut tx, &facts, now).await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    async fn get_deployment_run(&self, workspace_id: &str, id: &str) -> StoreResult<Option<DeploymentRunRow>> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM deployment_runs WHERE workspace_id = $1 AND id = $2");
        run(sqlx::query_as(&sql).bind(workspace_id).bind(id).fetch_optional(&self.readers).await?)
    }

    async fn list_deployment_runs(
        &self,
        workspace_id: &str,
        query: &DeploymentRunQuery,
    ) -> StoreResult<Vec<DeploymentRunRow>> {
        // $1 workspace, $2 cursor, $3 deployment, $4 has error (1, 0 or NULL), $5 trigger,
        // $6..$9 created bounds (> >= < <=), $10 limit.
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM deployment_runs WHERE workspace_id = $1 AND ($2 IS NULL OR id < $2) \
             AND ($3 IS NULL OR deployment_id = $3) \
             AND ($4 IS NULL OR ($4 = 1 AND error IS NOT NULL) OR ($4 = 0 AND session_id IS NOT NULL)) \
             AND ($5 IS NULL OR trigger_type = $5) \
             AND ($6 IS NULL OR created_at_ms > $6) AND ($7 IS NULL OR created_at_ms >= $7) \
             AND ($8 IS NULL OR created_at_ms < $8) AND ($9 IS NULL OR created_at_ms <= $9) \
             ORDER BY id DESC LIMIT $10"
        );
        sqlx::query_as::<_, RunRow>(&sql)
            .bind(workspace_id)
            .bind(query.before_id.clone())
            .bind(query.deployment_id.clone())
            .bind(query.has_error.map(i64::from))
            .bind(query.trigger_type.clone())
            .bind(query.created.gt)
            .bind(query.created.gte)
            .bind(query.created.lt)
            .bind(query.created.lte)
            .bind(query.limit)
            .fetch_all(&self.readers)
            .await?
            .into_iter()
            .map(DeploymentRunRow::try_from)
            .collect()
    }

    async fn unfinished_deployment_runs(
        &self,
        created_before_ms: i64,
        limit: i64,
    ) -> StoreResult<Vec<DeploymentRunRow>> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM deployment_runs WHERE session_id IS NULL AND error IS NULL \
             AND created_at_ms <= $1 ORDER BY created_at_ms LIMIT $2"
        );
        sqlx::query_as::<_, RunRow>(&sql)
            .bind(created_before_ms)
            .bind(limit)
            .fetch_all(&self.readers)
            .await?
            .into_iter()
            .map(DeploymentRunRow::try_from)
            .collect()
    }
}
