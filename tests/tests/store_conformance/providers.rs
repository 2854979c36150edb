//! The configuration of model providers (`ProviderStore`): every write bumps the
//! workspace's revision in its transaction, creates or replaces whole rows, refuses
//! references to what the workspace lacks without changing anything, and the whole
//! configuration reads back at one revision, per workspace.

use agentd_schema::catalog::{Prices, ProviderKind};
use agentd_schema::ids::new_id;
use agentd_schema::{
    CredentialPoolRow, CredentialRef, EndpointRow, InferenceProfileRow, ModelAttributesRow, OfferingRow,
    ProviderCredentialRow, ProviderRow,
};

use super::*;

fn provider(ws: &str, id: &str, kind: ProviderKind, at: i64) -> ProviderRow {
    ProviderRow {
        id: id.to_owned(),
        workspace_id: ws.to_owned(),
        kind,
        display_name: Some(format!("{id} provider")),
        created_at_ms: at,
        updated_at_ms: at,
    }
}

fn endpoint(ws: &str, provider: &str, id: &str, credential: Option<CredentialRef>, at: i64) -> EndpointRow {
    EndpointRow {
        id: id.to_owned(),
        workspace_id: ws.to_owned(),
        provider_id: provider.to_owned(),
        base_url: format!("https://{id}.example/v1"),
        credential,
        priority: 0,
        connect_timeout_ms: Some(2_000),
        request_timeout_ms: None,
        created_at_ms: at,
        updated_at_ms: at,
    }
}

fn credential(ws: &str, at: i64) -> ProviderCredentialRow {
    let id = new_id("pcrd");
    ProviderCredentialRow {
        sealed: format!("sealed-for-{id}"),
        id,
        workspace_id: ws.to_owned(),
        name: "key".into(),
        created_at_ms: at,
        archived_at_ms: None,
    }
}

conformance!(every_write_bumps_the_revision_and_puts_replace_whole_rows, |store, _clock| async move {
    assert!(store.config_revisions().await.unwrap().is_empty(), "nothing configured yet");
    let empty = store.provider_config("ws_1").await.unwrap();
    assert_eq!((empty.revision, empty.providers.len()), (0, 0));

    let put = store.put_provider(provider("ws_1", "local", ProviderKind::OpenAiCompatible, 1_000)).await.unwrap();
    assert!(put.created);
    assert_eq!(put.revision, 1);
    assert_eq!(put.row, provider("ws_1", "local", ProviderKind::OpenAiCompatible, 1_000), "every field round-trips");
    let replaced = store.put_provider(provider("ws_1", "local", ProviderKind::Anthropic, 2_000)).await.unwrap();
    assert!(!replaced.created);
    assert_eq!(replaced.revision, 2);
    assert_eq!(
        (replaced.row.kind, replaced.row.created_at_ms, replaced.row.updated_at_ms),
        (ProviderKind::Anthropic, 1_000, 2_000)
    );
    assert_eq!(store.get_provider("ws_1", "local").await.unwrap(), Some(replaced.row.clone()));
    assert_eq!(store.get_provider("ws_2", "local").await.unwrap(), None, "another workspace sees nothing");

    let key = store.insert_provider_credential(credential("ws_1", 3_000)).await.unwrap();
    assert_eq!(key.revision, 3);
    let ep = endpoint("ws_1", "local", "main", Some(CredentialRef::Credential(key.row.id.clone())), 4_000);
    let written = store.put_endpoint(ep.clone()).await.unwrap();
    assert_eq!((written.created, written.revision), (true, 4));
    assert_eq!(written.row, ep);
    let mut moved = ep.clone();
    moved.base_url = "https://second.example/v1".into();
    moved.credential = None;
    moved.updated_at_ms = 5_000;
    let written = store.put_endpoint(moved).await.unwrap();
    assert!(!written.created);
    assert_eq!((written.row.base_url.as_str(), &written.row.credential), ("https://second.example/v1", &None));
    assert_eq!(written.row.created_at_ms, 4_000);

    let offering = OfferingRow {
        model_id: "llama".into(),
        workspace_id: "ws_1".into(),
        provider_id: "local".into(),
        provider_model: "llama-3.1-8b".into(),
        created_at_ms: 6_000,
        updated_at_ms: 6_000,
    };
    assert!(store.put_offering(offering.clone()).await.unwrap().created);
    let prices = Prices { input: 100, output: 200, cache_read: 10, ..Prices::default() };
    let attributes = ModelAttributesRow {
        model_id: "llama".into(),
        workspace_id: "ws_1".into(),
        display_name: Some("Llama".into()),
        max_input_tokens: Some(8_192),
        max_tokens: None,
        prices: Some(prices),
        created_at_ms: 7_000,
        updated_at_ms: 7_000,
    };
    assert_eq!(store.put_model_attributes(attributes.clone()).await.unwrap().row, attributes);
    let unpriced = ModelAttributesRow { prices: None, updated_at_ms: 8_000, ..attributes.clone() };
    let written = store.put_model_attributes(unpriced).await.unwrap();
    assert_eq!((written.created, written.row.prices, written.revision), (false, None, 8));

    let config = store.provider_config("ws_1").await.unwrap();
    assert_eq!(config.revision, 8);
    assert_eq!(config.providers.len(), 1);
    assert_eq!(config.endpoints.len(), 1);
    assert_eq!(config.offerings, vec![offering]);
    assert_eq!(config.attributes.len(), 1);
    assert_eq!(config.credentials, vec![key.row.clone()]);
    assert_eq!(store.config_revisions().await.unwrap(), vec![("ws_1".to_owned(), 8)]);
    assert_eq!(store.provider_config("ws_2").await.unwrap().revision, 0, "revisions are per workspace");
});

fn missing<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    match result {
        Err(StoreError::NotFound { what: found, .. }) => assert_eq!(found, what),
        other => panic!("expected {what} not found, got {other:?}"),
    }
}

conformance!(references_to_missing_things_are_refused_and_change_nothing, |store, _clock| async move {
    missing(store.put_endpoint(endpoint("ws_1", "nope", "e", None, 1)).await, "provider");
    store.put_provider(provider("ws_1", "p", ProviderKind::Anthropic, 1)).await.unwrap();
    let revision = store.provider_config("ws_1").await.unwrap().revision;
    let ghost = CredentialRef::Credential(new_id("pcrd"));
    missing(store.put_endpoint(endpoint("ws_1", "p", "e", Some(ghost), 2)).await, "credential");
    let pool = CredentialRef::Pool("pool".into());
    missing(store.put_endpoint(endpoint("ws_1", "p", "e", Some(pool), 2)).await, "credential pool");
    let offering = OfferingRow {
        model_id: "m".into(),
        workspace_id: "ws_1".into(),
        provider_id: "ghost".into(),
        provider_model: "m".into(),
        created_at_ms: 2,
        updated_at_ms: 2,
    };
    missing(store.put_offering(offering).await, "provider");
    let pool = CredentialPoolRow {
        id: "pool".into(),
        workspace_id: "ws_1".into(),
        credential_ids: vec![new_id("pcrd")],
        cooldown_ms: 0,
        created_at_ms: 2,
        updated_at_ms: 2,
    };
    missing(store.put_credential_pool(pool).await, "credential");
    // A provider of another workspace is not this workspace's.
    store.put_provider(provider("ws_2", "theirs", ProviderKind::Anthropic, 1)).await.unwrap();
    missing(store.put_endpoint(endpoint("ws_1", "theirs", "e", None, 2)).await, "provider");
    let after = store.provider_config("ws_1").await.unwrap();
    assert_eq!(after.revision, revision, "refused writes are rolled back, the revision bump with them");
    assert!(after.endpoints.is_empty() && after.offerings.is_empty() && after.pools.is_empty());
});

conformance!(credentials_archive_once_and_pools_and_profiles_round_trip, |store, _clock| async move {
    let first = store.insert_provider_credential(credential("ws_1", 1_000)).await.unwrap().row;
    let second = store.insert_provider_credential(credential("ws_1", 2_000)).await.unwrap().row;
    assert_eq!(store.get_provider_credential("ws_1", &first.id).await.unwrap(), Some(first.clone()));
    assert_eq!(store.get_provider_credential("ws_2", &first.id).await.unwrap(), None);
    let mut listed: Vec<String> =
        store.list_provider_credentials("ws_1").await.unwrap().into_iter().map(|c| c.id).collect();
    listed.sort();
    let mut expected = vec![first.id.clone(), second.id.clone()];
    expected.sort();
    assert_eq!(listed, expected);

    let archived = store.archive_provider_credential("ws_1", &first.id, 5_000).await.unwrap();
    assert_eq!(archived.row.archived_at_ms, Some(5_000));
    let again = store.archive_provider_credential("ws_1", &first.id, 9_000).await.unwrap();
    assert_eq!(again.row.archived_at_ms, Some(5_000), "archived once: the first time is kept");
    assert!(matches!(
        store.archive_provider_credential("ws_2", &first.id, 9_000).await,
        Err(StoreError::NotFound { .. })
    ));

    let pool = CredentialPoolRow {
        id: "main".into(),
        workspace_id: "ws_1".into(),
        credential_ids: vec![second.id.clone(), first.id.clone()],
        cooldown_ms: 30_000,
        created_at_ms: 6_000,
        updated_at_ms: 6_000,
    };
    let written = store.put_credential_pool(pool.clone()).await.unwrap();
    assert_eq!((written.created, &written.row), (true, &pool), "the order is kept");
    assert_eq!(store.get_credential_pool("ws_1", "main").await.unwrap(), Some(pool.clone()));
    let pooled = endpoint("ws_1", "p", "e", Some(CredentialRef::Pool("main".into())), 7_000);
    store.put_provider(provider("ws_1", "p", ProviderKind::OpenAiCompatible, 7_000)).await.unwrap();
    assert_eq!(store.put_endpoint(pooled.clone()).await.unwrap().row.credential, pooled.credential);

    let profile = InferenceProfileRow {
        id: "fast".into(),
        workspace_id: "ws_1".into(),
        candidates: vec!["b-model".into(), "a-model".into()],
        created_at_ms: 8_000,
        updated_at_ms: 8_000,
    };
    assert!(store.put_inference_profile(profile.clone()).await.unwrap().created);
    let shorter = InferenceProfileRow { candidates: vec!["a-model".into()], updated_at_ms: 9_000, ..profile.clone() };
    let written = store.put_inference_profile(shorter).await.unwrap();
    assert_eq!((written.created, written.row.candidates.len(), written.row.created_at_ms), (false, 1, 8_000));
    assert_eq!(store.get_inference_profile("ws_2", "fast").await.unwrap(), None);

    let config = store.provider_config("ws_1").await.unwrap();
    assert_eq!(config.pools, vec![pool]);
    assert_eq!(config.profiles.len(), 1);
    assert_eq!(config.credentials.len(), 2, "archived credentials are read too");
});

conformance!(concurrent_writers_of_one_workspace_each_get_their_own_revision, |store, _clock| async move {
    let writes = (0..8).map(|i| {
        let store = store.clone();
        async move {
            store.put_provider(provider("ws_1", &format!("p{i}"), ProviderKind::Anthropic, i)).await.unwrap().revision
        }
    });
    let mut revisions = futures::future::join_all(writes).await;
    revisions.sort();
    assert_eq!(revisions, (1..=8).collect::<Vec<i64>>(), "the revision row serializes them");
    assert_eq!(store.provider_config("ws_1").await.unwrap().providers.len(), 8);
});
