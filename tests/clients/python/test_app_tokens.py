"""Application access tokens (docs/api/app-tokens.md; issue 21 item 5), both modes: issue
and revoke with RFC 9457 problem answers; the official AI SDK client (`useChat`'s
transport, driven headless by tests/clients/node/ai_sdk.mjs) runs a turn and reads the
history with a token instead of an API key; the token reaches only its protocols,
operations and bound threads — every other adapter route, thread and managed route is
refused — and stops working the moment it is deleted or expires.
"""

from __future__ import annotations

import time
from typing import Any

import anthropic
import pytest

from fake_models import FakeAnthropic, say
from harness import Deployment, unique
from test_ai_sdk import drive, texts

TOKENS = "/v1/application-access-tokens"


def session_for(client: anthropic.Anthropic, model: str = "claude-sonnet-4-6") -> str:
    agent = client.beta.agents.create(name=unique("app-agent"), model=model)
    environment = client.beta.environments.create(name=unique("app-env"), config={"type": "cloud"})
    return client.beta.sessions.create(agent=agent.id, environment_id=environment.id).id


def issue(deployment: Deployment, key: str | None = None, **fields: Any) -> Any:
    return deployment.http().post(TOKENS, json=fields, headers=deployment.headers(key, beta=False))


def grant(session: str, thread: str, **overrides: Any) -> dict[str, Any]:
    return {
        "authority_id": "app-auth",
        "application_scope": "chat-web",
        "actor_key": "user-42",
        "protocols": ["ai-sdk"],
        "operations": ["thread.run", "thread.messages.read"],
        "thread_bindings": [{"external_thread_id": thread, "managed_session_id": session}],
        "expires_in_seconds": 120,
        **overrides,
    }


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def problem(response: Any, status: int, *fragments: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body = response.json()
    assert body["type"] == "about:blank" and body["status"] == status and body["title"], body
    for fragment in fragments:
        assert fragment in body["detail"], (fragment, body)
    return body


def test_issue_and_the_refusals(agentd: Deployment, client: anthropic.Anthropic, workspace_client: Any) -> None:
    session, thread = session_for(client), unique("thread")
    made = issue(agentd, **grant(session, thread))
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["id"].startswith("aat_") and body["object"] == "application_access_token"
    assert body["token_type"] == "Bearer" and body["access_token"].startswith("sk-agentd-aat-")
    assert body["protocols"] == ["ai-sdk"] and body["operations"] == ["thread.run", "thread.messages.read"]
    assert body["application_scope"] == "chat-web" and body["expires_at"]

    for overrides, fragment in [
        ({"protocols": []}, "protocols"),
        ({"protocols": ["ai-sdk", "ai-sdk"]}, "twice"),
        ({"protocols": ["mcp"]}, "protocols"),
        ({"operations": ["session.delete"]}, "operations"),
        ({"expires_in_seconds": 901}, "expires_in_seconds"),
        ({"expires_in_seconds": 0}, "expires_in_seconds"),
        ({"thread_bindings": []}, "thread_bindings"),
        ({"thread_bindings": [{"external_thread_id": thread, "managed_session_id": session},
                              {"external_thread_id": thread, "managed_session_id": session_for(client)}]}, "one"),
        ({"thread_bindings": [{"external_thread_id": thread, "managed_session_id": "nope"}]}, "managed_session_id"),
        ({"application_scope": ""}, "application_scope"),
        ({"surprise": 1}, "surprise"),
    ]:
        problem(issue(agentd, **grant(session, thread, **overrides)), 422, fragment)
    # A session of another workspace is not found; an archived one cannot be run.
    foreign = session_for(workspace_client())
    problem(issue(agentd, **grant(foreign, thread)), 404, foreign)
    client.beta.sessions.archive(session)
    problem(issue(agentd, **grant(session, thread)), 409, "archived")
    read_only = issue(agentd, **grant(session, thread, operations=["thread.messages.read"]))
    assert read_only.status_code == 201, "reading an archived session's history is fine"

    # Delete: 204, then 404.
    http = agentd.http()
    headers = agentd.headers(beta=False)
    assert http.delete(f"{TOKENS}/{body['id']}", headers=headers).status_code == 204
    problem(http.delete(f"{TOKENS}/{body['id']}", headers=headers), 404)
    # Only an API key issues tokens; a token cannot issue or revoke one.
    token = read_only.json()["access_token"]
    assert http.post(TOKENS, json=grant(session, thread), headers=bearer(token)).status_code == 403


def test_a_token_runs_its_thread_with_the_ai_sdk_client_and_nothing_else(
    turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    client = turns.client()
    session, thread = session_for(client), unique("thread")
    other_session, other_thread = session_for(client), unique("other")
    token = issue(turns, **grant(session, thread)).json()["access_token"]

    key = unique("apptoken")
    fake_anthropic.script(key, say(f"hello via a token {key}"))
    report = drive("send", turns, key=token, thread=thread, agent="ignored", text=f"hi {key}")
    assert report["status"] == "ready" and report["errors"] == [], report
    assert texts(report["messages"][-1]) == [f"hello via a token {key}"]
    # The turn ran in the bound session.
    events = [e.type for e in client.beta.sessions.events.list(session)]
    assert "user.message" in events and "agent.message" in events
    http = turns.http()
    history = http.get(f"/v1/ai-sdk/threads/{thread}/messages", headers=bearer(token))
    assert history.status_code == 200 and history.json()["session_id"] == session, history.text

    # Outside the grant: another thread, another protocol, other routes, the managed API.
    body = {"id": other_thread, "messages": [{"id": "1", "role": "user", "parts": [{"type": "text", "text": "x"}]}],
            "trigger": "submit-message"}
    assert http.post("/v1/ai-sdk/chat", json=body, headers=bearer(token)).status_code == 404
    assert http.get(f"/v1/ai-sdk/threads/{other_thread}/messages", headers=bearer(token)).status_code == 404
    assert http.get(f"/v1/ai-sdk/chat/{other_thread}/stream", headers=bearer(token)).status_code == 404
    ag_ui = {"threadId": thread, "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]}
    assert http.post("/v1/ag-ui", json=ag_ui, headers=bearer(token)).status_code == 403
    assert http.get(f"/v1/ag-ui/threads/{thread}/messages", headers=bearer(token)).status_code == 403
    agent_path = "/v1/ai-sdk/agents/agent_" + "0" * 26 + "/runs"
    assert http.post(agent_path, json={}, headers=bearer(token)).status_code == 403
    for method, path in [("GET", f"/v1/sessions/{session}"), ("GET", f"/v1/sessions/{other_session}"),
                         ("GET", "/v1/agents"), ("POST", f"/v1/sessions/{session}/events"), ("GET", "/v1/nowhere")]:
        refused = http.request(method, path, headers={**bearer(token), **turns.headers(token)}, json={})
        assert refused.status_code == 403, (method, path, refused.status_code, refused.text)

    # A workspace the request names must be the token's own, by header or by path.
    other_workspace = turns.workspace_id(unique("ws"))
    named = http.get(f"/v1/ai-sdk/threads/{thread}/messages", headers={**bearer(token), "anthropic-workspace-id": other_workspace})
    assert named.status_code == 403, named.text
    projected = http.get(f"/v1/workspaces/{other_workspace}/ai-sdk/threads/{thread}/messages", headers=bearer(token))
    assert projected.status_code == 403, projected.text
    own = turns.workspace_id("default")
    assert http.get(f"/v1/workspaces/{own}/ai-sdk/threads/{thread}/messages", headers=bearer(token)).status_code == 200

    # A read-only token reads the history and cannot run.
    reader = issue(turns, **grant(session, thread, operations=["thread.messages.read"])).json()
    assert http.get(f"/v1/ai-sdk/threads/{thread}/messages", headers=bearer(reader["access_token"])).status_code == 200
    body["id"] = thread
    assert http.post("/v1/ai-sdk/chat", json=body, headers=bearer(reader["access_token"])).status_code == 403

    # Revoked: refused at once.
    assert http.delete(f"{TOKENS}/{reader['id']}", headers=turns.headers(beta=False)).status_code == 204
    gone = http.get(f"/v1/ai-sdk/threads/{thread}/messages", headers=bearer(reader["access_token"]))
    assert gone.status_code == 401, gone.text


def test_a_token_expires(agentd: Deployment, client: anthropic.Anthropic) -> None:
    session, thread = session_for(client), unique("thread")
    token = issue(agentd, **grant(session, thread, expires_in_seconds=1)).json()["access_token"]
    http = agentd.http()
    assert http.get(f"/v1/ai-sdk/threads/{thread}/messages", headers=bearer(token)).status_code in (200, 404)
    time.sleep(1.5)
    assert http.get(f"/v1/ai-sdk/threads/{thread}/messages", headers=bearer(token)).status_code == 401


def test_a_token_dies_with_the_api_key_that_issued_it(agentd: Deployment) -> None:
    workspace = unique("ws")
    key = agentd.create_key(workspace)
    session, thread = session_for(agentd.client(key)), unique("thread")
    issued = issue(agentd, key, **grant(session, thread))
    assert issued.status_code == 201, issued.text
    token, http = issued.json()["access_token"], agentd.http()
    path = f"/v1/ai-sdk/threads/{thread}/messages"
    assert http.get(path, headers=bearer(token)).status_code in (200, 404)
    (entry,) = [k for k in agentd.list_keys() if k.get("workspace") == workspace]
    agentd.revoke_key(entry["id"])
    assert http.get(path, headers=bearer(token)).status_code == 401


def test_the_ag_ui_protocol_with_a_token(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    session, thread = session_for(client), unique("thread")
    token = issue(turns, **grant(session, thread, protocols=["ag-ui"])).json()["access_token"]
    key = unique("agui-token")
    fake_anthropic.script(key, say(f"ag-ui via a token {key}"))
    run = {"threadId": thread, "runId": unique("run"), "messages": [{"id": "u1", "role": "user", "content": f"hi {key}"}]}
    response = turns.http().post("/v1/ag-ui", json=run, headers={**bearer(token), "accept": "text/event-stream"})
    assert response.status_code == 200 and "RUN_FINISHED" in response.text, response.text[-500:]
    assert "RUN_ERROR" not in response.text, response.text[-500:]
    history = turns.http().get(f"/v1/ag-ui/threads/{thread}/messages", headers=bearer(token))
    assert history.status_code == 200 and history.json()["session_id"] == session
    assert f"ag-ui via a token {key}" in str(history.json()["data"]), history.json()
    assert turns.http().get(f"/v1/ai-sdk/threads/{thread}/messages", headers=bearer(token)).status_code == 403
    # Frontend tools would change the session's agent for every later turn: not with a token.
    tools = [{"name": "pick", "description": "d", "parameters": {"type": "object", "properties": {}}}]
    with_tools = {**run, "runId": unique("run"), "tools": tools}
    refused = turns.http().post("/v1/ag-ui", json=with_tools, headers={**bearer(token), "accept": "text/event-stream"})
    assert refused.status_code == 403 and "tools" in refused.text, refused.text
    assert "pick" not in str(client.beta.sessions.retrieve(session).agent.model_dump()), "the agent is unchanged"


def test_the_adapter_environment_key_is_no_thread(agentd: Deployment) -> None:
    reserved = agentd.http().get("/v1/ai-sdk/threads/agentd:adapter-environment/messages", headers=agentd.headers())
    assert reserved.status_code == 404, reserved.text
