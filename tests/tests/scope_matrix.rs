//! The scope matrix: every route with a path id × spellings of that id × every kind of
//! credential × {its own resource, another environment's, another workspace's, a missing
//! one} → the status the credential must get. Driven through `app(state)` in process.
//!
//! What it pins down (docs/SECURITY.md): a scoped credential reaches only its own
//! resources; out of reach and missing answer the same 404; an id spelled any other
//! way than the id itself (double encoding, an encoded `/`, other case, look-alike
//! letters, trailing `.` or `/`, `..`) names nothing; percent-encoding an allowed
//! character is the same id and gets the same answer as the plain spelling.

use agentd_gateway::domain::skills::{self, UploadedFile};
use agentd_schema::KeyKind;
use agentd_schema::ids::new_id;
use agentd_schema::store::prelude::*;
use agentd_tests::gateway::TestGateway;
use axum::http::StatusCode;
use serde_json::json;

/// What a route acts on, for choosing ids per target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    Session,
    Environment,
    Work,
    Agent,
    Vault,
    Skill,
    /// A memory store (one per environment here: attached to that environment's session).
    MemoryStore,
    /// A dream (of the workspace).
    Dream,
    /// A deployment (of the workspace).
    Deployment,
    /// A deployment run (of the workspace).
    DeploymentRun,
    /// A user profile (of the workspace).
    UserProfile,
    /// A model provider's credential (of the workspace; control plane, API keys only).
    ProviderCredential,
    /// A publication of the control plane (of the workspace), named by its fingerprint.
    Publication,
    /// A webhook subscription (of the workspace; control plane, API keys only).
    WebhookSubscription,
    /// An MCP tunnel (of the workspace; API keys only).
    Tunnel,
    /// Ids that are the caller's text (adapter thread keys, A2A task ids): one spelling.
    Text,
    /// A project (of the workspace, with a workflow saved in it), named by its slug.
    Project,
    /// A workflow revision of the workspace's project.
    WorkflowRevision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cred {
    Api,
    EnvironmentKey,
    RunnerKey,
    SessionsToken,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Own,
    OtherEnvironment,
    OtherWorkspace,
    Missing,
}

/// (method, route relative to /v1 — or, for `/api/…`, the full path —, subject,
/// destructive). Destructive routes are only sent where they must be refused, so the
/// matrix never deletes what it checks next.
const ROUTES: &[(&str, &str, Subject, bool)] = &[
    ("GET", "/agents/{agent}", Subject::Agent, false),
    ("POST", "/agents/{agent}", Subject::Agent, false),
    ("POST", "/agents/{agent}/archive", Subject::Agent, true),
    ("POST", "/agents/{agent}/disable", Subject::Agent, true),
    ("GET", "/agents/{agent}/versions", Subject::Agent, false),
    ("GET", "/environments/{env}", Subject::Environment, false),
    ("POST", "/environments/{env}", Subject::Environment, false),
    ("DELETE", "/environments/{env}", Subject::Environment, true),
    ("POST", "/environments/{env}/archive", Subject::Environment, true),
    ("GET", "/environments/{env}/work", Subject::Environment, false),
    ("GET", "/environments/{env}/work/poll", Subject::Environment, false),
    ("GET", "/environments/{env}/work/stats", Subject::Environment, false),
    ("GET", "/environments/{env}/work/{work}", Subject::Work, false),
    ("POST", "/environments/{env}/work/{work}", Subject::Work, false),
    ("POST", "/environments/{env}/work/{work}/ack", Subject::Work, false),
    ("POST", "/environments/{env}/work/{work}/heartbeat", Subject::Work, false),
    ("POST", "/environments/{env}/work/{work}/stop", Subject::Work, true),
    ("POST", "/ext/environments/{env}/work/{work}/refuse", Subject::Work, true),
    ("GET", "/sessions/{session}", Subject::Session, false),
    ("POST", "/sessions/{session}", Subject::Session, false),
    ("DELETE", "/sessions/{session}", Subject::Session, true),
    ("POST", "/sessions/{session}/archive", Subject::Session, true),
    ("GET", "/sessions/{session}/resources", Subject::Session, false),
    ("POST", "/sessions/{session}/resources", Subject::Session, false),
    ("GET", "/sessions/{session}/resources/{resource}", Subject::Session, false),
    ("POST", "/sessions/{session}/resources/{resource}", Subject::Session, false),
    ("DELETE", "/sessions/{session}/resources/{resource}", Subject::Session, true),
    ("POST", "/sessions/{session}/events", Subject::Session, false),
    ("GET", "/sessions/{session}/events", Subject::Session, false),
    ("GET", "/sessions/{session}/events/stream", Subject::Session, false),
    ("GET", "/sessions/{session}/threads", Subject::Session, false),
    ("GET", "/sessions/{session}/threads/{session}", Subject::Session, false),
    ("POST", "/sessions/{session}/threads/{session}/archive", Subject::Session, false),
    ("GET", "/sessions/{session}/threads/{session}/events", Subject::Session, false),
    ("GET", "/sessions/{session}/threads/{session}/stream", Subject::Session, false),
    // A child thread (`sthr_…`) the session does not have.
    ("GET", "/sessions/{session}/threads/{sthr}", Subject::Session, false),
    ("POST", "/sessions/{session}/threads/{sthr}/archive", Subject::Session, false),
    ("GET", "/sessions/{session}/threads/{sthr}/events", Subject::Session, false),
    ("GET", "/sessions/{session}/threads/{sthr}/stream", Subject::Session, false),
    ("GET", "/ext/sessions/{session}/live-inbox", Subject::Session, false),
    ("POST", "/ext/sessions/{session}/live-inbox", Subject::Session, false),
    ("GET", "/ext/sessions/{session}/resources", Subject::Session, false),
    ("GET", "/ext/sessions/{session}/sandbox-environment", Subject::Session, false),
    ("POST", "/ext/sessions/{session}/files", Subject::Session, false),
    ("GET", "/ext/sessions/{session}/files/{file}/content", Subject::Session, false),
    ("PUT", "/ext/sessions/{session}/resources", Subject::Session, false),
    ("PUT", "/ext/sessions/{session}/live-inbox/order", Subject::Session, false),
    ("PUT", "/ext/sessions/{session}/live-inbox/{message}", Subject::Session, false),
    ("DELETE", "/ext/sessions/{session}/live-inbox/{message}", Subject::Session, true),
    ("POST", "/ext/environments/{env}/keys", Subject::Environment, false),
    ("GET", "/ext/environments/{env}/keys", Subject::Environment, false),
    ("POST", "/ext/environments/{env}/keys/{key}/revoke", Subject::Environment, true),
    ("GET", "/vaults/{vault}", Subject::Vault, false),
    ("POST", "/vaults/{vault}", Subject::Vault, false),
    ("DELETE", "/vaults/{vault}", Subject::Vault, true),
    ("POST", "/vaults/{vault}/archive", Subject::Vault, true),
    ("GET", "/vaults/{vault}/credentials", Subject::Vault, false),
    ("GET", "/vaults/{vault}/credentials/{credential}", Subject::Vault, false),
    ("POST", "/vaults/{vault}/credentials/{credential}", Subject::Vault, false),
    ("DELETE", "/vaults/{vault}/credentials/{credential}", Subject::Vault, true),
    ("POST", "/vaults/{vault}/credentials/{credential}/archive", Subject::Vault, true),
    ("POST", "/vaults/{vault}/credentials/{credential}/mcp_oauth_validate", Subject::Vault, false),
    ("GET", "/skills/{skill}", Subject::Skill, false),
    ("DELETE", "/skills/{skill}", Subject::Skill, true),
    ("GET", "/skills/{skill}/versions", Subject::Skill, false),
    ("POST", "/skills/{skill}/versions", Subject::Skill, false),
    ("GET", "/skills/{skill}/versions/{version}", Subject::Skill, false),
    ("DELETE", "/skills/{skill}/versions/{version}", Subject::Skill, true),
    ("GET", "/skills/{skill}/versions/{version}/content", Subject::Skill, false),
    ("GET", "/ext/skills/{skill}/versions/{version}/files/SKILL.md", Subject::Skill, false),
    ("GET", "/memory_stores/{memstore}", Subject::MemoryStore, false),
    ("POST", "/memory_stores/{memstore}", Subject::MemoryStore, false),
    ("DELETE", "/memory_stores/{memstore}", Subject::MemoryStore, true),
    ("POST", "/memory_stores/{memstore}/archive", Subject::MemoryStore, true),
    ("GET", "/memory_stores/{memstore}/memories", Subject::MemoryStore, false),
    ("POST", "/memory_stores/{memstore}/memories", Subject::MemoryStore, false),
    ("GET", "/memory_stores/{memstore}/memories/{memory}", Subject::MemoryStore, false),
    ("POST", "/memory_stores/{memstore}/memories/{memory}", Subject::MemoryStore, false),
    ("DELETE", "/memory_stores/{memstore}/memories/{memory}", Subject::MemoryStore, false),
    ("GET", "/memory_stores/{memstore}/memory_versions", Subject::MemoryStore, false),
    ("GET", "/memory_stores/{memstore}/memory_versions/{memver}", Subject::MemoryStore, false),
    ("POST", "/memory_stores/{memstore}/memory_versions/{memver}/redact", Subject::MemoryStore, false),
    ("GET", "/dreams/{dream}", Subject::Dream, false),
    ("POST", "/dreams/{dream}/archive", Subject::Dream, false),
    ("POST", "/dreams/{dream}/cancel", Subject::Dream, true),
    ("GET", "/deployments/{depl}", Subject::Deployment, false),
    ("POST", "/deployments/{depl}", Subject::Deployment, false),
    ("POST", "/deployments/{depl}/archive", Subject::Deployment, true),
    ("POST", "/deployments/{depl}/pause", Subject::Deployment, true),
    ("POST", "/deployments/{depl}/unpause", Subject::Deployment, false),
    ("POST", "/deployments/{depl}/run", Subject::Deployment, true),
    ("GET", "/deployment_runs/{drun}", Subject::DeploymentRun, false),
    ("GET", "/user_profiles/{uprof}", Subject::UserProfile, false),
    ("POST", "/user_profiles/{uprof}", Subject::UserProfile, false),
    ("DELETE", "/user_profiles/{uprof}", Subject::UserProfile, true),
    ("POST", "/user_profiles/{uprof}/enrollment_url", Subject::UserProfile, false),
    ("POST", "/user_profiles/{uprof}/action_urls", Subject::UserProfile, false),
    ("GET", "/config/credentials/{pcrd}", Subject::ProviderCredential, false),
    ("POST", "/config/credentials/{pcrd}/archive", Subject::ProviderCredential, true),
    ("GET", "/ext/memory-stores/{memstore}/dream-policy", Subject::MemoryStore, false),
    ("PUT", "/ext/memory-stores/{memstore}/dream-policy", Subject::MemoryStore, false),
    ("POST", "/durable/threads/{session}/cancel", Subject::Session, false),
    ("GET", "/durable/threads/{session}/dispatches", Subject::Session, false),
    ("GET", "/durable/threads/{session}/messages", Subject::Session, false),
    ("GET", "/durable/threads/{session}/dead-letters", Subject::Session, false),
    ("POST", "/durable/threads/{session}/dead-letters/{run}/requeue", Subject::Session, false),
    ("GET", "/durable/threads/{session}/superseded", Subject::Session, false),
    ("POST", "/ai-sdk/agents/{agent}/runs", Subject::Agent, false),
    ("POST", "/ag-ui/agents/{agent}", Subject::Agent, false),
    ("GET", "/a2a/agents/{agent}", Subject::Agent, false),
    ("GET", "/a2a/agents/{agent}/.well-known/agent-card.json", Subject::Agent, false),
    ("GET", "/a2a/tasks/{task}", Subject::Text, false),
    ("POST", "/a2a/tasks/{task}/pushNotificationConfigs", Subject::Text, false),
    ("GET", "/ai-sdk/threads/{chat}/messages", Subject::Text, false),
    // Agent authoring (an API key only). PUT first, so the draft the others read exists.
    ("PUT", "/config/agents/{agent}", Subject::Agent, false),
    ("GET", "/config/agents/{agent}", Subject::Agent, false),
    ("POST", "/config/agents/{agent}/validate", Subject::Agent, false),
    ("POST", "/config/agents/{agent}/publish", Subject::Agent, false),
    ("DELETE", "/config/agents/{agent}", Subject::Agent, true),
    ("GET", "/config/publications/{pub}", Subject::Publication, false),
    ("GET", "/config/publications/{pub}/export", Subject::Publication, false),
    ("GET", "/config/webhook-subscriptions/{hook}", Subject::WebhookSubscription, false),
    ("GET", "/config/webhook-subscriptions/{hook}/deliveries", Subject::WebhookSubscription, false),
    ("DELETE", "/config/webhook-subscriptions/{hook}", Subject::WebhookSubscription, true),
    // MCP configuration (an API key only): an agent's MCP servers, the registry.
    ("GET", "/config/agents/{agent}/mcp", Subject::Agent, false),
    ("PUT", "/config/agents/{agent}/mcp", Subject::Agent, false),
    ("POST", "/config/agents/{agent}/mcp/resolve", Subject::Agent, false),
    ("GET", "/config/mcp-servers/{mcpsrv}", Subject::Text, false),
    ("DELETE", "/config/mcp-servers/{mcpsrv}", Subject::Text, true),
    ("GET", "/ag-ui/threads/{chat}/messages", Subject::Text, false),
    // Sandbox execution policies (an API key only) and an environment's binding.
    ("GET", "/ext/environments/{env}/sandbox-execution-policy", Subject::Environment, false),
    ("POST", "/ext/environments/{env}/sandbox-execution-policy", Subject::Environment, false),
    ("GET", "/ext/sandbox-execution-policies/{sbxpol}", Subject::Text, false),
    ("POST", "/ext/sandbox-execution-policies/{sbxpol}/versions", Subject::Text, false),
    // MCP tunnels (an API key only).
    ("GET", "/tunnels/{tnl}", Subject::Tunnel, false),
    ("POST", "/tunnels/{tnl}/reveal_token", Subject::Tunnel, false),
    ("POST", "/tunnels/{tnl}/rotate_token", Subject::Tunnel, false),
    ("GET", "/tunnels/{tnl}/certificates", Subject::Tunnel, false),
    ("POST", "/tunnels/{tnl}/certificates", Subject::Tunnel, false),
    ("GET", "/tunnels/{tnl}/certificates/{tcrt}", Subject::Tunnel, false),
    ("POST", "/tunnels/{tnl}/certificates/{tcrt}/archive", Subject::Tunnel, false),
    ("POST", "/tunnels/{tnl}/archive", Subject::Tunnel, true),
    // A project's workflows (an API key only; docs/api/workflows.md), outside `/v1`.
    ("GET", "/api/projects/{proj}/workflows/matrix-flow/override", Subject::Project, false),
    ("POST", "/api/projects/{proj}/workflows/matrix-flow/revision", Subject::Project, false),
    ("POST", "/api/projects/{proj}/workflows/matrix-flow/override/clear", Subject::Project, false),
    ("GET", "/api/projects/{proj}/workflows/matrix-flow/revisions/{wfrev}", Subject::WorkflowRevision, false),
];

/// One environment's ids; its session has its memory store attached (`read_write`).
#[derive(Debug, Clone)]
struct Home {
    environment: String,
    session: String,
    work: String,
    memory_store: String,
}

/// One workspace's ids.
#[derive(Debug, Clone)]
struct Workspace {
    agent: String,
    vault: String,
    skill: String,
    /// A dream over the workspace's first home (filled once the homes exist).
    dream: String,
    /// A deployment on the workspace's first home's environment, and a run of it.
    deployment: String,
    deployment_run: String,
    /// A user profile of the workspace.
    user_profile: String,
    /// A provider credential of the workspace.
    provider_credential: String,
    /// A publication of the workspace's agent (its fingerprint).
    publication: String,
    /// A webhook subscription of the workspace.
    webhook_subscription: String,
    /// An MCP tunnel of the workspace.
    tunnel: String,
    /// A project of the workspace with a revision of `matrix-flow` saved in it.
    project: String,
    /// That revision.
    workflow_revision: String,
}

/// Whether the credential's kind ever uses the route (otherwise 403, whatever the id).
fn kind_uses(cred: Cred, method: &str, route: &str) -> bool {
    let session_route = route.starts_with("/sessions/{session}");
    let work_protocol = matches!(
        (method, route),
        ("GET", "/environments/{env}/work/poll" | "/environments/{env}/work/stats" | "/environments/{env}/work")
            | (
                "POST",
                "/environments/{env}/work/{work}/ack"
                    | "/environments/{env}/work/{work}/heartbeat"
                    | "/environments/{env}/work/{work}/stop"
                    | "/ext/environments/{env}/work/{work}/refuse"
            )
    );
    // A session's vault variables are for its sandbox: only its sessions token reads them.
    let sandbox_environment = route == "/ext/sessions/{session}/sandbox-environment";
    // A session's mounted files and outputs are exchanged by its hands only.
    let hands_files = route.starts_with("/ext/sessions/{session}/files");
    let skill_read = reads_skills(method, route);
    // Dreams and dream policies write memory stores: an API key only.
    let dreams = route.starts_with("/dreams/") || route.starts_with("/ext/memory-stores/");
    // A sessions token reaches the memories (and reads the versions) of the stores
    // attached to its session; the stores themselves and redaction take an API key.
    let session_memory = route.starts_with("/memory_stores/{memstore}/memories")
        || (method == "GET" && route.starts_with("/memory_stores/{memstore}/memory_versions"));
    // User profiles (and their consent) take an API key only.
    let user_profiles = route.starts_with("/user_profiles/");
    // So do a project's workflows.
    let projects = route.starts_with("/api/projects/");
    match cred {
        Cred::Api => !(sandbox_environment || hands_files || (method == "GET" && route == "/environments/{env}/work")),
        Cred::EnvironmentKey | Cred::RunnerKey if dreams => false,
        Cred::SessionsToken if dreams => false,
        Cred::EnvironmentKey | Cred::RunnerKey | Cred::SessionsToken if user_profiles || projects => false,
        Cred::EnvironmentKey | Cred::RunnerKey => {
            session_route
                || hands_files
                || work_protocol
                || skill_read
                || (method == "GET" && route == "/environments/{env}")
        }
        Cred::SessionsToken => {
            session_route
                || sandbox_environment
                || hands_files
                || skill_read
                || session_memory
                || (method == "POST"
                    && matches!(
                        route,
                        "/environments/{env}/work/{work}/heartbeat"
                            | "/environments/{env}/work/{work}/stop"
                            | "/ext/environments/{env}/work/{work}/refuse"
                    ))
        }
    }
}

/// Hands read the skills of their sessions (any skill of the workspace, by any path under
/// `/skills` or `/ext/skills`); only an API key changes them.
fn reads_skills(method: &str, route: &str) -> bool {
    method == "GET" && (route.starts_with("/skills/") || route.starts_with("/ext/skills/"))
}

/// Whether the target is inside the credential's reach (given that its kind uses the route).
fn reaches(cred: Cred, target: Target) -> bool {
    match cred {
        // An API key reaches every environment of its own workspace.
        Cred::Api => matches!(target, Target::Own | Target::OtherEnvironment),
        _ => target == Target::Own,
    }
}

/// The spellings of an id: (label, spelled, whether it is the same id).
fn spellings(id: &str) -> Vec<(&'static str, String, bool)> {
    let (prefix, rest) = id.split_once('_').expect("prefixed id");
    // The prefix's first letter as its fullwidth form (`ｓesn_…`), percent-encoded.
    let first = prefix.chars().next().expect("a prefix");
    let fullwidth = char::from_u32(0xFF41 + (first as u32 - 'a' as u32)).expect("a fullwidth letter");
    let lookalike: String =
        fullwidth.to_string().bytes().map(|b| format!("%{b:02X}")).collect::<String>() + &prefix[1..];
    vec![
        ("plain", id.to_owned(), true),
        ("%5F", format!("{prefix}%5F{rest}"), true),
        ("%5f", format!("{prefix}%5f{rest}"), true),
        ("double %255F", format!("{prefix}%255F{rest}"), false),
        ("%2F inside", format!("{prefix}_{}%2F{}", &rest[..10], &rest[10..]), false),
        ("upper case", id.to_uppercase(), false),
        ("mixed case", mixed_case(prefix, rest), false),
        ("look-alike", format!("{lookalike}_{rest}"), false),
        ("fullwidth _", format!("{prefix}%EF%BC%BF{rest}"), false),
        ("trailing .", format!("{id}."), false),
        ("trailing /", format!("{id}/"), false),
        ("..", "..".to_owned(), false),
        ("%2E%2E", "%2E%2E".to_owned(), false),
    ]
}

#[tokio::test]
async fn every_credential_reaches_exactly_its_scope_under_every_spelling() {
    let gateway = TestGateway::new().await;
    let (ws1, api1) = gateway.workspace("scope-one").await;
    let (_ws2, api2) = gateway.workspace("scope-two").await;

    // Workspace one: environments A and B (self-hosted) and C (cloud), a session and a
    // work item on each; workspace two: environment X with the same.
    let make_workspace = async |key: &str| {
        let project = slug("matrix");
        let agent = gateway.create(key, "/v1/agents", json!({"name": "a", "model": "claude-sonnet-4-5"})).await;
        let vault = gateway.create(key, "/v1/vaults", json!({"display_name": "v"})).await;
        let scope = gateway.store.store.resolve_api_key(key).await.unwrap().unwrap();
        let files = vec![UploadedFile {
            path: "matrix/SKILL.md".into(),
            bytes: "---\nname: matrix\ndescription: d\n---\n".into(),
        }];
        let (skill, _) = skills::create(
            gateway.state.backends.store.as_ref(),
            &gateway.state.backends.blobs,
            &scope.workspace_id,
            None,
            files,
        )
        .await
        .unwrap();
        Workspace {
            agent: agent["id"].as_str().unwrap().to_owned(),
            vault: vault["id"].as_str().unwrap().to_owned(),
            skill: skill.id,
            dream: String::new(),
            deployment: String::new(),
            deployment_run: String::new(),
            user_profile: gateway.create(key, "/v1/user_profiles", json!({"name": "p"})).await["id"]
                .as_str()
                .expect("a user profile")
                .to_owned(),
            provider_credential: {
                let body = json!({"name": "c", "secret": "sk-matrix-secret"});
                let answer = gateway.call(key, "POST", "/v1/config/credentials", Some(body)).await;
                assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
                answer.body["id"].as_str().expect("a provider credential").to_owned()
            },
            project: project.clone(),
            workflow_revision: save_workflow(&gateway, key, &project).await,
            publication: publish(&gateway, key, agent["id"].as_str().unwrap()).await,
            webhook_subscription: {
                let id = new_id("whep");
                let body = json!({"url": "http://127.0.0.1:9/hook", "event_types": ["agent.created"]});
                let path = format!("/v1/config/webhook-subscriptions/{id}");
                let answer = gateway.call(key, "PUT", &path, Some(body)).await;
                assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
                id
            },
            tunnel: gateway.create(key, "/v1/tunnels", json!({})).await["id"].as_str().expect("a tunnel").to_owned(),
        }
    };
    let mut w1 = make_workspace(&api1).await;
    let mut w2 = make_workspace(&api2).await;
    let make_home = async |key: &str, workspace: &Workspace, kind: &str| {
        let env = gateway.create(key, "/v1/environments", json!({"name": new_id("e"), "config": {"type": kind}})).await;
        let environment = env["id"].as_str().unwrap().to_owned();
        let memory_store = gateway.create(key, "/v1/memory_stores", json!({"name": new_id("m")})).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let resources = json!([{"type": "memory_store", "memory_store_id": memory_store}]);
        let session = gateway
            .create(
                key,
                "/v1/sessions",
                json!({"agent": workspace.agent, "environment_id": environment, "resources": resources}),
            )
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let scope = gateway.store.store.resolve_api_key(key).await.unwrap().unwrap();
        let work = gateway
            .store
            .store
            .ensure_work_item(&scope.workspace_id, &environment, &session, "test")
            .await
            .unwrap()
            .expect("a new work item")
            .id;
        Home { environment, session, work, memory_store }
    };
    let a = make_home(&api1, &w1, "self_hosted").await;
    let b = make_home(&api1, &w1, "self_hosted").await;
    let c = make_home(&api1, &w1, "cloud").await;
    let x = make_home(&api2, &w2, "self_hosted").await;
    // Dreams are the workspace's: one over each workspace's first home.
    for (key, workspace, home) in [(&api1, &mut w1, &a), (&api2, &mut w2, &x)] {
        let inputs = json!([
            {"type": "memory_store", "memory_store_id": home.memory_store},
            {"type": "sessions", "session_ids": [home.session]},
        ]);
        let dream = gateway.create(key, "/v1/dreams", json!({"inputs": inputs, "model": "claude-sonnet-4-5"})).await;
        workspace.dream = dream["id"].as_str().expect("a dream").to_owned();
        let events = json!([{"type": "user.message", "content": [{"type": "text", "text": "go"}]}]);
        let body = json!({"name": "d", "agent": workspace.agent, "environment_id": home.environment, "initial_events": events});
        let deployment = gateway.create(key, "/v1/deployments", body).await;
        workspace.deployment = deployment["id"].as_str().expect("a deployment").to_owned();
        let run = gateway.create(key, &format!("/v1/deployments/{}/run", workspace.deployment), json!({})).await;
        workspace.deployment_run = run["id"].as_str().expect("a deployment run").to_owned();
    }

    let environment_key = gateway.key(&ws1, KeyKind::Environment(a.environment.clone())).await;
    let runner_key = gateway.key(&ws1, KeyKind::Runner).await;
    // The sessions token comes with the work item offered on environment A.
    let offered =
        gateway.call(&environment_key, "GET", &format!("/v1/environments/{}/work/poll", a.environment), None).await;
    assert_eq!(offered.status, StatusCode::OK, "{:?}", offered.body);
    assert_eq!(offered.body["id"], a.work.as_str());
    let secret = offered.body["secret"].as_str().expect("the offer carries its secret");
    let decoded = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(secret).unwrap()
    };
    let sessions_token =
        serde_json::from_slice::<serde_json::Value>(&decoded).unwrap()["sessions_token"].as_str().unwrap().to_owned();

    let creds = [
        (Cred::Api, api1.clone(), a.clone(), b.clone()),
        (Cred::EnvironmentKey, environment_key, a.clone(), b.clone()),
        // A runner key serves cloud environments: A is "another environment" to it.
        (Cred::RunnerKey, runner_key, c.clone(), a.clone()),
        (Cred::SessionsToken, sessions_token, a.clone(), b.clone()),
    ];
    let missing = Home {
        environment: new_id("env"),
        session: new_id("sesn"),
        work: new_id("work"),
        memory_store: new_id("memstore"),
    };
    let missing_workspace = Workspace {
        agent: new_id("agent"),
        vault: new_id("vlt"),
        skill: new_id("skill"),
        dream: new_id("drm"),
        deployment: new_id("depl"),
        deployment_run: new_id("drun"),
        user_profile: new_id("uprof"),
        provider_credential: new_id("pcrd"),
        publication: agentd_schema::ids::secret_hash(&new_id("pub")),
        webhook_subscription: new_id("whep"),
        tunnel: new_id("tnl"),
        project: slug("missing"),
        workflow_revision: format!("wfrev_{}", agentd_schema::ids::secret_hash(&new_id("rev"))),
    };

    let mut failures = Vec::new();
    let mut sent = 0;
    for (cred, key, own, other) in &creds {
        for &(method, route, subject, destructive) in ROUTES {
            for target in [Target::Own, Target::OtherEnvironment, Target::OtherWorkspace, Target::Missing] {
                let (home, workspace) = match target {
                    Target::Own => (own, &w1),
                    Target::OtherEnvironment => (other, &w1),
                    Target::OtherWorkspace => (&x, &w2),
                    Target::Missing => (&missing, &missing_workspace),
                };
                // Agents and vaults belong to a workspace, not an environment.
                if matches!(
                    subject,
                    Subject::Agent
                        | Subject::Vault
                        | Subject::Skill
                        | Subject::Dream
                        | Subject::Deployment
                        | Subject::DeploymentRun
                        | Subject::UserProfile
                        | Subject::ProviderCredential
                        | Subject::Publication
                        | Subject::WebhookSubscription
                        | Subject::Text
                        | Subject::Project
                        | Subject::WorkflowRevision
                ) && target == Target::OtherEnvironment
                {
                    continue;
                }
                let allowed = kind_uses(*cred, method, route) && reaches(*cred, target);
                if destructive && allowed {
                    continue;
                }
                // A draft of an id no agent has is a draft of a new agent
                // (docs/api/config.md): for an API key, "missing" is created, not refused.
                if (*cred, method, route, target) == (Cred::Api, "PUT", "/config/agents/{agent}", Target::Missing) {
                    continue;
                }
                let subject_id = match subject {
                    Subject::Session => &home.session,
                    Subject::Environment | Subject::Work => &home.environment,
                    Subject::Agent => &workspace.agent,
                    Subject::Vault => &workspace.vault,
                    Subject::Skill => &workspace.skill,
                    Subject::Dream => &workspace.dream,
                    Subject::Deployment => &workspace.deployment,
                    Subject::DeploymentRun => &workspace.deployment_run,
                    Subject::UserProfile => &workspace.user_profile,
                    Subject::ProviderCredential => &workspace.provider_credential,
                    Subject::Publication => &workspace.publication,
                    Subject::WebhookSubscription => &workspace.webhook_subscription,
                    Subject::Tunnel => &workspace.tunnel,
                    Subject::MemoryStore => &home.memory_store,
                    Subject::Text => &workspace.agent,
                    Subject::Project => &workspace.project,
                    Subject::WorkflowRevision => &workspace.workflow_revision,
                };
                let spelled_ways = match subject {
                    Subject::Text => vec![("plain", subject_id.clone(), true)],
                    // A fingerprint is lowercase hex and nothing else.
                    Subject::Publication => vec![
                        ("plain", subject_id.clone(), true),
                        ("upper case", subject_id.to_uppercase(), false),
                        ("trailing .", format!("{subject_id}."), false),
                        ("..", "..".to_owned(), false),
                    ],
                    // A subscription's id is a name its creator chose, case and all: an
                    // upper-case spelling is another (valid) name, not a malformed id.
                    Subject::WebhookSubscription => spellings(subject_id)
                        .into_iter()
                        .filter(|(label, _, _)| !matches!(*label, "upper case" | "mixed case"))
                        .collect(),
                    // A slug is lowercase letters, digits and `-`; `%2D` is its `-`.
                    Subject::Project => vec![
                        ("plain", subject_id.clone(), true),
                        ("%2D", subject_id.replacen('-', "%2D", 1), true),
                        ("upper case", subject_id.to_uppercase(), false),
                        ("trailing .", format!("{subject_id}."), false),
                        ("%2F inside", subject_id.replacen('-', "%2F", 1), false),
                        ("..", "..".to_owned(), false),
                        ("%2E%2E", "%2E%2E".to_owned(), false),
                    ],
                    _ => spellings(subject_id),
                };
                for (label, spelled, same) in spelled_ways {
                    let path = route
                        .replace("{session}", &home.session)
                        .replace("{env}", &home.environment)
                        .replace("{work}", &home.work)
                        .replace("{agent}", &workspace.agent)
                        .replace("{vault}", &workspace.vault)
                        .replace("{skill}", &workspace.skill)
                        .replace("{dream}", &workspace.dream)
                        .replace("{depl}", &workspace.deployment)
                        .replace("{drun}", &workspace.deployment_run)
                        .replace("{uprof}", &workspace.user_profile)
                        .replace("{pcrd}", &workspace.provider_credential)
                        .replace("{pub}", &workspace.publication)
                        .replace("{hook}", &workspace.webhook_subscription)
                        .replace("{tnl}", &workspace.tunnel)
                        .replace("{tcrt}", &new_id("tcrt"))
                        .replace("{proj}", &workspace.project)
                        .replace("{wfrev}", &workspace.workflow_revision)
                        .replace("{memstore}", &home.memory_store)
                        .replace("{memory}", &new_id("mem"))
                        .replace("{memver}", &new_id("memver"))
                        .replace("{version}", "latest")
                        .replace("{resource}", &new_id("sres"))
                        .replace("{credential}", &new_id("vcrd"))
                        .replace("{message}", &new_id("inbox"))
                        .replace("{key}", &new_id("apikey"))
                        .replace("{run}", &new_id("run"))
                        .replace("{sthr}", &new_id("sthr"))
                        .replace("{file}", &new_id("file"))
                        .replace("{task}", "6f1c1c52-3b1e-4d5e-9a8f-2c1d7b9e4a10")
                        .replace("{chat}", "chat-key-of-the-client")
                        .replace("{mcpsrv}", "mcp-server-of-the-client")
                        .replace("{sbxpol}", "policy-of-the-client")
                        .replacen(subject_id.as_str(), &spelled, 1);
                    let body = (method != "GET" && method != "DELETE").then(|| json!({}));
                    let full = if path.starts_with("/api/") { path.clone() } else { format!("/v1{path}") };
                    let answer = gateway.call(key, method, &full, body).await;
                    sent += 1;
                    let status = answer.status.as_u16();
                    let expected = if label == "trailing /" && *cred != Cred::Api && !reads_skills(method, route) {
                        // No route has the trailing slash: a scoped credential gets the
                        // 403 of a path its kind never uses, whatever the id names (a
                        // path under the skills it reads is the 404 of no route).
                        "403"
                    } else if !same {
                        "404"
                    } else if !kind_uses(*cred, method, route) {
                        "403"
                    } else if allowed {
                        "reached"
                    } else if *cred == Cred::Api {
                        // Another workspace's resource is missing to this key; its
                        // handler may refuse the body before it looks (400), as may the
                        // envelope a JSON body sent to an upload route (415).
                        "missing"
                    } else {
                        "404"
                    };
                    let ok = match expected {
                        "missing" => status == 404 || status == 400 || (status == 415 && route.ends_with("/versions")),
                        // The handler ran: not refused, and not "not found" unless the
                        // route names a second resource the matrix did not create.
                        "reached" => ![401, 403].contains(&status) && (status != 404 || has_sub_id(route)),
                        "403" => status == 403,
                        _ => status == 404,
                    };
                    if !ok {
                        failures.push(format!(
                            "{cred:?} {method} {route} {target:?} [{label}] → {status}, expected {expected}: {}",
                            answer.body
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {sent} requests answered wrongly:\n{}", failures.len(), failures.join("\n"));
    assert!(sent > 2000, "the matrix is as large as it claims: {sent}");

    // Nothing out of reach was changed: every session and environment is still there.
    for home in [&a, &b, &c] {
        let session = gateway.call(&api1, "GET", &format!("/v1/sessions/{}", home.session), None).await;
        assert_eq!(session.status, StatusCode::OK, "{:?}", session.body);
        assert!(session.body["archived_at"].is_null(), "{:?}", session.body);
        let env = gateway.call(&api1, "GET", &format!("/v1/environments/{}", home.environment), None).await;
        assert!(env.body["archived_at"].is_null(), "{:?}", env.body);
        let store = gateway.call(&api1, "GET", &format!("/v1/memory_stores/{}", home.memory_store), None).await;
        assert_eq!(store.status, StatusCode::OK, "{:?}", store.body);
        assert!(store.body["archived_at"].is_null(), "{:?}", store.body);
    }
    let store = gateway.call(&api2, "GET", &format!("/v1/memory_stores/{}", x.memory_store), None).await;
    assert!(store.status == StatusCode::OK && store.body["archived_at"].is_null(), "{:?}", store.body);
    let session = gateway.call(&api2, "GET", &format!("/v1/sessions/{}", x.session), None).await;
    assert!(session.status == StatusCode::OK && session.body["archived_at"].is_null(), "{:?}", session.body);
    for (key, workspace) in [(&api1, &w1), (&api2, &w2)] {
        let skill = gateway.call(key, "GET", &format!("/v1/skills/{}/versions/latest", workspace.skill), None).await;
        assert_eq!(skill.status, StatusCode::OK, "{:?}", skill.body);
        let profile = gateway.call(key, "GET", &format!("/v1/user_profiles/{}", workspace.user_profile), None).await;
        assert_eq!(profile.status, StatusCode::OK, "no scoped credential deleted it: {:?}", profile.body);
    }
    gateway.cleanup().await;
}

/// A project slug no other test run uses.
fn slug(prefix: &str) -> String {
    format!("{prefix}-{}", new_id("p").trim_start_matches("p_").to_ascii_lowercase())
}

/// Saves a revision of `matrix-flow` in `project`: its id.
async fn save_workflow(gateway: &TestGateway, key: &str, project: &str) -> String {
    let state = json!({"name": "Done", "description": "", "icon": "", "state_group": "done", "completion": "completed", "transitions": []});
    let declaration = json!({"name": "m", "description": "", "icon": "", "start": "done", "states": {"done": state}});
    let body = json!({"expected_override_version": 0, "idempotency_key": "matrix", "declaration": declaration});
    let path = format!("/api/projects/{project}/workflows/matrix-flow/revision");
    let answer = gateway.call(key, "POST", &path, Some(body)).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    answer.body["revision"]["id"].as_str().expect("a revision").to_owned()
}

/// Publishes a draft of `agent` as it is: a publication of the workspace, by fingerprint.
async fn publish(gateway: &TestGateway, key: &str, agent: &str) -> String {
    let draft = format!("/v1/config/agents/{agent}");
    let put = gateway.call(key, "PUT", &draft, Some(json!({"name": "a", "model": "claude-sonnet-4-5"}))).await;
    assert_eq!(put.status, StatusCode::CREATED, "{:?}", put.body);
    let published = gateway.call(key, "POST", &format!("{draft}/publish"), Some(json!({}))).await;
    assert_eq!(published.status, StatusCode::CREATED, "{:?}", published.body);
    published.body["fingerprint"].as_str().expect("a fingerprint").to_owned()
}

/// The id with its first letter (not digit) after the prefix in upper case.
fn mixed_case(prefix: &str, rest: &str) -> String {
    let at = rest.find(|c: char| c.is_ascii_alphabetic()).expect("a letter in 26 base32 characters");
    format!("{prefix}_{}{}{}", &rest[..at], rest[at..=at].to_uppercase(), &rest[at + 1..])
}

/// Routes that name a second resource the matrix does not create (its handler answers 404).
fn has_sub_id(route: &str) -> bool {
    [
        "{sthr}",
        "{resource}",
        "{credential}",
        "{message}",
        "{key}",
        "{run}",
        "{task}",
        "{chat}",
        "{file}",
        "{memory}",
        "{memver}",
        "{mcpsrv}",
        "{sbxpol}",
        "{tcrt}",
    ]
    .iter()
    .any(|sub| route.contains(sub))
}

/// The two halves of the probe that found the hole, spelled as it was sent.
#[tokio::test]
async fn the_percent_encoded_probe_is_refused() {
    let gateway = TestGateway::new().await;
    let (ws, api) = gateway.workspace("probe").await;
    let agent = gateway.create(&api, "/v1/agents", json!({"name": "a", "model": "claude-sonnet-4-5"})).await;
    let mut envs = Vec::new();
    for kind in ["self_hosted", "self_hosted"] {
        let env =
            gateway.create(&api, "/v1/environments", json!({"name": new_id("e"), "config": {"type": kind}})).await;
        let session =
            gateway.create(&api, "/v1/sessions", json!({"agent": agent["id"], "environment_id": env["id"]})).await;
        envs.push((env["id"].as_str().unwrap().to_owned(), session["id"].as_str().unwrap().to_owned()));
    }
    let key_a = gateway.key(&ws, KeyKind::Environment(envs[0].0.clone())).await;
    let other_session = envs[1].1.replace('_', "%5F");
    for (method, suffix) in [("GET", ""), ("GET", "/events"), ("POST", ""), ("DELETE", "")] {
        let body = (method == "POST").then(|| json!({"title": "mine now"}));
        let answer = gateway.call(&key_a, method, &format!("/v1/sessions/{other_session}{suffix}"), body).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{method} {suffix}: {:?}", answer.body);
        assert_eq!(answer.body["error"]["type"], "not_found_error");
    }
    let missing = gateway.call(&key_a, "GET", &format!("/v1/sessions/{}", new_id("sesn")), None).await;
    let out_of_scope = gateway.call(&key_a, "GET", &format!("/v1/sessions/{}", envs[1].1), None).await;
    assert_eq!(missing.status, out_of_scope.status, "no existence oracle");
    assert_eq!(
        missing.body["error"]["message"].as_str().unwrap().split(':').next(),
        out_of_scope.body["error"]["message"].as_str().unwrap().split(':').next()
    );
    let runner = gateway.key(&ws, KeyKind::Runner).await;
    gateway.store.store.ensure_work_item(&ws, &envs[0].0, &envs[0].1, "test").await.unwrap();
    let poll = format!("/v1/environments/{}/work/poll", envs[0].0.replace('_', "%5F"));
    let answer = gateway.call(&runner, "GET", &poll, None).await;
    assert_eq!(
        answer.status,
        StatusCode::NOT_FOUND,
        "a runner key never polls a self-hosted environment: {:?}",
        answer.body
    );
    let still_queued = gateway.call(&key_a, "GET", &format!("/v1/environments/{}/work/stats", envs[0].0), None).await;
    assert_eq!(still_queued.status, StatusCode::OK);
    gateway.cleanup().await;
}

#[tokio::test]
async fn x_api_key_authenticates_beside_a_proxy_basic_authorization() {
    let gateway = TestGateway::new().await;
    let (_ws, api) = gateway.workspace("basic").await;
    let router = agentd_gateway::app(gateway.state.clone());
    use tower::ServiceExt;
    let request = axum::http::Request::get("/v1/agents")
        .header("authorization", "Basic dXNlcjpwYXNz")
        .header("x-api-key", &api)
        .header("anthropic-beta", agentd_gateway::admission::beta::MANAGED_AGENTS)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let request = axum::http::Request::get("/v1/agents")
        .header("authorization", "Basic dXNlcjpwYXNz")
        .header("anthropic-beta", agentd_gateway::admission::beta::MANAGED_AGENTS)
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(router.oneshot(request).await.unwrap().status(), StatusCode::UNAUTHORIZED);
    gateway.cleanup().await;
}

/// The sessions token of the work item offered on `environment` (polled with `key`).
async fn offered_sessions_token(gateway: &TestGateway, key: &str, environment: &str) -> String {
    let offered = gateway.call(key, "GET", &format!("/v1/environments/{environment}/work/poll"), None).await;
    assert_eq!(offered.status, StatusCode::OK, "{:?}", offered.body);
    let secret = offered.body["secret"].as_str().expect("the offer carries its secret");
    let decoded = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(secret).unwrap()
    };
    serde_json::from_slice::<serde_json::Value>(&decoded).unwrap()["sessions_token"].as_str().unwrap().to_owned()
}

/// A sessions token reaches the memories of the stores attached to its session: it
/// writes only through a `read_write` attachment (403 through a `read_only` one), a
/// store not attached is the 404 of a missing one, and the stores themselves and
/// redaction are 403. Environment keys never reach memory.
#[tokio::test]
async fn a_sessions_token_writes_memory_only_through_a_read_write_attachment() {
    let gateway = TestGateway::new().await;
    let (ws, api) = gateway.workspace("memory-scope").await;
    let agent = gateway.create(&api, "/v1/agents", json!({"name": "a", "model": "claude-sonnet-4-5"})).await;
    let env =
        gateway.create(&api, "/v1/environments", json!({"name": new_id("e"), "config": {"type": "self_hosted"}})).await;
    let environment = env["id"].as_str().unwrap().to_owned();
    let store = async |name: &str| {
        gateway.create(&api, "/v1/memory_stores", json!({"name": name})).await["id"].as_str().unwrap().to_owned()
    };
    let (writable, readable, unattached) = (store("writable").await, store("readable").await, store("elsewhere").await);
    let resources = json!([
        {"type": "memory_store", "memory_store_id": writable},
        {"type": "memory_store", "memory_store_id": readable, "access": "read_only"},
    ]);
    let session = gateway
        .create(
            &api,
            "/v1/sessions",
            json!({"agent": agent["id"], "environment_id": environment, "resources": resources}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let scope = gateway.store.store.resolve_api_key(&api).await.unwrap().unwrap();
    gateway.store.store.ensure_work_item(&scope.workspace_id, &environment, &session, "test").await.unwrap();
    let environment_key = gateway.key(&ws, KeyKind::Environment(environment.clone())).await;
    let token = offered_sessions_token(&gateway, &environment_key, &environment).await;
    // One memory in each store, written with the API key.
    let mut memories = std::collections::HashMap::new();
    for id in [&writable, &readable, &unattached] {
        let made = gateway
            .create(&api, &format!("/v1/memory_stores/{id}/memories"), json!({"path": "/seed.md", "content": "seed"}))
            .await;
        memories.insert(id.clone(), made["id"].as_str().unwrap().to_owned());
    }

    // Reads of both attached stores.
    for id in [&writable, &readable] {
        let listed = gateway.call(&token, "GET", &format!("/v1/memory_stores/{id}/memories"), None).await;
        assert_eq!(listed.status, StatusCode::OK, "{:?}", listed.body);
        assert_eq!(listed.body["data"][0]["path"], "/seed.md");
        let one = gateway.call(&token, "GET", &format!("/v1/memory_stores/{id}/memories/{}", memories[id]), None).await;
        assert_eq!((one.status, one.body["content"].as_str()), (StatusCode::OK, Some("seed")), "{:?}", one.body);
        let versions = gateway.call(&token, "GET", &format!("/v1/memory_stores/{id}/memory_versions"), None).await;
        assert_eq!(versions.status, StatusCode::OK, "{:?}", versions.body);
    }
    // Writes through the read_write attachment, as the session.
    let written = gateway
        .call(
            &token,
            "POST",
            &format!("/v1/memory_stores/{writable}/memories"),
            Some(json!({"path": "/by-agent.md", "content": "x"})),
        )
        .await;
    assert_eq!(written.status, StatusCode::OK, "{:?}", written.body);
    let versions = gateway
        .call(
            &api,
            "GET",
            &format!("/v1/memory_stores/{writable}/memory_versions?memory_id={}", written.body["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(versions.body["data"][0]["created_by"], json!({"type": "session_actor", "session_id": session}));
    // Writes through the read_only attachment: 403, and nothing changed.
    let seed = &memories[&readable];
    for (method, path, body) in [
        ("POST", format!("/v1/memory_stores/{readable}/memories"), Some(json!({"path": "/no.md", "content": "x"}))),
        ("POST", format!("/v1/memory_stores/{readable}/memories/{seed}"), Some(json!({"content": "changed"}))),
        ("DELETE", format!("/v1/memory_stores/{readable}/memories/{seed}"), None),
    ] {
        let refused = gateway.call(&token, method, &path, body).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{method} {path}: {:?}", refused.body);
        assert_eq!(refused.body["error"]["type"], "permission_error");
        assert!(refused.body["error"]["message"].as_str().unwrap().contains("read-only"), "{:?}", refused.body);
    }
    let untouched = gateway.call(&api, "GET", &format!("/v1/memory_stores/{readable}/memories/{seed}"), None).await;
    assert_eq!(untouched.body["content"], "seed");
    // A store of the workspace that is not attached: the 404 of a missing store.
    let missing = new_id("memstore");
    for store in [&unattached, &missing] {
        for (method, path) in [
            ("GET", format!("/v1/memory_stores/{store}/memories")),
            ("POST", format!("/v1/memory_stores/{store}/memories")),
            ("GET", format!("/v1/memory_stores/{store}/memory_versions")),
        ] {
            let body = (method == "POST").then(|| json!({"path": "/x.md", "content": "x"}));
            let answer = gateway.call(&token, method, &path, body).await;
            assert_eq!(answer.status, StatusCode::NOT_FOUND, "{method} {path}: {:?}", answer.body);
            assert!(answer.body["error"]["message"].as_str().unwrap().starts_with("memory store not found"));
        }
    }
    // The stores themselves and redaction take an API key.
    let version = versions.body["data"][0]["id"].as_str().unwrap().to_owned();
    for (method, path) in [
        ("GET", "/v1/memory_stores".to_owned()),
        ("POST", "/v1/memory_stores".to_owned()),
        ("GET", format!("/v1/memory_stores/{writable}")),
        ("POST", format!("/v1/memory_stores/{writable}")),
        ("DELETE", format!("/v1/memory_stores/{writable}")),
        ("POST", format!("/v1/memory_stores/{writable}/archive")),
        ("POST", format!("/v1/memory_stores/{writable}/memory_versions/{version}/redact")),
    ] {
        let body = (method == "POST").then(|| json!({"name": "mine"}));
        let answer = gateway.call(&token, method, &path, body).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{method} {path}: {:?}", answer.body);
    }
    // Environment keys: never.
    let answer = gateway.call(&environment_key, "GET", &format!("/v1/memory_stores/{writable}/memories"), None).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{:?}", answer.body);
    let store = gateway.call(&api, "GET", &format!("/v1/memory_stores/{writable}"), None).await;
    assert!(store.status == StatusCode::OK && store.body["archived_at"].is_null(), "{:?}", store.body);
    gateway.cleanup().await;
}
