//! The effective model catalog of each workspace: the process's bootstrap catalog
//! (built in, `AGENTD_MODEL_CATALOG`, the provider environment variables) overlaid with
//! the workspace's stored configuration (`/v1/config/*`, docs/api/config.md).
//!
//! Every process (gateway, worker, `agentd dev`) holds one [`Catalogs`]: the effective
//! catalog of every configured workspace, each tagged with the `config_revision` it
//! reflects. A workspace without configuration reads the bootstrap catalog, so nothing
//! changes until something is configured. A workspace whose configuration exists but
//! could not be read is [`Unloaded`] until a reload succeeds: never the bootstrap catalog,
//! which would send its models to the operator's providers with the operator's keys.
//! A process awaits one [`Catalogs::refresh`] before it serves or consumes, so no
//! request meets a configured workspace that was simply not read yet. [`Catalogs::spawn`] keeps it current: a
//! gateway that commits a change announces the workspace on the bus ([`CHANNEL`]) and
//! every process re-reads it at once; a poll of the revisions (one statement a second)
//! is the safety net for a lost announcement. Reading a catalog is a map lookup: the
//! turn path issues no statement for it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use agentd_proto::Bus;
use bytes::Bytes;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Catalog, Model, ProviderKind, Route, RouteEndpoint, SealedCredential};
use crate::error::StoreResult;
use crate::store::{CredentialRef, ProviderConfig, ProviderStore};

/// The bus channel on which a committed configuration change names its workspace.
pub const CHANNEL: &str = "config.providers";

/// How often the revisions are polled (the safety net behind the bus).
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Defaults of a model that only a workspace's configuration names.
const DEFAULT_MAX_INPUT_TOKENS: u64 = 128_000;
const DEFAULT_MAX_TOKENS: u64 = 8_192;

/// A workspace has stored configuration that this process could not read: its models
/// are served by nobody until a reload succeeds (the poll retries every second).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the model configuration of workspace {workspace_id} is not loaded yet; try again")]
pub struct Unloaded {
    /// The workspace.
    pub workspace_id: String,
}

/// The effective catalogs of this process.
#[derive(Debug)]
pub struct Catalogs {
    bootstrap: Arc<Catalog>,
    configured: RwLock<HashMap<String, Arc<Catalog>>>,
    /// Workspaces with stored configuration and nothing installed (their read failed).
    unloaded: RwLock<std::collections::HashSet<String>>,
}

impl Catalogs {
    /// Catalogs over `bootstrap` with nothing configured yet.
    pub fn new(bootstrap: Catalog) -> Self {
        Self { bootstrap: Arc::new(bootstrap), configured: RwLock::new(HashMap::new()), unloaded: RwLock::default() }
    }

    /// The effective catalog of a workspace: the bootstrap one when it has no
    /// configuration, [`Unloaded`] when it has some this process could not read.
    pub fn of(&self, workspace_id: &str) -> Result<Arc<Catalog>, Unloaded> {
        let configured = self.configured.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(catalog) = configured.get(workspace_id) {
            return Ok(catalog.clone());
        }
        if self.unloaded.read().unwrap_or_else(|poisoned| poisoned.into_inner()).contains(workspace_id) {
            return Err(Unloaded { workspace_id: workspace_id.to_owned() });
        }
        Ok(self.bootstrap.clone())
    }

    /// The revision installed for a workspace (0: none).
    fn installed(&self, workspace_id: &str) -> i64 {
        let configured = self.configured.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        configured.get(workspace_id).map_or(0, |catalog| catalog.revision())
    }

    /// Records that a read of `workspace_id`'s configuration failed: with nothing
    /// installed, the workspace is [`Unloaded`] (an older installed revision stays).
    fn failed(&self, workspace_id: &str) {
        if self.installed(workspace_id) == 0 {
            let mut unloaded = self.unloaded.write().unwrap_or_else(|poisoned| poisoned.into_inner());
            unloaded.insert(workspace_id.to_owned());
        }
    }

    /// The process's bootstrap catalog.
    pub fn bootstrap(&self) -> Arc<Catalog> {
        self.bootstrap.clone()
    }

    /// Installs `catalog` for `workspace_id` unless a newer revision is installed already.
    fn install(&self, workspace_id: &str, catalog: Catalog) -> Arc<Catalog> {
        let mut configured = self.configured.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        match configured.get(workspace_id) {
            Some(current) if current.revision() >= catalog.revision() => current.clone(),
            _ => {
                let catalog = Arc::new(catalog);
                configured.insert(workspace_id.to_owned(), catalog.clone());
                self.unloaded.write().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(workspace_id);
                catalog
            }
        }
    }

    /// Re-reads a workspace's configuration and installs its effective catalog. A read
    /// that fails leaves a workspace without an installed catalog [`Unloaded`].
    pub async fn reload<S: ProviderStore + ?Sized>(&self, store: &S, workspace_id: &str) -> StoreResult<Arc<Catalog>> {
        let config = match store.provider_config(workspace_id).await {
            Ok(config) => config,
            Err(error) => {
                self.failed(workspace_id);
                return Err(error);
            }
        };
        if config.revision == 0 {
            self.unloaded.write().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(workspace_id);
            return Ok(self.bootstrap.clone());
        }
        Ok(self.install(workspace_id, effective(&self.bootstrap, &config)))
    }

    /// One poll: re-reads every workspace whose revision is ahead of this process's. A
    /// workspace that cannot be read does not hold the others back: it is logged and,
    /// with nothing installed, [`Unloaded`] until a later poll reads it. The error is the
    /// revisions' read: then this process knows nothing new.
    pub async fn refresh<S: ProviderStore + ?Sized>(&self, store: &S) -> StoreResult<()> {
        for (workspace_id, revision) in store.config_revisions().await? {
            if self.installed(&workspace_id) < revision
                && let Err(error) = self.reload(store, &workspace_id).await
            {
                tracing::warn!(%error, workspace_id, "cannot read a workspace's provider configuration");
            }
        }
        Ok(())
    }

    /// Keeps the catalogs current until `stop`: a reload for every workspace announced
    /// on the bus, and a poll every [`POLL_INTERVAL`].
    pub fn spawn(
        self: Arc<Self>,
        store: Arc<dyn ProviderStore>,
        bus: Option<Arc<dyn Bus>>,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut announcements = None;
            let mut ticker = tokio::time::interval(POLL_INTERVAL);
            loop {
                if announcements.is_none()
                    && let Some(bus) = &bus
                {
                    announcements = bus
                        .subscribe(CHANNEL)
                        .await
                        .inspect_err(|error| tracing::warn!(%error, "cannot follow configuration changes on the bus"))
                        .ok();
                }
                let announced = async {
                    match announcements.as_mut() {
                        Some(stream) => stream.next().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = ticker.tick() => {
                        if let Err(error) = self.refresh(store.as_ref()).await {
                            tracing::warn!(%error, "cannot poll the provider configuration");
                        }
                    }
                    item = announced => match item {
                        Some(agentd_proto::BusItem::Message(payload)) => {
                            let workspace_id = String::from_utf8_lossy(&payload).into_owned();
                            if let Err(error) = self.reload(store.as_ref(), &workspace_id).await {
                                tracing::warn!(%error, workspace_id, "cannot reload the provider configuration");
                            }
                        }
                        // Lost announcements: the poll catches up.
                        Some(_) => {}
                        None => announcements = None,
                    },
                }
            }
        })
    }
}

/// Tells every process that `workspace_id`'s configuration changed (best effort: the
/// poll catches up with a lost announcement).
pub async fn announce(bus: &dyn Bus, workspace_id: &str) {
    if let Err(error) = bus.publish(CHANNEL, Bytes::from(workspace_id.to_owned())).await {
        tracing::warn!(%error, workspace_id, "could not announce a configuration change");
    }
}

/// The endpoint a provider's models go to: its first by (priority, id), with the
/// credentials it may use now.
fn route_endpoint(config: &ProviderConfig, provider_id: &str) -> Option<RouteEndpoint> {
    let endpoint = config
        .endpoints
        .iter()
        .filter(|e| e.provider_id == provider_id)
        .min_by(|a, b| (a.priority, &a.id).cmp(&(b.priority, &b.id)))?;
    let usable = |id: &str| {
        config
            .credentials
            .iter()
            .find(|c| c.id == id && c.archived_at_ms.is_none())
            .map(|c| SealedCredential { id: c.id.clone(), sealed: c.sealed.clone() })
    };
    let (credentials, cooldown_ms) = match &endpoint.credential {
        None => (Vec::new(), 0),
        Some(CredentialRef::Credential(id)) => (usable(id).into_iter().collect(), 0),
        Some(CredentialRef::Pool(pool)) => match config.pools.iter().find(|p| &p.id == pool) {
            Some(pool) => (pool.credential_ids.iter().filter_map(|id| usable(id)).collect(), pool.cooldown_ms),
            None => (Vec::new(), 0),
        },
    };
    Some(RouteEndpoint {
        id: endpoint.id.clone(),
        base_url: endpoint.base_url.clone(),
        connect_timeout_ms: endpoint.connect_timeout_ms,
        request_timeout_ms: endpoint.request_timeout_ms,
        authenticated: endpoint.credential.is_some(),
        credentials,
        cooldown_ms,
    })
}

/// The effective catalog of a workspace: `bootstrap`, then each offering (a model id
/// routed to a configured provider, added when the bootstrap lacks it), then each
/// model's attributes over whatever it had. Attributes of a model that is neither in
/// the bootstrap catalog nor offered add nothing: a model is listed once it can be
/// served.
pub fn effective(bootstrap: &Catalog, config: &ProviderConfig) -> Catalog {
    let mut models: Vec<Model> = bootstrap.models().to_vec();
    let mut added: Vec<Model> = Vec::new();
    for offering in &config.offerings {
        let Some(provider) = config.providers.iter().find(|p| p.id == offering.provider_id) else { continue };
        let route = Route {
            provider_id: provider.id.clone(),
            kind: provider.kind,
            provider_model: offering.provider_model.clone(),
            endpoint: route_endpoint(config, &provider.id),
        };
        let wire_provider = match provider.kind {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAiCompatible => "openai",
        };
        match models.iter_mut().find(|m| m.id == offering.model_id) {
            Some(model) => {
                model.provider = wire_provider.to_owned();
                model.route = Some(route);
            }
            None => added.push(Model {
                id: offering.model_id.clone(),
                provider: wire_provider.to_owned(),
                display_name: offering.model_id.clone(),
                line: None,
                created_at: crate::live::rfc3339(offering.created_at_ms),
                max_input_tokens: DEFAULT_MAX_INPUT_TOKENS,
                max_tokens: DEFAULT_MAX_TOKENS,
                default_effort: "high".to_owned(),
                prices: None,
                route: Some(route),
            }),
        }
    }
    // Newest first, as the Models API lists: configured models by their offering's time.
    added.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| a.id.cmp(&b.id)));
    added.append(&mut models);
    let mut models = added;
    for attributes in &config.attributes {
        let Some(model) = models.iter_mut().find(|m| m.id == attributes.model_id) else { continue };
        if let Some(name) = &attributes.display_name {
            model.display_name = name.clone();
        }
        if let Some(tokens) = attributes.max_input_tokens {
            model.max_input_tokens = u64::try_from(tokens).unwrap_or(0);
        }
        if let Some(tokens) = attributes.max_tokens {
            model.max_tokens = u64::try_from(tokens).unwrap_or(0);
        }
        if attributes.prices.is_some() {
            model.prices = attributes.prices;
        }
    }
    Catalog::from_models(models, config.revision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Prices;
    use crate::store::{
        EndpointRow, ModelAttributesRow, OfferingRow, ProviderCredentialRow, ProviderRow, ProviderStore,
    };

    fn config() -> ProviderConfig {
        let ws = "ws".to_owned();
        ProviderConfig {
            workspace_id: ws.clone(),
            revision: 3,
            providers: vec![ProviderRow {
                id: "local".into(),
                workspace_id: ws.clone(),
                kind: ProviderKind::OpenAiCompatible,
                display_name: None,
                created_at_ms: 1,
                updated_at_ms: 1,
            }],
            endpoints: vec![
                EndpointRow {
                    id: "b".into(),
                    workspace_id: ws.clone(),
                    provider_id: "local".into(),
                    base_url: "http://second".into(),
                    credential: None,
                    priority: 0,
                    connect_timeout_ms: None,
                    request_timeout_ms: None,
                    created_at_ms: 1,
                    updated_at_ms: 1,
                },
                EndpointRow {
                    id: "a".into(),
                    workspace_id: ws.clone(),
                    provider_id: "local".into(),
                    base_url: "http://first".into(),
                    credential: Some(CredentialRef::Credential("pcrd_1".into())),
                    priority: 0,
                    connect_timeout_ms: Some(500),
                    request_timeout_ms: None,
                    created_at_ms: 1,
                    updated_at_ms: 1,
                },
            ],
            offerings: vec![
                OfferingRow {
                    model_id: "llama".into(),
                    workspace_id: ws.clone(),
                    provider_id: "local".into(),
                    provider_model: "llama-3.1".into(),
                    created_at_ms: 1_000,
                    updated_at_ms: 1_000,
                },
                OfferingRow {
                    model_id: "claude-sonnet-4-5".into(),
                    workspace_id: ws.clone(),
                    provider_id: "local".into(),
                    provider_model: "sonnet".into(),
                    created_at_ms: 1_000,
                    updated_at_ms: 1_000,
                },
            ],
            attributes: vec![
                ModelAttributesRow {
                    model_id: "claude-opus-4-6".into(),
                    workspace_id: ws.clone(),
                    display_name: Some("Opus".into()),
                    max_input_tokens: None,
                    max_tokens: None,
                    prices: Some(Prices { input: 1, output: 2, ..Prices::default() }),
                    created_at_ms: 1,
                    updated_at_ms: 1,
                },
                ModelAttributesRow {
                    model_id: "nowhere".into(),
                    workspace_id: ws.clone(),
                    display_name: Some("Nowhere".into()),
                    max_input_tokens: None,
                    max_tokens: None,
                    prices: None,
                    created_at_ms: 1,
                    updated_at_ms: 1,
                },
            ],
            credentials: vec![ProviderCredentialRow {
                id: "pcrd_1".into(),
                workspace_id: ws,
                name: "k".into(),
                sealed: "sealed".into(),
                created_at_ms: 1,
                archived_at_ms: None,
            }],
            pools: vec![],
            profiles: vec![],
        }
    }

    #[test]
    fn the_configuration_overlays_the_bootstrap_catalog() {
        let bootstrap = Catalog::builtin();
        let catalog = effective(&bootstrap, &config());
        assert_eq!(catalog.revision(), 3);
        let llama = catalog.find("llama").expect("an offered model is listed");
        assert_eq!(catalog.models()[0].id, "llama", "newest first");
        let route = llama.route.as_ref().unwrap();
        assert_eq!(route.provider_model, "llama-3.1");
        let endpoint = route.endpoint.as_ref().unwrap();
        assert_eq!(endpoint.id, "a", "the first endpoint by (priority, id) serves");
        assert_eq!(endpoint.credentials.len(), 1);
        assert_eq!(catalog.provider_of("llama"), Some("local"));
        let sonnet = catalog.find("claude-sonnet-4-5").unwrap();
        assert_eq!(sonnet.route.as_ref().unwrap().provider_model, "sonnet", "a built-in model rerouted");
        assert_eq!(sonnet.prices, bootstrap.find("claude-sonnet-4-5").unwrap().prices, "its prices kept");
        let opus = catalog.find("claude-opus-4-6").unwrap();
        assert_eq!((opus.display_name.as_str(), opus.prices.unwrap().input), ("Opus", 1));
        assert!(opus.route.is_none(), "attributes alone do not reroute");
        assert!(catalog.find("nowhere").is_none(), "attributes alone do not add a model");
        assert_eq!(catalog.models().len(), bootstrap.models().len() + 1);
    }

    /// A store that serves one workspace's configuration and counts its reads (the
    /// reads fail while the flag is set).
    struct OneWorkspace(std::sync::Mutex<(ProviderConfig, usize, bool)>);

    #[async_trait::async_trait]
    impl ProviderStore for OneWorkspace {
        async fn config_revisions(&self) -> StoreResult<Vec<(String, i64)>> {
            let state = self.0.lock().unwrap();
            Ok(vec![(state.0.workspace_id.clone(), state.0.revision)])
        }
        async fn provider_config(&self, _: &str) -> StoreResult<ProviderConfig> {
            let mut state = self.0.lock().unwrap();
            state.1 += 1;
            if state.2 {
                return Err(crate::StoreError::Unavailable("the database is down".into()));
            }
            Ok(state.0.clone())
        }
        async fn put_provider(&self, _: ProviderRow) -> StoreResult<crate::store::Written<ProviderRow>> {
            unimplemented!()
        }
        async fn get_provider(&self, _: &str, _: &str) -> StoreResult<Option<ProviderRow>> {
            unimplemented!()
        }
        async fn put_endpoint(&self, _: EndpointRow) -> StoreResult<crate::store::Written<EndpointRow>> {
            unimplemented!()
        }
        async fn list_endpoints(&self, _: &str, _: &str) -> StoreResult<Vec<EndpointRow>> {
            unimplemented!()
        }
        async fn put_offering(&self, _: OfferingRow) -> StoreResult<crate::store::Written<OfferingRow>> {
            unimplemented!()
        }
        async fn put_model_attributes(
            &self,
            _: ModelAttributesRow,
        ) -> StoreResult<crate::store::Written<ModelAttributesRow>> {
            unimplemented!()
        }
        async fn insert_provider_credential(
            &self,
            _: ProviderCredentialRow,
        ) -> StoreResult<crate::store::Written<ProviderCredentialRow>> {
            unimplemented!()
        }
        async fn get_provider_credential(&self, _: &str, _: &str) -> StoreResult<Option<ProviderCredentialRow>> {
            unimplemented!()
        }
        async fn list_provider_credentials(&self, _: &str) -> StoreResult<Vec<ProviderCredentialRow>> {
            unimplemented!()
        }
        async fn archive_provider_credential(
            &self,
            _: &str,
            _: &str,
            _: i64,
        ) -> StoreResult<crate::store::Written<ProviderCredentialRow>> {
            unimplemented!()
        }
        async fn put_credential_pool(
            &self,
            _: crate::store::CredentialPoolRow,
        ) -> StoreResult<crate::store::Written<crate::store::CredentialPoolRow>> {
            unimplemented!()
        }
        async fn get_credential_pool(&self, _: &str, _: &str) -> StoreResult<Option<crate::store::CredentialPoolRow>> {
            unimplemented!()
        }
        async fn put_inference_profile(
            &self,
            _: crate::store::InferenceProfileRow,
        ) -> StoreResult<crate::store::Written<crate::store::InferenceProfileRow>> {
            unimplemented!()
        }
        async fn get_inference_profile(
            &self,
            _: &str,
            _: &str,
        ) -> StoreResult<Option<crate::store::InferenceProfileRow>> {
            unimplemented!()
        }
    }

    #[tokio::test]
    async fn a_poll_rereads_only_workspaces_whose_revision_moved() {
        let store = OneWorkspace(std::sync::Mutex::new((config(), 0, false)));
        let catalogs = Catalogs::new(Catalog::builtin());
        assert!(catalogs.of("ws").unwrap().find("llama").is_none(), "nothing read yet: the bootstrap catalog");
        catalogs.refresh(&store).await.unwrap();
        catalogs.refresh(&store).await.unwrap();
        assert_eq!(store.0.lock().unwrap().1, 1, "the second poll saw the same revision");
        assert!(catalogs.of("ws").unwrap().find("llama").is_some());
        assert!(catalogs.of("other").unwrap().find("llama").is_none(), "other workspaces keep the bootstrap catalog");
        {
            let mut state = store.0.lock().unwrap();
            state.0.revision = 4;
            state.0.offerings.clear();
        }
        catalogs.refresh(&store).await.unwrap();
        assert!(catalogs.of("ws").unwrap().find("llama").is_none(), "the new revision is in force");
        assert_eq!(catalogs.of("ws").unwrap().revision(), 4);
    }

    #[tokio::test]
    async fn a_configured_workspace_that_cannot_be_read_is_unloaded_not_bootstrap() {
        let store = OneWorkspace(std::sync::Mutex::new((config(), 0, true)));
        let catalogs = Catalogs::new(Catalog::builtin());
        catalogs.refresh(&store).await.expect("one unreadable workspace does not fail the poll");
        assert_eq!(
            catalogs.of("ws").err(),
            Some(Unloaded { workspace_id: "ws".into() }),
            "never the bootstrap catalog"
        );
        assert!(catalogs.of("other").is_ok(), "a workspace without configuration reads the bootstrap catalog");
        assert!(catalogs.reload(&store, "ws").await.is_err());
        assert!(catalogs.of("ws").is_err(), "an announced workspace that cannot be read stays unloaded");

        // The next poll reads it.
        store.0.lock().unwrap().2 = false;
        catalogs.refresh(&store).await.unwrap();
        let catalog = catalogs.of("ws").expect("loaded");
        assert_eq!(catalog.revision(), 3);
        assert!(catalog.find("llama").is_some());

        // Once installed, a failed read keeps the installed revision (the tenant's own).
        {
            let mut state = store.0.lock().unwrap();
            state.0.revision = 4;
            state.2 = true;
        }
        catalogs.refresh(&store).await.unwrap();
        assert_eq!(catalogs.of("ws").unwrap().revision(), 3);
    }
}
