//! File metadata (`files`): one row per file, its bytes a blob named by `blob_key`.

use async_trait::async_trait;
use sqlx::FromRow;

use super::{Flag, SqlStore};
use crate::error::{StoreError, StoreResult};
use crate::store::{FileQuery, FileRow, FileState, FileStore, NewFile};

const COLUMNS: &str = "id, workspace_id, filename, mime_type, size_bytes, downloadable, scope_type, scope_id, \
                       blob_key, state, created_at_ms, expires_at_ms, changed_at_ms";

/// A `files` row as stored.
#[derive(Debug, FromRow)]
struct Row {
    id: String,
    workspace_id: String,
    filename: String,
    mime_type: String,
    size_bytes: i64,
    #[sqlx(try_from = "i64")]
    downloadable: Flag,
    scope_type: Option<String>,
    scope_id: Option<String>,
    blob_key: String,
    state: String,
    created_at_ms: i64,
    expires_at_ms: Option<i64>,
    changed_at_ms: i64,
}

impl TryFrom<Row> for FileRow {
    type Error = StoreError;

    fn try_from(row: Row) -> StoreResult<Self> {
        let state = FileState::parse(&row.state)
            .ok_or_else(|| StoreError::Backend(format!("file {}: unknown state {:?}", row.id, row.state)))?;
        Ok(FileRow {
            id: row.id,
            workspace_id: row.workspace_id,
            filename: row.filename,
            mime_type: row.mime_type,
            size_bytes: row.size_bytes,
            downloadable: row.downloadable.0,
            scope: row.scope_type.zip(row.scope_id),
            blob_key: row.blob_key,
            state,
            created_at_ms: row.created_at_ms,
            expires_at_ms: row.expires_at_ms,
            changed_at_ms: row.changed_at_ms,
        })
    }
}

fn rows(rows: Vec<Row>) -> StoreResult<Vec<FileRow>> {
    rows.into_iter().map(FileRow::try_from).collect()
}

#[async_trait]
impl FileStore for SqlStore {
    async fn insert_file(&self, new: NewFile) -> StoreResult<FileRow> {
        let (scope_type, scope_id) = new.scope.unzip();
        let row: Row = sqlx::query_as(include_str!("../../queries/files/insert_file.sql"))
            .bind(new.id)
            .bind(new.workspace_id)
            .bind(new.filename)
            .bind(new.mime_type)
            .bind(i64::from(new.downloadable))
            .bind(scope_type)
            .bind(scope_id)
            .bind(new.blob_key)
            .bind(self.now())
            .bind(new.expires_at_ms)
            .fetch_one(&self.primary)
            .await?;
        row.try_into()
    }

    async fn finish_file(&self, id: &str, size_bytes: i64) -> StoreResult<Option<FileRow>> {
        let row: Option<Row> = sqlx::query_as(include_str!("../../queries/files/finish_file.sql"))
            .bind(id)
            .bind(size_bytes)
            .bind(self.now())
            .fetch_optional(&self.primary)
            .await?;
        row.map(FileRow::try_from).transpose()
    }

    async fn get_file(&self, workspace_id: &str, id: &str) -> StoreResult<Option<FileRow>> {
        let row: Option<Row> = sqlx::query_as(include_str!("../../queries/files/select_file.sql"))
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(&self.readers)
            .await?;
        row.map(FileRow::try_from).transpose()
    }

    async fn scoped_files(&self, workspace_id: &str, scope_id: &str, limit: i64) -> StoreResult<Vec<FileRow>> {
        let sql = format!("SELECT {COLUMNS} FROM files WHERE workspace_id = $1 AND scope_id = $2 ORDER BY id LIMIT $3");
        let rows: Vec<Row> =
            sqlx::query_as(&sql).bind(workspace_id).bind(scope_id).bind(limit.max(1)).fetch_all(&self.primary).await?;
        rows.into_iter().map(FileRow::try_from).collect()
    }

    async fn list_files(&self, workspace_id: &str, query: &FileQuery) -> StoreResult<Vec<FileRow>> {
        // $1 workspace, $2 now, $3 limit, then the optional filters in order.
        let mut sql = format!(
            "SELECT {COLUMNS} FROM files WHERE workspace_id = $1 AND state = 'ready' \
             AND (expires_at_ms IS NULL OR expires_at_ms > $2)"
        );
        let mut next = 4;
        if query.scope_id.is_some() {
            sql.push_str(&format!(" AND scope_id = ${next}"));
            next += 1;
        }
        if query.before_id.is_some() {
            sql.push_str(&format!(" AND id < ${next}"));
            next += 1;
        }
        if !query.ids.is_empty() {
            let marks: Vec<String> = (next..next + query.ids.len()).map(|n| format!("${n}")).collect();
            sql.push_str(&format!(" AND id IN ({})", marks.join(", ")));
        }
        sql.push_str(" ORDER BY id DESC LIMIT $3");
        let mut statement = sqlx::query_as::<_, Row>(&sql).bind(workspace_id).bind(self.now()).bind(query.limit);
        if let Some(scope_id) = &query.scope_id {
            statement = statement.bind(scope_id);
        }
        if let Some(before) = &query.before_id {
            statement = statement.bind(before);
        }
        for id in &query.ids {
            statement = statement.bind(id);
        }
        rows(statement.fetch_all(&self.readers).await?)
    }

    async fn set_file_state(&self, id: &str, from: FileState, to: FileState) -> StoreResult<bool> {
        let done = sqlx::query(include_str!("../../queries/files/set_state.sql"))
            .bind(id)
            .bind(from.as_str())
            .bind(to.as_str())
            .bind(self.now())
            .execute(&self.primary)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn files_to_sweep(&self, now_ms: i64, stale_before_ms: i64, limit: i64) -> StoreResult<Vec<FileRow>> {
        rows(
            sqlx::query_as(include_str!("../../queries/files/to_sweep.sql"))
                .bind(now_ms)
                .bind(stale_before_ms)
                .bind(limit)
                .fetch_all(&self.readers)
                .await?,
        )
    }

    async fn remove_file(&self, id: &str, from: FileState) -> StoreResult<bool> {
        let done = sqlx::query(include_str!("../../queries/files/remove_file.sql"))
            .bind(id)
            .bind(from.as_str())
            .execute(&self.primary)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
