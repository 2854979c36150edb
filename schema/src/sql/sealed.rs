//! Rows holding sealed secrets, paged in key order, and the per-row compare-and-swap
//! a key rotation writes with (`crate::rotation`).

use async_trait::async_trait;
use sqlx::Row;

use super::SqlStore;
use crate::error::StoreResult;
use crate::store::{SealedRow, SealedStore, SealedTable};

#[async_trait]
impl SealedStore for SqlStore {
    async fn sealed_page(
        &self,
        table: SealedTable,
        after: Option<(&str, &str)>,
        limit: i64,
    ) -> StoreResult<Vec<SealedRow>> {
        let (id, sub_id) = after.unwrap_or(("", ""));
        // `_sealed` in a LIKE also matches any character for `_`: a superset, filtered by
        // the caller, that spares reading sessions that cannot hold a sealed value.
        let sql = match table {
            SealedTable::VaultCredentials => {
                "SELECT id, '' AS sub_id, body AS text FROM resources \
                 WHERE kind = 'vault_credential' AND id > $1 AND $2 = $2 ORDER BY id LIMIT $3"
            }
            SealedTable::Sessions => {
                "SELECT id, '' AS sub_id, body AS text FROM sessions \
                 WHERE id > $1 AND $2 = $2 AND body LIKE '%\"_sealed\"%' ORDER BY id LIMIT $3"
            }
            SealedTable::A2aPushConfigs => {
                "SELECT task_id AS id, id AS sub_id, auth_credentials AS text FROM a2a_push_configs \
                 WHERE auth_credentials IS NOT NULL AND (task_id > $1 OR (task_id = $1 AND id > $2)) \
                 ORDER BY task_id, id LIMIT $3"
            }
            SealedTable::ProviderCredentials => {
                "SELECT id, '' AS sub_id, sealed AS text FROM provider_credentials \
                 WHERE id > $1 AND $2 = $2 ORDER BY id LIMIT $3"
            }
            SealedTable::WebhookSubscriptions => {
                "SELECT workspace_id AS id, id AS sub_id, secret AS text FROM webhook_subscriptions \
                 WHERE workspace_id > $1 OR (workspace_id = $1 AND id > $2) ORDER BY workspace_id, id LIMIT $3"
            }
        };
        let rows = sqlx::query(sql).bind(id).bind(sub_id).bind(limit).fetch_all(&self.primary).await?;
        rows.iter()
            .map(|row| {
                Ok(SealedRow {
                    table,
                    id: row.try_get("id")?,
                    sub_id: row.try_get("sub_id")?,
                    text: row.try_get("text")?,
                })
            })
            .collect()
    }

    async fn replace_sealed(&self, row: &SealedRow, replacement: &str) -> StoreResult<bool> {
        // Compare-and-swap on the stored text itself: a concurrent writer (a credential
        // update, a worker's token refresh, a resource token rotation) makes this match
        // nothing; bumping `version` / `resources_revision` makes that writer's own
        // compare-and-swap fail if it read the text we are replacing.
        let sql = match row.table {
            SealedTable::VaultCredentials => {
                "UPDATE resources SET body = $1, version = version + 1 \
                 WHERE id = $2 AND $3 = $3 AND kind = 'vault_credential' AND body = $4"
            }
            SealedTable::Sessions => {
                "UPDATE sessions SET body = $1, resources_revision = resources_revision + 1 \
                 WHERE id = $2 AND $3 = $3 AND body = $4"
            }
            SealedTable::A2aPushConfigs => {
                "UPDATE a2a_push_configs SET auth_credentials = $1 WHERE task_id = $2 AND id = $3 AND auth_credentials = $4"
            }
            SealedTable::ProviderCredentials => {
                "UPDATE provider_credentials SET sealed = $1 WHERE id = $2 AND $3 = $3 AND sealed = $4"
            }
            SealedTable::WebhookSubscriptions => {
                "UPDATE webhook_subscriptions SET secret = $1 WHERE workspace_id = $2 AND id = $3 AND secret = $4"
            }
        };
        let done = sqlx::query(sql)
            .bind(replacement)
            .bind(&row.id)
            .bind(&row.sub_id)
            .bind(&row.text)
            .execute(&self.primary)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
