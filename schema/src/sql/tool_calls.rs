//! The tool-call ledger (table `tool_calls`, migration 0013): one row per tool use,
//! filled in by the answers that name it, written by the transaction that appends the
//! events (the sessions area's append calls [`record`]), so it is never behind the
//! committed history.

use async_trait::async_trait;
use sqlx::FromRow;

use super::{SqlStore, Tx};
use crate::error::StoreResult;
use crate::store::{Confirmation, StoredEvent, ToolCall, ToolCallStore, ToolUseKind};

/// Ids per lookup statement, well below either dialect's bound-parameter limit.
const IDS_PER_STATEMENT: usize = 1000;

/// A `tool_calls` row as stored.
#[derive(Debug, FromRow)]
struct ToolCallRow {
    session_id: String,
    thread_id: String,
    tool_use_id: String,
    #[sqlx(try_from = "String")]
    use_kind: ToolUseKind,
    name: String,
    evaluated_permission: Option<String>,
    use_seq: i64,
    confirmation: Option<String>,
    confirmation_event_id: Option<String>,
    confirmation_seq: Option<i64>,
    result_event_id: Option<String>,
    result_kind: Option<String>,
    result_seq: Option<i64>,
}

impl TryFrom<ToolCallRow> for ToolCall {
    type Error = crate::error::StoreError;

    fn try_from(row: ToolCallRow) -> StoreResult<ToolCall> {
        Ok(ToolCall {
            session_id: row.session_id,
            thread_id: row.thread_id,
            tool_use_id: row.tool_use_id,
            use_kind: row.use_kind,
            name: row.name,
            evaluated_permission: row.evaluated_permission,
            use_seq: row.use_seq,
            confirmation: row.confirmation.map(Confirmation::try_from).transpose()?,
            confirmation_event_id: row.confirmation_event_id,
            confirmation_seq: row.confirmation_seq,
            result_event_id: row.result_event_id,
            result_kind: row.result_kind,
            result_seq: row.result_seq,
        })
    }
}

/// What an event does to the ledger.
enum Entry<'a> {
    /// A tool use: a new row.
    Use(ToolUseKind),
    /// A confirmation of the named use.
    Confirmation(&'a str, Confirmation),
    /// A result of the named use.
    Result(&'a str),
}

/// The ledger entry of a committed event, if it is one. The field naming the use
/// differs by answer type; an answer without it names nothing.
fn entry(event: &StoredEvent) -> Option<Entry<'_>> {
    let field = |name: &str| event.body[name].as_str();
    match event.kind.as_str() {
        "user.tool_confirmation" => {
            field("tool_use_id").map(|id| Entry::Confirmation(id, Confirmation::of_result(field("result"))))
        }
        "user.tool_result" | "agent.tool_result" => field("tool_use_id").map(Entry::Result),
        "agent.mcp_tool_result" => field("mcp_tool_use_id").or_else(|| field("tool_use_id")).map(Entry::Result),
        "user.custom_tool_result" => field("custom_tool_use_id").map(Entry::Result),
        kind => ToolUseKind::of_event_type(kind).map(Entry::Use),
    }
}

/// Updates the ledger for events just appended to `session_id`, inside the appending
/// transaction: every use of the batch in one INSERT, then each answer in batch order
/// (an answer may name a use committed in the same batch).
pub(super) async fn record(tx: &mut Tx, session_id: &str, events: &[StoredEvent]) -> StoreResult<()> {
    let entries: Vec<(&StoredEvent, Entry<'_>)> =
        events.iter().filter_map(|event| entry(event).map(|entry| (event, entry))).collect();
    let uses: Vec<(&StoredEvent, ToolUseKind)> = entries
        .iter()
        .filter_map(|(event, entry)| match entry {
            Entry::Use(kind) => Some((*event, *kind)),
            _ => None,
        })
        .collect();
    if !uses.is_empty() {
        let mut sql = String::from(include_str!("../../queries/tool_calls/insert_uses.sql"));
        for i in 0..uses.len() {
            let n = 2 + 6 * i;
            let separator = if i == 0 { "" } else { ", " };
            sql.push_str(&format!("{separator}($1, ${n}, ${}, ${}, ${}, ${}, ${})", n + 1, n + 2, n + 3, n + 4, n + 5));
        }
        let mut statement = sqlx::query(&sql).bind(session_id);
        for (event, kind) in &uses {
            statement = statement
                .bind(&event.event_id)
                .bind(&event.thread_id)
                .bind(kind.event_type())
                .bind(event.body["name"].as_str().unwrap_or_default())
                .bind(event.body["evaluated_permission"].as_str())
                .bind(event.seq);
        }
        statement.execute(&mut *tx).await?;
    }
    for (event, entry) in &entries {
        match entry {
            Entry::Use(_) => {}
            Entry::Confirmation(use_id, confirmation) => {
                sqlx::query(include_str!("../../queries/tool_calls/confirm.sql"))
                    .bind(session_id)
                    .bind(*use_id)
                    .bind(confirmation.as_str())
                    .bind(&event.event_id)
                    .bind(event.seq)
                    .execute(&mut *tx)
                    .await?;
            }
            Entry::Result(use_id) => {
                sqlx::query(include_str!("../../queries/tool_calls/answer.sql"))
                    .bind(session_id)
                    .bind(*use_id)
                    .bind(&event.event_id)
                    .bind(&event.kind)
                    .bind(event.seq)
                    .execute(&mut *tx)
                    .await?;
            }
        }
    }
    Ok(())
}

#[async_trait]
impl ToolCallStore for SqlStore {
    async fn open_tool_calls(&self, session_id: &str) -> StoreResult<Vec<ToolCall>> {
        let rows: Vec<ToolCallRow> = sqlx::query_as(include_str!("../../queries/tool_calls/open.sql"))
            .bind(session_id)
            .fetch_all(&self.readers)
            .await?;
        rows.into_iter().map(ToolCall::try_from).collect()
    }

    async fn tool_calls(&self, session_id: &str, ids: &[String]) -> StoreResult<Vec<ToolCall>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut rows = Vec::new();
        for chunk in ids.chunks(IDS_PER_STATEMENT) {
            let placeholders: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 2)).collect();
            let sql = include_str!("../../queries/tool_calls/by_ids.sql").replace("{ids}", &placeholders.join(", "));
            let mut statement = sqlx::query_as::<_, ToolCallRow>(&sql).bind(session_id);
            for id in chunk {
                statement = statement.bind(id);
            }
            rows.extend(statement.fetch_all(&self.readers).await?);
        }
        rows.sort_by_key(|row| row.use_seq);
        rows.into_iter().map(ToolCall::try_from).collect()
    }
}
