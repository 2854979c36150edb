//! Model providers, the model catalog's configuration, provider credentials, credential
//! pools and inference profiles (`/v1/config/*`, docs/api/config.md). Everything is
//! scoped to a workspace.
//!
//! Every write is one transaction that first bumps the workspace's `config_revision`
//! (which also serializes the workspace's configuration writers: the bumped row stays
//! locked until commit), then checks what the change refers to, then writes. A process
//! keeps its effective catalogs current by polling [`ProviderStore::config_revisions`]
//! and re-reading [`ProviderStore::provider_config`] of the workspaces whose revision
//! moved (`crate::catalogs`).

use async_trait::async_trait;

use crate::catalog::Prices;
pub use crate::catalog::ProviderKind;
use crate::error::StoreResult;

/// A model provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRow {
    /// The caller's id (path id of `PUT /v1/config/providers/{id}`).
    pub id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// Its protocol.
    pub kind: ProviderKind,
    /// A label for people.
    pub display_name: Option<String>,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
}

/// What an endpoint authenticates with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CredentialRef {
    /// One credential (`pcrd_…`).
    Credential(String),
    /// The first available credential of a pool.
    Pool(String),
}

/// Where a provider is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRow {
    /// The caller's id, unique within the provider.
    pub id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// Its provider.
    pub provider_id: String,
    /// E.g. `https://api.anthropic.com` or `https://api.openai.com/v1`.
    pub base_url: String,
    /// Its credential, if the endpoint takes one.
    pub credential: Option<CredentialRef>,
    /// The lowest serves (ties by id).
    pub priority: i64,
    /// Connection timeout, ms (`None`: the default).
    pub connect_timeout_ms: Option<i64>,
    /// Whole-request timeout, ms (`None`: none).
    pub request_timeout_ms: Option<i64>,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
}

/// A model id served by a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferingRow {
    /// The model id clients name.
    pub model_id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// The provider that serves it.
    pub provider_id: String,
    /// The model's name at the provider.
    pub provider_model: String,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
}

/// How a model is described and priced; `None` keeps the bootstrap catalog's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelAttributesRow {
    /// The model id.
    pub model_id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// Human-readable name.
    pub display_name: Option<String>,
    /// Context window.
    pub max_input_tokens: Option<i64>,
    /// Maximum `max_tokens`.
    pub max_tokens: Option<i64>,
    /// List prices (micro-USD per million tokens).
    pub prices: Option<Prices>,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
}

/// A provider credential as stored: its secret only sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderCredentialRow {
    /// `pcrd_…`
    pub id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// A label.
    pub name: String,
    /// The secret sealed for owner `id` (`SecretBox::seal`), `{"api_key": …}`.
    pub sealed: String,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Set once archived; an archived credential authenticates nothing.
    pub archived_at_ms: Option<i64>,
}

/// Credentials tried in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialPoolRow {
    /// The caller's id.
    pub id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// Credential ids, in order.
    pub credential_ids: Vec<String>,
    /// How long a credential the provider refused (401, 403, 429) is passed over, ms.
    pub cooldown_ms: i64,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
}

/// Candidate models, tried in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InferenceProfileRow {
    /// The caller's id.
    pub id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// Model ids, in order.
    pub candidates: Vec<String>,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
}

/// A workspace's whole configuration, read at one revision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderConfig {
    /// The workspace.
    pub workspace_id: String,
    /// Its `config_revision` (0: never configured).
    pub revision: i64,
    /// Providers by id.
    pub providers: Vec<ProviderRow>,
    /// Endpoints by (provider, id).
    pub endpoints: Vec<EndpointRow>,
    /// Offerings by model id.
    pub offerings: Vec<OfferingRow>,
    /// Model attributes by model id.
    pub attributes: Vec<ModelAttributesRow>,
    /// Credentials by id, archived ones included.
    pub credentials: Vec<ProviderCredentialRow>,
    /// Pools by id.
    pub pools: Vec<CredentialPoolRow>,
    /// Inference profiles by id.
    pub profiles: Vec<InferenceProfileRow>,
}

/// What a configuration write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written<T> {
    /// The row as stored.
    pub row: T,
    /// Whether the row is new (else it replaced one).
    pub created: bool,
    /// The workspace's `config_revision` after the change.
    pub revision: i64,
}

/// The configuration of model providers. Writes are one transaction each (the revision
/// bump, the reference checks, the row), durable when they return; a write that refers
/// to something missing in the workspace returns `NotFound` naming it and changes
/// nothing. `PUT`-style writes replace the row whole (its creation time kept).
#[async_trait]
pub trait ProviderStore: Send + Sync {
    /// Every configured workspace's revision: the cheap poll (one statement).
    async fn config_revisions(&self) -> StoreResult<Vec<(String, i64)>>;

    /// A workspace's whole configuration, consistent at one revision (re-read while a
    /// write lands in between).
    async fn provider_config(&self, workspace_id: &str) -> StoreResult<ProviderConfig>;

    /// Creates or replaces a provider.
    async fn put_provider(&self, row: ProviderRow) -> StoreResult<Written<ProviderRow>>;

    /// A provider of the workspace.
    async fn get_provider(&self, workspace_id: &str, id: &str) -> StoreResult<Option<ProviderRow>>;

    /// Creates or replaces an endpoint; its provider and credential (or pool) must exist.
    async fn put_endpoint(&self, row: EndpointRow) -> StoreResult<Written<EndpointRow>>;

    /// A provider's endpoints, by (priority, id).
    async fn list_endpoints(&self, workspace_id: &str, provider_id: &str) -> StoreResult<Vec<EndpointRow>>;

    /// Creates or replaces the offering of a model id; its provider must exist.
    async fn put_offering(&self, row: OfferingRow) -> StoreResult<Written<OfferingRow>>;

    /// Creates or replaces a model's attributes.
    async fn put_model_attributes(&self, row: ModelAttributesRow) -> StoreResult<Written<ModelAttributesRow>>;

    /// Stores a new credential (its secret already sealed).
    async fn insert_provider_credential(
        &self,
        row: ProviderCredentialRow,
    ) -> StoreResult<Written<ProviderCredentialRow>>;

    /// A credential of the workspace (archived ones too).
    async fn get_provider_credential(&self, workspace_id: &str, id: &str)
    -> StoreResult<Option<ProviderCredentialRow>>;

    /// The workspace's credentials by id, archived ones too.
    async fn list_provider_credentials(&self, workspace_id: &str) -> StoreResult<Vec<ProviderCredentialRow>>;

    /// Archives a credential (idempotent: an archived one keeps its time).
    async fn archive_provider_credential(
        &self,
        workspace_id: &str,
        id: &str,
        now_ms: i64,
    ) -> StoreResult<Written<ProviderCredentialRow>>;

    /// Creates or replaces a pool; every credential it lists must exist.
    async fn put_credential_pool(&self, row: CredentialPoolRow) -> StoreResult<Written<CredentialPoolRow>>;

    /// A pool of the workspace.
    async fn get_credential_pool(&self, workspace_id: &str, id: &str) -> StoreResult<Option<CredentialPoolRow>>;

    /// Creates or replaces an inference profile.
    async fn put_inference_profile(&self, row: InferenceProfileRow) -> StoreResult<Written<InferenceProfileRow>>;

    /// An inference profile of the workspace.
    async fn get_inference_profile(&self, workspace_id: &str, id: &str) -> StoreResult<Option<InferenceProfileRow>>;
}
