//! `agentd keys rotate-secret` (`agentd_schema::rotation`) against the real stores
//! (SQLite and PostgreSQL): every sealed secret at rest — vault credentials, session
//! resource tokens, A2A push credentials — moves from key A to key B; a rotation
//! stopped halfway (as a kill between rows leaves it) loses nothing, readers holding
//! both keys read every row meanwhile, and a rerun completes it.

use std::sync::Arc;

use agentd_schema::rotation::{self, Options};
use agentd_schema::secrets::SecretBox;
use agentd_schema::store::prelude::*;
use agentd_schema::{A2aPushConfig, NewResource, NewSession, SealedTable, Session};
use agentd_tests::process::Launch;
use agentd_tests::stores::{Kind, TestStore};
use agentd_worker::credentials::Credentials;
use serde_json::{Value, json};

const CREDENTIALS: usize = 23;
const SESSIONS: usize = 6;
const PUSH_CONFIGS: usize = 4;

struct Seeded {
    workspace_id: String,
    session: Session,
    /// (credential id, its MCP server URL, its token)
    credentials: Vec<(String, String, String)>,
    /// (session id, resource id, its token)
    resource_tokens: Vec<(String, String, String)>,
    /// (task id, config id, its credentials)
    push: Vec<(String, String, String)>,
    /// (provider credential id, its API key)
    provider_keys: Vec<(String, String)>,
    /// (webhook subscription id, its signing secret)
    webhook_secrets: Vec<(String, String)>,
}

impl Seeded {
    fn total(&self) -> u64 {
        (self.credentials.len()
            + self.resource_tokens.len()
            + self.push.len()
            + self.provider_keys.len()
            + self.webhook_secrets.len()) as u64
    }
}

/// Seals everything with `secrets` (key A), as a gateway running with A would have.
async fn seed(store: &dyn Store, secrets: &SecretBox) -> Seeded {
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let vault_id = agentd_schema::ids::new_id("vlt");
    let resource = |id: &str, kind: &str, parent: Option<&str>, body: Value| NewResource {
        id: id.to_owned(),
        workspace_id: workspace.id.clone(),
        kind: kind.into(),
        parent_id: parent.map(str::to_owned),
        body,
        versioned: false,
    };
    store.create_resource(resource(&vault_id, "vault", None, json!({}))).await.unwrap();
    let mut credentials = Vec::new();
    for i in 0..CREDENTIALS {
        let id = agentd_schema::ids::new_id("vcrd");
        let url = format!("https://mcp{i}.example.com/mcp");
        let token = format!("token-{i}");
        let body = json!({
            "auth": { "type": "static_bearer", "mcp_server_url": url },
            "_sealed": secrets.seal(&id, &json!({ "token": token })),
        });
        store.create_resource(resource(&id, "vault_credential", Some(&vault_id), body)).await.unwrap();
        credentials.push((id, url, token));
    }
    let mut resource_tokens = Vec::new();
    let mut first_session = None;
    for i in 0..SESSIONS {
        let id = agentd_schema::ids::new_id("sesn");
        let (a, b) = (agentd_schema::ids::new_id("sres"), agentd_schema::ids::new_id("sres"));
        let body = json!({
            "vault_ids": [vault_id],
            "resources": [
                { "type": "github_repository", "id": a, "_sealed": secrets.seal(&a, &json!({ "authorization_token": format!("gh-{i}-a") })) },
                { "type": "file", "id": agentd_schema::ids::new_id("sres"), "file_id": "file_1" },
                { "type": "github_repository", "id": b, "_sealed": secrets.seal(&b, &json!({ "authorization_token": format!("gh-{i}-b") })) },
            ],
        });
        let session = store
            .create_session(NewSession {
                id: id.clone(),
                workspace_id: workspace.id.clone(),
                status: "idle".into(),
                body,
                agent_id: None,
                agent_version: None,
            })
            .await
            .unwrap();
        first_session.get_or_insert(session);
        resource_tokens.push((id.clone(), a, format!("gh-{i}-a")));
        resource_tokens.push((id, b, format!("gh-{i}-b")));
    }
    // A session without sealed values is left alone.
    store
        .create_session(NewSession {
            id: agentd_schema::ids::new_id("sesn"),
            workspace_id: workspace.id.clone(),
            status: "idle".into(),
            body: json!({ "resources": [] }),
            agent_id: None,
            agent_version: None,
        })
        .await
        .unwrap();
    let mut push = Vec::new();
    for i in 0..PUSH_CONFIGS {
        let (task_id, id) = (format!("task-{}", i % 2), format!("cfg-{i}"));
        let credential = format!("push-cred-{i}");
        store
            .a2a_put_push_config(&A2aPushConfig {
                task_id: task_id.clone(),
                id: id.clone(),
                workspace_id: workspace.id.clone(),
                url: "https://hooks.example.com/a2a".into(),
                token: None,
                auth_scheme: Some("Bearer".into()),
                auth_credentials: Some(secrets.seal(&format!("a2a-push:{task_id}:{id}"), &json!(credential))),
                created_at_ms: 1,
            })
            .await
            .unwrap();
        push.push((task_id, id, credential));
    }
    let mut provider_keys = Vec::new();
    for i in 0..3 {
        let id = agentd_schema::ids::new_id("pcrd");
        let key = format!("sk-provider-{i}");
        let row = agentd_schema::ProviderCredentialRow {
            sealed: secrets.seal(&id, &json!({ "api_key": key })),
            id: id.clone(),
            workspace_id: workspace.id.clone(),
            name: format!("key {i}"),
            created_at_ms: 1,
            archived_at_ms: None,
        };
        store.insert_provider_credential(row).await.unwrap();
        provider_keys.push((id, key));
    }
    let mut webhook_secrets = Vec::new();
    for i in 0..3 {
        let id = format!("hook-{i}");
        let secret = format!("whsec_c2VjcmV0LXtpfS1vZi10aGUtaG9vaw{i}");
        let row = agentd_schema::WebhookSubscriptionRow {
            workspace_id: workspace.id.clone(),
            id: id.clone(),
            organization_id: "org".into(),
            url: "https://hooks.example.com/agentd".into(),
            name: String::new(),
            description: String::new(),
            event_types: vec!["agent.created".into()],
            sealed_secret: secrets.seal(&agentd_schema::webhooks::secret_owner(&workspace.id, &id), &json!(secret)),
            enabled: true,
            disabled_reason: String::new(),
            consecutive_failures: 0,
            created_at_ms: 0,
            updated_at_ms: 0,
        };
        let put =
            agentd_schema::WebhookPutRequest { row, mode: agentd_schema::WebhookPut::Create, set_state: true, max: 32 };
        store.put_subscription(put).await.unwrap();
        webhook_secrets.push((id, secret));
    }
    Seeded {
        workspace_id: workspace.id,
        session: first_session.unwrap(),
        credentials,
        resource_tokens,
        push,
        provider_keys,
        webhook_secrets,
    }
}

/// Every stored secret as `secrets` opens it (panics naming the first that does not).
async fn read_all(store: &dyn Store, secrets: &SecretBox, seeded: &Seeded) {
    for (id, _, token) in &seeded.credentials {
        let row = store.get_resource(&seeded.workspace_id, "vault_credential", id).await.unwrap().unwrap();
        let opened = secrets.open(id, row.body["_sealed"].as_str().unwrap()).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(opened["token"], token.as_str());
    }
    for (session_id, resource_id, token) in &seeded.resource_tokens {
        let session = store.get_session(&seeded.workspace_id, session_id).await.unwrap().unwrap();
        let resource = session.body["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == resource_id.as_str())
            .unwrap()
            .clone();
        let opened = secrets
            .open(resource_id, resource["_sealed"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{resource_id}: {e}"));
        assert_eq!(opened["authorization_token"], token.as_str());
    }
    for (task_id, id, credential) in &seeded.push {
        let config = store.a2a_get_push_config(task_id, id).await.unwrap().unwrap();
        let opened = secrets
            .open(&format!("a2a-push:{task_id}:{id}"), config.auth_credentials.as_deref().unwrap())
            .unwrap_or_else(|e| panic!("{task_id}/{id}: {e}"));
        assert_eq!(opened, json!(credential));
    }
    for (id, key) in &seeded.provider_keys {
        let row = store.get_provider_credential(&seeded.workspace_id, id).await.unwrap().unwrap();
        let opened = secrets.open(id, &row.sealed).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(opened["api_key"], key.as_str());
    }
    for (id, secret) in &seeded.webhook_secrets {
        let row = store.get_subscription(&seeded.workspace_id, id).await.unwrap().unwrap();
        let owner = agentd_schema::webhooks::secret_owner(&seeded.workspace_id, id);
        let opened = secrets.open(&owner, &row.sealed_secret).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(opened, json!(secret));
    }
}

/// What a worker holding `secrets` reads for every credential's MCP server.
async fn worker_reads_every_bearer(store: &Arc<dyn Store>, secrets: &Arc<SecretBox>, seeded: &Seeded) {
    let mut credentials = Credentials::of(store.clone(), Some(secrets.clone()), &seeded.session, false);
    for (id, url, token) in &seeded.credentials {
        let bearer = credentials.bearer_for(url).await.unwrap_or_else(|e| panic!("{id}: {e}")).unwrap();
        assert_eq!(&bearer.token, token, "{id}");
    }
}

agentd_tests::store_conformance!(
    rotation_stopped_halfway_loses_nothing_and_a_rerun_completes_it,
    |store, _clock| async move {
        let (key_a, key_b) = (SecretBox::generate_key(), SecretBox::generate_key());
        let box_a = SecretBox::from_encoded(&key_a).unwrap();
        let box_b = SecretBox::from_encoded(&key_b).unwrap();
        let rotating = Arc::new(SecretBox::from_encoded(&key_b).unwrap().with_previous(&key_a).unwrap());
        let seeded = seed(store.as_ref(), &box_a).await;
        let total = seeded.total();
        assert_eq!(rotation::pending(store.as_ref(), &rotating).await.unwrap(), total);

        // "Killed" halfway: the run stops after re-sealing 17 values, in pages of 5, among
        // the credentials (visited first); sessions and push configs are all still old.
        let half = Options { batch: 5, limit: Some(17) };
        let report = rotation::rotate(store.as_ref(), &rotating, half).await.unwrap();
        assert_eq!(report.resealed, 17);
        assert!(!report.complete);
        assert_eq!(rotation::pending(store.as_ref(), &rotating).await.unwrap(), total - 17);

        // Mid-rotation, processes configured with both keys read every secret, old or new,
        // and neither key alone does.
        read_all(store.as_ref(), &rotating, &seeded).await;
        worker_reads_every_bearer(&store, &rotating, &seeded).await;
        let only_b = Arc::new(SecretBox::from_encoded(&key_b).unwrap());
        let mut old_rows = Vec::new();
        for (id, url, token) in &seeded.credentials {
            let row = store.get_resource(&seeded.workspace_id, "vault_credential", id).await.unwrap().unwrap();
            if box_b.open(id, row.body["_sealed"].as_str().unwrap()).is_err() {
                old_rows.push((row, url.clone(), token.clone()));
            }
        }
        assert_eq!(old_rows.len(), CREDENTIALS - 17);
        let mut worker_b = Credentials::of(store.clone(), Some(only_b), &seeded.session, false);
        let (row, url, token) = &old_rows[0];
        assert!(worker_b.bearer_for(url).await.is_err(), "not yet re-sealed: key B alone cannot open it");

        // A writer with the new key changes a credential meanwhile: its value stands.
        let id = &row.id;
        let mut body = row.body.clone();
        body["_sealed"] = json!(rotating.seal(id, &json!({ "token": token })));
        store.update_resource(credential_update(&seeded.workspace_id, id, row.version, body)).await.unwrap();

        // The rerun finishes the job; another one finds nothing to do.
        let report = rotation::rotate(store.as_ref(), &rotating, Options { batch: 5, limit: None }).await.unwrap();
        assert!(report.complete);
        assert_eq!(report.resealed, total - 17 - 1, "the value the writer re-sealed is not counted twice");
        assert_eq!(rotation::pending(store.as_ref(), &rotating).await.unwrap(), 0);
        let again = rotation::rotate(store.as_ref(), &rotating, Options::default()).await.unwrap();
        assert_eq!((again.resealed, again.complete, again.passes), (0, true, 1));
        assert_eq!(again.current, total);

        // Key A can be dropped: key B alone opens everything, A alone nothing.
        read_all(store.as_ref(), &box_b, &seeded).await;
        worker_reads_every_bearer(&store, &Arc::new(box_b), &seeded).await;
        let (id, _, _) = &seeded.credentials[0];
        let row = store.get_resource(&seeded.workspace_id, "vault_credential", id).await.unwrap().unwrap();
        assert!(box_a.open(id, row.body["_sealed"].as_str().unwrap()).is_err());
    }
);

agentd_tests::store_conformance!(
    resealing_is_a_compare_and_swap_that_fences_stale_writers,
    |store, _clock| async move {
        let (key_a, key_b) = (SecretBox::generate_key(), SecretBox::generate_key());
        let box_a = SecretBox::from_encoded(&key_a).unwrap();
        let rotating = SecretBox::from_encoded(&key_b).unwrap().with_previous(&key_a).unwrap();
        let seeded = seed(store.as_ref(), &box_a).await;
        let page = store.sealed_page(SealedTable::VaultCredentials, None, 2).await.unwrap();
        assert_eq!(page.len(), 2);
        let next = store.sealed_page(SealedTable::VaultCredentials, Some((&page[1].id, "")), 100).await.unwrap();
        assert_eq!(page.len() + next.len(), CREDENTIALS, "pages cover every credential once");
        let pushes = store.sealed_page(SealedTable::A2aPushConfigs, None, 100).await.unwrap();
        assert_eq!(pushes.len(), PUSH_CONFIGS);
        let sessions = store.sealed_page(SealedTable::Sessions, None, 100).await.unwrap();
        assert_eq!(sessions.len(), SESSIONS, "only sessions holding sealed values");

        // A row changed after it was read is not overwritten.
        let row = &page[0];
        let current = store.get_resource(&seeded.workspace_id, "vault_credential", &row.id).await.unwrap().unwrap();
        let mut body = current.body.clone();
        body["display_name"] = json!("renamed");
        store.update_resource(credential_update(&seeded.workspace_id, &row.id, current.version, body)).await.unwrap();
        assert!(!store.replace_sealed(row, "{}").await.unwrap(), "stale read: nothing written");

        // A writer that read the row before a re-seal cannot write the old value back.
        let row = &page[1];
        let stale = store.get_resource(&seeded.workspace_id, "vault_credential", &row.id).await.unwrap().unwrap();
        let mut body: Value = serde_json::from_str(&row.text).unwrap();
        body["_sealed"] = json!(rotating.reseal(&row.id, body["_sealed"].as_str().unwrap()).unwrap().unwrap());
        assert!(store.replace_sealed(row, &body.to_string()).await.unwrap());
        let written = store
            .update_resource(credential_update(&seeded.workspace_id, &row.id, stale.version, stale.body.clone()))
            .await;
        assert!(matches!(written, Err(agentd_schema::StoreError::Conflict(_))), "{written:?}");
    }
);

/// `agentd keys rotate-secret` killed (aborted) right after its 5th re-sealed row, then
/// run again to completion; `--check` tells the two states apart.
async fn the_command_survives_a_kill(kind: Kind) {
    let test = TestStore::new(kind, Arc::new(agentd_schema::SystemClock)).await;
    let store: Arc<dyn Store> = test.store.clone();
    let (key_a, key_b) = (SecretBox::generate_key(), SecretBox::generate_key());
    let seeded = seed(store.as_ref(), &SecretBox::from_encoded(&key_a).unwrap()).await;
    let rotate = |extra: &[&str]| {
        let mut launch = Launch::role("keys")
            .arg("rotate-secret")
            .env("AGENTD_DATABASE_URL", test.url.clone())
            .env("AGENTD_SECRET_KEY", key_b.clone())
            .env("AGENTD_SECRET_KEY_PREVIOUS", key_a.clone());
        for arg in extra {
            launch = launch.arg(*arg);
        }
        launch
    };
    let killed = rotate(&["--batch", "3"]).env("AGENTD_FAULT_CRASH_AT", "rotate_secret.row@5").output().await;
    assert!(!killed.status.success(), "{}", String::from_utf8_lossy(&killed.stderr));
    assert!(String::from_utf8_lossy(&killed.stderr).contains("crashing at rotate_secret.row"));
    let rotating = SecretBox::from_encoded(&key_b).unwrap().with_previous(&key_a).unwrap();
    assert_eq!(rotation::pending(store.as_ref(), &rotating).await.unwrap(), seeded.total() - 5);
    read_all(store.as_ref(), &rotating, &seeded).await;
    let check = rotate(&["--check"]).output().await;
    assert!(!check.status.success(), "values are still pending");

    let rerun = rotate(&[]).output().await;
    let stderr = String::from_utf8_lossy(&rerun.stderr);
    assert!(rerun.status.success() && stderr.contains("rotation complete"), "{stderr}");
    assert!(rotate(&["--check"]).output().await.status.success());
    read_all(store.as_ref(), &SecretBox::from_encoded(&key_b).unwrap(), &seeded).await;
    test.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_survives_a_kill_sqlite() {
    the_command_survives_a_kill(Kind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_survives_a_kill_postgres() {
    the_command_survives_a_kill(Kind::Postgres).await;
}

/// A compare-and-swap write of a vault credential's body, as a credential update makes.
fn credential_update(
    workspace_id: &str,
    id: &str,
    expected_version: i64,
    body: Value,
) -> agentd_schema::ResourceUpdate {
    agentd_schema::ResourceUpdate {
        workspace_id: workspace_id.to_owned(),
        kind: "vault_credential".into(),
        id: id.to_owned(),
        expected_version,
        body,
        versioned: false,
    }
}
