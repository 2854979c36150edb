//! Generic versioned resources: most managed families store their wire body here.

use async_trait::async_trait;
use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::{Flag, JsonText, SqlStore, Tx, json};
use crate::error::{StoreError, StoreResult};
use crate::store::{ListQuery, NewResource, Resource, ResourceState, ResourceStore, ResourceUpdate};
use crate::webhooks::{self, Action, Fact};

const COLUMNS: &str = "id, workspace_id, kind, parent_id, version, body, created_at_ms, updated_at_ms, archived_at_ms";

/// A `resources` row as stored (the [`COLUMNS`]).
#[derive(Debug, FromRow)]
struct ResourceRow {
    id: String,
    workspace_id: String,
    kind: String,
    parent_id: Option<String>,
    version: i64,
    #[sqlx(try_from = "String")]
    body: JsonText,
    created_at_ms: i64,
    updated_at_ms: i64,
    archived_at_ms: Option<i64>,
}

/// What `select_states.sql` returns.
#[derive(Debug, FromRow)]
struct StateRow {
    id: String,
    kind: String,
    archived_at_ms: Option<i64>,
    #[sqlx(try_from = "i64")]
    disabled: Flag,
}

impl From<ResourceRow> for Resource {
    fn from(row: ResourceRow) -> Self {
        Resource {
            id: row.id,
            workspace_id: row.workspace_id,
            kind: row.kind,
            parent_id: row.parent_id,
            version: row.version,
            body: row.body.0,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
            archived_at_ms: row.archived_at_ms,
        }
    }
}

/// A resource from a row holding the [`COLUMNS`].
fn resource(row: &AnyRow) -> StoreResult<Resource> {
    Ok(ResourceRow::from_row(row)?.into())
}

async fn snapshot(tx: &mut Tx, id: &str, version: i64, body: &str, now: i64) -> StoreResult<()> {
    sqlx::query(include_str!("../../queries/resources/insert_version.sql"))
        .bind(id)
        .bind(version)
        .bind(body)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Writes the webhook fact of an action on a resource, if its kind has one
/// (`crate::webhooks::of_resource`), inside the action's transaction. A credential's
/// event names its vault (`vault_id`).
async fn report(
    tx: &mut Tx,
    workspace_id: &str,
    kind: &str,
    id: &str,
    parent_id: Option<&str>,
    action: Action,
    now: i64,
) -> StoreResult<()> {
    let Some(event_type) = webhooks::of_resource(kind, action) else { return Ok(()) };
    let mut fact = Fact::new(workspace_id, event_type, id);
    if kind == "vault_credential" {
        fact.extra = parent_id.map(|vault| serde_json::json!({ "vault_id": vault }));
    }
    super::webhooks::record(tx, &[fact], now).await
}

/// Inserts a new resource at version 1 (with its first snapshot if versioned) and
/// reports its creation, in `tx`.
async fn insert(tx: &mut Tx, new: &NewResource, now: i64) -> StoreResult<AnyRow> {
    let body = new.body.to_string();
    let row = sqlx::query(include_str!("../../queries/resources/insert_resource.sql"))
        .bind(&new.id)
        .bind(&new.workspace_id)
        .bind(&new.kind)
        .bind(&new.parent_id)
        .bind(&body)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
    if new.versioned {
        snapshot(tx, &new.id, 1, &body, now).await?;
    }
    report(tx, &new.workspace_id, &new.kind, &new.id, new.parent_id.as_deref(), Action::Created, now).await?;
    Ok(row)
}

#[async_trait]
impl ResourceStore for SqlStore {
    async fn create_resource(&self, new: NewResource) -> StoreResult<Resource> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let row = insert(&mut tx, &new, now).await?;
        tx.commit().await?;
        resource(&row)
    }

    async fn create_capped_child(&self, new: NewResource, parent_kind: &str, max_active: i64) -> StoreResult<Resource> {
        let parent =
            new.parent_id.clone().ok_or_else(|| StoreError::Backend("a capped child needs a parent".into()))?;
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        // Touching the parent takes its row lock (PostgreSQL) or the one write lock
        // (SQLite) until commit: the count below cannot change under us.
        let locked = sqlx::query(
            "UPDATE resources SET updated_at_ms = updated_at_ms \
             WHERE id = $1 AND workspace_id = $2 AND kind = $3 AND archived_at_ms IS NULL",
        )
        .bind(&parent)
        .bind(&new.workspace_id)
        .bind(parent_kind)
        .execute(&mut tx)
        .await?;
        if locked.rows_affected() == 0 {
            return Err(StoreError::NotFound { what: "parent resource", id: parent });
        }
        let active: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM resources \
             WHERE workspace_id = $1 AND kind = $2 AND parent_id = $3 AND archived_at_ms IS NULL",
        )
        .bind(&new.workspace_id)
        .bind(&new.kind)
        .bind(&parent)
        .fetch_one(&mut tx)
        .await?;
        if active >= max_active {
            return Err(StoreError::Conflict(format!("{parent} already has {active} active {}s", new.kind)));
        }
        let row = insert(&mut tx, &new, now).await?;
        tx.commit().await?;
        resource(&row)
    }

    async fn get_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<Option<Resource>> {
        let row = sqlx::query(include_str!("../../queries/resources/select_resource.sql"))
            .bind(id)
            .bind(workspace_id)
            .bind(kind)
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(resource).transpose()
    }

    async fn resource_states(&self, workspace_id: &str, wanted: &[(&str, &str)]) -> StoreResult<Vec<ResourceState>> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let pairs: Vec<String> =
            (0..wanted.len()).map(|i| format!("(kind = ${} AND id = ${})", 2 * i + 2, 2 * i + 3)).collect();
        let sql = include_str!("../../queries/resources/select_states.sql").replace("{pairs}", &pairs.join(" OR "));
        let mut statement = sqlx::query_as::<_, StateRow>(&sql).bind(workspace_id);
        for (kind, id) in wanted {
            statement = statement.bind(*kind).bind(*id);
        }
        let rows = statement.fetch_all(&self.readers).await?;
        Ok(rows
            .into_iter()
            .map(|row| ResourceState {
                id: row.id,
                kind: row.kind,
                archived_at_ms: row.archived_at_ms,
                disabled: row.disabled.0,
            })
            .collect())
    }

    async fn update_resource(&self, update: ResourceUpdate) -> StoreResult<Resource> {
        let ResourceUpdate { workspace_id, kind, id, expected_version, body, versioned } = update;
        let (workspace_id, kind, id) = (workspace_id.as_str(), kind.as_str(), id.as_str());
        let now = self.now();
        let body = body.to_string();
        let mut tx = self.primary.begin().await?;
        // Compare-and-swap on the version: a concurrent writer makes this match nothing.
        let row = sqlx::query(include_str!("../../queries/resources/update_resource.sql"))
            .bind(id)
            .bind(workspace_id)
            .bind(kind)
            .bind(expected_version)
            .bind(&body)
            .bind(now)
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = row else {
            drop(tx);
            return Err(match self.get_resource(workspace_id, kind, id).await? {
                Some(current) => StoreError::Conflict(format!(
                    "{kind} {id} is at version {}, not {expected_version}",
                    current.version
                )),
                None => StoreError::NotFound { what: "resource", id: id.to_owned() },
            });
        };
        let updated = resource(&row)?;
        if versioned {
            snapshot(&mut tx, id, updated.version, &body, now).await?;
        }
        let parent = updated.parent_id.clone();
        report(&mut tx, workspace_id, kind, id, parent.as_deref(), Action::Updated, now).await?;
        tx.commit().await?;
        Ok(updated)
    }

    async fn archive_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<Resource> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let row = sqlx::query(&format!(
            "UPDATE resources SET archived_at_ms = COALESCE(archived_at_ms, $4), updated_at_ms = $4 \
             WHERE id = $1 AND workspace_id = $2 AND kind = $3 RETURNING {COLUMNS}"
        ))
        .bind(id)
        .bind(workspace_id)
        .bind(kind)
        .bind(now)
        .fetch_optional(&mut tx)
        .await?;
        let Some(row) = row else {
            return Err(StoreError::NotFound { what: "resource", id: id.to_owned() });
        };
        let archived = resource(&row)?;
        // Archiving an archived resource changes nothing and reports nothing.
        if archived.archived_at_ms == Some(now) {
            let parent = archived.parent_id.clone();
            report(&mut tx, workspace_id, kind, id, parent.as_deref(), Action::Archived, now).await?;
        }
        tx.commit().await?;
        Ok(archived)
    }

    async fn delete_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<bool> {
        let mut tx = self.primary.begin().await?;
        let parent: Option<(Option<String>,)> = sqlx::query_as(
            "DELETE FROM resources WHERE id = $1 AND workspace_id = $2 AND kind = $3 RETURNING parent_id",
        )
        .bind(id)
        .bind(workspace_id)
        .bind(kind)
        .fetch_optional(&mut tx)
        .await?;
        let deleted = u64::from(parent.is_some());
        if let Some((parent,)) = parent {
            report(&mut tx, workspace_id, kind, id, parent.as_deref(), Action::Deleted, self.now()).await?;
        }
        if deleted == 1 {
            // Explicit, not only ON DELETE CASCADE: SQLite enforces cascades only with
            // foreign_keys on, and a missed snapshot would outlive its resource.
            sqlx::query("DELETE FROM resource_versions WHERE resource_id = $1").bind(id).execute(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(deleted == 1)
    }

    async fn list_resources(&self, workspace_id: &str, kind: &str, query: &ListQuery) -> StoreResult<Vec<Resource>> {
        // The cursor bounds are written for ascending order; descending swaps them so
        // "after" always means "further along the listing".
        let (order, after_op, before_op) = if query.descending { ("DESC", "<", ">") } else { ("ASC", ">", "<") };
        let sql = format!(
            "SELECT {COLUMNS} FROM resources \
             WHERE workspace_id = $1 AND kind = $2 \
               AND ($3 IS NULL OR parent_id = $3) \
               AND ($4 IS NULL OR id {after_op} $4) \
               AND ($5 IS NULL OR id {before_op} $5) \
               AND ($6 = 1 OR archived_at_ms IS NULL) \
               AND ($8 IS NULL OR created_at_ms >= $8) \
               AND ($9 IS NULL OR created_at_ms <= $9) \
             ORDER BY id {order} LIMIT $7"
        );
        let rows = sqlx::query(&sql)
            .bind(workspace_id)
            .bind(kind)
            .bind(&query.parent_id)
            .bind(&query.after_id)
            .bind(&query.before_id)
            .bind(i64::from(query.include_archived))
            .bind(query.limit.max(0))
            .bind(query.created_gte_ms)
            .bind(query.created_lte_ms)
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(resource).collect()
    }

    async fn get_resource_version(&self, resource_id: &str, version: i64) -> StoreResult<Option<Value>> {
        let row = sqlx::query("SELECT body FROM resource_versions WHERE resource_id = $1 AND version = $2")
            .bind(resource_id)
            .bind(version)
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(|row| json(row, "body")).transpose()
    }

    async fn list_resource_versions(
        &self,
        resource_id: &str,
        after_version: Option<i64>,
        limit: i64,
        descending: bool,
    ) -> StoreResult<Vec<(i64, Value)>> {
        let (order, after_op) = if descending { ("DESC", "<") } else { ("ASC", ">") };
        let rows = sqlx::query(&format!(
            "SELECT version, body FROM resource_versions WHERE resource_id = $1 AND ($2 IS NULL OR version {after_op} $2) \
             ORDER BY version {order} LIMIT $3"
        ))
        .bind(resource_id)
        .bind(after_version)
        .bind(limit.max(0))
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(|row| Ok((row.try_get("version")?, json(row, "body")?))).collect()
    }
}
