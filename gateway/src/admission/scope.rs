//! Authorization: whether an authenticated credential reaches what the matched route
//! acts on.
//!
//! It runs after routing, on the route's template and its *decoded* path parameters —
//! the same values the handler's `Path` extractor will see — never on the raw path. Each
//! parameter is parsed once into its typed id ([`agentd_schema::ids`]); one that does not
//! parse is the route's 404, whoever asks. For a credential narrower than a workspace API
//! key, the route must be one its kind may use (otherwise 403), and the resource it names
//! must be inside the credential's reach: a session of its environment, its own work item.
//! A resource outside the reach and one that does not exist answer the same 404, so a
//! scoped key learns nothing about what it cannot reach; an unknown or unparsable id is
//! refused, never waved through to the handler.
//!
//! [`check`] is the one scope check: the layer calls it for every route, and a service
//! that acts on a resource a request did not name in its path calls it the same way.

use agentd_schema::Store;
use agentd_schema::ids::{
    AgentId, ApiKeyId, ApplicationAccessTokenId, CredentialId, DeploymentId, DeploymentRunId, DreamId, EnvironmentId,
    FileId, InboxMessageId, MemoryId, MemoryStoreId, MemoryVersionId, ProviderCredentialId, RunId, SessionId,
    SessionResourceId, SkillId, ThreadId, UserProfileId, VaultId, WebhookSubscriptionId, WorkId,
};
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::auth::{Access, Anonymous, Tenant, is_public};
use crate::AppState;
use crate::error::ApiError;

/// A resource a request acts on, as far as a scoped credential's reach is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// A session and everything under it (events, resources, threads).
    Session(SessionId),
    /// An environment (its record, its work queue).
    Environment(EnvironmentId),
    /// One work item of an environment.
    Work(EnvironmentId, WorkId),
    /// The memories (and memory versions) of a memory store; `write` for a change.
    MemoryStore {
        /// The store.
        id: MemoryStoreId,
        /// Whether the request changes its memories (create, update, delete).
        write: bool,
    },
    /// Nothing in particular (a poll across environments, a catalogue read).
    Anything,
}

/// The path parameters of the matched route, each parsed into its typed id.
#[derive(Debug, Default)]
struct PathIds {
    session: Option<SessionId>,
    environment: Option<EnvironmentId>,
    work: Option<WorkId>,
    memory_store: Option<MemoryStoreId>,
}

/// Checks the request against the tenant's reach (a `route_layer`: it needs the matched
/// route). Answers 404 for an id that does not parse, 403 for a route the credential's
/// kind never uses, 404 for a resource outside its reach.
pub async fn layer(
    State(state): State<AppState>,
    matched: Option<MatchedPath>,
    params: Result<RawPathParams, RawPathParamsRejection>,
    request: Request,
    next: Next,
) -> Response {
    let full_template = matched.as_ref().map_or("", MatchedPath::as_str);
    let template = full_template.strip_prefix("/v1").unwrap_or(full_template);
    let Some(tenant) = request.extensions().get::<Tenant>() else {
        // Authentication let it in without a credential: the route must be a public one
        // (the matched template, not the raw path, decides), its ids still parse.
        if request.extensions().get::<Anonymous>().is_none() {
            return ApiError::Unavailable("request has no trusted workspace scope".to_owned()).into_response();
        }
        if !is_public(request.method(), full_template) {
            return ApiError::Unauthenticated(
                "missing API key: send it as `Authorization: Bearer <key>` or `x-api-key: <key>`".to_owned(),
            )
            .into_response();
        }
        return match params.map_err(|_| ()).map(|params| parse(template, params.iter())) {
            Ok(Ok(_)) => next.run(request).await,
            Ok(Err(error)) => error.into_response(),
            Err(()) => ApiError::NotFound("not found: the path names no resource".to_owned()).into_response(),
        };
    };
    let ids = match params {
        Ok(params) => match parse(template, params.iter()) {
            Ok(ids) => ids,
            Err(error) => return error.into_response(),
        },
        // A parameter that is not UTF-8 once decoded names nothing.
        Err(_) => return ApiError::NotFound("not found: the path names no resource".to_owned()).into_response(),
    };
    let reach = match route_reach(&tenant.access, request.method(), template, &ids) {
        Ok(reach) => reach,
        Err(error) => return error.into_response(),
    };
    if let Err(error) = check(state.backends.store.as_ref(), tenant, &reach).await {
        return error.into_response();
    }
    next.run(request).await
}

/// Parses every path parameter into its typed id. The id kind follows from the
/// parameter's name; a name this table does not know fails closed.
fn parse<'a>(template: &str, params: impl Iterator<Item = (&'a str, &'a str)>) -> Result<PathIds, ApiError> {
    fn typed<T>(value: &str, parse: fn(&str) -> Result<T, agentd_schema::ids::InvalidId>) -> Result<T, ApiError> {
        parse(value).map_err(|invalid| not_found(invalid.kind, value))
    }
    let mut ids = PathIds::default();
    for (name, value) in params {
        match name {
            // Durable run control addresses a session's primary thread.
            "session_id" | "thread" => ids.session = Some(typed(value, SessionId::parse)?),
            "environment_id" => ids.environment = Some(typed(value, EnvironmentId::parse)?),
            "work_id" => ids.work = Some(typed(value, WorkId::parse)?),
            "agent_id" => drop(typed(value, AgentId::parse)?),
            "vault_id" => drop(typed(value, VaultId::parse)?),
            "credential_id" => drop(typed(value, CredentialId::parse)?),
            "resource_id" => drop(typed(value, SessionResourceId::parse)?),
            "key_id" => drop(typed(value, ApiKeyId::parse)?),
            "message_id" => drop(typed(value, InboxMessageId::parse)?),
            "run_id" => drop(typed(value, RunId::parse)?),
            "file_id" => drop(typed(value, FileId::parse)?),
            "skill_id" => drop(typed(value, SkillId::parse)?),
            "memory_store_id" => ids.memory_store = Some(typed(value, MemoryStoreId::parse)?),
            "memory_id" => drop(typed(value, MemoryId::parse)?),
            "memory_version_id" => drop(typed(value, MemoryVersionId::parse)?),
            "dream_id" => drop(typed(value, DreamId::parse)?),
            "deployment_id" => drop(typed(value, DeploymentId::parse)?),
            "deployment_run_id" => drop(typed(value, DeploymentRunId::parse)?),
            "user_profile_id" => drop(typed(value, UserProfileId::parse)?),
            "application_access_token_id" => drop(typed(value, ApplicationAccessTokenId::parse)?),
            "webhook_subscription_id" | "webhook_endpoint_id" => drop(typed(value, WebhookSubscriptionId::parse)?),
            // A publication of the control plane: a hex SHA-256 (docs/api/config.md).
            "fingerprint" if crate::domain::agent_drafts::is_fingerprint(value) => {}
            "fingerprint" => return Err(not_found("publication", value)),
            "provider_credential_id" => drop(typed(value, ProviderCredentialId::parse)?),
            "tunnel_id" => drop(typed(value, agentd_schema::ids::TunnelId::parse)?),
            "certificate_id" => drop(typed(value, agentd_schema::ids::TunnelCertificateId::parse)?),
            // Names the caller chose for providers, their endpoints, credential pools and
            // inference profiles (docs/api/config.md): one that cannot exist is a 404.
            "provider_id" | "endpoint_id" | "credential_pool_id" | "inference_profile_id"
                if crate::domain::providers::is_name(value) => {}
            "provider_id" | "endpoint_id" | "credential_pool_id" | "inference_profile_id" => {
                return Err(not_found(&name.replace('_', " ").replace(" id", ""), value));
            }
            // A registered MCP server: an id the caller chose (docs/api/config.md).
            "mcp_server_id" if crate::domain::mcp_config::is_server_id(value) => {}
            "mcp_server_id" => return Err(not_found("mcp server", value)),
            // A sandbox execution policy: an id the caller chose or a preset's.
            "sandbox_policy_id" if crate::domain::sandbox_policies::is_policy_id(value) => {}
            "sandbox_policy_id" => return Err(not_found("sandbox execution policy", value)),
            // A project and a workflow definition (docs/api/workflows.md): slugs the caller
            // chose; a revision of one: `wfrev_` and its content's hex SHA-256.
            "project" | "definition" if crate::domain::workflows::is_slug(value) => {}
            "project" | "definition" => return Err(not_found(name, value)),
            "revision_id" if crate::domain::workflows::is_revision_id(value) => {}
            "revision_id" => return Err(not_found("workflow revision", value)),
            // A protocol whose exposure the control plane sets.
            "protocol" if agentd_schema::ExposedProtocol::parse(value).is_some() => {}
            "protocol" => return Err(not_found("protocol", value)),
            // A skill version (an epoch-microsecond id or `latest`) and a path inside
            // it: checked by the handler inside the skill it names.
            "version" | "path" => {}
            "thread_id" if template.starts_with("/sessions/") => drop(typed(value, ThreadId::parse)?),
            // Names the caller chose (adapter thread keys, chat ids, A2A push config ids),
            // A2A task ids (UUIDs, as the protocol has them) and model names: text,
            // looked up inside the caller's workspace by the handler.
            "thread_id" | "chat_id" | "model_id" | "task" | "config" => {}
            unknown => {
                tracing::error!(route = template, parameter = unknown, "path parameter without an id kind");
                return Err(ApiError::NotFound(format!("not found: {template}")));
            }
        }
    }
    Ok(ids)
}

fn not_found(kind: &str, value: &str) -> ApiError {
    let shown: String = value.chars().take(64).collect();
    ApiError::NotFound(format!("{kind} not found: {shown}"))
}

/// Which resource a route acts on for this credential, or 403 when the credential's
/// kind never uses the route. Routes are named by their template, so what is checked is
/// exactly the handler that will run.
fn route_reach(access: &Access, method: &Method, template: &str, ids: &PathIds) -> Result<Reach, ApiError> {
    let denied = |message: &str| Err(ApiError::PermissionDenied(message.to_owned()));
    let segments: Vec<&str> = template.trim_matches('/').split('/').collect();
    let get = method == Method::GET;
    let post = method == Method::POST;
    let read = get || method == Method::HEAD;
    // The ids the template names (a template without them names no resource: 404).
    let missing = || ApiError::NotFound(format!("not found: {template}"));
    let environment = || ids.environment.clone().map(Reach::Environment).ok_or_else(missing);
    let work = || match (&ids.environment, &ids.work) {
        (Some(environment), Some(work)) => Ok(Reach::Work(environment.clone(), work.clone())),
        _ => Err(missing()),
    };
    let session = || ids.session.clone().map(Reach::Session).ok_or_else(missing);
    let memory_store =
        |write: bool| ids.memory_store.clone().map(|id| Reach::MemoryStore { id, write }).ok_or_else(missing);
    // The environment work protocol, shared by environment and runner keys.
    let work_route = match segments.as_slice() {
        ["environments", "{environment_id}", "work"] if get => Some(environment()),
        ["environments", "{environment_id}", "work", "poll" | "stats"] if get => Some(environment()),
        ["environments", "{environment_id}", "work", "{work_id}", "ack" | "heartbeat" | "stop"] if post => Some(work()),
        ["ext", "environments", "{environment_id}", "work", "{work_id}", "refuse"] if post => Some(work()),
        _ => None,
    };
    if let (Access::Environment(_) | Access::Runner, Some(reach)) = (access, work_route) {
        return reach;
    }
    match access {
        Access::Workspace => match segments.as_slice() {
            ["environments", "{environment_id}", "work"] if get => {
                denied("work.list accepts the environment key; it rejects an API key")
            }
            ["ext", "runner", ..] => denied("runner routes accept only a runner key"),
            ["ext", "sessions", "{session_id}", "sandbox-environment"] => {
                denied("a session's sandbox environment is readable only with the sessions token of its work item")
            }
            ["ext", "sessions", "{session_id}", "files", ..] => {
                denied("a session's mounted files and outputs are exchanged only by the hands of the session")
            }
            _ => Ok(Reach::Anything),
        },
        // Projects and their workflows are authored with an API key only.
        Access::App(_) | Access::Environment(_) | Access::Runner | Access::Session { .. }
            if segments.starts_with(&["api", "projects"]) =>
        {
            denied("project workflows take an API key")
        }
        // An application access token: the adapter routes of its protocols and operations;
        // which threads, `threads::bound` decides from its bindings.
        Access::App(grant) => {
            let (protocol, operation) = match segments.as_slice() {
                ["ai-sdk", "chat"] | ["ai-sdk", "threads", "{thread_id}", "runs"] if post => ("ai-sdk", "thread.run"),
                ["ai-sdk", "chat", "{chat_id}", "stream"] if get => ("ai-sdk", "thread.run"),
                ["ai-sdk", "threads", "{thread_id}", "messages"] if get => ("ai-sdk", "thread.messages.read"),
                ["ag-ui"] if post => ("ag-ui", "thread.run"),
                ["ag-ui", "threads", "{thread_id}", "messages"] if get => ("ag-ui", "thread.messages.read"),
                _ => {
                    return denied(
                        "an application access token reaches only the AI SDK and AG-UI thread routes of its grant",
                    );
                }
            };
            if !grant.protocols.iter().any(|p| p == protocol) {
                return Err(ApiError::PermissionDenied(format!(
                    "this application access token does not grant {protocol}"
                )));
            }
            if !grant.operations.iter().any(|o| o == operation) {
                return Err(ApiError::PermissionDenied(format!(
                    "this application access token does not grant {operation}"
                )));
            }
            Ok(Reach::Anything)
        }
        // Dreams write memory stores: only an API key may start, read or schedule them.
        Access::Environment(_) | Access::Runner | Access::Session { .. }
            if segments.first() == Some(&"dreams") || segments.starts_with(&["ext", "memory-stores"]) =>
        {
            denied("dreams and dream policies take an API key")
        }
        // User profiles are the platform's records of its end users (and their consent):
        // only an API key reads or changes them.
        Access::Environment(_) | Access::Runner | Access::Session { .. }
            if segments.first() == Some(&"user_profiles") =>
        {
            denied("user profiles take an API key")
        }
        Access::Environment(_) | Access::Runner if segments.first() == Some(&"memory_stores") => {
            denied("the memory_stores endpoints accept the per-item sessions token but reject the environment key")
        }
        Access::Environment(_) => match segments.as_slice() {
            ["environments", "{environment_id}"] if get => environment(),
            ["sessions", "{session_id}", ..] | ["ext", "sessions", "{session_id}", "files", ..] => session(),
            ["skills", ..] | ["ext", "skills", ..] if get => Ok(Reach::Anything),
            _ => denied("an environment key reaches only its environment's work queue and sessions"),
        },
        Access::Runner => match segments.as_slice() {
            ["ext", "runner", "work", "poll"] => Ok(Reach::Anything),
            ["environments", "{environment_id}"] if get => environment(),
            ["sessions", "{session_id}", ..] | ["ext", "sessions", "{session_id}", "files", ..] => session(),
            ["skills", ..] | ["ext", "skills", ..] if get => Ok(Reach::Anything),
            _ => denied("a runner key reaches only the work and sessions of cloud environments"),
        },
        Access::Session { .. } => match segments.as_slice() {
            ["sessions", "{session_id}", ..] => session(),
            // The session's vault variables, for its sandbox (only this token reads them).
            ["ext", "sessions", "{session_id}", "sandbox-environment"] if get => session(),
            ["ext", "sessions", "{session_id}", "files", ..] => session(),
            ["environments", "{environment_id}", "work", "{work_id}", "heartbeat" | "stop"] if post => work(),
            ["ext", "environments", "{environment_id}", "work", "{work_id}", "refuse"] if post => work(),
            ["skills", ..] | ["ext", "skills", ..] if get => Ok(Reach::Anything),
            // The memories of the stores attached to its session (the hands sync them):
            // reads, and writes through a `read_write` attachment (checked by `check`).
            ["memory_stores", "{memory_store_id}", "memories", ..] => memory_store(!read),
            ["memory_stores", "{memory_store_id}", "memory_versions"]
            | ["memory_stores", "{memory_store_id}", "memory_versions", "{memory_version_id}"]
                if get =>
            {
                memory_store(false)
            }
            ["memory_stores", ..] => denied(
                "a sessions token reaches only the memories and memory versions of the memory stores attached to its \
                 session; memory stores themselves and redaction take an API key",
            ),
            _ => denied("a sessions token reaches only its session, its work item and the session's skills and memory"),
        },
    }
}

/// For a request no route matched: a credential narrower than an API key gets the 403
/// of a route its kind never uses (as for any route outside its reach), so unknown and
/// unreachable paths look alike to it; an API key gets `None` (the route's 404).
pub fn unrouted(access: &Access, method: &Method, path: &str) -> Option<ApiError> {
    if *access == Access::Workspace {
        return None;
    }
    let relative = path.strip_prefix("/v1").unwrap_or(path);
    // Raw segments never equal a `{…}` placeholder, so nothing here is reached.
    route_reach(access, method, relative, &PathIds::default())
        .err()
        .filter(|e| matches!(e, ApiError::PermissionDenied(_)))
}

/// The scope check: `Ok` when the tenant's credential reaches `reach`, else the same 404
/// a missing resource gets. A workspace API key reaches its whole workspace (handlers
/// read and write inside it only).
pub async fn check(store: &dyn Store, tenant: &Tenant, reach: &Reach) -> Result<(), ApiError> {
    let workspace = tenant.workspace_id.as_str();
    match (&tenant.access, reach) {
        (Access::Workspace, _) | (_, Reach::Anything) => Ok(()),
        (Access::Environment(own), Reach::Session(session)) => {
            let environment = session_environment(store, workspace, session).await?;
            if environment.as_deref() == Some(own.as_str()) { Ok(()) } else { Err(not_found("session", session)) }
        }
        (Access::Environment(own), Reach::Environment(environment) | Reach::Work(environment, _)) => {
            if environment == own { Ok(()) } else { Err(not_found(EnvironmentId::KIND, environment)) }
        }
        (Access::Runner, Reach::Session(session)) => match session_environment(store, workspace, session).await? {
            Some(environment) if is_cloud(store, workspace, &environment).await? => Ok(()),
            _ => Err(not_found("session", session)),
        },
        (Access::Runner, Reach::Environment(environment) | Reach::Work(environment, _)) => {
            if is_cloud(store, workspace, environment).await? {
                Ok(())
            } else {
                Err(not_found(EnvironmentId::KIND, environment))
            }
        }
        (Access::Session { session_id, .. }, Reach::Session(session)) => {
            if session == session_id {
                Ok(())
            } else {
                Err(not_found("session", session))
            }
        }
        (Access::Session { work_id, environment_id, .. }, Reach::Work(environment, work)) => {
            if environment == environment_id && work == work_id { Ok(()) } else { Err(not_found(WorkId::KIND, work)) }
        }
        (Access::Session { .. }, Reach::Environment(environment)) => Err(not_found(EnvironmentId::KIND, environment)),
        (Access::Session { session_id, .. }, Reach::MemoryStore { id, write }) => {
            let session = store.get_session(workspace, session_id).await?;
            let resources = session.as_ref().map(|s| &s.body["resources"]);
            match resources.and_then(|r| attachment_access(r, id)) {
                None => Err(not_found(MemoryStoreId::KIND, id)),
                Some(MemoryAccess::ReadOnly) if *write => Err(ApiError::PermissionDenied(format!(
                    "memory store {id} is attached to session {session_id} read-only: its memories cannot be changed \
                     with this session's token"
                ))),
                Some(_) => Ok(()),
            }
        }
        (Access::Environment(_) | Access::Runner, Reach::MemoryStore { id, .. }) => {
            Err(not_found(MemoryStoreId::KIND, id))
        }
        // A token reaches the sessions its threads are bound to, nothing else.
        (Access::App(grant), Reach::Session(session)) => {
            if grant.bindings.iter().any(|b| b.managed_session_id == session.as_str()) {
                Ok(())
            } else {
                Err(not_found("session", session))
            }
        }
        (Access::App(_), Reach::Environment(environment) | Reach::Work(environment, _)) => {
            Err(not_found(EnvironmentId::KIND, environment))
        }
        (Access::App(_), Reach::MemoryStore { id, .. }) => Err(not_found(MemoryStoreId::KIND, id)),
    }
}

/// How a session has a memory store attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemoryAccess {
    ReadOnly,
    ReadWrite,
}

/// How a session's `resources` attach `store` (`None`: not at all). The attachment's
/// `access` defaults to `read_write` (wire reference §2B.2); any value but `read_write`
/// is read-only, and of several attachments of one store (session writes refuse them) the
/// least permissive counts.
fn attachment_access(resources: &serde_json::Value, store: &MemoryStoreId) -> Option<MemoryAccess> {
    resources
        .as_array()?
        .iter()
        .filter(|r| r["type"] == "memory_store" && r["memory_store_id"].as_str() == Some(store.as_str()))
        .map(|r| match &r["access"] {
            serde_json::Value::Null => MemoryAccess::ReadWrite,
            access if access == "read_write" => MemoryAccess::ReadWrite,
            _ => MemoryAccess::ReadOnly,
        })
        .min_by_key(|access| *access == MemoryAccess::ReadWrite)
}

/// The environment of a session of the workspace, if it exists.
async fn session_environment(
    store: &dyn Store,
    workspace: &str,
    session: &SessionId,
) -> Result<Option<String>, ApiError> {
    let found = store.get_session(workspace, session).await?;
    Ok(found.and_then(|s| s.body["environment_id"].as_str().map(str::to_owned)))
}

/// Whether the workspace has this `cloud` environment (runner keys serve only those).
async fn is_cloud(store: &dyn Store, workspace: &str, environment: &str) -> Result<bool, ApiError> {
    let found = store.get_resource(workspace, "environment", environment).await?;
    Ok(found.is_some_and(|env| env.body["config"]["type"] == "cloud"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(template: &str, params: &[(&str, &str)]) -> Result<PathIds, ApiError> {
        parse(template, params.iter().copied())
    }

    #[test]
    fn every_parameter_parses_into_its_kind() {
        let session = agentd_schema::ids::new_id("sesn");
        let parsed = ids("/sessions/{session_id}", &[("session_id", &session)]).unwrap();
        assert_eq!(parsed.session.unwrap(), session);
        let encoded = session.replace('_', "%5F");
        assert!(matches!(ids("/sessions/{session_id}", &[("session_id", &encoded)]), Err(ApiError::NotFound(_))));
        assert!(matches!(ids("/x/{mystery}", &[("mystery", "a")]), Err(ApiError::NotFound(_))), "fails closed");
        assert!(ids("/ai-sdk/threads/{thread_id}/runs", &[("thread_id", "any chat key")]).is_ok());
        let fingerprint = "0123456789abcdef".repeat(4);
        assert!(ids("/config/publications/{fingerprint}", &[("fingerprint", &fingerprint)]).is_ok());
        for spelled in [fingerprint.to_uppercase(), fingerprint[1..].to_owned(), "..".to_owned()] {
            let parsed = ids("/config/publications/{fingerprint}", &[("fingerprint", &spelled)]);
            assert!(matches!(parsed, Err(ApiError::NotFound(_))), "{spelled}");
        }
        assert!(matches!(
            ids("/sessions/{session_id}/threads/{thread_id}", &[("session_id", &session), ("thread_id", "x")]),
            Err(ApiError::NotFound(_))
        ));
        // A session's threads: its primary (the session's id) and its children (`sthr_…`).
        let child = agentd_schema::ids::new_id("sthr");
        for thread in [session.as_str(), child.as_str()] {
            let params = [("session_id", session.as_str()), ("thread_id", thread)];
            assert!(ids("/sessions/{session_id}/threads/{thread_id}/stream", &params).is_ok(), "{thread}");
        }
        let other = agentd_schema::ids::new_id("agent");
        let params = [("session_id", session.as_str()), ("thread_id", other.as_str())];
        assert!(matches!(ids("/sessions/{session_id}/threads/{thread_id}", &params), Err(ApiError::NotFound(_))));
    }

    #[test]
    fn workflow_parameters_parse() {
        let template = "/api/projects/{project}/workflows/{definition}/revisions/{revision_id}";
        let revision = format!("wfrev_{}", "0123456789abcdef".repeat(4));
        let good = [("project", "acme-web"), ("definition", "bug-fix"), ("revision_id", revision.as_str())];
        assert!(ids(template, &good).is_ok());
        for (name, bad) in [
            ("project", "Acme"),
            ("project", "-lead"),
            ("project", "a.b"),
            ("project", ".."),
            ("definition", "a/b"),
            ("definition", &"x".repeat(64)),
            ("revision_id", &revision.to_uppercase()),
            ("revision_id", &revision[..20]),
            ("revision_id", "wfrev_.."),
        ] {
            assert!(matches!(ids(template, &[(name, bad)]), Err(ApiError::NotFound(_))), "{name} = {bad}");
        }
        let app = crate::admission::auth::AppGrant {
            token_id: agentd_schema::ids::new_id("aat"),
            protocols: vec!["ai-sdk".into(), "ag-ui".into()],
            operations: vec!["thread.run".into(), "thread.messages.read".into()],
            bindings: Vec::new(),
        };
        for key in [
            Access::App(app),
            Access::Environment(agentd_schema::ids::new_id("env")),
            Access::Runner,
            Access::Session {
                session_id: agentd_schema::ids::new_id("sesn"),
                work_id: agentd_schema::ids::new_id("work"),
                environment_id: agentd_schema::ids::new_id("env"),
            },
        ] {
            let refused = route_reach(&key, &Method::POST, template, &PathIds::default());
            assert!(matches!(refused, Err(ApiError::PermissionDenied(_))), "{key:?}");
        }
        let reach = route_reach(&Access::Workspace, &Method::GET, template, &PathIds::default());
        assert_eq!(reach.unwrap(), Reach::Anything);
    }

    #[test]
    fn provider_configuration_parameters_parse() {
        let credential = agentd_schema::ids::new_id("pcrd");
        assert!(
            ids("/config/credentials/{provider_credential_id}", &[("provider_credential_id", &credential)]).is_ok()
        );
        let vault_credential = agentd_schema::ids::new_id("vcrd");
        let other =
            ids("/config/credentials/{provider_credential_id}", &[("provider_credential_id", &vault_credential)]);
        assert!(matches!(other, Err(ApiError::NotFound(_))), "a vault credential id names no provider credential");
        for name in ["provider_id", "endpoint_id", "credential_pool_id", "inference_profile_id"] {
            assert!(ids("/config/x/{name}", &[(name, "local-llm.v2")]).is_ok(), "{name}");
            for bad in ["..", "-lead", "with space", &"x".repeat(65)] {
                assert!(matches!(ids("/config/x/{name}", &[(name, bad)]), Err(ApiError::NotFound(_))), "{name} {bad}");
            }
        }
    }

    #[test]
    fn scoped_credentials_use_only_their_routes() {
        let environment = agentd_schema::ids::new_id("env");
        let parsed = ids("/environments/{environment_id}", &[("environment_id", &environment)]).unwrap();
        let key = Access::Environment(environment.clone());
        let reach = route_reach(&key, &Method::GET, "/environments/{environment_id}", &parsed).unwrap();
        assert_eq!(reach, Reach::Environment(EnvironmentId::parse(&environment).unwrap()));
        let update = route_reach(&key, &Method::POST, "/environments/{environment_id}", &parsed);
        assert!(matches!(update, Err(ApiError::PermissionDenied(_))));
        let agents = route_reach(&Access::Runner, &Method::GET, "/agents", &PathIds::default());
        assert!(matches!(agents, Err(ApiError::PermissionDenied(_))));
        let list = route_reach(&Access::Workspace, &Method::GET, "/environments/{environment_id}/work", &parsed);
        assert!(matches!(list, Err(ApiError::PermissionDenied(_))), "work.list rejects an API key");
    }

    #[test]
    fn memory_routes_parse_their_ids() {
        let store = agentd_schema::ids::new_id("memstore");
        let memory = agentd_schema::ids::new_id("mem");
        let version = agentd_schema::ids::new_id("memver");
        let template = "/memory_stores/{memory_store_id}/memories/{memory_id}";
        let parsed = ids(template, &[("memory_store_id", &store), ("memory_id", &memory)]).unwrap();
        assert_eq!(parsed.memory_store.unwrap(), store);
        for (name, value) in [("memory_store_id", &memory), ("memory_id", &version), ("memory_version_id", &store)] {
            assert!(matches!(ids(template, &[(name, value)]), Err(ApiError::NotFound(_))), "{name} = {value}");
        }
        assert!(ids(template, &[("memory_version_id", &version)]).is_ok());
    }

    #[test]
    fn a_sessions_token_reaches_only_the_memories_of_a_store() {
        let store = agentd_schema::ids::new_id("memstore");
        let parsed = ids("/memory_stores/{memory_store_id}", &[("memory_store_id", &store)]).unwrap();
        let typed = MemoryStoreId::parse(&store).unwrap();
        let token = Access::Session {
            session_id: agentd_schema::ids::new_id("sesn"),
            work_id: agentd_schema::ids::new_id("work"),
            environment_id: agentd_schema::ids::new_id("env"),
        };
        let reach = |method: Method, template: &str| route_reach(&token, &method, template, &parsed);
        let memories = "/memory_stores/{memory_store_id}/memories";
        let memory = "/memory_stores/{memory_store_id}/memories/{memory_id}";
        let versions = "/memory_stores/{memory_store_id}/memory_versions";
        let version = "/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}";
        for (method, template, write) in [
            (Method::GET, memories, false),
            (Method::GET, memory, false),
            (Method::GET, versions, false),
            (Method::GET, version, false),
            (Method::POST, memories, true),
            (Method::POST, memory, true),
            (Method::DELETE, memory, true),
        ] {
            let got = reach(method.clone(), template).unwrap();
            assert_eq!(got, Reach::MemoryStore { id: typed.clone(), write }, "{method} {template}");
        }
        for (method, template) in [
            (Method::GET, "/memory_stores"),
            (Method::POST, "/memory_stores"),
            (Method::GET, "/memory_stores/{memory_store_id}"),
            (Method::POST, "/memory_stores/{memory_store_id}"),
            (Method::DELETE, "/memory_stores/{memory_store_id}"),
            (Method::POST, "/memory_stores/{memory_store_id}/archive"),
            (Method::POST, "/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact"),
        ] {
            assert!(
                matches!(reach(method.clone(), template), Err(ApiError::PermissionDenied(_))),
                "{method} {template}"
            );
        }
        // Environment and runner keys never reach memory.
        for key in [Access::Environment(agentd_schema::ids::new_id("env")), Access::Runner] {
            for template in [memories, memory, versions, "/memory_stores"] {
                let got = route_reach(&key, &Method::GET, template, &parsed);
                assert!(matches!(got, Err(ApiError::PermissionDenied(_))), "{key:?} {template}");
            }
        }
        // An API key reaches its workspace (the handlers read inside it only).
        assert_eq!(route_reach(&Access::Workspace, &Method::POST, memories, &parsed).unwrap(), Reach::Anything);
    }

    #[test]
    fn attachments_say_how_a_session_has_a_store() {
        let store = MemoryStoreId::parse(&agentd_schema::ids::new_id("memstore")).unwrap();
        let other = agentd_schema::ids::new_id("memstore");
        let attached = |access: serde_json::Value| {
            let mut resource = serde_json::json!({"type": "memory_store", "memory_store_id": store.as_str()});
            if !access.is_null() {
                resource["access"] = access;
            }
            serde_json::json!([{"type": "file", "file_id": "file_x"}, resource])
        };
        assert_eq!(
            attachment_access(&attached(serde_json::json!("read_write")), &store),
            Some(MemoryAccess::ReadWrite)
        );
        assert_eq!(attachment_access(&attached(serde_json::Value::Null), &store), Some(MemoryAccess::ReadWrite));
        assert_eq!(attachment_access(&attached(serde_json::json!("read_only")), &store), Some(MemoryAccess::ReadOnly));
        assert_eq!(attachment_access(&attached(serde_json::json!("bogus")), &store), Some(MemoryAccess::ReadOnly));
        let twice = serde_json::json!([
            {"type": "memory_store", "memory_store_id": store.as_str(), "access": "read_write"},
            {"type": "memory_store", "memory_store_id": store.as_str(), "access": "read_only"},
        ]);
        assert_eq!(attachment_access(&twice, &store), Some(MemoryAccess::ReadOnly), "the least permissive");
        let elsewhere = serde_json::json!([{"type": "memory_store", "memory_store_id": other, "access": "read_write"}]);
        assert_eq!(attachment_access(&elsewhere, &store), None);
        // A file resource whose id happens to match is not an attachment.
        let file = serde_json::json!([{"type": "file", "memory_store_id": store.as_str()}]);
        assert_eq!(attachment_access(&file, &store), None);
        assert_eq!(attachment_access(&serde_json::Value::Null, &store), None);
    }
}
