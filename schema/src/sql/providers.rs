//! The configuration of model providers (migration 0024): providers and endpoints,
//! offerings and model attributes, sealed provider credentials, credential pools and
//! inference profiles, each write one transaction that bumps the workspace's
//! `config_revision` first (`queries/providers/bump_revision.sql`).

use async_trait::async_trait;
use serde_json::json;
use sqlx::FromRow;

use super::{JsonText, SqlStore, Tx};
use crate::catalog::Prices;
use crate::error::{StoreError, StoreResult};
use crate::store::{
    CredentialPoolRow, CredentialRef, EndpointRow, InferenceProfileRow, ModelAttributesRow, OfferingRow,
    ProviderConfig, ProviderCredentialRow, ProviderKind, ProviderRow, ProviderStore, Written,
};

const ENDPOINT_COLUMNS: &str = "workspace_id, provider_id, id, base_url, credential_id, credential_pool_id, priority, \
                                connect_timeout_ms, request_timeout_ms, created_at_ms, updated_at_ms";
const ATTRIBUTE_COLUMNS: &str =
    "workspace_id, model_id, display_name, max_input_tokens, max_tokens, prices, created_at_ms, updated_at_ms";
const CREDENTIAL_COLUMNS: &str = "id, workspace_id, name, sealed, created_at_ms, archived_at_ms";

#[derive(Debug, FromRow)]
struct Provider {
    workspace_id: String,
    id: String,
    kind: String,
    display_name: Option<String>,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl TryFrom<Provider> for ProviderRow {
    type Error = StoreError;

    fn try_from(row: Provider) -> StoreResult<Self> {
        let kind = ProviderKind::parse(&row.kind)
            .ok_or_else(|| StoreError::Backend(format!("provider {}: unknown kind {:?}", row.id, row.kind)))?;
        Ok(ProviderRow {
            id: row.id,
            workspace_id: row.workspace_id,
            kind,
            display_name: row.display_name,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        })
    }
}

#[derive(Debug, FromRow)]
struct Endpoint {
    workspace_id: String,
    provider_id: String,
    id: String,
    base_url: String,
    credential_id: Option<String>,
    credential_pool_id: Option<String>,
    priority: i64,
    connect_timeout_ms: Option<i64>,
    request_timeout_ms: Option<i64>,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl From<Endpoint> for EndpointRow {
    fn from(row: Endpoint) -> Self {
        let credential = match (row.credential_id, row.credential_pool_id) {
            (Some(id), _) => Some(CredentialRef::Credential(id)),
            (None, Some(pool)) => Some(CredentialRef::Pool(pool)),
            (None, None) => None,
        };
        EndpointRow {
            id: row.id,
            workspace_id: row.workspace_id,
            provider_id: row.provider_id,
            base_url: row.base_url,
            credential,
            priority: row.priority,
            connect_timeout_ms: row.connect_timeout_ms,
            request_timeout_ms: row.request_timeout_ms,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        }
    }
}

#[derive(Debug, FromRow)]
struct Offering {
    workspace_id: String,
    model_id: String,
    provider_id: String,
    provider_model: String,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl From<Offering> for OfferingRow {
    fn from(row: Offering) -> Self {
        OfferingRow {
            model_id: row.model_id,
            workspace_id: row.workspace_id,
            provider_id: row.provider_id,
            provider_model: row.provider_model,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        }
    }
}

#[derive(Debug, FromRow)]
struct Attributes {
    workspace_id: String,
    model_id: String,
    display_name: Option<String>,
    max_input_tokens: Option<i64>,
    max_tokens: Option<i64>,
    prices: Option<String>,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl TryFrom<Attributes> for ModelAttributesRow {
    type Error = StoreError;

    fn try_from(row: Attributes) -> StoreResult<Self> {
        let prices = row
            .prices
            .map(|text| serde_json::from_str::<Prices>(&text))
            .transpose()
            .map_err(|e| StoreError::Backend(format!("model {}: corrupt prices: {e}", row.model_id)))?;
        Ok(ModelAttributesRow {
            model_id: row.model_id,
            workspace_id: row.workspace_id,
            display_name: row.display_name,
            max_input_tokens: row.max_input_tokens,
            max_tokens: row.max_tokens,
            prices,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        })
    }
}

#[derive(Debug, FromRow)]
struct Credential {
    id: String,
    workspace_id: String,
    name: String,
    sealed: String,
    created_at_ms: i64,
    archived_at_ms: Option<i64>,
}

impl From<Credential> for ProviderCredentialRow {
    fn from(row: Credential) -> Self {
        ProviderCredentialRow {
            id: row.id,
            workspace_id: row.workspace_id,
            name: row.name,
            sealed: row.sealed,
            created_at_ms: row.created_at_ms,
            archived_at_ms: row.archived_at_ms,
        }
    }
}

/// A JSON array of strings, as stored.
fn strings(text: JsonText, what: &str) -> StoreResult<Vec<String>> {
    serde_json::from_value(text.0).map_err(|e| StoreError::Backend(format!("{what}: corrupt id list: {e}")))
}

#[derive(Debug, FromRow)]
struct Pool {
    workspace_id: String,
    id: String,
    #[sqlx(try_from = "String")]
    credential_ids: JsonText,
    cooldown_ms: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl TryFrom<Pool> for CredentialPoolRow {
    type Error = StoreError;

    fn try_from(row: Pool) -> StoreResult<Self> {
        Ok(CredentialPoolRow {
            credential_ids: strings(row.credential_ids, &row.id)?,
            id: row.id,
            workspace_id: row.workspace_id,
            cooldown_ms: row.cooldown_ms,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        })
    }
}

#[derive(Debug, FromRow)]
struct Profile {
    workspace_id: String,
    id: String,
    #[sqlx(try_from = "String")]
    candidates: JsonText,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl TryFrom<Profile> for InferenceProfileRow {
    type Error = StoreError;

    fn try_from(row: Profile) -> StoreResult<Self> {
        Ok(InferenceProfileRow {
            candidates: strings(row.candidates, &row.id)?,
            id: row.id,
            workspace_id: row.workspace_id,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        })
    }
}

/// Bumps the workspace's revision: the first statement of every write (the lock).
async fn bump(tx: &mut Tx, workspace_id: &str, now_ms: i64) -> StoreResult<i64> {
    let (revision,): (i64,) = sqlx::query_as(include_str!("../../queries/providers/bump_revision.sql"))
        .bind(workspace_id)
        .bind(now_ms)
        .fetch_one(&mut *tx)
        .await?;
    Ok(revision)
}

/// Whether a row of `table` has the key (inside the write's transaction).
async fn exists(tx: &mut Tx, table: &str, key: &str, workspace_id: &str, id: &str) -> StoreResult<bool> {
    let found: Option<(i64,)> =
        sqlx::query_as(&format!("SELECT created_at_ms FROM {table} WHERE workspace_id = $1 AND {key} = $2"))
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    Ok(found.is_some())
}

async fn endpoint_exists(tx: &mut Tx, row: &EndpointRow) -> StoreResult<bool> {
    let found: Option<(i64,)> = sqlx::query_as(
        "SELECT created_at_ms FROM provider_endpoints WHERE workspace_id = $1 AND provider_id = $2 AND id = $3",
    )
    .bind(&row.workspace_id)
    .bind(&row.provider_id)
    .bind(&row.id)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(found.is_some())
}

fn missing(what: &'static str, id: &str) -> StoreError {
    StoreError::NotFound { what, id: id.to_owned() }
}

impl SqlStore {
    async fn revision(&self, workspace_id: &str) -> StoreResult<i64> {
        let found: Option<(i64,)> =
            sqlx::query_as("SELECT revision FROM provider_config_revisions WHERE workspace_id = $1")
                .bind(workspace_id)
                .fetch_optional(&self.readers)
                .await?;
        Ok(found.map_or(0, |(revision,)| revision))
    }

    /// Every table of the workspace's configuration, without the revision.
    async fn config_rows(&self, workspace_id: &str) -> StoreResult<ProviderConfig> {
        let providers: Vec<Provider> = sqlx::query_as(
            "SELECT workspace_id, id, kind, display_name, created_at_ms, updated_at_ms FROM model_providers \
             WHERE workspace_id = $1 ORDER BY id",
        )
        .bind(workspace_id)
        .fetch_all(&self.readers)
        .await?;
        let endpoints: Vec<Endpoint> = sqlx::query_as(&format!(
            "SELECT {ENDPOINT_COLUMNS} FROM provider_endpoints WHERE workspace_id = $1 \
             ORDER BY provider_id, priority, id"
        ))
        .bind(workspace_id)
        .fetch_all(&self.readers)
        .await?;
        let offerings: Vec<Offering> = sqlx::query_as(
            "SELECT workspace_id, model_id, provider_id, provider_model, created_at_ms, updated_at_ms \
             FROM model_offerings WHERE workspace_id = $1 ORDER BY model_id",
        )
        .bind(workspace_id)
        .fetch_all(&self.readers)
        .await?;
        let attributes: Vec<Attributes> = sqlx::query_as(&format!(
            "SELECT {ATTRIBUTE_COLUMNS} FROM model_attributes WHERE workspace_id = $1 ORDER BY model_id"
        ))
        .bind(workspace_id)
        .fetch_all(&self.readers)
        .await?;
        let pools: Vec<Pool> = sqlx::query_as(
            "SELECT workspace_id, id, credential_ids, cooldown_ms, created_at_ms, updated_at_ms \
             FROM credential_pools WHERE workspace_id = $1 ORDER BY id",
        )
        .bind(workspace_id)
        .fetch_all(&self.readers)
        .await?;
        let profiles: Vec<Profile> = sqlx::query_as(
            "SELECT workspace_id, id, candidates, created_at_ms, updated_at_ms FROM inference_profiles \
             WHERE workspace_id = $1 ORDER BY id",
        )
        .bind(workspace_id)
        .fetch_all(&self.readers)
        .await?;
        Ok(ProviderConfig {
            workspace_id: workspace_id.to_owned(),
            revision: 0,
            providers: providers.into_iter().map(TryInto::try_into).collect::<StoreResult<_>>()?,
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            offerings: offerings.into_iter().map(Into::into).collect(),
            attributes: attributes.into_iter().map(TryInto::try_into).collect::<StoreResult<_>>()?,
            credentials: self.list_provider_credentials(workspace_id).await?,
            pools: pools.into_iter().map(TryInto::try_into).collect::<StoreResult<_>>()?,
            profiles: profiles.into_iter().map(TryInto::try_into).collect::<StoreResult<_>>()?,
        })
    }
}

#[async_trait]
impl ProviderStore for SqlStore {
    async fn config_revisions(&self) -> StoreResult<Vec<(String, i64)>> {
        Ok(sqlx::query_as("SELECT workspace_id, revision FROM provider_config_revisions")
            .fetch_all(&self.readers)
            .await?)
    }

    async fn provider_config(&self, workspace_id: &str) -> StoreResult<ProviderConfig> {
        // The tables are read outside a transaction (readers); a write that lands in
        // between moves the revision, and the read is repeated.
        let mut before = self.revision(workspace_id).await?;
        for _ in 0..5 {
            let mut config = self.config_rows(workspace_id).await?;
            let after = self.revision(workspace_id).await?;
            if after == before {
                config.revision = after;
                return Ok(config);
            }
            before = after;
        }
        Err(StoreError::Unavailable(format!(
            "workspace {workspace_id}: its provider configuration kept changing while it was read"
        )))
    }

    async fn put_provider(&self, row: ProviderRow) -> StoreResult<Written<ProviderRow>> {
        let now = row.updated_at_ms;
        let mut tx = self.primary.begin().await?;
        let revision = bump(&mut tx, &row.workspace_id, now).await?;
        let created = !exists(&mut tx, "model_providers", "id", &row.workspace_id, &row.id).await?;
        let stored: Provider = sqlx::query_as(include_str!("../../queries/providers/put_provider.sql"))
            .bind(&row.workspace_id)
            .bind(&row.id)
            .bind(row.kind.as_str())
            .bind(row.display_name.clone())
            .bind(now)
            .fetch_one(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Written { row: stored.try_into()?, created, revision })
    }

    async fn get_provider(&self, workspace_id: &str, id: &str) -> StoreResult<Option<ProviderRow>> {
        let row: Option<Provider> = sqlx::query_as(
            "SELECT workspace_id, id, kind, display_name, created_at_ms, updated_at_ms FROM model_providers \
             WHERE workspace_id = $1 AND id = $2",
        )
        .bind(workspace_id)
        .bind(id)
        .fetch_optional(&self.readers)
        .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn put_endpoint(&self, row: EndpointRow) -> StoreResult<Written<EndpointRow>> {
        let now = row.updated_at_ms;
        let ws = row.workspace_id.as_str();
        let mut tx = self.primary.begin().await?;
        let revision = bump(&mut tx, ws, now).await?;
        if !exists(&mut tx, "model_providers", "id", ws, &row.provider_id).await? {
            return Err(missing("provider", &row.provider_id));
        }
        let (credential, pool) = match &row.credential {
            Some(CredentialRef::Credential(id)) => {
                if !exists(&mut tx, "provider_credentials", "id", ws, id).await? {
                    return Err(missing("credential", id));
                }
                (Some(id.clone()), None)
            }
            Some(CredentialRef::Pool(id)) => {
                if !exists(&mut tx, "credential_pools", "id", ws, id).await? {
                    return Err(missing("credential pool", id));
                }
                (None, Some(id.clone()))
            }
            None => (None, None),
        };
        let created = !endpoint_exists(&mut tx, &row).await?;
        let sql = include_str!("../../queries/providers/put_endpoint.sql").replace("{columns}", ENDPOINT_COLUMNS);
        let stored: Endpoint = sqlx::query_as(&sql)
            .bind(ws)
            .bind(&row.provider_id)
            .bind(&row.id)
            .bind(&row.base_url)
            .bind(credential)
            .bind(pool)
            .bind(row.priority)
            .bind(row.connect_timeout_ms)
            .bind(row.request_timeout_ms)
            .bind(now)
            .fetch_one(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Written { row: stored.into(), created, revision })
    }

    async fn list_endpoints(&self, workspace_id: &str, provider_id: &str) -> StoreResult<Vec<EndpointRow>> {
        let rows: Vec<Endpoint> = sqlx::query_as(&format!(
            "SELECT {ENDPOINT_COLUMNS} FROM provider_endpoints WHERE workspace_id = $1 AND provider_id = $2 \
             ORDER BY priority, id"
        ))
        .bind(workspace_id)
        .bind(provider_id)
        .fetch_all(&self.readers)
        .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn put_offering(&self, row: OfferingRow) -> StoreResult<Written<OfferingRow>> {
        let now = row.updated_at_ms;
        let mut tx = self.primary.begin().await?;
        let revision = bump(&mut tx, &row.workspace_id, now).await?;
        if !exists(&mut tx, "model_providers", "id", &row.workspace_id, &row.provider_id).await? {
            return Err(missing("provider", &row.provider_id));
        }
        let created = !exists(&mut tx, "model_offerings", "model_id", &row.workspace_id, &row.model_id).await?;
        let stored: Offering = sqlx::query_as(include_str!("../../queries/providers/put_offering.sql"))
            .bind(&row.workspace_id)
            .bind(&row.model_id)
            .bind(&row.provider_id)
            .bind(&row.provider_model)
            .bind(now)
            .fetch_one(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Written { row: stored.into(), created, revision })
    }

    async fn put_model_attributes(&self, row: ModelAttributesRow) -> StoreResult<Written<ModelAttributesRow>> {
        let now = row.updated_at_ms;
        let prices = row.prices.map(|p| json!(p).to_string());
        let mut tx = self.primary.begin().await?;
        let revision = bump(&mut tx, &row.workspace_id, now).await?;
        let created = !exists(&mut tx, "model_attributes", "model_id", &row.workspace_id, &row.model_id).await?;
        let sql = include_str!("../../queries/providers/put_attributes.sql").replace("{columns}", ATTRIBUTE_COLUMNS);
        let stored: Attributes = sqlx::query_as(&sql)
            .bind(&row.workspace_id)
            .bind(&row.model_id)
            .bind(row.display_name.clone())
            .bind(row.max_input_tokens)
            .bind(row.max_tokens)
            .bind(prices)
            .bind(now)
            .fetch_one(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Written { row: stored.try_into()?, created, revision })
    }

    async fn insert_provider_credential(
        &self,
        row: ProviderCredentialRow,
    ) -> StoreResult<Written<ProviderCredentialRow>> {
        let mut tx = self.primary.begin().await?;
        let revision = bump(&mut tx, &row.workspace_id, row.created_at_ms).await?;
        let stored: Credential = sqlx::query_as(&format!(
            "INSERT INTO provider_credentials ({CREDENTIAL_COLUMNS}) VALUES ($1, $2, $3, $4, $5, NULL) \
             RETURNING {CREDENTIAL_COLUMNS}"
        ))
        .bind(&row.id)
        .bind(&row.workspace_id)
        .bind(&row.name)
        .bind(&row.sealed)
        .bind(row.created_at_ms)
        .fetch_one(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(Written { row: stored.into(), created: true, revision })
    }

    async fn get_provider_credential(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<ProviderCredentialRow>> {
        let row: Option<Credential> = sqlx::query_as(&format!(
            "SELECT {CREDENTIAL_COLUMNS} FROM provider_credentials WHERE workspace_id = $1 AND id = $2"
        ))
        .bind(workspace_id)
        .bind(id)
        .fetch_optional(&self.readers)
        .await?;
        Ok(row.map(Into::into))
    }

    async fn list_provider_credentials(&self, workspace_id: &str) -> StoreResult<Vec<ProviderCredentialRow>> {
        let rows: Vec<Credential> = sqlx::query_as(&format!(
            "SELECT {CREDENTIAL_COLUMNS} FROM provider_credentials WHERE workspace_id = $1 ORDER BY id"
        ))
        .bind(workspace_id)
        .fetch_all(&self.readers)
        .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn archive_provider_credential(
        &self,
        workspace_id: &str,
        id: &str,
        now_ms: i64,
    ) -> StoreResult<Written<ProviderCredentialRow>> {
        let mut tx = self.primary.begin().await?;
        let revision = bump(&mut tx, workspace_id, now_ms).await?;
        let stored: Option<Credential> = sqlx::query_as(include_str!("../../queries/providers/archive_credential.sql"))
            .bind(workspace_id)
            .bind(id)
            .bind(now_ms)
            .fetch_optional(&mut tx)
            .await?;
        let Some(stored) = stored else { return Err(missing("credential", id)) };
        tx.commit().await?;
        Ok(Written { row: stored.into(), created: false, revision })
    }

    async fn put_credential_pool(&self, row: CredentialPoolRow) -> StoreResult<Written<CredentialPoolRow>> {
        let now = row.updated_at_ms;
        let mut tx = self.primary.begin().await?;
        let revision = bump(&mut tx, &row.workspace_id, now).await?;
        for id in &row.credential_ids {
            if !exists(&mut tx, "provider_credentials", "id", &row.workspace_id, id).await? {
                return Err(missing("credential", id));
            }
        }
        let created = !exists(&mut tx, "credential_pools", "id", &row.workspace_id, &row.id).await?;
        let stored: Pool = sqlx::query_as(include_str!("../../queries/providers/put_pool.sql"))
            .bind(&row.workspace_id)
            .bind(&row.id)
            .bind(json!(row.credential_ids).to_string())
            .bind(row.cooldown_ms)
            .bind(now)
            .fetch_one(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Written { row: stored.try_into()?, created, revision })
    }

    async fn get_credential_pool(&self, workspace_id: &str, id: &str) -> StoreResult<Option<CredentialPoolRow>> {
        let row: Option<Pool> = sqlx::query_as(
            "SELECT workspace_id, id, credential_ids, cooldown_ms, created_at_ms, updated_at_ms \
             FROM credential_pools WHERE workspace_id = $1 AND id = $2",
        )
        .bind(workspace_id)
        .bind(id)
        .fetch_optional(&self.readers)
        .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn put_inference_profile(&self, row: InferenceProfileRow) -> StoreResult<Written<InferenceProfileRow>> {
        let now = row.updated_at_ms;
        let mut tx = self.primary.begin().await?;
        let revision = bump(&mut tx, &row.workspace_id, now).await?;
        let created = !exists(&mut tx, "inference_profiles", "id", &row.workspace_id, &row.id).await?;
        let stored: Profile = sqlx::query_as(include_str!("../../queries/providers/put_profile.sql"))
            .bind(&row.workspace_id)
            .bind(&row.id)
            .bind(json!(row.candidates).to_string())
            .bind(now)
            .fetch_one(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Written { row: stored.try_into()?, created, revision })
    }

    async fn get_inference_profile(&self, workspace_id: &str, id: &str) -> StoreResult<Option<InferenceProfileRow>> {
        let row: Option<Profile> = sqlx::query_as(
            "SELECT workspace_id, id, candidates, created_at_ms, updated_at_ms FROM inference_profiles \
             WHERE workspace_id = $1 AND id = $2",
        )
        .bind(workspace_id)
        .bind(id)
        .fetch_optional(&self.readers)
        .await?;
        row.map(TryInto::try_into).transpose()
    }
}
