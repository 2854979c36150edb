//! The parity matrix (issue 16): every way to put input into a session × every state
//! that must refuse it gives the same decision — refused, nothing committed, no run —
//! each in its surface's own error shape. In process, through `app(state)` + `oneshot`.

use std::time::Duration;

use agentd_schema::NewEvent;
use agentd_schema::store::prelude::*;
use agentd_tests::gateway::TestGateway;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A state a session can be in that refuses new input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusing {
    Archived,
    Deleted,
    BudgetReached,
    AgentDisabled,
    AgentArchived,
    // Beyond the five: the other states `domain::input` refuses.
    Terminated,
    EnvironmentArchived,
}

const STATES: [Refusing; 7] = [
    Refusing::Archived,
    Refusing::Deleted,
    Refusing::BudgetReached,
    Refusing::AgentDisabled,
    Refusing::AgentArchived,
    Refusing::Terminated,
    Refusing::EnvironmentArchived,
];

/// Every way to put input into a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Surface {
    EventsSend,
    AiSdkChat,
    AiSdkThreadRun,
    AiSdkAgentRun,
    AgUiRun,
    AgUiAgentRun,
    A2aJsonRpc,
    A2aRest,
    McpToolsCall,
    DurableSubmit,
    LiveInbox,
}

const SURFACES: [Surface; 11] = [
    Surface::EventsSend,
    Surface::AiSdkChat,
    Surface::AiSdkThreadRun,
    Surface::AiSdkAgentRun,
    Surface::AgUiRun,
    Surface::AgUiAgentRun,
    Surface::A2aJsonRpc,
    Surface::A2aRest,
    Surface::McpToolsCall,
    Surface::DurableSubmit,
    Surface::LiveInbox,
];

/// One session in a refusing state, bound to one adapter thread of every protocol.
struct Case {
    workspace: String,
    agent: String,
    agent_name: String,
    session: String,
    thread: String,
}

/// What a request answered: status, content type and body text.
struct Answer {
    status: StatusCode,
    content_type: String,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|_| panic!("not JSON ({}): {}", self.status, self.text))
    }

    /// The JSON payloads of an SSE body (`data: …` lines), or the body itself.
    fn payloads(&self) -> Vec<Value> {
        if !self.content_type.starts_with("text/event-stream") {
            return vec![self.json()];
        }
        self.text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    }
}

async fn send(gateway: &TestGateway, key: &str, method: &str, uri: &str, body: Option<Value>) -> Answer {
    let mut request = Request::builder();
    if uri == "/v1/mcp"
        && let Some(call) = &body
    {
        // The stateless MCP era names the method and the tool in headers too (SEP-2243).
        request = request
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", call["method"].as_str().unwrap_or_default())
            .header("mcp-name", call["params"]["name"].as_str().unwrap_or_default());
    }
    let request = request
        .method(method)
        .uri(uri)
        .header("x-api-key", key)
        .header("anthropic-beta", agentd_gateway::admission::beta::MANAGED_AGENTS)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .expect("request");
    let response = agentd_gateway::app(gateway.state.clone()).oneshot(request).await.expect("infallible");
    let status = response.status();
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    // A turn that ran would stream until the session idles: read what is there.
    let bytes =
        match tokio::time::timeout(Duration::from_millis(500), axum::body::to_bytes(response.into_body(), 1 << 24))
            .await
        {
            Ok(Ok(bytes)) => bytes,
            _ => Default::default(),
        };
    Answer { status, content_type, text: String::from_utf8_lossy(&bytes).into_owned() }
}

async fn ok(gateway: &TestGateway, key: &str, method: &str, uri: &str, body: Option<Value>) -> Value {
    let answer = send(gateway, key, method, uri, body).await;
    assert_eq!(answer.status, StatusCode::OK, "{method} {uri}: {}", answer.text);
    answer.json()
}

/// A fresh agent, environment and session, put into `state`, bound to `thread` for
/// every adapter (an AI SDK chat, an AG-UI thread, an A2A context, an MCP thread).
async fn case(gateway: &TestGateway, key: &str, workspace: &str, n: usize, state: Refusing) -> Case {
    let agent_name = format!("parity agent {n}");
    let agent =
        ok(gateway, key, "POST", "/v1/agents", Some(json!({ "name": agent_name, "model": "claude-sonnet-4-6" }))).await
            ["id"]
            .as_str()
            .unwrap()
            .to_owned();
    let environment = ok(gateway, key, "POST", "/v1/environments", Some(json!({ "name": format!("parity {n}") })))
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut create = json!({ "agent": agent, "environment_id": environment });
    if state == Refusing::BudgetReached {
        create["budget"] = json!({ "type": "limit", "max_list_cost": { "amount": "1", "currency": "USD" } });
    }
    let session = ok(gateway, key, "POST", "/v1/sessions", Some(create)).await["id"].as_str().unwrap().to_owned();
    let thread = format!("parity-thread-{n}-{}", uuid::Uuid::new_v4());
    let store = gateway.store.store.as_ref();
    assert_eq!(store.bind_thread(workspace, &thread, &session).await.unwrap(), session);
    match state {
        Refusing::Archived => {
            ok(gateway, key, "POST", &format!("/v1/sessions/{session}/archive"), None).await;
        }
        Refusing::Deleted => {
            ok(gateway, key, "DELETE", &format!("/v1/sessions/{session}"), None).await;
        }
        Refusing::BudgetReached => {
            // A model request that cost far more than the 1 ¢ ceiling.
            let spent = NewEvent::new(
                &session,
                json!({ "type": "span.model_request_end", "model_usage": { "input_tokens": 1_000_000, "output_tokens": 1_000_000 } }),
            );
            store.append_events(&session, vec![spent]).await.unwrap();
        }
        Refusing::AgentDisabled => {
            ok(gateway, key, "POST", &format!("/v1/agents/{agent}/disable"), Some(json!({}))).await;
        }
        Refusing::AgentArchived => {
            ok(gateway, key, "POST", &format!("/v1/agents/{agent}/archive"), None).await;
        }
        Refusing::Terminated => {
            let terminated = NewEvent::new(&session, json!({ "type": "session.status_terminated" }));
            store.append_events(&session, vec![terminated]).await.unwrap();
        }
        Refusing::EnvironmentArchived => {
            ok(gateway, key, "POST", &format!("/v1/environments/{environment}/archive"), None).await;
        }
    }
    Case { workspace: workspace.to_owned(), agent, agent_name, session, thread }
}

/// What the store holds for the case's session: its events and runs, and the thread's
/// binding — a refusal changes none of them.
async fn footprint(gateway: &TestGateway, case: &Case) -> (Vec<String>, usize, Option<String>) {
    let store = gateway.store.store.as_ref();
    let events = store.list_events(&case.session, 0, 10_000).await.unwrap();
    let runs = store.thread_runs(&case.session).await.unwrap();
    let bound = store.thread_session(&case.workspace, &case.thread).await.unwrap();
    (events.into_iter().map(|e| e.kind).collect(), runs.len(), bound)
}

fn ai_sdk_body(case: &Case) -> Value {
    json!({ "id": case.thread, "trigger": "submit-message",
            "messages": [{ "id": "m1", "role": "user", "parts": [{ "type": "text", "text": "hello" }] }] })
}

fn ag_ui_body(case: &Case) -> Value {
    json!({ "threadId": case.thread, "runId": "run-1", "state": {}, "tools": [], "context": [], "forwardedProps": {},
            "messages": [{ "id": "m1", "role": "user", "content": "hello" }] })
}

fn a2a_message(case: &Case) -> Value {
    json!({ "messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{ "text": "hello" }],
            "contextId": case.thread })
}

/// The MCP tool name of the case's agent (its name, lowercased, `_` for the rest).
fn tool_name(case: &Case) -> String {
    case.agent_name.replace(' ', "_")
}

/// Sends input through `surface` and checks the refusal is in that surface's shape.
async fn refused_through(gateway: &TestGateway, key: &str, case: &Case, state: Refusing, surface: Surface) {
    let what = format!("{surface:?} × {state:?}");
    let session = &case.session;
    let managed = |answer: &Answer| {
        let body = answer.json();
        let expected = if state == Refusing::Deleted {
            (StatusCode::NOT_FOUND, "not_found_error")
        } else {
            (StatusCode::BAD_REQUEST, "invalid_request_error")
        };
        assert_eq!((answer.status, body["error"]["type"].as_str().unwrap_or_default()), expected, "{what}: {body}");
        assert_eq!(body["type"], "error", "{what}: {body}");
        if state == Refusing::BudgetReached {
            assert_eq!(body["error"]["details"]["error_code"], "budget_reached", "{what}: {body}");
        }
        if state == Refusing::EnvironmentArchived {
            assert_eq!(body["error"]["details"]["error_code"], "environment_archived", "{what}: {body}");
        }
    };
    match surface {
        Surface::EventsSend => {
            let body =
                json!({ "events": [{ "type": "user.message", "content": [{ "type": "text", "text": "hello" }] }] });
            managed(&send(gateway, key, "POST", &format!("/v1/sessions/{session}/events"), Some(body)).await);
        }
        Surface::AiSdkChat => managed(&send(gateway, key, "POST", "/v1/ai-sdk/chat", Some(ai_sdk_body(case))).await),
        Surface::AiSdkThreadRun => {
            let uri = format!("/v1/ai-sdk/threads/{}/runs", case.thread);
            managed(&send(gateway, key, "POST", &uri, Some(ai_sdk_body(case))).await);
        }
        Surface::AiSdkAgentRun => {
            let uri = format!("/v1/ai-sdk/agents/{}/runs", case.agent);
            managed(&send(gateway, key, "POST", &uri, Some(ai_sdk_body(case))).await);
        }
        Surface::AgUiRun | Surface::AgUiAgentRun => {
            let uri = if surface == Surface::AgUiRun {
                "/v1/ag-ui".to_owned()
            } else {
                format!("/v1/ag-ui/agents/{}", case.agent)
            };
            let answer = send(gateway, key, "POST", &uri, Some(ag_ui_body(case))).await;
            assert_eq!(answer.status, StatusCode::OK, "{what}: {}", answer.text);
            let events = answer.payloads();
            assert_eq!(events.len(), 1, "{what}: one RUN_ERROR and nothing else: {events:?}");
            assert_eq!(events[0]["type"], "RUN_ERROR", "{what}: {events:?}");
            let code = match state {
                Refusing::Archived => "session_archived",
                Refusing::Deleted => "session_deleted",
                Refusing::BudgetReached => "budget_reached",
                Refusing::AgentDisabled => "agent_disabled",
                Refusing::AgentArchived => "agent_archived",
                Refusing::Terminated => "session_terminated",
                Refusing::EnvironmentArchived => "environment_archived",
            };
            assert_eq!(events[0]["code"], code, "{what}: {events:?}");
        }
        Surface::A2aJsonRpc => {
            let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": { "message": a2a_message(case) } });
            let answer = send(gateway, key, "POST", "/v1/a2a", Some(call)).await;
            assert_eq!(answer.status, StatusCode::OK, "{what}: JSON-RPC errors ride on 200");
            let body = answer.json();
            assert_eq!(body["error"]["code"], -32004, "{what}: {body}");
            assert_eq!(body["error"]["data"][0]["reason"], "UNSUPPORTED_OPERATION", "{what}: {body}");
            assert!(body.get("result").is_none(), "{what}: {body}");
        }
        Surface::A2aRest => {
            let answer =
                send(gateway, key, "POST", "/v1/a2a/message:send", Some(json!({ "message": a2a_message(case) }))).await;
            let body = answer.json();
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{what}: {body}");
            assert_eq!(body["error"]["status"], "FAILED_PRECONDITION", "{what}: {body}");
            assert_eq!(body["error"]["details"][0]["reason"], "UNSUPPORTED_OPERATION", "{what}: {body}");
        }
        Surface::McpToolsCall => {
            let call = json!({
                "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {
                    "name": tool_name(case), "arguments": { "prompt": "hello", "thread_id": case.thread },
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {},
                    },
                },
            });
            let answer = send(gateway, key, "POST", "/v1/mcp", Some(call)).await;
            assert_eq!(answer.status, StatusCode::OK, "{what}: {}", answer.text);
            let response = answer
                .payloads()
                .into_iter()
                .find(|p| p["id"] == 3)
                .unwrap_or_else(|| panic!("{what}: {}", answer.text));
            match state {
                // A disabled or archived agent is not a tool any more.
                Refusing::AgentDisabled | Refusing::AgentArchived => {
                    assert_eq!(response["error"]["code"], -32602, "{what}: {response}");
                    assert!(
                        response["error"]["message"].as_str().unwrap().contains("unknown tool"),
                        "{what}: {response}"
                    );
                }
                _ => {
                    assert_eq!(response["result"]["isError"], true, "{what}: {response}");
                    let text = response["result"]["content"][0]["text"].as_str().unwrap_or_default();
                    let expected = match state {
                        Refusing::Archived => "archived",
                        Refusing::Deleted => "deleted",
                        Refusing::Terminated => "terminated",
                        Refusing::EnvironmentArchived => "environment",
                        _ => "budget",
                    };
                    assert!(text.contains(expected), "{what}: {response}");
                }
            }
        }
        Surface::DurableSubmit => {
            let uri = format!("/v1/durable/threads/{session}/submit_background");
            managed(&send(gateway, key, "POST", &uri, Some(json!({ "text": "hello" }))).await);
        }
        Surface::LiveInbox => {
            let uri = format!("/v1/ext/sessions/{session}/live-inbox");
            let body = json!({ "content": [{ "type": "text", "text": "hello" }] });
            let answer = send(gateway, key, "POST", &uri, Some(body)).await;
            if state == Refusing::Terminated {
                // The live inbox's own answer for a terminated session (docs/api/live-inbox.md).
                assert_eq!(answer.status, StatusCode::GONE, "{what}: {}", answer.text);
                assert_eq!(answer.json()["error"]["type"], "invalid_request_error", "{what}");
            } else {
                managed(&answer);
            }
        }
    }
}

#[tokio::test]
async fn every_surface_refuses_input_to_a_session_that_takes_none() {
    let gateway = TestGateway::new().await;
    let (workspace, key) = gateway.workspace("parity").await;
    let mut n = 0;
    for state in STATES {
        for surface in SURFACES {
            n += 1;
            let case = case(&gateway, &key, &workspace, n, state).await;
            let before = footprint(&gateway, &case).await;
            refused_through(&gateway, &key, &case, state, surface).await;
            let after = footprint(&gateway, &case).await;
            assert_eq!(after, before, "{surface:?} × {state:?}: nothing is committed, no run, the thread stays bound");
        }
    }
    // No refused request started a session of its own (a deleted thread is not re-bound).
    let sessions = gateway
        .store
        .store
        .list_sessions(
            &workspace,
            &agentd_schema::SessionQuery { limit: 10_000, include_archived: true, ..Default::default() },
        )
        .await
        .unwrap();
    let deleted = SURFACES.len();
    assert_eq!(sessions.len(), n - deleted, "one session per case, minus the deleted ones");
    gateway.cleanup().await;
}

#[tokio::test]
async fn the_same_request_runs_a_turn_on_a_session_that_takes_input() {
    // The control row: every surface's request above is well-formed — on a session in
    // no refusing state, managed, AI SDK, durable and A2A input each commit a user.message.
    let gateway = TestGateway::new().await;
    let (workspace, key) = gateway.workspace("parity-control").await;
    let store = gateway.store.store.clone();
    let mut n = 100;
    for surface in
        [Surface::EventsSend, Surface::AiSdkChat, Surface::AgUiRun, Surface::A2aJsonRpc, Surface::DurableSubmit]
    {
        n += 1;
        let agent = ok(
            &gateway,
            &key,
            "POST",
            "/v1/agents",
            Some(json!({ "name": format!("live {n}"), "model": "claude-sonnet-4-6" })),
        )
        .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let environment = ok(&gateway, &key, "POST", "/v1/environments", Some(json!({ "name": format!("live {n}") })))
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let session =
            ok(&gateway, &key, "POST", "/v1/sessions", Some(json!({ "agent": agent, "environment_id": environment })))
                .await["id"]
                .as_str()
                .unwrap()
                .to_owned();
        let thread = format!("live-{n}");
        store.bind_thread(&workspace, &thread, &session).await.unwrap();
        let live = Case {
            workspace: workspace.clone(),
            agent,
            agent_name: format!("live {n}"),
            session: session.clone(),
            thread,
        };
        let uri_body = match surface {
            Surface::EventsSend => (
                format!("/v1/sessions/{session}/events"),
                json!({ "events": [{ "type": "user.message", "content": [{ "type": "text", "text": "hello" }] }] }),
            ),
            Surface::AiSdkChat => ("/v1/ai-sdk/chat".to_owned(), ai_sdk_body(&live)),
            Surface::AgUiRun => ("/v1/ag-ui".to_owned(), ag_ui_body(&live)),
            Surface::A2aJsonRpc => (
                "/v1/a2a".to_owned(),
                json!({ "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                        "params": { "message": a2a_message(&live), "configuration": { "returnImmediately": true } } }),
            ),
            _ => (format!("/v1/durable/threads/{session}/submit_background"), json!({ "text": "hello" })),
        };
        let answer = send(&gateway, &key, "POST", &uri_body.0, Some(uri_body.1)).await;
        assert_eq!(answer.status, StatusCode::OK, "{surface:?}: {}", answer.text);
        let kinds = footprint(&gateway, &live).await.0;
        assert_eq!(kinds.iter().filter(|k| *k == "user.message").count(), 1, "{surface:?}: {kinds:?}");
        assert_eq!(gateway.store.store.thread_runs(&session).await.unwrap().len(), 1, "{surface:?}: one run");
    }
    gateway.cleanup().await;
}
