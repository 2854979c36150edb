//! Concurrent OAuth refreshes of one vault credential converge (worker
//! `credentials.rs`), against the real store (SQLite and PostgreSQL) and a token
//! endpoint played here on 127.0.0.1 that acts as "another worker" mid-request.

use std::sync::Arc;

use agentd_schema::secrets::SecretBox;
use agentd_schema::store::prelude::*;
use agentd_schema::{NewResource, Resource, Session, SystemClock};
use agentd_tests::stores::{Kind, TestStore};
use agentd_worker::credentials::Credentials;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KIND: &str = "vault_credential";

/// What the token endpoint does with one request (its form's `refresh_token`):
/// the reply's status and body.
type Behaviour = Arc<dyn Fn(String) -> BoxFuture<'static, (u16, String)> + Send + Sync>;

/// Serves `behaviour` on 127.0.0.1; returns the token URL.
async fn token_endpoint(behaviour: Behaviour) -> String {
    let _ = agentd_tests::http(); // installs the rustls provider reqwest needs
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let behaviour = behaviour.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                let body = loop {
                    let read = socket.read(&mut chunk).await.unwrap_or(0);
                    buffer.extend_from_slice(&chunk[..read]);
                    let text = String::from_utf8_lossy(&buffer).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if buffer.len() >= end + 4 + length || read == 0 {
                            break text[end + 4..].to_owned();
                        }
                    } else if read == 0 {
                        break String::new();
                    }
                };
                // The tokens here need no percent-decoding.
                let refresh_token =
                    body.split('&').find_map(|pair| pair.strip_prefix("refresh_token=")).unwrap_or_default().to_owned();
                let (status, reply) = behaviour(refresh_token).await;
                let response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    url
}

struct Rig {
    test: TestStore,
    store: Arc<dyn Store>,
    secrets: Arc<SecretBox>,
    session: Session,
    credential_id: String,
    workspace_id: String,
}

const MCP_URL: &str = "http://127.0.0.1:1/mcp";

async fn rig(kind: Kind, token_url: &str) -> Rig {
    let test = TestStore::new(kind, Arc::new(SystemClock)).await;
    let store: Arc<dyn Store> = test.store.clone();
    let secrets = Arc::new(SecretBox::from_encoded(&SecretBox::generate_key()).unwrap());
    let workspace = store.ensure_workspace("acme", "default").await.unwrap();
    let vault_id = agentd_schema::ids::new_id("vlt");
    store
        .create_resource(NewResource {
            id: vault_id.clone(),
            workspace_id: workspace.id.clone(),
            kind: "vault".into(),
            parent_id: None,
            body: json!({}),
            versioned: false,
        })
        .await
        .unwrap();
    let credential_id = agentd_schema::ids::new_id("vcrd");
    let sealed = secrets.seal(&credential_id, &json!({ "access_token": "old", "refresh_token": "r1" }));
    store
        .create_resource(NewResource {
            id: credential_id.clone(),
            workspace_id: workspace.id.clone(),
            kind: KIND.into(),
            parent_id: Some(vault_id.clone()),
            body: json!({
                "auth": {
                    "type": "mcp_oauth",
                    "mcp_server_url": MCP_URL,
                    "refresh": { "token_endpoint": token_url, "client_id": "c", "token_endpoint_auth": { "type": "none" } },
                },
                "_sealed": sealed,
            }),
            versioned: false,
        })
        .await
        .unwrap();
    let session = Session {
        id: "sesn_oauth".into(),
        workspace_id: workspace.id.clone(),
        status: "running".into(),
        body: json!({ "vault_ids": [vault_id] }),
        agent_id: None,
        agent_version: None,
        usage: json!({}),
        next_seq: 0,
        created_at_ms: 0,
        updated_at_ms: 0,
        archived_at_ms: None,
        active_ms: 0,
        running_since_ms: None,
        inbox_version: 0,
        resources_revision: 0,
        agent_snapshot_id: None,
        child_threads: 0,
    };
    Rig { test, store, secrets, session, credential_id, workspace_id: workspace.id }
}

impl Rig {
    async fn stored(&self) -> (Resource, Value) {
        let credential = self.store.get_resource(&self.workspace_id, KIND, &self.credential_id).await.unwrap().unwrap();
        let opened = self.secrets.open(&credential.id, credential.body["_sealed"].as_str().unwrap()).unwrap();
        (credential, opened)
    }

    /// What another worker does: writes its own refreshed tokens.
    async fn other_worker_writes(&self, access: &str, refresh: &str) {
        let (credential, _) = self.stored().await;
        let mut body = credential.body.clone();
        body["_sealed"] =
            json!(self.secrets.seal(&credential.id, &json!({ "access_token": access, "refresh_token": refresh })));
        self.store
            .update_resource(agentd_schema::ResourceUpdate {
                workspace_id: self.workspace_id.clone(),
                kind: KIND.into(),
                id: credential.id.clone(),
                expected_version: credential.version,
                body,
                versioned: false,
            })
            .await
            .unwrap();
    }
}

/// Another worker writes its refresh while ours is at the token endpoint: ours loses
/// the version race, and the token the winner stored is the one used.
async fn a_lost_write_back_uses_the_stored_token(kind: Kind) {
    let slot: Arc<tokio::sync::OnceCell<std::sync::Weak<Rig>>> = Arc::new(tokio::sync::OnceCell::new());
    let rig_slot = slot.clone();
    let url = token_endpoint(Arc::new(move |_refresh_token| {
        let rig = rig_slot.get().and_then(std::sync::Weak::upgrade).expect("the rig is alive");
        Box::pin(async move {
            rig.other_worker_writes("theirs", "r2").await;
            (200, json!({ "access_token": "mine", "refresh_token": "r3", "expires_in": 3600 }).to_string())
        })
    }))
    .await;
    let rig = Arc::new(rig(kind, &url).await);
    let _ = slot.set(Arc::downgrade(&rig));
    let mut credentials = Credentials::of(rig.store.clone(), Some(rig.secrets.clone()), &rig.session, true);
    let bearer = credentials.bearer_for(MCP_URL).await.unwrap().unwrap();
    assert_eq!(bearer.token, "old");
    let refreshed = credentials.refresh(&bearer).await.unwrap();
    assert_eq!(refreshed.token, "theirs", "the stored token wins over ours");
    let (_, opened) = rig.stored().await;
    assert_eq!(opened, json!({ "access_token": "theirs", "refresh_token": "r2" }), "ours was not written over theirs");
    drop(credentials);
    if let Ok(rig) = Arc::try_unwrap(rig) {
        rig.test.cleanup().await;
    }
}

/// Our refresh token was rotated by another worker: `invalid_grant`, then one retry
/// with the stored refresh token succeeds and is written back (with a saturated
/// expiry for an absurd `expires_in`).
async fn invalid_grant_retries_with_the_rotated_refresh_token(kind: Kind) {
    let slot: Arc<tokio::sync::OnceCell<std::sync::Weak<Rig>>> = Arc::new(tokio::sync::OnceCell::new());
    let rig_slot = slot.clone();
    let url = token_endpoint(Arc::new(move |refresh_token| {
        let rig = rig_slot.get().and_then(std::sync::Weak::upgrade).expect("the rig is alive");
        Box::pin(async move {
            match refresh_token.as_str() {
                "r1" => {
                    rig.other_worker_writes("expired-theirs", "r2").await;
                    (400, json!({ "error": "invalid_grant" }).to_string())
                }
                "r2" => {
                    (200, json!({ "access_token": "fresh", "refresh_token": "r4", "expires_in": i64::MAX }).to_string())
                }
                _ => (400, json!({ "error": "invalid_grant" }).to_string()),
            }
        })
    }))
    .await;
    let rig = Arc::new(rig(kind, &url).await);
    let _ = slot.set(Arc::downgrade(&rig));
    let mut credentials = Credentials::of(rig.store.clone(), Some(rig.secrets.clone()), &rig.session, true);
    let bearer = credentials.bearer_for(MCP_URL).await.unwrap().unwrap();
    let refreshed = credentials.refresh(&bearer).await.unwrap();
    assert_eq!(refreshed.token, "fresh");
    let (credential, opened) = rig.stored().await;
    assert_eq!(opened, json!({ "access_token": "fresh", "refresh_token": "r4" }));
    let expires_at = credential.body["auth"]["expires_at"].as_str().unwrap();
    assert!(expires_at.starts_with("9999-"), "saturated, not wrapped into the past: {expires_at}");
    drop(credentials);
    if let Ok(rig) = Arc::try_unwrap(rig) {
        rig.test.cleanup().await;
    }
}

/// A refused token endpoint is refused by the egress guard when private addresses are
/// not allowed: nothing is sent.
async fn a_private_token_endpoint_is_refused_without_the_setting(kind: Kind) {
    let url = token_endpoint(Arc::new(|_| Box::pin(async { panic!("the token endpoint must not be called") }))).await;
    let rig = rig(kind, &url).await;
    let mut credentials = Credentials::of(rig.store.clone(), Some(rig.secrets.clone()), &rig.session, false);
    let bearer = credentials.bearer_for(MCP_URL).await.unwrap().unwrap();
    let error = credentials.refresh(&bearer).await.unwrap_err().to_string();
    assert!(error.contains("must resolve only to public addresses"), "{error}");
    rig.test.cleanup().await;
}

#[tokio::test]
async fn sqlite_lost_write_back() {
    a_lost_write_back_uses_the_stored_token(Kind::Sqlite).await;
}

#[tokio::test]
async fn postgres_lost_write_back() {
    a_lost_write_back_uses_the_stored_token(Kind::Postgres).await;
}

#[tokio::test]
async fn sqlite_invalid_grant_retry() {
    invalid_grant_retries_with_the_rotated_refresh_token(Kind::Sqlite).await;
}

#[tokio::test]
async fn postgres_invalid_grant_retry() {
    invalid_grant_retries_with_the_rotated_refresh_token(Kind::Postgres).await;
}

#[tokio::test]
async fn sqlite_private_token_endpoint() {
    a_private_token_endpoint_is_refused_without_the_setting(Kind::Sqlite).await;
}
