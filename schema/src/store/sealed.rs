//! Rows holding secrets sealed with the process's key, for `agentd keys rotate-secret`.

use async_trait::async_trait;

use crate::error::StoreResult;

/// Where secrets sealed with the process's key live at rest (`agentd keys rotate-secret`
/// re-seals each under a new key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealedTable {
    /// `resources` of kind `vault_credential`: the body's `_sealed`, for the credential id.
    VaultCredentials,
    /// `sessions`: each `body.resources[]._sealed`, for that resource's id.
    Sessions,
    /// `a2a_push_configs.auth_credentials`, for `a2a-push:{task_id}:{id}`.
    A2aPushConfigs,
    /// `provider_credentials.sealed`, for the credential id (`/v1/config/credentials`).
    ProviderCredentials,
    /// `webhook_subscriptions.secret` (workspace id, subscription id), for
    /// `webhook:{workspace_id}:{id}`.
    WebhookSubscriptions,
}

impl SealedTable {
    /// Every table, in the order a rotation visits them.
    pub const ALL: [SealedTable; 5] = [
        SealedTable::VaultCredentials,
        SealedTable::Sessions,
        SealedTable::A2aPushConfigs,
        SealedTable::ProviderCredentials,
        SealedTable::WebhookSubscriptions,
    ];

    /// A name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SealedTable::VaultCredentials => "vault_credentials",
            SealedTable::Sessions => "sessions",
            SealedTable::A2aPushConfigs => "a2a_push_configs",
            SealedTable::ProviderCredentials => "provider_credentials",
            SealedTable::WebhookSubscriptions => "webhook_subscriptions",
        }
    }
}

/// One row that may hold sealed secrets, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedRow {
    /// Its table.
    pub table: SealedTable,
    /// The row id (the task id of an A2A push config, the workspace of a webhook
    /// subscription).
    pub id: String,
    /// The second key column (the push config id, the subscription id), empty elsewhere.
    pub sub_id: String,
    /// The stored text holding the sealed values: the JSON body, or the sealed column.
    pub text: String,
}

/// Sealed secrets at rest, read in key order and rewritten one row at a time by
/// compare-and-swap, so a rotation can run while the service serves traffic.
#[async_trait]
pub trait SealedStore: Send + Sync {
    /// Rows of `table` that may hold sealed secrets, in key order strictly after `after`
    /// (a previous row's `(id, sub_id)`), at most `limit`. A read; no lock is held.
    async fn sealed_page(
        &self,
        table: SealedTable,
        after: Option<(&str, &str)>,
        limit: i64,
    ) -> StoreResult<Vec<SealedRow>>;

    /// Compare-and-swap of one row's sealed text: writes `replacement` only while the
    /// stored text is still exactly `row.text`, and bumps the row's version (resources)
    /// or resources revision (sessions) so a writer that read the old text fails its own
    /// compare-and-swap instead of writing it back. `false`: the row changed or is gone,
    /// nothing was written. One statement, durable when it returns.
    async fn replace_sealed(&self, row: &SealedRow, replacement: &str) -> StoreResult<bool>;
}
