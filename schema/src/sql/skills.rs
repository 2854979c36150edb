//! Skills (`skills`) and their versions (`skill_versions`): metadata and file lists;
//! each version's archive is a blob named by `blob_key`.

use async_trait::async_trait;
use sqlx::FromRow;

use super::{JsonText, SqlStore, Tx};
use crate::error::{StoreError, StoreResult};
use crate::store::{NewSkill, NewSkillVersion, SkillQuery, SkillRow, SkillStore, SkillVersionRow};

const SKILL_COLUMNS: &str =
    "id, workspace_id, name, display_name, source, latest_version_id, created_at_ms, updated_at_ms";
const VERSION_COLUMNS: &str = "skill_id, id, workspace_id, name, description, files, blob_key, created_at_ms";

/// A `skills` row.
#[derive(Debug, FromRow)]
struct Skill {
    id: String,
    workspace_id: String,
    name: String,
    display_name: String,
    source: String,
    latest_version_id: String,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl From<Skill> for SkillRow {
    fn from(row: Skill) -> Self {
        SkillRow {
            id: row.id,
            workspace_id: row.workspace_id,
            name: row.name,
            display_name: row.display_name,
            source: row.source,
            latest_version_id: row.latest_version_id,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        }
    }
}

/// A `skill_versions` row.
#[derive(Debug, FromRow)]
struct Version {
    skill_id: String,
    id: String,
    workspace_id: String,
    name: String,
    description: String,
    #[sqlx(try_from = "String")]
    files: JsonText,
    blob_key: String,
    created_at_ms: i64,
}

impl From<Version> for SkillVersionRow {
    fn from(row: Version) -> Self {
        SkillVersionRow {
            skill_id: row.skill_id,
            id: row.id,
            workspace_id: row.workspace_id,
            name: row.name,
            description: row.description,
            files: row.files.0,
            blob_key: row.blob_key,
            created_at_ms: row.created_at_ms,
        }
    }
}

async fn insert_version(
    tx: &mut Tx,
    workspace_id: &str,
    skill_id: &str,
    version: &NewSkillVersion,
    id: &str,
    now: i64,
) -> StoreResult<SkillVersionRow> {
    let row: Version = sqlx::query_as(include_str!("../../queries/skills/insert_version.sql"))
        .bind(skill_id)
        .bind(id)
        .bind(workspace_id)
        .bind(&version.name)
        .bind(&version.description)
        .bind(version.files.to_string())
        .bind(&version.blob_key)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
    Ok(row.into())
}

/// The skill row, locked for the rest of the transaction (versions of one skill change
/// one at a time); `None` when the workspace has no such skill.
async fn lock_skill(tx: &mut Tx, workspace_id: &str, skill_id: &str, now: i64) -> StoreResult<Option<Skill>> {
    Ok(sqlx::query_as(include_str!("../../queries/skills/lock_skill.sql"))
        .bind(workspace_id)
        .bind(skill_id)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?)
}

/// A version id above `latest` (both epoch-microsecond strings of the same width).
fn after(proposed: &str, latest: &str) -> String {
    match (proposed.parse::<u64>(), latest.parse::<u64>()) {
        (Ok(proposed), Ok(latest)) if proposed <= latest => (latest + 1).to_string(),
        _ => proposed.to_owned(),
    }
}

#[async_trait]
impl SkillStore for SqlStore {
    async fn create_skill(&self, new: NewSkill) -> StoreResult<(SkillRow, SkillVersionRow)> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let skill: Skill = sqlx::query_as(include_str!("../../queries/skills/insert_skill.sql"))
            .bind(&new.id)
            .bind(&new.workspace_id)
            .bind(&new.version.name)
            .bind(&new.display_name)
            .bind(&new.version.id)
            .bind(now)
            .fetch_one(&mut tx)
            .await
            .map_err(|error| match StoreError::from(error) {
                StoreError::Conflict(_) => {
                    StoreError::Conflict(format!("a skill named {:?} already exists", new.version.name))
                }
                other => other,
            })?;
        let version = insert_version(&mut tx, &new.workspace_id, &new.id, &new.version, &new.version.id, now).await?;
        tx.commit().await?;
        Ok((skill.into(), version))
    }

    async fn get_skill(&self, workspace_id: &str, id: &str) -> StoreResult<Option<SkillRow>> {
        let row: Option<Skill> = sqlx::query_as(include_str!("../../queries/skills/select_skill.sql"))
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(&self.readers)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn list_skills(&self, workspace_id: &str, query: &SkillQuery) -> StoreResult<Vec<SkillRow>> {
        let mut sql = format!("SELECT {SKILL_COLUMNS} FROM skills WHERE workspace_id = $1");
        let mut next = 3;
        if query.source.is_some() {
            sql.push_str(&format!(" AND source = ${next}"));
            next += 1;
        }
        if query.before_id.is_some() {
            sql.push_str(&format!(" AND id < ${next}"));
        }
        sql.push_str(" ORDER BY id DESC LIMIT $2");
        let mut statement = sqlx::query_as::<_, Skill>(&sql).bind(workspace_id).bind(query.limit);
        if let Some(source) = &query.source {
            statement = statement.bind(source);
        }
        if let Some(before) = &query.before_id {
            statement = statement.bind(before);
        }
        Ok(statement.fetch_all(&self.readers).await?.into_iter().map(Into::into).collect())
    }

    async fn delete_skill(&self, workspace_id: &str, id: &str) -> StoreResult<Option<Vec<String>>> {
        let mut tx = self.primary.begin().await?;
        let keys: Vec<(String,)> =
            sqlx::query_as("SELECT blob_key FROM skill_versions WHERE workspace_id = $1 AND skill_id = $2")
                .bind(workspace_id)
                .bind(id)
                .fetch_all(&mut tx)
                .await?;
        sqlx::query("DELETE FROM skill_versions WHERE workspace_id = $1 AND skill_id = $2")
            .bind(workspace_id)
            .bind(id)
            .execute(&mut tx)
            .await?;
        let done = sqlx::query("DELETE FROM skills WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .execute(&mut tx)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        tx.commit().await?;
        Ok(Some(keys.into_iter().map(|(key,)| key).collect()))
    }

    async fn add_skill_version(
        &self,
        workspace_id: &str,
        skill_id: &str,
        version: NewSkillVersion,
    ) -> StoreResult<Option<SkillVersionRow>> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let Some(skill) = lock_skill(&mut tx, workspace_id, skill_id, now).await? else { return Ok(None) };
        if skill.name != version.name {
            return Err(StoreError::Conflict(format!(
                "the skill is named {:?}; a new version's SKILL.md names {:?}",
                skill.name, version.name
            )));
        }
        let id = after(&version.id, &skill.latest_version_id);
        let row = insert_version(&mut tx, workspace_id, skill_id, &version, &id, now).await?;
        sqlx::query(include_str!("../../queries/skills/set_latest.sql"))
            .bind(skill_id)
            .bind(&id)
            .bind(now)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    async fn get_skill_version(
        &self,
        workspace_id: &str,
        skill_id: &str,
        version: &str,
    ) -> StoreResult<Option<SkillVersionRow>> {
        let row: Option<Version> = if version == "latest" {
            sqlx::query_as(&format!(
                "SELECT v.{} FROM skill_versions v JOIN skills s ON s.id = v.skill_id AND s.latest_version_id = v.id \
                 WHERE s.workspace_id = $1 AND s.id = $2",
                VERSION_COLUMNS.replace(", ", ", v.")
            ))
            .bind(workspace_id)
            .bind(skill_id)
            .fetch_optional(&self.readers)
            .await?
        } else {
            sqlx::query_as(include_str!("../../queries/skills/select_version.sql"))
                .bind(workspace_id)
                .bind(skill_id)
                .bind(version)
                .fetch_optional(&self.readers)
                .await?
        };
        Ok(row.map(Into::into))
    }

    async fn list_skill_versions(
        &self,
        workspace_id: &str,
        skill_id: &str,
        query: &SkillQuery,
    ) -> StoreResult<Vec<SkillVersionRow>> {
        let mut sql = format!("SELECT {VERSION_COLUMNS} FROM skill_versions WHERE workspace_id = $1 AND skill_id = $2");
        if query.before_id.is_some() {
            sql.push_str(" AND id < $4");
        }
        sql.push_str(" ORDER BY id DESC LIMIT $3");
        let mut statement = sqlx::query_as::<_, Version>(&sql).bind(workspace_id).bind(skill_id).bind(query.limit);
        if let Some(before) = &query.before_id {
            statement = statement.bind(before);
        }
        Ok(statement.fetch_all(&self.readers).await?.into_iter().map(Into::into).collect())
    }

    async fn delete_skill_version(
        &self,
        workspace_id: &str,
        skill_id: &str,
        version: &str,
    ) -> StoreResult<Option<SkillVersionRow>> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let Some(skill) = lock_skill(&mut tx, workspace_id, skill_id, now).await? else { return Ok(None) };
        let version_id = if version == "latest" { skill.latest_version_id.as_str() } else { version };
        let removed: Option<Version> = sqlx::query_as(&format!(
            "DELETE FROM skill_versions WHERE workspace_id = $1 AND skill_id = $2 AND id = $3 \
             RETURNING {VERSION_COLUMNS}"
        ))
        .bind(workspace_id)
        .bind(skill_id)
        .bind(version_id)
        .fetch_optional(&mut tx)
        .await?;
        let Some(removed) = removed else { return Ok(None) };
        let newest: Option<(String,)> =
            sqlx::query_as("SELECT id FROM skill_versions WHERE skill_id = $1 ORDER BY id DESC LIMIT 1")
                .bind(skill_id)
                .fetch_optional(&mut tx)
                .await?;
        let Some((newest,)) = newest else {
            // Rolled back: a skill keeps at least one version.
            return Err(StoreError::Conflict(format!(
                "version {version_id} is the only version of skill {skill_id}: delete the skill instead"
            )));
        };
        if newest != skill.latest_version_id {
            sqlx::query(include_str!("../../queries/skills/set_latest.sql"))
                .bind(skill_id)
                .bind(&newest)
                .bind(now)
                .execute(&mut tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Some(removed.into()))
    }
}
