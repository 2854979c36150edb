"""MCP endpoint (issue 9): the workspace's agents as MCP tools, proven with the official
clients against both modes, with the model played by the fake Anthropic server.

* Python `mcp` 2.3: `mcp.client.Client` in its default mode (`auto`: the 2026-07-28
  `server/discover` probe, stateless) and in `legacy` mode (the 2025-11-25 `initialize`
  handshake with `Mcp-Session-Id`), and the low-level `streamable_http_client` +
  `ClientSession`; the API key rides on the httpx2 client the SDK accepts.
* JS `@modelcontextprotocol/sdk` 1.32.2 (tests/clients/node/mcp.mjs).
* Raw HTTP for what the clients hide: 401 / 403 admission, the Host allowlist, a
  session refused after DELETE, and sessions shared by two gateways.
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
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from fake_models import FakeAnthropic, call, http_error, say, slow
from harness import Deployment, unique

MODEL = "claude-sonnet-4-5"
NODE_DIR = Path(__file__).resolve().parent.parent / "node"
MCP_ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


def endpoint(deployment: Deployment, base: str | None = None) -> str:
    return f"{base or deployment.url}/v1/mcp"


def transport(url: str, key: str) -> Any:
    """The SDK's streamable HTTP transport with the API key on its httpx2 client."""
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30.0, read=120.0))
    return streamable_http_client(url, http_client=http)


def new_agent(client: anthropic.Anthropic, name: str, **fields: Any) -> str:
    return client.beta.agents.create(name=name, model=MODEL, **fields).id


def tool_name(name: str) -> str:
    """The documented derivation for simple names: lowercase, runs of other characters → `_`."""
    out = ""
    for c in name.lower():
        c = c if (c.isascii() and c.isalnum()) or c == "-" else "_"
        if c == "_" and (not out or out.endswith("_")):
            continue
        out += c
    return out.rstrip("_")


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def raw(deployment: Deployment, base: str | None = None) -> httpx.Client:
    return deployment.http(base_url=base)


def mcp_headers(key: str | None, session: str | None = None, **extra: str) -> dict[str, str]:
    headers = {"accept": MCP_ACCEPT, "content-type": "application/json", **extra}
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    if session is not None:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = "2025-11-25"
    return headers


def sse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    out = []
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            out.append(json.loads(line[5:]))
    return out


def handshake(http: httpx.Client, url: str, key: str) -> str:
    """initialize + notifications/initialized over raw HTTP; returns the session id."""
    response = http.post(url, json=INITIALIZE, headers=mcp_headers(key))
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    assert sse_messages(response)[-1]["result"]["protocolVersion"] == "2025-11-25"
    done = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=mcp_headers(key, session))
    assert done.status_code == 202, done.text
    return session


def list_over(http: httpx.Client, url: str, key: str, session: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    return http.post(url, json=body, headers=mcp_headers(key, session))


# ---------------------------------------------------------------------------------------
# The Python SDK, both modes


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_client_lists_agents_and_calls_one_with_progress(
    turns: Deployment, fake_anthropic: FakeAnthropic, mode: str
) -> None:
    client = turns.client()
    key = unique("mcp")
    name = f"Helper {key}"
    agent_id = new_agent(client, name, description=f"Answers questions ({key}).")
    new_agent(client, f"Other {key}")
    archived = new_agent(client, f"Gone {key}")
    client.beta.agents.archive(archived)
    fake_anthropic.script(key, say(f"the answer is 42 ({key})"))
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async def scenario() -> tuple[Any, Any, str]:
        async with Client(transport(endpoint(turns), turns.bootstrap_key), mode=mode) as mcp:
            version = mcp.session.protocol_version
            tools = await mcp.list_tools()
            result = await mcp.call_tool(tool_name(name), {"prompt": f"what is it? {key}"}, progress_callback=on_progress)
            return tools, result, version

    tools, result, version = asyncio.run(scenario())
    assert version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    by_name = {tool.name: tool for tool in tools.tools}
    tool = by_name[tool_name(name)]
    assert tool.title == name and tool.description == f"Answers questions ({key})."
    assert tool.input_schema["required"] == ["prompt"]
    assert set(tool.input_schema["properties"]) == {"prompt", "thread_id"}
    assert tool.output_schema is None
    assert tool_name(f"Gone {key}") not in by_name, "archived agents are not tools"
    assert tool_name(f"Other {key}") in by_name

    assert not result.is_error, result
    assert text_of(result) == f"the answer is 42 ({key})"
    meta = result.meta or {}
    thread, session_id = meta["agentd/thread_id"], meta["agentd/session_id"]
    # The call ran a turn on a managed session of that agent.
    session = client.beta.sessions.retrieve(session_id)
    assert session.agent.id == agent_id
    kinds = [e.type for e in client.beta.sessions.events.list(session_id)]
    assert "user.message" in kinds and "agent.message" in kinds and kinds[-1] == "session.status_idle"
    assert thread

    assert progress, "progress notifications arrived"
    values = [value for value, _ in progress]
    assert values == sorted(values) and len(set(values)) == len(values), f"monotonic: {values}"
    messages = [m for _, m in progress]
    assert any(m and "model request" in m for m in messages), messages


def test_low_level_session_continues_a_thread(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key = unique("mcpthread")
    name, other = f"Threads {key}", f"Other threads {key}"
    new_agent(client, name)
    new_agent(client, other)
    fake_anthropic.script(key, say(f"first {key}"), say(f"second {key}"))

    async def scenario() -> tuple[Any, Any, Any]:
        async with transport(endpoint(turns), turns.bootstrap_key) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                await session.send_ping()
                first = await session.call_tool(tool_name(name), {"prompt": f"one {key}"})
                thread = first.meta["agentd/thread_id"]
                second = await session.call_tool(tool_name(name), {"prompt": f"two {key}", "thread_id": thread})
                # A thread belongs to its agent: another agent's tool refuses it.
                with pytest.raises(MCPError) as raised:
                    await session.call_tool(tool_name(other), {"prompt": "x", "thread_id": thread})
                assert raised.value.code == -32602 and "arguments.thread_id" in raised.value.error.message
                return init, first, second

    init, first, second = asyncio.run(scenario())
    assert init.protocol_version == "2025-11-25"
    assert init.server_info.name == "agentd" and init.capabilities.tools is not None
    assert text_of(first) == f"first {key}" and text_of(second) == f"second {key}"
    thread = first.meta["agentd/thread_id"]
    assert second.meta["agentd/thread_id"] == thread
    assert second.meta["agentd/session_id"] == first.meta["agentd/session_id"], "the same session"
    # The model saw the whole conversation on the second turn.
    last = fake_anthropic.received(key)[-1]
    assert [m["role"] for m in last.messages] == ["user", "assistant", "user"]
    # The same thread through the AI SDK adapter's history route.
    page = raw(turns).get(f"/v1/ai-sdk/threads/{thread}/messages", headers=turns.headers()).json()
    assert page["session_id"] == first.meta["agentd/session_id"]
    assert [m["role"] for m in page["data"]] == ["user", "assistant", "user", "assistant"]


def test_agent_failure_is_an_error_result(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key = unique("mcpfail")
    name = f"Failing {key}"
    new_agent(client, name)
    fake_anthropic.script(key, http_error(400, "messages: bad"))

    async def scenario() -> Any:
        async with Client(transport(endpoint(turns), turns.bootstrap_key), mode="legacy") as mcp:
            return await mcp.call_tool(tool_name(name), {"prompt": f"fail {key}"})

    result = asyncio.run(scenario())
    assert result.is_error is True
    assert text_of(result).startswith("the turn failed"), text_of(result)
    session = client.beta.sessions.retrieve(result.meta["agentd/session_id"])
    assert session.status == "idle"


def test_a_turn_that_needs_the_caller_is_an_error_result(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key = unique("mcpaction")
    name = f"Weather {key}"
    weather = {
        "type": "custom",
        "name": "get_weather",
        "description": "Weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    new_agent(client, name, tools=[weather])
    fake_anthropic.script(key, call("get_weather", {"city": "Paris"}))

    async def scenario() -> Any:
        async with Client(transport(endpoint(turns), turns.bootstrap_key)) as mcp:
            return await mcp.call_tool(tool_name(name), {"prompt": f"weather? {key}"})

    result = asyncio.run(scenario())
    assert result.is_error is True
    session_id = result.meta["agentd/session_id"]
    (use,) = [e for e in client.beta.sessions.events.list(session_id) if e.type == "agent.custom_tool_use"]
    assert use.id in text_of(result) and "waiting for input" in text_of(result)


def test_tools_are_paginated(turns: Deployment) -> None:
    key = turns.create_key(unique("mcp-many"))
    client = turns.client(key)
    names = {tool_name(client.beta.agents.create(name=f"Many {i:03d}", model=MODEL).name) for i in range(101)}

    async def scenario() -> list[Any]:
        pages = []
        async with Client(transport(endpoint(turns), key), mode="legacy") as mcp:
            cursor = None
            while True:
                page = await mcp.list_tools(cursor=cursor)
                pages.append(page)
                cursor = page.next_cursor
                if cursor is None:
                    return pages

    pages = asyncio.run(scenario())
    assert [len(p.tools) for p in pages] == [100, 1]
    assert {t.name for p in pages for t in p.tools} == names, "another workspace's agents are not listed"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_cancelled_call_interrupts_the_turn(turns: Deployment, fake_anthropic: FakeAnthropic, mode: str) -> None:
    client = turns.client()
    key = unique("mcpcancel")
    name = f"Slow {key}"
    agent_id = new_agent(client, name)
    fake_anthropic.script(key, slow(f"never finished {key}", chunks=40, delay=0.5))
    thread = unique("mcp-thread")

    async def scenario() -> None:
        async with Client(transport(endpoint(turns), turns.bootstrap_key), mode=mode) as mcp:
            # The client gives up after 2 s: legacy sends notifications/cancelled, the
            # 2026-07-28 era closes the request's stream.
            with pytest.raises(MCPError):
                await mcp.call_tool(tool_name(name), {"prompt": f"go {key}", "thread_id": thread}, read_timeout_seconds=2)

    asyncio.run(scenario())
    session_id = raw(turns).get(f"/v1/ai-sdk/threads/{thread}/messages", headers=turns.headers()).json()["session_id"]
    assert client.beta.sessions.retrieve(session_id).agent.id == agent_id
    deadline = time.monotonic() + 20
    while True:
        events = list(client.beta.sessions.events.list(session_id))
        kinds = [e.type for e in events]
        if "user.interrupt" in kinds and kinds[-1] == "session.status_idle":
            break
        assert time.monotonic() < deadline, f"the turn was not interrupted: {kinds}"
        time.sleep(0.2)
    assert "agent.message" not in kinds, "the reply was cut off, not completed"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_protocol_errors_are_jsonrpc_errors(turns: Deployment, mode: str) -> None:
    client = turns.client()
    name = f"Strict {unique('mcp')}"
    new_agent(client, name)

    async def scenario() -> list[MCPError]:
        errors = []
        async with Client(transport(endpoint(turns), turns.bootstrap_key), mode=mode) as mcp:
            for tool, arguments in [
                ("no_such_agent", {"prompt": "x"}),
                (tool_name(name), {}),
                (tool_name(name), {"prompt": 7}),
                (tool_name(name), {"prompt": "x", "extra": True}),
            ]:
                with pytest.raises(MCPError) as raised:
                    await mcp.call_tool(tool, arguments)
                errors.append(raised.value)
        return errors

    unknown, missing, wrong_type, extra = asyncio.run(scenario())
    assert unknown.code == -32602 and "unknown tool" in unknown.error.message
    assert missing.code == -32602 and "arguments.prompt" in missing.error.message
    assert wrong_type.code == -32602 and "arguments.prompt" in wrong_type.error.message
    assert extra.code == -32602 and "arguments.extra" in extra.error.message


# ---------------------------------------------------------------------------------------
# Sessions and admission over raw HTTP


def test_deleted_session_is_refused(turns: Deployment) -> None:
    http, url, key = raw(turns), endpoint(turns), turns.bootstrap_key
    session = handshake(http, url, key)
    listed = list_over(http, url, key, session)
    assert listed.status_code == 200 and "tools" in sse_messages(listed)[-1]["result"]
    deleted = http.delete(url, headers=mcp_headers(key, session))
    assert deleted.status_code in (200, 202, 204), deleted.text
    assert list_over(http, url, key, session).status_code == 404
    assert list_over(http, url, key, "never-issued").status_code == 404


def test_a_session_belongs_to_its_workspace(turns: Deployment) -> None:
    http, url, key = raw(turns), endpoint(turns), turns.bootstrap_key
    session = handshake(http, url, key)
    intruder = turns.create_key(unique("mcp-intruder"))
    # Another workspace's key naming the session meets an unknown session: it can
    # neither use it, nor follow it, nor end it.
    assert list_over(http, url, intruder, session).status_code == 404
    with http.stream("GET", url, headers={**mcp_headers(intruder, session), "accept": "text/event-stream"}) as followed:
        assert followed.status_code == 404
    assert http.delete(url, headers=mcp_headers(intruder, session)).status_code == 404
    listed = list_over(http, url, key, session)
    assert listed.status_code == 200 and "tools" in sse_messages(listed)[-1]["result"], "the owner's session lives on"
    # A session the intruder opens is its own.
    own = handshake(http, url, intruder)
    assert list_over(http, url, intruder, own).status_code == 200
    assert list_over(http, url, key, own).status_code == 404


def test_sessions_are_shared_by_gateways(turns: Deployment) -> None:
    if turns.mode != "prod":
        pytest.skip("one process in dev")
    second = turns.start_gateway()
    http, key = raw(turns), turns.bootstrap_key
    session = handshake(http, endpoint(turns), key)
    # The other gateway serves the session it never saw...
    listed = list_over(http, endpoint(turns, second), key, session)
    assert listed.status_code == 200, listed.text
    assert "tools" in sse_messages(listed)[-1]["result"]
    # ...ends it, and the first gateway refuses it from then on.
    assert http.delete(endpoint(turns, second), headers=mcp_headers(key, session)).status_code in (200, 202, 204)
    assert list_over(http, endpoint(turns), key, session).status_code == 404


def test_only_api_keys_reach_the_endpoint(turns: Deployment) -> None:
    url = endpoint(turns)
    # A fresh connection per refused request: a refusal sent before the body is read
    # may close the connection under the next request.
    missing = raw(turns).post(url, json=INITIALIZE, headers=mcp_headers(None))
    assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error"
    invalid = raw(turns).post(url, json=INITIALIZE, headers=mcp_headers("sk-agentd-test-not-a-key"))
    assert invalid.status_code == 401
    assert raw(turns).get(url, headers={"accept": "text/event-stream"}).status_code == 401
    assert raw(turns).delete(url).status_code == 401
    http = raw(turns)
    environment = turns.client().beta.environments.create(name=unique("mcp-env"), config={"type": "cloud"})
    env_key = turns.create_environment_key(environment.id)
    refused = http.post(url, json=INITIALIZE, headers=mcp_headers(env_key))
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "permission_error"

    async def scenario() -> None:
        async with Client(transport(url, "sk-agentd-test-not-a-key"), mode="legacy") as mcp:
            await mcp.list_tools()

    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 401 as its own error type
        asyncio.run(scenario())


def test_host_allowlist(turns: Deployment, launch: Any) -> None:
    key = turns.bootstrap_key
    evil = raw(turns).post(endpoint(turns), json=INITIALIZE, headers=mcp_headers(key, host="evil.example"))
    if turns.mode == "dev":
        assert evil.status_code == 403, "agentd dev accepts only loopback Host names by default"
    else:
        assert evil.status_code == 200, "a gateway behind a load balancer checks no Host by default"
    listed = launch(turns.mode, extra_env={"AGENTD_MCP_ALLOWED_HOSTS": "agents.example.com", "AGENTD_MCP_PATH": "/mcp"})
    url, key = f"{listed.url}/mcp", listed.bootstrap_key
    assert raw(listed).post(url, json=INITIALIZE, headers=mcp_headers(key)).status_code == 403
    ok = raw(listed).post(url, json=INITIALIZE, headers=mcp_headers(key, host="agents.example.com"))
    assert ok.status_code == 200 and ok.headers.get("mcp-session-id")
    # The custom path outside /v1 is authenticated like the default one.
    assert raw(listed).post(url, json=INITIALIZE, headers=mcp_headers(None, host="agents.example.com")).status_code == 401
    assert raw(listed).post(f"{listed.url}/v1/mcp", json=INITIALIZE, headers=mcp_headers(key)).status_code == 404


# ---------------------------------------------------------------------------------------
# The JS SDK


@pytest.mark.skipif(
    not (NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir() or shutil.which("node") is None,
    reason="the node clients are not installed (scripts/test runs npm ci in tests/clients/node)",
)
def test_js_client(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key, bad = unique("mcpjs"), unique("mcpjsfail")
    name = f"Js Agent {key}"
    new_agent(client, name, description="Answers from JavaScript.")
    fake_anthropic.script(key, say(f"hello js {key}"))
    fake_anthropic.script(bad, http_error(400, "messages: bad"))
    options = {
        "url": turns.url,
        "key": turns.bootstrap_key,
        "tool": tool_name(name),
        "prompt": f"hi {key}",
        "failing_prompt": f"fail {bad}",
    }
    result = subprocess.run(
        ["node", "mcp.mjs", json.dumps(options)], cwd=NODE_DIR, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"node mcp.mjs failed:\n{result.stdout}\n{result.stderr}"
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["protocolVersion"] == "2025-11-25" and report["sessionId"]
    assert report["serverVersion"]["name"] == "agentd"
    tool = next(t for t in report["tools"] if t["name"] == tool_name(name))
    assert tool["description"] == "Answers from JavaScript." and not tool["hasOutputSchema"]
    assert tool["inputSchema"]["required"] == ["prompt"]
    assert report["reply"]["isError"] is False and report["reply"]["text"] == f"hello js {key}"
    assert report["reply"]["meta"]["agentd/thread_id"]
    assert report["progress"], "onprogress was called"
    assert [p["progress"] for p in report["progress"]] == sorted(p["progress"] for p in report["progress"])
    assert report["failed"]["isError"] is True and report["failed"]["text"].startswith("the turn failed")
    assert report["unknown"]["code"] == -32602
    assert report["terminatedSessionId"] is None
    assert report["afterDelete"] == 404
