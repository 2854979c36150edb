"""The parity matrix (issue 16): every way to put input into a session × every state that
must refuse it gives the same decision — refused, nothing committed — each in its surface's
own error shape, in both modes. Official clients where the suite uses them (`anthropic`,
`a2a-sdk` over JSON-RPC and HTTP+JSON, `mcp`); the AI SDK and AG-UI wire shapes, durable
and the live inbox over plain HTTP.

One conversation per state: a thread started through the AI SDK (one turn, the model played
by the fake) is the same adapter thread for AG-UI, A2A (`contextId`) and MCP (`thread_id`),
so every adapter reaches the session the state was applied to. A budget can only be set
when a session is created through the managed API, which binds no adapter thread: the
budget row is covered here for the surfaces that name a session (`events.send`, durable,
live inbox) and for the adapters by the Rust matrix (tests/tests/parity.rs).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, UnsupportedOperationError
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from fake_models import FakeAnthropic, say
from harness import Deployment, unique

MODEL = "claude-sonnet-4-5"
NODE_DIR = Path(__file__).resolve().parent.parent / "node"
# The official JS clients (`ai`, `@ag-ui/client`) when they are installed.
NODE = (NODE_DIR / "node_modules" / "ai").is_dir() and shutil.which("node") is not None
STATES = ["archived", "deleted", "budget_reached", "agent_disabled", "agent_archived"]
# The AG-UI `RUN_ERROR.code` of each refusing state.
AG_UI_CODES = {
    "archived": "session_archived",
    "deleted": "session_deleted",
    "budget_reached": "budget_reached",
    "agent_disabled": "agent_disabled",
    "agent_archived": "agent_archived",
}


def tool_name(name: str) -> str:
    out = ""
    for c in name.lower():
        c = c if (c.isascii() and c.isalnum()) or c == "-" else "_"
        if c == "_" and (not out or out.endswith("_")):
            continue
        out += c
    return out.rstrip("_")


def sse_payloads(response: httpx.Response) -> list[dict[str, Any]]:
    out = []
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            out.append(json.loads(line[5:]))
    return out


def managed_refusal(response: httpx.Response, state: str) -> None:
    """The managed envelope: 404 for a deleted session, 400 otherwise (budget names its code)."""
    body = response.json()
    assert body["type"] == "error", body
    if state == "deleted":
        assert response.status_code == 404 and body["error"]["type"] == "not_found_error", body
    else:
        assert response.status_code == 400 and body["error"]["type"] == "invalid_request_error", body
    if state == "budget_reached":
        assert body["error"]["details"]["error_code"] == "budget_reached", body


class Conversation:
    """An agent, and a session started through the AI SDK on `thread`."""

    def __init__(self, deployment: Deployment, fake: FakeAnthropic) -> None:
        self.deployment = deployment
        self.client = deployment.client()
        self.http = deployment.http()
        self.key = unique("parity")
        self.name = f"Parity {self.key}"
        self.agent = self.client.beta.agents.create(name=self.name, model=MODEL).id
        self.thread = unique("parity-thread")
        fake.script(self.key, say(f"hello {self.key}"))
        body = {
            "id": self.thread,
            "agent": self.agent,
            "trigger": "submit-message",
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": f"start {self.key}"}]}],
        }
        with self.http.stream("POST", "/v1/ai-sdk/chat", json=body, headers=deployment.headers(), timeout=60) as response:
            assert response.status_code == 200, response.read()
            chunks = [line for line in response.iter_lines() if line.startswith("data:")]
        assert chunks[-1] == "data: [DONE]", chunks
        assert any('"finish"' in c for c in chunks), chunks
        page = self.http.get(f"/v1/ai-sdk/threads/{self.thread}/messages", headers=deployment.headers()).json()
        self.session = page["session_id"]

    def events(self) -> list[str]:
        return [e.type for e in self.client.beta.sessions.events.list(self.session, limit=1000)]

    def sessions_of_thread(self) -> list[str]:
        listed = self.http.get("/v1/sessions?limit=1000&include_archived=true", headers=self.deployment.headers()).json()
        return [s["id"] for s in listed["data"] if (s.get("metadata") or {}).get("adapter_thread") == self.thread]

    def apply(self, state: str) -> None:
        if state == "archived":
            self.client.beta.sessions.archive(self.session)
        elif state == "deleted":
            self.client.beta.sessions.delete(self.session)
        elif state == "agent_disabled":
            response = self.http.post(f"/v1/agents/{self.agent}/disable", json={}, headers=self.deployment.headers())
            assert response.status_code == 200, response.text
        elif state == "agent_archived":
            self.client.beta.agents.archive(self.agent)
        else:
            raise AssertionError(state)


def drive(script: str, deployment: Deployment, **options: Any) -> dict[str, Any]:
    """One `send` scenario of a node driver (tests/clients/node) on `options["thread"]`."""
    options = {"url": deployment.url, "key": deployment.bootstrap_key, **options}
    result = subprocess.run(
        ["node", script, "send", json.dumps(options)],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "SUPPRESS_TRANSFORMATION_WARNINGS": "1"},
    )
    assert result.returncode == 0, f"node {script} failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def ai_sdk_body(thread: str, text: str) -> dict[str, Any]:
    return {"id": thread, "trigger": "submit-message",
            "messages": [{"id": unique("m"), "role": "user", "parts": [{"type": "text", "text": text}]}]}


def ag_ui_body(thread: str, text: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": unique("run"), "state": {}, "tools": [], "context": [], "forwardedProps": {},
            "messages": [{"id": unique("m"), "role": "user", "content": text}]}


async def a2a_send(deployment: Deployment, binding: str, thread: str, text: str) -> None:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {deployment.bootstrap_key}"}, timeout=60)
    config = ClientConfig(streaming=False, supported_protocol_bindings=[binding], httpx_client=http)
    client = await ClientFactory(config).create_from_url(deployment.url)
    message = Message(message_id=unique("m"), role=Role.ROLE_USER, parts=[Part(text=text)], context_id=thread)
    try:
        async for _ in client.send_message(SendMessageRequest(message=message)):
            pass
    finally:
        await client.close()


async def mcp_call(deployment: Deployment, tool: str, thread: str, text: str) -> Any:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {deployment.bootstrap_key}"}, timeout=httpx2.Timeout(30.0, read=60.0))
    async with Client(streamable_http_client(f"{deployment.url}/v1/mcp", http_client=http), mode="legacy") as mcp:
        try:
            return await mcp.call_tool(tool, {"prompt": text, "thread_id": thread})
        except MCPError as error:
            # Returned, not raised: raised inside the client's task group it would
            # surface as an exception group.
            return error


def refused_everywhere(conversation: Conversation, state: str) -> None:
    """Every surface refuses input to the conversation's session, in its own shape."""
    deployment, http, headers = conversation.deployment, conversation.http, conversation.deployment.headers()
    thread, session, text = conversation.thread, conversation.session, f"more {conversation.key}"

    # Managed events.send, through the SDK.
    error_class = anthropic.NotFoundError if state == "deleted" else anthropic.BadRequestError
    with pytest.raises(error_class):
        conversation.client.beta.sessions.events.send(
            session, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}]
        )

    # AI SDK: chat, thread runs, agent runs — the JSON error before any stream.
    for path, body in [
        ("/v1/ai-sdk/chat", ai_sdk_body(thread, text)),
        (f"/v1/ai-sdk/threads/{thread}/runs", ai_sdk_body(thread, text)),
        (f"/v1/ai-sdk/agents/{conversation.agent}/runs", ai_sdk_body(thread, text)),
    ]:
        response = http.post(path, json=body, headers=headers, timeout=30)
        assert response.headers["content-type"].startswith("application/json"), (path, response.text)
        managed_refusal(response, state)

    if NODE:
        # `useChat`'s engine shows the JSON error as the chat's error and never streams.
        report = drive("ai_sdk.mjs", deployment, thread=thread, agent=conversation.agent, text=text)
        assert report["status"] == "error" and len(report["errors"]) == 1, report
        assert json.loads(report["errors"][0])["type"] == "error", report
        # `HttpAgent.runAgent` resolves and reports the RUN_ERROR, with no other event.
        report = drive("ag_ui.mjs", deployment, thread=thread, agent=conversation.agent, text=text)
        assert report["seen"] == ["RUN_ERROR"] and len(report["runErrors"]) == 1 and report["failures"] == [], report

    # AG-UI: run and agent run — one RUN_ERROR naming the reason, nothing else.
    for path in ["/v1/ag-ui", f"/v1/ag-ui/agents/{conversation.agent}"]:
        response = http.post(path, json=ag_ui_body(thread, text), headers=headers, timeout=30)
        assert response.status_code == 200, (path, response.text)
        events = sse_payloads(response)
        assert [e["type"] for e in events] == ["RUN_ERROR"], (path, events)
        assert events[0]["code"] == AG_UI_CODES[state] and events[0]["message"], (path, events)

    # A2A SendMessage over JSON-RPC and HTTP+JSON, through a2a-sdk: -32004 / 400 FAILED_PRECONDITION.
    for binding in ["JSONRPC", "HTTP+JSON"]:
        with pytest.raises(UnsupportedOperationError):
            asyncio.run(a2a_send(deployment, binding, thread, text))

    # MCP tools/call: an isError result saying why; a disabled or archived agent is no tool.
    if state in ("agent_disabled", "agent_archived"):
        error = asyncio.run(mcp_call(deployment, tool_name(conversation.name), thread, text))
        assert isinstance(error, MCPError), error
        assert error.code == -32602 and "unknown tool" in error.error.message, error
    else:
        result = asyncio.run(mcp_call(deployment, tool_name(conversation.name), thread, text))
        assert not isinstance(result, MCPError) and result.is_error is True, result
        said = "".join(block.text for block in result.content if block.type == "text")
        assert ("deleted" if state == "deleted" else "archived") in said, said

    # Durable submit_background and the live inbox: the managed envelope.
    managed_refusal(http.post(f"/v1/durable/threads/{session}/submit_background", json={"text": text}, headers=headers), state)
    inbox = {"content": [{"type": "text", "text": text}]}
    managed_refusal(http.post(f"/v1/ext/sessions/{session}/live-inbox", json=inbox, headers=headers), state)


@pytest.mark.parametrize("state", [s for s in STATES if s != "budget_reached"])
def test_every_surface_refuses_a_session_that_takes_no_input(
    turns: Deployment, fake_anthropic: FakeAnthropic, state: str
) -> None:
    conversation = Conversation(turns, fake_anthropic)
    before = conversation.events()
    assert before.count("user.message") == 1 and before[-1] == "session.status_idle", before
    conversation.apply(state)
    refused_everywhere(conversation, state)
    if state == "deleted":
        # Nothing answered by starting a new session on the thread.
        assert conversation.sessions_of_thread() == []
    else:
        assert conversation.events() == before, "a refused request commits nothing"
        assert conversation.sessions_of_thread() == [conversation.session]
    assert fake_anthropic.pending(conversation.key) == 0


def test_a_session_over_its_budget_refuses_every_surface_that_names_it(
    turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    client = turns.client()
    http, headers = turns.http(), turns.headers()
    key = unique("parity-budget")
    agent = client.beta.agents.create(name=f"Budget {key}", model=MODEL).id
    environment = client.beta.environments.create(name=unique("parity-env")).id
    budget = {"type": "limit", "max_list_cost": {"amount": "1", "currency": "USD"}}
    session = client.beta.sessions.create(agent=agent, environment_id=environment, budget=budget).id
    fake_anthropic.script(key, say(f"costly {key}", input_tokens=100_000, output_tokens=10_000))
    client.beta.sessions.events.send(session, events=[{"type": "user.message", "content": [{"type": "text", "text": f"go {key}"}]}])
    # `session.budget_reached` is in no SDK event union: read history over plain HTTP.
    def kinds() -> list[str]:
        page = http.get(f"/v1/sessions/{session}/events?limit=1000", headers=headers).json()
        return [e["type"] for e in page["data"]]

    for _ in range(600):
        if "session.status_idle" in kinds():
            break
        time.sleep(0.1)
    before = kinds()
    assert "session.budget_reached" in before, before
    assert "session.status_idle" in before, before
    text = f"more {key}"
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.beta.sessions.events.send(session, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}])
    assert raised.value.body["error"]["details"]["error_code"] == "budget_reached"
    managed_refusal(http.post(f"/v1/durable/threads/{session}/submit_background", json={"text": text}, headers=headers), "budget_reached")
    inbox = {"content": [{"type": "text", "text": text}]}
    managed_refusal(http.post(f"/v1/ext/sessions/{session}/live-inbox", json=inbox, headers=headers), "budget_reached")
    assert kinds() == before, "a refused request commits nothing"
