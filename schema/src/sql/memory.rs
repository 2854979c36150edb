//! Agent memory: `memory_stores`, `memories` and `memory_versions` (migration 0016).
//!
//! Every write to a memory is one transaction that starts by locking its store's row
//! (`lock_store.sql`), so the store's writers go one at a time and every check — the
//! cap, the path's uniqueness, the `content_sha256` precondition — is made on the state
//! the write commits on. A refused write returns before committing: nothing changes.

use async_trait::async_trait;
use sqlx::FromRow;

use super::{JsonText, SqlStore, Tx};
use crate::error::{StoreError, StoreResult};
use crate::store::{
    AgentMemoryStore, MAX_MEMORIES_PER_STORE, MemoryActor, MemoryContent, MemoryDeletion, MemoryListItem,
    MemoryOperation, MemoryQuery, MemoryRow, MemoryStoreQuery, MemoryStoreRow, MemoryStoreUpdate, MemoryUpdate,
    MemoryVersionQuery, MemoryVersionRow, MemoryWrite, NewMemory, NewMemoryStore,
};
use crate::webhooks::Fact;

const STORE_COLUMNS: &str = "id, workspace_id, name, description, metadata, memory_count, revision, archived_at_ms, \
                             created_at_ms, updated_at_ms";
const MEMORY_COLUMNS: &str = "id, memory_store_id, workspace_id, path, content_sha256, content_size_bytes, \
                              memory_version_id, created_at_ms, updated_at_ms";
const VERSION_COLUMNS: &str = "id, memory_store_id, workspace_id, memory_id, operation, path, content_sha256, \
                               content_size_bytes, actor_type, actor_id, redacted_at_ms, redacted_by_type, \
                               redacted_by_id, created_at_ms";

/// The content column, or a typed NULL in its place when the read does not want it.
fn content_column(with_content: bool) -> &'static str {
    if with_content { "content" } else { "CAST(NULL AS TEXT) AS content" }
}

/// A `memory_stores` row.
#[derive(Debug, FromRow)]
struct Store {
    id: String,
    workspace_id: String,
    name: String,
    description: String,
    #[sqlx(try_from = "String")]
    metadata: JsonText,
    memory_count: i64,
    revision: i64,
    archived_at_ms: Option<i64>,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl From<Store> for MemoryStoreRow {
    fn from(row: Store) -> Self {
        MemoryStoreRow {
            id: row.id,
            workspace_id: row.workspace_id,
            name: row.name,
            description: row.description,
            metadata: row.metadata.0,
            memory_count: row.memory_count,
            revision: row.revision,
            archived_at_ms: row.archived_at_ms,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        }
    }
}

/// A `memories` row.
#[derive(Debug, FromRow)]
struct Memory {
    id: String,
    memory_store_id: String,
    workspace_id: String,
    path: String,
    content: Option<String>,
    content_sha256: String,
    content_size_bytes: i64,
    memory_version_id: String,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl From<Memory> for MemoryRow {
    fn from(row: Memory) -> Self {
        MemoryRow {
            id: row.id,
            memory_store_id: row.memory_store_id,
            workspace_id: row.workspace_id,
            path: row.path,
            content: row.content,
            content_sha256: row.content_sha256,
            content_size_bytes: row.content_size_bytes,
            memory_version_id: row.memory_version_id,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        }
    }
}

/// A `memory_versions` row.
#[derive(Debug, FromRow)]
struct Version {
    id: String,
    memory_store_id: String,
    workspace_id: String,
    memory_id: String,
    operation: String,
    path: Option<String>,
    content: Option<String>,
    content_sha256: Option<String>,
    content_size_bytes: Option<i64>,
    actor_type: String,
    actor_id: String,
    redacted_at_ms: Option<i64>,
    redacted_by_type: Option<String>,
    redacted_by_id: Option<String>,
    created_at_ms: i64,
}

impl TryFrom<Version> for MemoryVersionRow {
    type Error = StoreError;

    fn try_from(row: Version) -> StoreResult<Self> {
        let corrupt = |what: &str| StoreError::Backend(format!("memory version {}: unknown {what}", row.id));
        let operation = MemoryOperation::parse(&row.operation).ok_or_else(|| corrupt("operation"))?;
        let created_by =
            MemoryActor::from_stored(&row.actor_type, row.actor_id.clone()).ok_or_else(|| corrupt("actor"))?;
        let redacted_by = match (row.redacted_by_type.as_deref(), row.redacted_by_id.clone()) {
            (Some(kind), Some(id)) => Some(MemoryActor::from_stored(kind, id).ok_or_else(|| corrupt("redactor"))?),
            _ => None,
        };
        Ok(MemoryVersionRow {
            id: row.id,
            memory_store_id: row.memory_store_id,
            workspace_id: row.workspace_id,
            memory_id: row.memory_id,
            operation,
            path: row.path,
            content: row.content,
            content_sha256: row.content_sha256,
            content_size_bytes: row.content_size_bytes,
            created_by,
            redacted_at_ms: row.redacted_at_ms,
            redacted_by,
            created_at_ms: row.created_at_ms,
        })
    }
}

/// The store's lock, taken with its memory count moved by `count_delta`; `None` when
/// the workspace has no such store. Returns `(archived, memory_count)` after the move.
async fn lock_store(
    tx: &mut Tx,
    workspace_id: &str,
    store_id: &str,
    count_delta: i64,
) -> StoreResult<Option<(bool, i64)>> {
    let row: Option<(Option<i64>, i64)> = sqlx::query_as(include_str!("../../queries/memory/lock_store.sql"))
        .bind(workspace_id)
        .bind(store_id)
        .bind(count_delta)
        .fetch_optional(&mut *tx)
        .await?;
    Ok(row.map(|(archived, count)| (archived.is_some(), count)))
}

/// The memory with its content, inside the store's transaction.
async fn current_memory(tx: &mut Tx, store_id: &str, memory_id: &str) -> StoreResult<Option<Memory>> {
    let sql = format!("SELECT {MEMORY_COLUMNS}, content FROM memories WHERE memory_store_id = $1 AND id = $2");
    Ok(sqlx::query_as(&sql).bind(store_id).bind(memory_id).fetch_optional(&mut *tx).await?)
}

/// Whether another memory of the store has `path`.
async fn path_taken(tx: &mut Tx, store_id: &str, path: &str) -> StoreResult<bool> {
    let found: Option<(String,)> = sqlx::query_as("SELECT id FROM memories WHERE memory_store_id = $1 AND path = $2")
        .bind(store_id)
        .bind(path)
        .fetch_optional(&mut *tx)
        .await?;
    Ok(found.is_some())
}

/// What a version records besides its ids.
struct VersionRecord<'a> {
    id: &'a str,
    memory_id: &'a str,
    operation: MemoryOperation,
    path: &'a str,
    content: Option<(&'a str, &'a str, i64)>,
    actor: &'a MemoryActor,
}

async fn insert_version(
    tx: &mut Tx,
    workspace_id: &str,
    store_id: &str,
    version: VersionRecord<'_>,
    now: i64,
) -> StoreResult<()> {
    let (content, sha, size) = version.content.map_or((None, None, None), |(c, s, n)| (Some(c), Some(s), Some(n)));
    sqlx::query(include_str!("../../queries/memory/insert_version.sql"))
        .bind(version.id)
        .bind(store_id)
        .bind(workspace_id)
        .bind(version.memory_id)
        .bind(version.operation.as_str())
        .bind(version.path)
        .bind(content)
        .bind(sha)
        .bind(size)
        .bind(version.actor.kind())
        .bind(version.actor.id())
        .bind(now)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// The least path above every path that starts with `prefix` (which ends with `/`):
/// `/a/` → `/a0`, since `0` follows `/` bytewise.
fn past_prefix(prefix: &str) -> String {
    debug_assert!(prefix.ends_with('/'));
    format!("{}0", &prefix[..prefix.len() - 1])
}

/// The directory at `depth` segments below `base` that `path` is rolled up into, or
/// `None` when `path` is no deeper than `depth` (it is listed itself).
fn rolled_up(base: &str, path: &str, depth: u32) -> Option<String> {
    if depth == 0 {
        return None;
    }
    let relative = path.strip_prefix(base)?;
    let mut ends = relative.match_indices('/').map(|(i, _)| i);
    let cut = ends.nth(depth as usize - 1)?;
    Some(format!("{base}{}", &relative[..=cut]))
}

#[async_trait]
impl AgentMemoryStore for SqlStore {
    async fn create_memory_store(&self, new: NewMemoryStore) -> StoreResult<MemoryStoreRow> {
        let now = self.now();
        let fact = Fact::new(&new.workspace_id, "memory_store.created", &new.id);
        let mut tx = self.primary.begin().await?;
        let row: Store = sqlx::query_as(include_str!("../../queries/memory/insert_store.sql"))
            .bind(new.id)
            .bind(new.workspace_id)
            .bind(new.name)
            .bind(new.description)
            .bind(new.metadata.to_string())
            .bind(now)
            .fetch_one(&mut tx)
            .await?;
        super::webhooks::record(&mut tx, &[fact], now).await?;
        tx.commit().await?;
        Ok(row.into())
    }

    async fn get_memory_store(&self, workspace_id: &str, id: &str) -> StoreResult<Option<MemoryStoreRow>> {
        let sql = format!("SELECT {STORE_COLUMNS} FROM memory_stores WHERE workspace_id = $1 AND id = $2");
        let row: Option<Store> = sqlx::query_as(&sql).bind(workspace_id).bind(id).fetch_optional(&self.readers).await?;
        Ok(row.map(Into::into))
    }

    async fn list_memory_stores(
        &self,
        workspace_id: &str,
        query: &MemoryStoreQuery,
    ) -> StoreResult<Vec<MemoryStoreRow>> {
        let mut sql = format!("SELECT {STORE_COLUMNS} FROM memory_stores WHERE workspace_id = $1");
        let mut binds: Vec<i64> = Vec::new();
        let mut next = 3;
        if !query.include_archived {
            sql.push_str(" AND archived_at_ms IS NULL");
        }
        for (bound, op) in
            [(query.created.gte, ">="), (query.created.lte, "<="), (query.created.gt, ">"), (query.created.lt, "<")]
        {
            if let Some(value) = bound {
                sql.push_str(&format!(" AND created_at_ms {op} ${next}"));
                binds.push(value);
                next += 1;
            }
        }
        if query.before_id.is_some() {
            sql.push_str(&format!(" AND id < ${next}"));
        }
        sql.push_str(" ORDER BY id DESC LIMIT $2");
        let mut statement = sqlx::query_as::<_, Store>(&sql).bind(workspace_id).bind(query.limit);
        for value in binds {
            statement = statement.bind(value);
        }
        if let Some(before) = &query.before_id {
            statement = statement.bind(before);
        }
        Ok(statement.fetch_all(&self.readers).await?.into_iter().map(Into::into).collect())
    }

    async fn update_memory_store(
        &self,
        workspace_id: &str,
        id: &str,
        update: MemoryStoreUpdate,
    ) -> StoreResult<Option<MemoryStoreRow>> {
        let row: Option<Store> = sqlx::query_as(include_str!("../../queries/memory/update_store.sql"))
            .bind(workspace_id)
            .bind(id)
            .bind(update.expected_revision)
            .bind(update.name)
            .bind(update.description)
            .bind(update.metadata.to_string())
            .bind(self.now())
            .fetch_optional(&self.primary)
            .await?;
        match row {
            Some(row) => Ok(Some(row.into())),
            None => match self.get_memory_store(workspace_id, id).await? {
                None => Ok(None),
                Some(store) if store.archived_at_ms.is_some() => {
                    Err(StoreError::Conflict(format!("memory store {id} is archived")))
                }
                Some(store) => Err(StoreError::Conflict(format!(
                    "memory store {id} is at revision {}, not {}",
                    store.revision, update.expected_revision
                ))),
            },
        }
    }

    async fn archive_memory_store(&self, workspace_id: &str, id: &str) -> StoreResult<Option<MemoryStoreRow>> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        let row: Option<Store> = sqlx::query_as(include_str!("../../queries/memory/archive_store.sql"))
            .bind(workspace_id)
            .bind(id)
            .bind(now)
            .fetch_optional(&mut tx)
            .await?;
        if row.is_some() {
            super::webhooks::record(&mut tx, &[Fact::new(workspace_id, "memory_store.archived", id)], now).await?;
        }
        tx.commit().await?;
        match row {
            Some(row) => Ok(Some(row.into())),
            None => self.get_memory_store(workspace_id, id).await,
        }
    }

    async fn delete_memory_store(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        let mut tx = self.primary.begin().await?;
        if lock_store(&mut tx, workspace_id, id, 0).await?.is_none() {
            return Ok(false);
        }
        for table in ["memory_versions", "memories"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE memory_store_id = $1")).bind(id).execute(&mut tx).await?;
        }
        sqlx::query("DELETE FROM memory_stores WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .execute(&mut tx)
            .await?;
        super::webhooks::record(&mut tx, &[Fact::new(workspace_id, "memory_store.deleted", id)], self.now()).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn create_memory(&self, new: NewMemory) -> StoreResult<MemoryWrite> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        match lock_store(&mut tx, &new.workspace_id, &new.memory_store_id, 1).await? {
            None => return Ok(MemoryWrite::StoreMissing),
            Some((true, _)) => return Ok(MemoryWrite::StoreArchived),
            Some((false, count)) if count > MAX_MEMORIES_PER_STORE => return Ok(MemoryWrite::StoreFull),
            Some(_) => {}
        }
        if path_taken(&mut tx, &new.memory_store_id, &new.path).await? {
            return Ok(MemoryWrite::PathTaken);
        }
        let content = &new.content;
        let row: Memory = sqlx::query_as(include_str!("../../queries/memory/insert_memory.sql"))
            .bind(&new.id)
            .bind(&new.memory_store_id)
            .bind(&new.workspace_id)
            .bind(&new.path)
            .bind(&content.text)
            .bind(&content.sha256)
            .bind(content.size_bytes)
            .bind(&new.version_id)
            .bind(now)
            .fetch_one(&mut tx)
            .await?;
        let version = VersionRecord {
            id: &new.version_id,
            memory_id: &new.id,
            operation: MemoryOperation::Created,
            path: &new.path,
            content: Some((&content.text, &content.sha256, content.size_bytes)),
            actor: &new.actor,
        };
        insert_version(&mut tx, &new.workspace_id, &new.memory_store_id, version, now).await?;
        tx.commit().await?;
        Ok(MemoryWrite::Written(row.into()))
    }

    async fn update_memory(&self, update: MemoryUpdate) -> StoreResult<MemoryWrite> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        match lock_store(&mut tx, &update.workspace_id, &update.memory_store_id, 0).await? {
            None => return Ok(MemoryWrite::StoreMissing),
            Some((true, _)) => return Ok(MemoryWrite::StoreArchived),
            Some(_) => {}
        }
        let Some(current) = current_memory(&mut tx, &update.memory_store_id, &update.memory_id).await? else {
            return Ok(MemoryWrite::MemoryMissing);
        };
        if let Some(expected) = &update.expected_sha256
            && *expected != current.content_sha256
        {
            return Ok(MemoryWrite::PreconditionFailed { current_sha256: current.content_sha256 });
        }
        let path = update.path.unwrap_or_else(|| current.path.clone());
        let content = update.content.unwrap_or_else(|| MemoryContent {
            text: current.content.clone().unwrap_or_default(),
            sha256: current.content_sha256.clone(),
            size_bytes: current.content_size_bytes,
        });
        if path == current.path && content.sha256 == current.content_sha256 {
            // Nothing changes: no version, the memory as it is.
            return Ok(MemoryWrite::Written(current.into()));
        }
        if path != current.path && path_taken(&mut tx, &update.memory_store_id, &path).await? {
            return Ok(MemoryWrite::PathTaken);
        }
        let row: Memory = sqlx::query_as(include_str!("../../queries/memory/update_memory.sql"))
            .bind(&update.memory_store_id)
            .bind(&update.memory_id)
            .bind(&path)
            .bind(&content.text)
            .bind(&content.sha256)
            .bind(content.size_bytes)
            .bind(&update.version_id)
            .bind(now)
            .fetch_one(&mut tx)
            .await?;
        let version = VersionRecord {
            id: &update.version_id,
            memory_id: &update.memory_id,
            operation: MemoryOperation::Modified,
            path: &path,
            content: Some((&content.text, &content.sha256, content.size_bytes)),
            actor: &update.actor,
        };
        insert_version(&mut tx, &update.workspace_id, &update.memory_store_id, version, now).await?;
        tx.commit().await?;
        Ok(MemoryWrite::Written(row.into()))
    }

    async fn delete_memory(&self, deletion: MemoryDeletion) -> StoreResult<MemoryWrite> {
        let now = self.now();
        let mut tx = self.primary.begin().await?;
        if lock_store(&mut tx, &deletion.workspace_id, &deletion.memory_store_id, -1).await?.is_none() {
            return Ok(MemoryWrite::StoreMissing);
        }
        let Some(current) = current_memory(&mut tx, &deletion.memory_store_id, &deletion.memory_id).await? else {
            return Ok(MemoryWrite::MemoryMissing);
        };
        if let Some(expected) = &deletion.expected_sha256
            && *expected != current.content_sha256
        {
            return Ok(MemoryWrite::PreconditionFailed { current_sha256: current.content_sha256 });
        }
        sqlx::query("DELETE FROM memories WHERE memory_store_id = $1 AND id = $2")
            .bind(&deletion.memory_store_id)
            .bind(&deletion.memory_id)
            .execute(&mut tx)
            .await?;
        let version = VersionRecord {
            id: &deletion.version_id,
            memory_id: &deletion.memory_id,
            operation: MemoryOperation::Deleted,
            path: &current.path,
            content: None,
            actor: &deletion.actor,
        };
        insert_version(&mut tx, &deletion.workspace_id, &deletion.memory_store_id, version, now).await?;
        tx.commit().await?;
        Ok(MemoryWrite::Written(current.into()))
    }

    async fn get_memory(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        memory_id: &str,
        with_content: bool,
    ) -> StoreResult<Option<MemoryRow>> {
        let sql = format!(
            "SELECT {MEMORY_COLUMNS}, {} FROM memories WHERE workspace_id = $1 AND memory_store_id = $2 AND id = $3",
            content_column(with_content)
        );
        let row: Option<Memory> = sqlx::query_as(&sql)
            .bind(workspace_id)
            .bind(memory_store_id)
            .bind(memory_id)
            .fetch_optional(&self.readers)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn list_memories(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        query: &MemoryQuery,
    ) -> StoreResult<Vec<MemoryListItem>> {
        let base = query.path_prefix.clone().unwrap_or_else(|| "/".to_owned());
        let end = past_prefix(&base);
        let sql_after = format!(
            "SELECT {MEMORY_COLUMNS}, {} FROM memories WHERE workspace_id = $1 AND memory_store_id = $2 \
             AND path > $3 AND path < $4 ORDER BY path LIMIT $5",
            content_column(query.with_content)
        );
        let sql_from = sql_after.replace("path > $3", "path >= $3");
        // Where the page starts: after a memory's path, or past everything under a prefix.
        let (mut from, mut inclusive) = match &query.after {
            Some(after) if after.ends_with('/') => (past_prefix(after), true),
            Some(after) => (after.clone(), false),
            None => (base.clone(), true),
        };
        if from < base {
            (from, inclusive) = (base.clone(), true);
        }
        let limit = query.limit.max(0) as usize;
        let mut items = Vec::with_capacity(limit.min(128));
        // Rows fetched per statement: what the page still wants, but after a roll-up only
        // a few, since the next rows are likely under the next directory too and a seek
        // past it reads nothing it does not return (doubling again while no roll-up
        // happens).
        let mut batch = limit;
        while items.len() < limit {
            let wanted = (limit - items.len()).min(batch) as i64;
            let rows: Vec<Memory> = sqlx::query_as(if inclusive { &sql_from } else { &sql_after })
                .bind(workspace_id)
                .bind(memory_store_id)
                .bind(&from)
                .bind(&end)
                .bind(wanted)
                .fetch_all(&self.readers)
                .await?;
            let fetched = rows.len() as i64;
            let mut skipped = false;
            for row in rows {
                if let Some(prefix) = rolled_up(&base, &row.path, query.depth) {
                    // The rest of this batch may be under the prefix: seek past it.
                    (from, inclusive) = (past_prefix(&prefix), true);
                    items.push(MemoryListItem::Prefix(prefix));
                    skipped = true;
                    break;
                }
                (from, inclusive) = (row.path.clone(), false);
                items.push(MemoryListItem::Memory(row.into()));
            }
            if !skipped && fetched < wanted {
                break;
            }
            batch = if skipped { 2 } else { batch.saturating_mul(2) };
        }
        Ok(items)
    }

    async fn get_memory_version(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        version_id: &str,
        with_content: bool,
    ) -> StoreResult<Option<MemoryVersionRow>> {
        let sql = format!(
            "SELECT {VERSION_COLUMNS}, {} FROM memory_versions \
             WHERE workspace_id = $1 AND memory_store_id = $2 AND id = $3",
            content_column(with_content)
        );
        let row: Option<Version> = sqlx::query_as(&sql)
            .bind(workspace_id)
            .bind(memory_store_id)
            .bind(version_id)
            .fetch_optional(&self.readers)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn list_memory_versions(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        query: &MemoryVersionQuery,
    ) -> StoreResult<Vec<MemoryVersionRow>> {
        let mut sql = format!(
            "SELECT {VERSION_COLUMNS}, {} FROM memory_versions WHERE workspace_id = $1 AND memory_store_id = $2",
            content_column(query.with_content)
        );
        let mut texts: Vec<String> = Vec::new();
        let mut next = 4;
        let mut text_filter = |sql: &mut String, condition: &str, value: String| {
            sql.push_str(&format!(" AND {condition} ${next}"));
            texts.push(value);
            next += 1;
        };
        if let Some(memory) = &query.memory_id {
            text_filter(&mut sql, "memory_id =", memory.clone());
        }
        if let Some(operation) = query.operation {
            text_filter(&mut sql, "operation =", operation.as_str().to_owned());
        }
        if let Some(session) = &query.session_id {
            text_filter(&mut sql, "actor_type = 'session' AND actor_id =", session.clone());
        }
        if let Some(key) = &query.api_key_id {
            text_filter(&mut sql, "actor_type = 'api_key' AND actor_id =", key.clone());
        }
        if let Some(before) = &query.before_id {
            text_filter(&mut sql, "id <", before.clone());
        }
        let mut times: Vec<i64> = Vec::new();
        for (bound, op) in
            [(query.created.gte, ">="), (query.created.lte, "<="), (query.created.gt, ">"), (query.created.lt, "<")]
        {
            if let Some(value) = bound {
                sql.push_str(&format!(" AND created_at_ms {op} ${next}"));
                times.push(value);
                next += 1;
            }
        }
        sql.push_str(" ORDER BY id DESC LIMIT $3");
        let mut statement =
            sqlx::query_as::<_, Version>(&sql).bind(workspace_id).bind(memory_store_id).bind(query.limit);
        for value in texts {
            statement = statement.bind(value);
        }
        for value in times {
            statement = statement.bind(value);
        }
        statement.fetch_all(&self.readers).await?.into_iter().map(TryInto::try_into).collect()
    }

    async fn redact_memory_version(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        version_id: &str,
        by: MemoryActor,
    ) -> StoreResult<Option<MemoryVersionRow>> {
        sqlx::query(include_str!("../../queries/memory/redact_version.sql"))
            .bind(workspace_id)
            .bind(memory_store_id)
            .bind(version_id)
            .bind(self.now())
            .bind(by.kind())
            .bind(by.id())
            .execute(&self.primary)
            .await?;
        let sql = format!(
            "SELECT {VERSION_COLUMNS}, content FROM memory_versions \
             WHERE workspace_id = $1 AND memory_store_id = $2 AND id = $3"
        );
        let row: Option<Version> = sqlx::query_as(&sql)
            .bind(workspace_id)
            .bind(memory_store_id)
            .bind(version_id)
            .fetch_optional(&self.primary)
            .await?;
        row.map(TryInto::try_into).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_just_past_its_last_path() {
        assert_eq!(past_prefix("/a/"), "/a0");
        assert!("/a/zzz" < "/a0" && "/a/" < "/a0" && "/a.md" < "/a/" && "/ab" > "/a0");
        assert_eq!(past_prefix("/"), "0");
    }

    #[test]
    fn deep_paths_roll_up_at_the_depth() {
        assert_eq!(rolled_up("/", "/a.md", 1), None);
        assert_eq!(rolled_up("/", "/x/y.md", 1).as_deref(), Some("/x/"));
        assert_eq!(rolled_up("/", "/x/y/z.md", 2).as_deref(), Some("/x/y/"));
        assert_eq!(rolled_up("/", "/x/y.md", 2), None);
        assert_eq!(rolled_up("/p/", "/p/q/r.md", 1).as_deref(), Some("/p/q/"));
        assert_eq!(rolled_up("/", "/x/y/z.md", 0), None);
    }
}
