//! The table of every operation agentd serves: the source the OpenAPI document is built
//! from, kept equal to the routers by `super::tests` (both ways). A new route is a new
//! row here; the tests say which row is missing or stale.

use crate::admission::beta;

/// An HTTP method agentd routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    /// GET.
    Get,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
}

impl Method {
    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}

/// Which listener serves an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// The public listener (`app`).
    Public,
    /// The operations listener (`ops_app`, `AGENTD_OPS_ADDR`).
    Ops,
    /// Both (`/readyz`; the operations listener's answer also names the backends).
    Both,
}

/// What a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body.
    None,
    /// A JSON object.
    Json,
    /// A JSON object that may be left out.
    Optional,
    /// `multipart/form-data` (an upload, streamed).
    Multipart,
    /// An HTML form (`application/x-www-form-urlencoded`).
    Form,
}

/// What a success carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A JSON object.
    Json,
    /// Server-sent events.
    Sse,
    /// JSON, or server-sent events for the streaming methods (JSON-RPC, MCP).
    JsonOrSse,
    /// Bytes (a file's content, a skill archive).
    Bytes,
    /// Plain text (Prometheus metrics).
    Text,
    /// An HTML page.
    Html,
    /// Nothing.
    Empty,
}

/// The error shape an operation answers in (`envelope.rs` keeps each surface to its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Errors {
    /// The managed envelope `{"type": "error", "error": {type, message}}`.
    Managed,
    /// RFC 9457 `application/problem+json` (control plane, application access tokens).
    Problem,
    /// A2A's HTTP+JSON binding: `{"error": {code, status, message, details}}`.
    A2aRest,
    /// A JSON-RPC 2.0 response with an `error` member (A2A JSON-RPC, MCP).
    JsonRpc,
    /// An HTML page (the consent page).
    Html,
}

impl Errors {
    /// Every error shape.
    pub const ALL: [Errors; 5] = [Errors::Managed, Errors::Problem, Errors::A2aRest, Errors::JsonRpc, Errors::Html];

    /// The name of its schema and response components.
    pub fn component(self) -> &'static str {
        match self {
            Errors::Managed => "ManagedError",
            Errors::Problem => "Problem",
            Errors::A2aRest => "A2aRestError",
            Errors::JsonRpc => "JsonRpcError",
            Errors::Html => "HtmlErrorPage",
        }
    }

    /// Its media type.
    pub fn content_type(self) -> &'static str {
        match self {
            Errors::Managed | Errors::A2aRest | Errors::JsonRpc => "application/json",
            Errors::Problem => "application/problem+json",
            Errors::Html => "text/html",
        }
    }

    /// What the error response says.
    pub fn description(self) -> &'static str {
        match self {
            Errors::Managed => "An error in the managed envelope (docs/api/errors.md).",
            Errors::Problem => "An RFC 9457 problem with a stable `code` (docs/api/config.md, \"Errors\").",
            Errors::A2aRest => "An A2A error of the HTTP+JSON binding (docs/api/a2a.md).",
            Errors::JsonRpc => "A JSON-RPC 2.0 error response (docs/api/a2a.md, docs/api/mcp.md).",
            Errors::Html => "An error page.",
        }
    }

    /// Its JSON Schema.
    pub fn schema(self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Errors::Managed => json!({
                "type": "object",
                "required": ["type", "error"],
                "properties": {
                    "type": { "type": "string", "enum": ["error"] },
                    "error": {
                        "type": "object",
                        "required": ["type", "message"],
                        "properties": {
                            "type": { "type": "string", "description": "e.g. invalid_request_error, not_found_error" },
                            "message": { "type": "string" },
                            "details": { "type": "object" }
                        }
                    },
                    "request_id": { "type": "string" }
                }
            }),
            Errors::Problem => json!({
                "type": "object",
                "required": ["type", "title", "status", "detail", "code"],
                "properties": {
                    "type": { "type": "string" },
                    "title": { "type": "string" },
                    "status": { "type": "integer" },
                    "detail": { "type": "string" },
                    "code": { "type": "string", "description": "stable, machine-readable" },
                    "request_id": { "type": ["string", "null"] },
                    "errors": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["path", "message"],
                            "properties": {
                                "path": { "type": "string", "description": "a JSON pointer" },
                                "message": { "type": "string" }
                            }
                        }
                    }
                }
            }),
            Errors::A2aRest => json!({
                "type": "object",
                "required": ["error"],
                "properties": {
                    "error": {
                        "type": "object",
                        "required": ["code", "status", "message"],
                        "properties": {
                            "code": { "type": "integer" },
                            "status": { "type": "string" },
                            "message": { "type": "string" },
                            "details": { "type": "array", "items": { "type": "object" } }
                        }
                    }
                }
            }),
            Errors::JsonRpc => json!({
                "type": "object",
                "required": ["jsonrpc", "error"],
                "properties": {
                    "jsonrpc": { "type": "string", "enum": ["2.0"] },
                    "id": { "type": ["string", "integer", "null"] },
                    "error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": {
                            "code": { "type": "integer" },
                            "message": { "type": "string" }
                        }
                    }
                }
            }),
            Errors::Html => json!({ "type": "string" }),
        }
    }
}

/// Who may call an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// A credential (`x-api-key` or `Authorization: Bearer`); which kinds reach the route
    /// is the scope layer's (docs/SECURITY.md).
    Credential,
    /// A credential, or none: the A2A agent cards, public without one (the public card,
    /// docs/api/a2a.md "Discovery"), the full card with one.
    Optional,
    /// `Authorization: Bearer <AGENTD_OPS_TOKEN>` when one is configured.
    OpsToken,
    /// None (the consent page's signed token authorizes; readiness and metrics are open).
    None,
}

/// An operation's tag: its family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    Agents,
    Environments,
    Work,
    Sessions,
    Events,
    Deployments,
    Vaults,
    Files,
    Skills,
    Memory,
    Dreams,
    UserProfiles,
    Models,
    OrgWebhooks,
    Tunnels,
    AppTokens,
    Extensions,
    Durable,
    ConfigAgents,
    ConfigProviders,
    ConfigWebhooks,
    ConfigProtocols,
    Workflows,
    AiSdk,
    AgUi,
    A2a,
    Mcp,
    Consent,
    Contract,
    Operations,
}

impl Tag {
    /// Every tag, in the document's order.
    pub const ALL: [Tag; 30] = [
        Tag::Agents,
        Tag::Environments,
        Tag::Work,
        Tag::Sessions,
        Tag::Events,
        Tag::Deployments,
        Tag::Vaults,
        Tag::Files,
        Tag::Skills,
        Tag::Memory,
        Tag::Dreams,
        Tag::UserProfiles,
        Tag::Models,
        Tag::OrgWebhooks,
        Tag::Tunnels,
        Tag::AppTokens,
        Tag::Extensions,
        Tag::Durable,
        Tag::ConfigAgents,
        Tag::ConfigProviders,
        Tag::ConfigWebhooks,
        Tag::ConfigProtocols,
        Tag::Workflows,
        Tag::AiSdk,
        Tag::AgUi,
        Tag::A2a,
        Tag::Mcp,
        Tag::Consent,
        Tag::Contract,
        Tag::Operations,
    ];

    /// The tag's name in the document.
    pub fn name(self) -> &'static str {
        self.about().0
    }

    /// What the tag covers.
    pub fn description(self) -> &'static str {
        self.about().1
    }

    fn about(self) -> (&'static str, &'static str) {
        match self {
            Tag::Agents => ("agents", "Managed agents and their versions."),
            Tag::Environments => ("environments", "Environments."),
            Tag::Work => ("environment-work", "The environment work protocol (docs/api/hands.md)."),
            Tag::Sessions => ("sessions", "Sessions and their resources."),
            Tag::Events => ("events", "A session's events and threads, listed and streamed."),
            Tag::Deployments => ("deployments", "Deployments and deployment runs (docs/api/deployments.md)."),
            Tag::Vaults => ("vaults", "Vaults and their credentials."),
            Tag::Files => ("files", "Files (docs/api/files.md)."),
            Tag::Skills => ("skills", "Skills and skill versions (docs/api/skills.md)."),
            Tag::Memory => ("memory", "Memory stores, memories and memory versions (docs/api/memory.md)."),
            Tag::Dreams => ("dreams", "Dreams (docs/api/dreams.md)."),
            Tag::UserProfiles => ("user-profiles", "User profiles and erasure (docs/api/user-profiles.md)."),
            Tag::Models => ("models", "The model catalog."),
            Tag::OrgWebhooks => {
                ("organization-webhooks", "The SDK's organization webhook endpoint API (docs/api/webhooks.md).")
            }
            Tag::Tunnels => ("tunnels", "MCP tunnels and their CA certificates (docs/api/tunnels.md)."),
            Tag::AppTokens => ("application-access-tokens", "Application access tokens (docs/api/app-tokens.md)."),
            Tag::Extensions => (
                "extensions",
                "agentd extensions under /v1/ext (hands, live inbox, dream policies, sandbox execution policies).",
            ),
            Tag::Durable => ("durable", "Durable run control (docs/api/durable.md)."),
            Tag::ConfigAgents => {
                ("config-agents", "Control plane: agent drafts and publications (docs/api/config.md).")
            }
            Tag::ConfigProviders => {
                ("config-providers", "Control plane: providers, models and credentials (docs/api/config.md).")
            }
            Tag::ConfigWebhooks => ("config-webhooks", "Control plane: webhook subscriptions (docs/api/webhooks.md)."),
            Tag::ConfigProtocols => {
                ("config-protocols", "Control plane: MCP and A2A configuration (docs/api/config.md).")
            }
            Tag::Workflows => {
                ("workflows", "A project's workflow revisions and its override, under /api (docs/api/workflows.md).")
            }
            Tag::AiSdk => ("ai-sdk", "The AI SDK UI message stream adapter (docs/api/ai-sdk.md)."),
            Tag::AgUi => ("ag-ui", "The AG-UI adapter (docs/api/ag-ui.md)."),
            Tag::A2a => ("a2a", "The A2A server: JSON-RPC, HTTP+JSON and agent cards (docs/api/a2a.md)."),
            Tag::Mcp => ("mcp", "The MCP endpoint, streamable HTTP; its path is AGENTD_MCP_PATH (docs/api/mcp.md)."),
            Tag::Consent => ("consent", "The consent page of user profiles: no API key, its signed token authorizes."),
            Tag::Contract => ("contract", "This document."),
            Tag::Operations => ("operations", "Readiness, metrics and drain (docs/OPERATIONS.md)."),
        }
    }

    /// The error shape of the tag's operations unless a row says otherwise.
    const fn errors(self) -> Errors {
        match self {
            Tag::ConfigAgents | Tag::ConfigProviders | Tag::ConfigWebhooks | Tag::ConfigProtocols | Tag::AppTokens => {
                Errors::Problem
            }
            Tag::A2a => Errors::A2aRest,
            Tag::Mcp => Errors::JsonRpc,
            Tag::Consent => Errors::Html,
            _ => Errors::Managed,
        }
    }

    /// The beta selector the tag's routes require, if any.
    const fn beta(self) -> Option<&'static str> {
        match self {
            Tag::Agents
            | Tag::Environments
            | Tag::Work
            | Tag::Sessions
            | Tag::Events
            | Tag::Deployments
            | Tag::Vaults => Some(beta::MANAGED_AGENTS),
            Tag::Memory => Some(beta::AGENT_MEMORY),
            Tag::Dreams => Some(beta::DREAMING),
            Tag::OrgWebhooks => Some(beta::WEBHOOKS),
            Tag::Tunnels => Some(beta::MCP_TUNNELS),
            _ => None,
        }
    }
}

/// One operation: a method on a route.
#[derive(Debug, Clone, Copy)]
pub struct Operation {
    /// The method.
    pub method: Method,
    /// The route's template as axum has it (`{param}`, `{*rest}`), the full path.
    pub path: &'static str,
    /// The document's `operationId`.
    pub id: &'static str,
    /// The family.
    pub tag: Tag,
    /// One line.
    pub summary: &'static str,
    /// What the request carries.
    pub body: Body,
    /// The success statuses.
    pub status: &'static [u16],
    /// What a success carries.
    pub answer: Answer,
    /// The error shape.
    pub errors: Errors,
    /// The beta selector the route requires.
    pub beta: Option<&'static str>,
    /// Who may call it.
    pub auth: Auth,
    /// Where it is served.
    pub listener: Listener,
}

const fn op(method: Method, path: &'static str, id: &'static str, tag: Tag, summary: &'static str) -> Operation {
    let body = match method {
        Method::Post | Method::Put => Body::Json,
        Method::Get | Method::Delete => Body::None,
    };
    let (auth, listener) = match tag {
        Tag::Consent => (Auth::None, Listener::Public),
        Tag::Operations => (Auth::None, Listener::Ops),
        _ => (Auth::Credential, Listener::Public),
    };
    Operation {
        method,
        path,
        id,
        tag,
        summary,
        body,
        status: &[200],
        answer: Answer::Json,
        errors: tag.errors(),
        beta: tag.beta(),
        auth,
        listener,
    }
}

impl Operation {
    const fn body(self, body: Body) -> Self {
        Self { body, ..self }
    }
    const fn status(self, status: &'static [u16]) -> Self {
        Self { status, ..self }
    }
    const fn answers(self, answer: Answer) -> Self {
        Self { answer, ..self }
    }
    const fn errors(self, errors: Errors) -> Self {
        Self { errors, ..self }
    }
    const fn without_beta(self) -> Self {
        Self { beta: None, ..self }
    }
    const fn beta(self, selector: &'static str) -> Self {
        Self { beta: Some(selector), ..self }
    }
    const fn listener(self, listener: Listener) -> Self {
        Self { listener, ..self }
    }
    const fn auth(self, auth: Auth) -> Self {
        Self { auth, ..self }
    }
}

/// The names of a template's path parameters, in order (`{*rest}` is `rest`).
pub fn path_parameters(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter_map(|segment| {
        let inner = segment.strip_prefix('{')?;
        let end = inner.find('}')?;
        Some(inner[..end].trim_start_matches('*'))
    })
}

/// What a path parameter names.
pub fn parameter_description(name: &str) -> &'static str {
    match name {
        "agent_id" => "An agent id.",
        "environment_id" => "An environment id.",
        "work_id" => "A work item id.",
        "session_id" => "A session id.",
        "thread" => "A session id (durable run control addresses the session's primary thread).",
        "thread_id" => "A session thread (`sthr_…`, or the session's id for its primary) or an adapter's thread key.",
        "resource_id" => "A session resource id.",
        "deployment_id" => "A deployment id.",
        "deployment_run_id" => "A deployment run id.",
        "vault_id" => "A vault id.",
        "credential_id" => "A vault credential id.",
        "file_id" => "A file id.",
        "skill_id" => "A skill id.",
        "version" => "A skill version (its id, or `latest`).",
        "path" => "A path inside the skill version (may span segments).",
        "memory_store_id" => "A memory store id.",
        "memory_id" => "A memory id.",
        "memory_version_id" => "A memory version id.",
        "dream_id" => "A dream id.",
        "user_profile_id" => "A user profile id.",
        "model_id" => "A model name.",
        "webhook_endpoint_id" | "webhook_subscription_id" => "A webhook subscription id.",
        "application_access_token_id" => "An application access token id.",
        "key_id" => "An environment key id.",
        "message_id" => "A live inbox message id.",
        "run_id" => "A run id.",
        "fingerprint" => "A publication's fingerprint (hex SHA-256 of its canonical JSON).",
        "provider_id" => "A provider name.",
        "endpoint_id" => "A provider endpoint name.",
        "credential_pool_id" => "A credential pool name.",
        "inference_profile_id" => "An inference profile name.",
        "provider_credential_id" => "A provider credential id.",
        "mcp_server_id" => "A registered MCP server id.",
        "protocol" => "A protocol whose exposure is set (`a2a`, `mcp`).",
        "chat_id" => "An AI SDK chat id.",
        "task" => "An A2A task id; `{id}:cancel` and `{id}:subscribe` on POST.",
        "config" => "An A2A push notification config id.",
        "token" => "The consent page's signed token.",
        "project" => "A project's slug (lowercase letters, digits and `-`, at most 63).",
        "definition" => "A workflow definition's slug (lowercase letters, digits and `-`, at most 63).",
        "revision_id" => "A workflow revision id: `wfrev_` and its content's hex SHA-256.",
        _ => "A path parameter.",
    }
}

use Method::{Delete, Get, Post, Put};
use Tag::*;

/// Every operation agentd serves (one row each: rustfmt keeps it a table).
#[rustfmt::skip]
pub const OPERATIONS: &[Operation] = &[
    op(Get, "/.well-known/agent-card.json", "a2a.card.workspace_card", A2a, "The workspace agent card (A2A): public without a key, full with one").errors(Errors::Managed).auth(Auth::Optional),
    op(Post, "/v1/a2a", "a2a.jsonrpc.workspace", A2a, "A2A JSON-RPC endpoint of the workspace").errors(Errors::JsonRpc).answers(Answer::JsonOrSse),
    op(Get, "/v1/a2a/agents/{agent_id}", "a2a.card.agent_card", A2a, "An agent's A2A card: public without a key, full with one").errors(Errors::JsonRpc).auth(Auth::Optional),
    op(Post, "/v1/a2a/agents/{agent_id}", "a2a.jsonrpc.agent", A2a, "A2A JSON-RPC endpoint of one agent").errors(Errors::JsonRpc).answers(Answer::JsonOrSse),
    op(Get, "/v1/a2a/agents/{agent_id}/.well-known/agent-card.json", "a2a.card.agent_well_known", A2a, "An agent's A2A card (well-known path): public without a key, full with one").errors(Errors::A2aRest).auth(Auth::Optional),
    op(Get, "/v1/a2a/agents/{agent_id}/extendedAgentCard", "a2a.agent.extended_card", A2a, "An agent's extended A2A card"),
    op(Post, "/v1/a2a/agents/{agent_id}/message:send", "a2a.agent.send", A2a, "Send a message to an agent (A2A REST)"),
    op(Post, "/v1/a2a/agents/{agent_id}/message:stream", "a2a.agent.stream", A2a, "Send a message and stream the task (A2A REST)").answers(Answer::Sse),
    op(Get, "/v1/a2a/agents/{agent_id}/tasks", "a2a.agent.list", A2a, "List tasks"),
    op(Get, "/v1/a2a/agents/{agent_id}/tasks/{task}", "a2a.agent.task_get", A2a, "Retrieve a task"),
    op(Post, "/v1/a2a/agents/{agent_id}/tasks/{task}", "a2a.agent.task_post", A2a, "Cancel or subscribe to a task (`{id}:cancel`, `{id}:subscribe`)").answers(Answer::JsonOrSse),
    op(Get, "/v1/a2a/agents/{agent_id}/tasks/{task}/pushNotificationConfigs", "a2a.agent.push_list", A2a, "List push notification configs"),
    op(Post, "/v1/a2a/agents/{agent_id}/tasks/{task}/pushNotificationConfigs", "a2a.agent.push_create", A2a, "Create a push notification config"),
    op(Delete, "/v1/a2a/agents/{agent_id}/tasks/{task}/pushNotificationConfigs/{config}", "a2a.agent.push_delete", A2a, "Delete a push notification config"),
    op(Get, "/v1/a2a/agents/{agent_id}/tasks/{task}/pushNotificationConfigs/{config}", "a2a.agent.push_get", A2a, "Retrieve a push notification config"),
    op(Get, "/v1/a2a/extendedAgentCard", "a2a.workspace.extended_card", A2a, "The workspace's extended A2A card"),
    op(Post, "/v1/a2a/message:send", "a2a.workspace.send", A2a, "Send a message (A2A REST)"),
    op(Post, "/v1/a2a/message:stream", "a2a.workspace.stream", A2a, "Send a message and stream the task (A2A REST)").answers(Answer::Sse),
    op(Get, "/v1/a2a/tasks", "a2a.workspace.list", A2a, "List tasks"),
    op(Get, "/v1/a2a/tasks/{task}", "a2a.workspace.task_get", A2a, "Retrieve a task"),
    op(Post, "/v1/a2a/tasks/{task}", "a2a.workspace.task_post", A2a, "Cancel or subscribe to a task (`{id}:cancel`, `{id}:subscribe`)").answers(Answer::JsonOrSse),
    op(Get, "/v1/a2a/tasks/{task}/pushNotificationConfigs", "a2a.workspace.push_list", A2a, "List push notification configs"),
    op(Post, "/v1/a2a/tasks/{task}/pushNotificationConfigs", "a2a.workspace.push_create", A2a, "Create a push notification config"),
    op(Delete, "/v1/a2a/tasks/{task}/pushNotificationConfigs/{config}", "a2a.workspace.push_delete", A2a, "Delete a push notification config"),
    op(Get, "/v1/a2a/tasks/{task}/pushNotificationConfigs/{config}", "a2a.workspace.push_get", A2a, "Retrieve a push notification config"),
    op(Post, "/v1/ag-ui", "ag_ui.run", AgUi, "Run an AG-UI agent (default agent)").answers(Answer::Sse),
    op(Post, "/v1/ag-ui/agents/{agent_id}", "ag_ui.agent_run", AgUi, "Run an AG-UI agent").answers(Answer::Sse),
    op(Get, "/v1/ag-ui/threads/{thread_id}/messages", "ag_ui.messages", AgUi, "An AG-UI thread's messages"),
    op(Get, "/v1/agents", "agents.list", Agents, "List agents"),
    op(Post, "/v1/agents", "agents.create", Agents, "Create an agent"),
    op(Get, "/v1/agents/{agent_id}", "agents.retrieve", Agents, "Retrieve an agent"),
    op(Post, "/v1/agents/{agent_id}", "agents.update", Agents, "Update an agent"),
    op(Post, "/v1/agents/{agent_id}/archive", "agents.archive", Agents, "Archive an agent").body(Body::Optional),
    op(Post, "/v1/agents/{agent_id}/disable", "agents.disable", Agents, "Disable an agent").body(Body::Optional),
    op(Get, "/v1/agents/{agent_id}/versions", "agents.versions", Agents, "List an agent's versions"),
    op(Post, "/v1/ai-sdk/agents/{agent_id}/runs", "ai_sdk.agent_run", AiSdk, "Run an agent (AI SDK UI message stream)").answers(Answer::Sse),
    op(Post, "/v1/ai-sdk/chat", "ai_sdk.chat", AiSdk, "Chat (AI SDK `useChat` transport)").answers(Answer::Sse),
    op(Get, "/v1/ai-sdk/chat/{chat_id}/stream", "ai_sdk.resume", AiSdk, "Resume a chat's stream").answers(Answer::Sse).status(&[200, 204]),
    op(Get, "/v1/ai-sdk/threads/{thread_id}/messages", "ai_sdk.messages", AiSdk, "An AI SDK thread's messages"),
    op(Post, "/v1/ai-sdk/threads/{thread_id}/runs", "ai_sdk.thread_run", AiSdk, "Run a thread (AI SDK UI message stream)").answers(Answer::Sse),
    op(Post, "/v1/application-access-tokens", "app_tokens.create", AppTokens, "Create an application access token").status(&[201]),
    op(Delete, "/v1/application-access-tokens/{application_access_token_id}", "app_tokens.delete", AppTokens, "Delete an application access token").status(&[204]).answers(Answer::Empty),
    op(Get, "/v1/config/agents", "config.agents.list", ConfigAgents, "List agent drafts"),
    op(Delete, "/v1/config/agents/{agent_id}", "config.agents.discard", ConfigAgents, "Discard an agent draft").status(&[204]).answers(Answer::Empty),
    op(Get, "/v1/config/agents/{agent_id}", "config.agents.retrieve", ConfigAgents, "Retrieve an agent draft"),
    op(Put, "/v1/config/agents/{agent_id}", "config.agents.put", ConfigAgents, "Create or replace an agent draft").status(&[200, 201]),
    op(Post, "/v1/config/agents/{agent_id}/publish", "config.agents.publish", ConfigAgents, "Publish an agent draft").status(&[200, 201]).body(Body::Optional),
    op(Post, "/v1/config/agents/{agent_id}/validate", "config.agents.validate", ConfigAgents, "Validate an agent draft").body(Body::Optional),
    op(Get, "/v1/config/publications/{fingerprint}", "config.agents.publication", ConfigAgents, "Retrieve a publication"),
    op(Get, "/v1/config/publications/{fingerprint}/export", "config.agents.export", ConfigAgents, "Export a publication"),
    op(Get, "/v1/config/agents/{agent_id}/mcp", "config.protocol_config.get_agent", ConfigProtocols, "An agent's MCP servers"),
    op(Put, "/v1/config/agents/{agent_id}/mcp", "config.protocol_config.put_agent", ConfigProtocols, "Set an agent's MCP servers"),
    op(Post, "/v1/config/agents/{agent_id}/mcp/resolve", "config.protocol_config.resolve_agent", ConfigProtocols, "Resolve an agent's MCP servers").body(Body::Optional),
    op(Get, "/v1/config/exposure", "config.protocol_config.list_exposure", ConfigProtocols, "List exposure gates"),
    op(Get, "/v1/config/exposure/{protocol}", "config.protocol_config.get_exposure", ConfigProtocols, "Retrieve an exposure gate"),
    op(Put, "/v1/config/exposure/{protocol}", "config.protocol_config.put_exposure", ConfigProtocols, "Create or replace an exposure gate"),
    op(Get, "/v1/config/mcp-servers", "config.protocol_config.list_servers", ConfigProtocols, "List MCP servers"),
    op(Delete, "/v1/config/mcp-servers/{mcp_server_id}", "config.protocol_config.delete_server", ConfigProtocols, "Delete an MCP server").status(&[204]).answers(Answer::Empty),
    op(Get, "/v1/config/mcp-servers/{mcp_server_id}", "config.protocol_config.get_server", ConfigProtocols, "Retrieve an MCP server"),
    op(Put, "/v1/config/mcp-servers/{mcp_server_id}", "config.protocol_config.put_server", ConfigProtocols, "Create or replace an MCP server").status(&[200, 201]),
    op(Get, "/v1/config/catalog", "config.providers.get_catalog", ConfigProviders, "The workspace's effective model catalog"),
    op(Get, "/v1/config/credential-pools/{credential_pool_id}", "config.providers.get_pool", ConfigProviders, "Retrieve a credential pool"),
    op(Put, "/v1/config/credential-pools/{credential_pool_id}", "config.providers.put_pool", ConfigProviders, "Create or replace a credential pool").status(&[200, 201]),
    op(Get, "/v1/config/credentials", "config.providers.list_credentials", ConfigProviders, "List provider credentials"),
    op(Post, "/v1/config/credentials", "config.providers.create_credential", ConfigProviders, "Create a provider credential"),
    op(Get, "/v1/config/credentials/{provider_credential_id}", "config.providers.get_credential", ConfigProviders, "Retrieve a provider credential"),
    op(Post, "/v1/config/credentials/{provider_credential_id}/archive", "config.providers.archive_credential", ConfigProviders, "Archive a provider credential").body(Body::Optional),
    op(Get, "/v1/config/inference-profiles/{inference_profile_id}", "config.providers.get_profile", ConfigProviders, "Retrieve an inference profile"),
    op(Put, "/v1/config/inference-profiles/{inference_profile_id}", "config.providers.put_profile", ConfigProviders, "Create or replace an inference profile").status(&[200, 201]),
    op(Post, "/v1/config/inference-profiles/{inference_profile_id}/resolve", "config.providers.resolve_profile", ConfigProviders, "Resolve an inference profile").body(Body::Optional),
    op(Put, "/v1/config/model-attributes/{model_id}", "config.providers.put_model_attributes", ConfigProviders, "Set a model's attributes"),
    op(Post, "/v1/config/offerings", "config.providers.post_offering", ConfigProviders, "Create or change an offering"),
    op(Get, "/v1/config/providers/{provider_id}", "config.providers.get_provider", ConfigProviders, "Retrieve a provider"),
    op(Put, "/v1/config/providers/{provider_id}", "config.providers.put_provider", ConfigProviders, "Create or replace a provider").status(&[200, 201]),
    op(Get, "/v1/config/providers/{provider_id}/endpoints/{endpoint_id}", "config.providers.get_endpoint", ConfigProviders, "Retrieve an endpoint"),
    op(Put, "/v1/config/providers/{provider_id}/endpoints/{endpoint_id}", "config.providers.put_endpoint", ConfigProviders, "Create or replace an endpoint").status(&[200, 201]),
    op(Get, "/v1/config/webhook-subscriptions", "config.webhooks.list", ConfigWebhooks, "List webhook subscriptions"),
    op(Delete, "/v1/config/webhook-subscriptions/{webhook_subscription_id}", "config.webhooks.delete", ConfigWebhooks, "Delete a webhook subscription").status(&[204]).answers(Answer::Empty),
    op(Get, "/v1/config/webhook-subscriptions/{webhook_subscription_id}", "config.webhooks.retrieve", ConfigWebhooks, "Retrieve a webhook subscription"),
    op(Put, "/v1/config/webhook-subscriptions/{webhook_subscription_id}", "config.webhooks.put", ConfigWebhooks, "Create or replace a webhook subscription").status(&[200, 201]),
    op(Get, "/v1/config/webhook-subscriptions/{webhook_subscription_id}/deliveries", "config.webhooks.deliveries", ConfigWebhooks, "A webhook subscription's deliveries"),
    op(Post, "/api/projects/{project}/workflows/{definition}/revision", "workflows.save_revision", Workflows, "Save a workflow revision and move the project override to it"),
    op(Get, "/api/projects/{project}/workflows/{definition}/revisions/{revision_id}", "workflows.retrieve_revision", Workflows, "Retrieve a workflow revision"),
    op(Get, "/api/projects/{project}/workflows/{definition}/override", "workflows.retrieve_override", Workflows, "Retrieve the project override of a workflow"),
    op(Post, "/api/projects/{project}/workflows/{definition}/override/clear", "workflows.clear_override", Workflows, "Clear the project override of a workflow"),
    op(Get, "/consent/{token}", "consent.show", Consent, "The consent page").answers(Answer::Html),
    op(Post, "/consent/{token}", "consent.answer", Consent, "Answer the consent page (a form)").answers(Answer::Html).body(Body::Form),
    op(Get, "/v1/openapi.json", "openapi.serve", Contract, "This document"),
    op(Get, "/v1/deployment_runs", "deployments.list_runs", Deployments, "List deployment runs"),
    op(Get, "/v1/deployment_runs/{deployment_run_id}", "deployments.retrieve_run", Deployments, "Retrieve a deployment run"),
    op(Get, "/v1/deployments", "deployments.list", Deployments, "List deployments"),
    op(Post, "/v1/deployments", "deployments.create", Deployments, "Create a deployment"),
    op(Get, "/v1/deployments/{deployment_id}", "deployments.retrieve", Deployments, "Retrieve a deployment"),
    op(Post, "/v1/deployments/{deployment_id}", "deployments.update", Deployments, "Update a deployment"),
    op(Post, "/v1/deployments/{deployment_id}/archive", "deployments.archive", Deployments, "Archive a deployment").body(Body::Optional),
    op(Post, "/v1/deployments/{deployment_id}/pause", "deployments.pause", Deployments, "Pause a deployment").body(Body::Optional),
    op(Post, "/v1/deployments/{deployment_id}/run", "deployments.run", Deployments, "Run a deployment").body(Body::Optional),
    op(Post, "/v1/deployments/{deployment_id}/unpause", "deployments.unpause", Deployments, "Unpause a deployment").body(Body::Optional),
    op(Get, "/v1/dreams", "dreams.list", Dreams, "List dreams"),
    op(Post, "/v1/dreams", "dreams.create", Dreams, "Create a dream"),
    op(Get, "/v1/dreams/{dream_id}", "dreams.retrieve", Dreams, "Retrieve a dream"),
    op(Post, "/v1/dreams/{dream_id}/archive", "dreams.archive", Dreams, "Archive a dream").body(Body::Optional),
    op(Post, "/v1/dreams/{dream_id}/cancel", "dreams.cancel", Dreams, "Cancel a dream").body(Body::Optional),
    op(Post, "/v1/durable/threads/{thread}/cancel", "durable.cancel", Durable, "Cancel a thread").body(Body::Optional),
    op(Get, "/v1/durable/threads/{thread}/dead-letters", "durable.dead_letters", Durable, "A thread's dead letters"),
    op(Post, "/v1/durable/threads/{thread}/dead-letters/purge", "durable.purge", Durable, "Purge a thread's dead letters").body(Body::Optional),
    op(Post, "/v1/durable/threads/{thread}/dead-letters/{run_id}/requeue", "durable.requeue", Durable, "Requeue a dead-lettered run").body(Body::Optional),
    op(Post, "/v1/durable/threads/{thread}/deliver", "durable.deliver", Durable, "Deliver a message to a thread"),
    op(Get, "/v1/durable/threads/{thread}/dispatches", "durable.dispatches", Durable, "A thread's dispatches"),
    op(Get, "/v1/durable/threads/{thread}/messages", "durable.messages", Durable, "A thread's messages"),
    op(Post, "/v1/durable/threads/{thread}/pause", "durable.pause", Durable, "Pause a thread").body(Body::Optional),
    op(Post, "/v1/durable/threads/{thread}/quarantine-retry-exhausted", "durable.quarantine", Durable, "Quarantine runs that exhausted their retries").body(Body::Optional),
    op(Post, "/v1/durable/threads/{thread}/reconcile", "durable.reconcile", Durable, "Reconcile a thread").body(Body::Optional),
    op(Post, "/v1/durable/threads/{thread}/resume", "durable.resume", Durable, "Resume a thread").body(Body::Optional),
    op(Post, "/v1/durable/threads/{thread}/submit_background", "durable.submit_background", Durable, "Submit a background run"),
    op(Post, "/v1/durable/threads/{thread}/supersede", "durable.supersede", Durable, "Supersede a thread's pending runs"),
    op(Get, "/v1/durable/threads/{thread}/superseded", "durable.superseded", Durable, "A thread's superseded runs"),
    op(Post, "/v1/durable/threads/{thread}/wake", "durable.wake", Durable, "Wake a thread").body(Body::Optional),
    op(Get, "/v1/environments", "environments.list", Environments, "List environments"),
    op(Post, "/v1/environments", "environments.create", Environments, "Create an environment"),
    op(Delete, "/v1/environments/{environment_id}", "environments.delete", Environments, "Delete an environment"),
    op(Get, "/v1/environments/{environment_id}", "environments.retrieve", Environments, "Retrieve an environment"),
    op(Post, "/v1/environments/{environment_id}", "environments.update", Environments, "Update an environment"),
    op(Post, "/v1/environments/{environment_id}/archive", "environments.archive", Environments, "Archive an environment").body(Body::Optional),
    op(Get, "/v1/sessions/{session_id}/events", "events.list", Events, "List events"),
    op(Post, "/v1/sessions/{session_id}/events", "events.send", Events, "Send events to a session"),
    op(Get, "/v1/sessions/{session_id}/events/stream", "events.stream", Events, "Stream a session's events (SSE)").answers(Answer::Sse),
    op(Get, "/v1/sessions/{session_id}/threads", "events.threads", Events, "List a session's threads (the primary first)"),
    op(Get, "/v1/sessions/{session_id}/threads/{thread_id}", "events.thread", Events, "Retrieve a thread"),
    op(Post, "/v1/sessions/{session_id}/threads/{thread_id}/archive", "events.archive_thread", Events, "Archive a child thread (not running)").body(Body::Optional),
    op(Get, "/v1/sessions/{session_id}/threads/{thread_id}/events", "events.thread_events", Events, "List a thread's own events"),
    op(Get, "/v1/sessions/{session_id}/threads/{thread_id}/stream", "events.thread_stream", Events, "Stream a thread's events (SSE)").answers(Answer::Sse),
    op(Get, "/v1/ext/environments/{environment_id}/keys", "environment_keys.list", Extensions, "List environment keys"),
    op(Post, "/v1/ext/environments/{environment_id}/keys", "environment_keys.create", Extensions, "Create an environment key"),
    op(Post, "/v1/ext/environments/{environment_id}/keys/{key_id}/revoke", "environment_keys.revoke", Extensions, "Revoke an environment key").body(Body::Optional),
    op(Get, "/v1/ext/environments/{environment_id}/sandbox-execution-policy", "sandbox_policies.binding", Extensions, "An environment's sandbox execution policy binding"),
    op(Post, "/v1/ext/environments/{environment_id}/sandbox-execution-policy", "sandbox_policies.bind", Extensions, "Bind an environment to a sandbox execution policy version"),
    op(Post, "/v1/ext/environments/{environment_id}/work/{work_id}/refuse", "work.refuse", Extensions, "Refuse a work item the hands cannot serve (the session is told why)"),
    op(Get, "/v1/ext/memory-stores/{memory_store_id}/dream-policy", "dreams.get_policy", Extensions, "A memory store's dream policy"),
    op(Put, "/v1/ext/memory-stores/{memory_store_id}/dream-policy", "dreams.put_policy", Extensions, "Set a memory store's dream policy"),
    op(Get, "/v1/ext/runner/work/poll", "work.poll_cloud", Extensions, "Poll work of cloud environments (runner key)"),
    op(Get, "/v1/ext/sandbox-execution-policies", "sandbox_policies.list", Extensions, "List sandbox execution policies (current versions, presets first)"),
    op(Post, "/v1/ext/sandbox-execution-policies", "sandbox_policies.create", Extensions, "Create a sandbox execution policy (version 1)").status(&[201]),
    op(Get, "/v1/ext/sandbox-execution-policies/{sandbox_policy_id}", "sandbox_policies.retrieve", Extensions, "A sandbox execution policy's current version"),
    op(Post, "/v1/ext/sandbox-execution-policies/{sandbox_policy_id}/versions", "sandbox_policies.add_version", Extensions, "Write a sandbox execution policy's next version"),
    op(Get, "/v1/ext/sandbox-execution-policies/{sandbox_policy_id}/versions/{version}", "sandbox_policies.retrieve_version", Extensions, "One version of a sandbox execution policy"),
    op(Post, "/v1/ext/sessions/{session_id}/files", "files.hands_upload", Extensions, "Upload a session's output file (the session's hands)").body(Body::Multipart),
    op(Get, "/v1/ext/sessions/{session_id}/files/{file_id}/content", "files.hands_content", Extensions, "Download a session's mounted file (the session's hands)").answers(Answer::Bytes),
    op(Get, "/v1/ext/sessions/{session_id}/live-inbox", "live_inbox.snapshot", Extensions, "A session's live inbox"),
    op(Post, "/v1/ext/sessions/{session_id}/live-inbox", "live_inbox.enqueue", Extensions, "Enqueue a live inbox message"),
    op(Put, "/v1/ext/sessions/{session_id}/live-inbox/order", "live_inbox.reorder", Extensions, "Reorder the live inbox"),
    op(Delete, "/v1/ext/sessions/{session_id}/live-inbox/{message_id}", "live_inbox.withdraw", Extensions, "Withdraw a live inbox message"),
    op(Put, "/v1/ext/sessions/{session_id}/live-inbox/{message_id}", "live_inbox.replace", Extensions, "Replace a live inbox message"),
    op(Get, "/v1/ext/sessions/{session_id}/resources", "session_resources.get_manifest", Extensions, "A session's resource manifest"),
    op(Put, "/v1/ext/sessions/{session_id}/resources", "session_resources.replace", Extensions, "Replace a session's resource manifest"),
    op(Get, "/v1/ext/sessions/{session_id}/sandbox-environment", "sandbox_environment.retrieve", Extensions, "A session's sandbox environment variables (sessions token)"),
    op(Get, "/v1/ext/skills/{skill_id}/versions/{version}/files/{*path}", "skills.file", Extensions, "A file inside a skill version").answers(Answer::Bytes),
    op(Get, "/v1/files", "files.list", Files, "List files"),
    op(Post, "/v1/files", "files.upload", Files, "Upload a file (multipart)").body(Body::Multipart),
    op(Delete, "/v1/files/{file_id}", "files.delete", Files, "Delete a file"),
    op(Get, "/v1/files/{file_id}", "files.retrieve", Files, "Retrieve a file"),
    op(Get, "/v1/files/{file_id}/content", "files.content", Files, "Download a file's content").answers(Answer::Bytes),
    op(Delete, "/v1/mcp", "mcp.delete", Mcp, "End an MCP session").answers(Answer::Empty),
    op(Get, "/v1/mcp", "mcp.get", Mcp, "Open an MCP server-to-client stream (SSE)").answers(Answer::Sse).body(Body::None),
    op(Post, "/v1/mcp", "mcp.post", Mcp, "Send an MCP JSON-RPC message").answers(Answer::JsonOrSse),
    op(Get, "/v1/memory_stores", "memory.list_stores", Memory, "List memory stores"),
    op(Post, "/v1/memory_stores", "memory.create_store", Memory, "Create a memory store"),
    op(Delete, "/v1/memory_stores/{memory_store_id}", "memory.delete_store", Memory, "Delete a memory store"),
    op(Get, "/v1/memory_stores/{memory_store_id}", "memory.retrieve_store", Memory, "Retrieve a memory store"),
    op(Post, "/v1/memory_stores/{memory_store_id}", "memory.update_store", Memory, "Update a memory store"),
    op(Post, "/v1/memory_stores/{memory_store_id}/archive", "memory.archive_store", Memory, "Archive a memory store").body(Body::Optional),
    op(Get, "/v1/memory_stores/{memory_store_id}/memories", "memory.list_memories", Memory, "List memories"),
    op(Post, "/v1/memory_stores/{memory_store_id}/memories", "memory.create_memory", Memory, "Create a memory"),
    op(Delete, "/v1/memory_stores/{memory_store_id}/memories/{memory_id}", "memory.delete_memory", Memory, "Delete a memory"),
    op(Get, "/v1/memory_stores/{memory_store_id}/memories/{memory_id}", "memory.retrieve_memory", Memory, "Retrieve a memory"),
    op(Post, "/v1/memory_stores/{memory_store_id}/memories/{memory_id}", "memory.update_memory", Memory, "Update a memory"),
    op(Get, "/v1/memory_stores/{memory_store_id}/memory_versions", "memory.list_versions", Memory, "List memory versions"),
    op(Get, "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}", "memory.retrieve_version", Memory, "Retrieve a memory version"),
    op(Post, "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact", "memory.redact_version", Memory, "Redact a memory version").body(Body::Optional),
    op(Get, "/v1/models", "models.list", Models, "List models"),
    op(Get, "/v1/models/{model_id}", "models.retrieve", Models, "Retrieve a model"),
    op(Get, "/readyz", "ops.readyz", Operations, "Readiness").status(&[200, 503]).listener(Listener::Both),
    op(Post, "/admin/drain", "ops.drain", Operations, "Drain this gateway (operations listener)").status(&[202]).body(Body::None).auth(Auth::OpsToken),
    op(Get, "/metrics", "ops.metrics_text", Operations, "Prometheus metrics (operations listener)").answers(Answer::Text),
    op(Get, "/v1/organizations/webhooks", "org_webhooks.list", OrgWebhooks, "List webhook endpoints"),
    op(Post, "/v1/organizations/webhooks", "org_webhooks.create", OrgWebhooks, "Create a webhook endpoint"),
    op(Delete, "/v1/organizations/webhooks/{webhook_endpoint_id}", "org_webhooks.delete", OrgWebhooks, "Delete a webhook endpoint"),
    op(Get, "/v1/organizations/webhooks/{webhook_endpoint_id}", "org_webhooks.retrieve", OrgWebhooks, "Retrieve a webhook endpoint"),
    op(Post, "/v1/organizations/webhooks/{webhook_endpoint_id}", "org_webhooks.update", OrgWebhooks, "Update a webhook endpoint"),
    op(Post, "/v1/organizations/webhooks/{webhook_endpoint_id}/regenerate_signing_secret", "org_webhooks.regenerate_signing_secret", OrgWebhooks, "Regenerate a webhook endpoint's signing secret").body(Body::Optional),
    op(Get, "/v1/sessions", "sessions.list", Sessions, "List sessions"),
    op(Post, "/v1/sessions", "sessions.create", Sessions, "Create a session"),
    op(Delete, "/v1/sessions/{session_id}", "sessions.delete", Sessions, "Delete a session"),
    op(Get, "/v1/sessions/{session_id}", "sessions.retrieve", Sessions, "Retrieve a session"),
    op(Post, "/v1/sessions/{session_id}", "sessions.update", Sessions, "Update a session"),
    op(Post, "/v1/sessions/{session_id}/archive", "sessions.archive", Sessions, "Archive a session").body(Body::Optional),
    op(Get, "/v1/sessions/{session_id}/resources", "session_resources.list", Sessions, "List session resources"),
    op(Post, "/v1/sessions/{session_id}/resources", "session_resources.add", Sessions, "Create a session resource"),
    op(Delete, "/v1/sessions/{session_id}/resources/{resource_id}", "session_resources.delete", Sessions, "Delete a session resource"),
    op(Get, "/v1/sessions/{session_id}/resources/{resource_id}", "session_resources.retrieve", Sessions, "Retrieve a session resource"),
    op(Post, "/v1/sessions/{session_id}/resources/{resource_id}", "session_resources.update", Sessions, "Update a session resource"),
    op(Get, "/v1/skills", "skills.list", Skills, "List skills"),
    op(Post, "/v1/skills", "skills.create", Skills, "Create a skill (multipart)").body(Body::Multipart),
    op(Delete, "/v1/skills/{skill_id}", "skills.delete", Skills, "Delete a skill"),
    op(Get, "/v1/skills/{skill_id}", "skills.retrieve", Skills, "Retrieve a skill"),
    op(Get, "/v1/skills/{skill_id}/versions", "skills.list_versions", Skills, "List a skill's versions"),
    op(Post, "/v1/skills/{skill_id}/versions", "skills.create_version", Skills, "Create a skill version (multipart)").body(Body::Multipart),
    op(Delete, "/v1/skills/{skill_id}/versions/{version}", "skills.delete_version", Skills, "Delete a skill version"),
    op(Get, "/v1/skills/{skill_id}/versions/{version}", "skills.retrieve_version", Skills, "Retrieve a skill version"),
    op(Get, "/v1/skills/{skill_id}/versions/{version}/content", "skills.content", Skills, "Download a skill version's archive").answers(Answer::Bytes),
    op(Get, "/tunnel/connect", "tunnels.connect", Tunnels, "A tunnel connector's connection (its token; upgraded to HTTP/2)").status(&[101]).answers(Answer::Empty).without_beta(),
    op(Get, "/v1/tunnels", "tunnels.list", Tunnels, "List tunnels (newest first)"),
    op(Post, "/v1/tunnels", "tunnels.create", Tunnels, "Create a tunnel (a fresh domain and connector token)"),
    op(Get, "/v1/tunnels/{tunnel_id}", "tunnels.retrieve", Tunnels, "Retrieve a tunnel"),
    op(Post, "/v1/tunnels/{tunnel_id}/archive", "tunnels.archive", Tunnels, "Archive a tunnel (final)").body(Body::Optional),
    op(Get, "/v1/tunnels/{tunnel_id}/certificates", "tunnels.certificates.list", Tunnels, "List a tunnel's CA certificates"),
    op(Post, "/v1/tunnels/{tunnel_id}/certificates", "tunnels.certificates.create", Tunnels, "Register a CA certificate with a tunnel"),
    op(Get, "/v1/tunnels/{tunnel_id}/certificates/{certificate_id}", "tunnels.certificates.retrieve", Tunnels, "Retrieve a tunnel certificate"),
    op(Post, "/v1/tunnels/{tunnel_id}/certificates/{certificate_id}/archive", "tunnels.certificates.archive", Tunnels, "Archive a tunnel certificate").body(Body::Optional),
    op(Post, "/v1/tunnels/{tunnel_id}/reveal_token", "tunnels.reveal_token", Tunnels, "Reveal a tunnel's connector token").body(Body::Optional),
    op(Post, "/v1/tunnels/{tunnel_id}/rotate_token", "tunnels.rotate_token", Tunnels, "Rotate a tunnel's connector token").body(Body::Optional),
    op(Get, "/v1/user_profiles", "user_profiles.list", UserProfiles, "List user profiles"),
    op(Post, "/v1/user_profiles", "user_profiles.create", UserProfiles, "Create a user profile"),
    op(Delete, "/v1/user_profiles/{user_profile_id}", "user_profiles.delete", UserProfiles, "Delete a user profile"),
    op(Get, "/v1/user_profiles/{user_profile_id}", "user_profiles.retrieve", UserProfiles, "Retrieve a user profile"),
    op(Post, "/v1/user_profiles/{user_profile_id}", "user_profiles.update", UserProfiles, "Update a user profile"),
    op(Post, "/v1/user_profiles/{user_profile_id}/action_urls", "user_profiles.action_url", UserProfiles, "Create a user profile's action URL"),
    op(Post, "/v1/user_profiles/{user_profile_id}/enrollment_url", "user_profiles.enrollment_url", UserProfiles, "Create a user profile's enrollment URL").body(Body::Optional),
    op(Post, "/v1/user_profiles/{user_profile_id}/erasure", "erasure.erase", UserProfiles, "Erase a user profile's data").beta(beta::USER_PROFILES).body(Body::Optional),
    op(Get, "/v1/vaults", "vaults.list", Vaults, "List vaults"),
    op(Post, "/v1/vaults", "vaults.create", Vaults, "Create a vault"),
    op(Delete, "/v1/vaults/{vault_id}", "vaults.delete", Vaults, "Delete a vault"),
    op(Get, "/v1/vaults/{vault_id}", "vaults.retrieve", Vaults, "Retrieve a vault"),
    op(Post, "/v1/vaults/{vault_id}", "vaults.update", Vaults, "Update a vault"),
    op(Post, "/v1/vaults/{vault_id}/archive", "vaults.archive", Vaults, "Archive a vault").body(Body::Optional),
    op(Get, "/v1/vaults/{vault_id}/credentials", "credentials.list", Vaults, "List credentials"),
    op(Post, "/v1/vaults/{vault_id}/credentials", "credentials.create", Vaults, "Create a credential"),
    op(Delete, "/v1/vaults/{vault_id}/credentials/{credential_id}", "credentials.delete", Vaults, "Delete a credential"),
    op(Get, "/v1/vaults/{vault_id}/credentials/{credential_id}", "credentials.retrieve", Vaults, "Retrieve a credential"),
    op(Post, "/v1/vaults/{vault_id}/credentials/{credential_id}", "credentials.update", Vaults, "Update a credential"),
    op(Post, "/v1/vaults/{vault_id}/credentials/{credential_id}/archive", "credentials.archive", Vaults, "Archive a credential").body(Body::Optional),
    op(Post, "/v1/vaults/{vault_id}/credentials/{credential_id}/mcp_oauth_validate", "credentials.mcp_oauth_validate", Vaults, "Validate a credential's MCP OAuth").body(Body::Optional),
    op(Get, "/v1/environments/{environment_id}/work", "work.list", Work, "List work items"),
    op(Get, "/v1/environments/{environment_id}/work/poll", "work.poll", Work, "Poll an environment's work queue"),
    op(Get, "/v1/environments/{environment_id}/work/stats", "work.stats", Work, "An environment's work queue statistics"),
    op(Get, "/v1/environments/{environment_id}/work/{work_id}", "work.retrieve", Work, "Retrieve a work item"),
    op(Post, "/v1/environments/{environment_id}/work/{work_id}", "work.update", Work, "Update a work item"),
    op(Post, "/v1/environments/{environment_id}/work/{work_id}/ack", "work.ack", Work, "Acknowledge a work item").body(Body::Optional),
    op(Post, "/v1/environments/{environment_id}/work/{work_id}/heartbeat", "work.heartbeat", Work, "Renew a work item's lease").body(Body::Optional),
    op(Post, "/v1/environments/{environment_id}/work/{work_id}/stop", "work.stop", Work, "Stop a work item").body(Body::Optional),
];
