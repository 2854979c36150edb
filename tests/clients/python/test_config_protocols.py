"""MCP and A2A configuration on the control plane (docs/api/config.md "MCP and A2A
configuration"; issue 21 item 3), both modes.

* Exposure gates, through the official clients: with mode `listed`, an unlisted agent's
  A2A card, endpoint (JSON-RPC and HTTP+JSON), new contexts and tasks answer exactly as
  for a missing agent (`a2a-sdk`), and the MCP `tools/list` omits it while `tools/call`
  refuses it as an unknown tool (`mcp`); `none` hides every agent; `all` restores.
* The MCP server registry: CRUD, names unique per workspace, the egress guard refusing a
  private URL on the shared deployment (`prod`), a server in use refused deletion.
* An agent's MCP servers: `PUT …/mcp` writes a new version that the official
  `anthropic` SDK reads back (`client.beta.agents.retrieve`), `resolve` answers the
  effective configuration and says when a registered server changed since.
* RFC 9457 problems for every refusal; another workspace's ids are missing (404).
"""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import httpx
import httpx2
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.errors import AgentCardResolutionError
from a2a.types import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskNotFoundError,
)
from google.protobuf.json_format import MessageToDict
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from fake_models import FakeAnthropic, say
from harness import Deployment, unique

MODEL = "claude-sonnet-4-5"
# A public address literal (TEST-NET-3): the egress guard accepts it without DNS.
PUBLIC_URL = "https://203.0.113.10/mcp"


def problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """An RFC 9457 problem of the control plane."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body = response.json()
    assert body["type"] == "about:blank" and body["status"] == status and body["title"], body
    assert body["code"] == code and body["detail"], body
    assert body["request_id"].startswith("req_"), body
    return body


def new_workspace(deployment: Deployment) -> tuple[str, anthropic.Anthropic, httpx.Client, dict[str, str]]:
    key = deployment.create_key(unique("ws-protocols"))
    return key, deployment.client(key), deployment.http(), deployment.headers(key, beta=False)


def expose(http: httpx.Client, headers: dict[str, str], protocol: str, mode: str, agent_ids: list[str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"mode": mode}
    if agent_ids is not None:
        body["agent_ids"] = agent_ids
    answer = http.put(f"/v1/config/exposure/{protocol}", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["mode"] == mode and answer.json()["protocol"] == protocol
    return answer.json()


def missing_agent_id() -> str:
    return "agent_" + "0" * 26


# ---------------------------------------------------------------------------------------
# A2A


def message(text: str, *, agent_id: str | None = None, context: str | None = None) -> SendMessageRequest:
    msg = Message(message_id=unique("m"), role=Role.ROLE_USER, parts=[Part(text=text)])
    if agent_id:
        msg.metadata.update({"agent": agent_id})
    if context:
        msg.context_id = context
    return SendMessageRequest(message=msg)


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def without_ids(value: Any, *ids: str) -> Any:
    """`value` as text with the given ids blanked: two answers that differ only by the
    id they name are the same answer."""
    text = str(value)
    for id_ in ids:
        text = text.replace(id_, "<id>")
    return text


def test_a2a_serves_only_the_agents_it_exposes(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key, client, http, headers = new_workspace(turns)
    tag = unique("a2a-exposure")
    shown = client.beta.agents.create(name=f"shown {tag}", model=MODEL).id
    hidden = client.beta.agents.create(name=f"hidden {tag}", model=MODEL).id
    missing = missing_agent_id()
    fake_anthropic.script(tag, say(f"hidden answer {tag}"), say(f"shown answer {tag}"))
    base = turns.url
    auth = {"Authorization": f"Bearer {key}"}

    async def a2a(url: str) -> Any:
        config = ClientConfig(streaming=False, supported_protocol_bindings=["JSONRPC"], httpx_client=httpx.AsyncClient(headers=auth, timeout=60))
        return await ClientFactory(config).create_from_url(url)

    async def scenario() -> None:
        # While every agent is exposed, the hidden one answers: its task and context exist.
        hidden_client = await a2a(f"{base}/v1/a2a/agents/{hidden}")
        (event,) = [MessageToDict(e) async for e in hidden_client.send_message(message(f"hi {tag}"))]
        hidden_task, hidden_context = event["task"]["id"], event["task"]["contextId"]
        assert event["task"]["status"]["state"] == "TASK_STATE_COMPLETED", event

        expose(http, headers, "a2a", "listed", [shown])
        async with httpx.AsyncClient(headers=auth, timeout=60) as raw:
            # The cards: the hidden agent's is a missing agent's; the root lists the shown one.
            for path in ["", "/.well-known/agent-card.json"]:
                gone = await raw.get(f"{base}/v1/a2a/agents/{hidden}{path}")
                absent = await raw.get(f"{base}/v1/a2a/agents/{missing}{path}")
                assert gone.status_code == absent.status_code == 404, gone.text
                assert without_ids(gone.json(), hidden) == without_ids(absent.json(), missing)
            root = (await raw.get(f"{base}/.well-known/agent-card.json")).json()
            assert [s["id"] for s in root["skills"]] == [shown], root["skills"]
            # Its endpoint, JSON-RPC and HTTP+JSON, every method: a missing agent's.
            for method, params in [
                ("SendMessage", {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
                ("GetTask", {"id": hidden_task}),
                ("ListTasks", {}),
            ]:
                gone = (await raw.post(f"{base}/v1/a2a/agents/{hidden}", json=rpc(method, params))).json()
                absent = (await raw.post(f"{base}/v1/a2a/agents/{missing}", json=rpc(method, params))).json()
                assert "error" in gone and gone["error"]["data"][0]["reason"] == "NOT_FOUND", gone
                assert without_ids(gone, hidden) == without_ids(absent, missing)
            for suffix in ["/message:send", f"/tasks/{hidden_task}", "/tasks"]:
                send = (lambda url: raw.post(url, json={"message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "x"}]}})) if suffix == "/message:send" else raw.get
                gone, absent = await send(f"{base}/v1/a2a/agents/{hidden}{suffix}"), await send(f"{base}/v1/a2a/agents/{missing}{suffix}")
                assert gone.status_code == absent.status_code == 404, (suffix, gone.text)
                assert without_ids(gone.json(), hidden) == without_ids(absent.json(), missing)
        # The official client cannot resolve its card at all.
        with pytest.raises(AgentCardResolutionError):
            await a2a(f"{base}/v1/a2a/agents/{hidden}")

        # Through the workspace endpoint: a new context of the hidden agent is refused as a
        # missing agent's, its existing context too, and its task is a missing task.
        workspace = await a2a(base)
        with pytest.raises(InvalidParamsError) as refused:
            async for _ in workspace.send_message(message("x", agent_id=hidden)):
                pass
        with pytest.raises(InvalidParamsError) as refused_missing:
            async for _ in workspace.send_message(message("x", agent_id=missing)):
                pass
        assert without_ids(refused.value, hidden) == without_ids(refused_missing.value, missing)
        with pytest.raises(InvalidParamsError):
            async for _ in workspace.send_message(message("x", context=hidden_context)):
                pass
        with pytest.raises(TaskNotFoundError):
            await workspace.get_task(GetTaskRequest(id=hidden_task))
        with pytest.raises(TaskNotFoundError):
            await workspace.cancel_task(CancelTaskRequest(id=hidden_task))
        listed = MessageToDict(await workspace.list_tasks(ListTasksRequest()))
        assert hidden_task not in [t["id"] for t in listed.get("tasks", [])], listed

        # The shown agent works as before.
        shown_client = await a2a(f"{base}/v1/a2a/agents/{shown}")
        (event,) = [MessageToDict(e) async for e in shown_client.send_message(message(f"hello {tag}"))]
        assert event["task"]["status"]["state"] == "TASK_STATE_COMPLETED", event
        shown_task = event["task"]["id"]

        # `none` hides every agent; `all` restores them.
        expose(http, headers, "a2a", "none")
        async with httpx.AsyncClient(headers=auth, timeout=60) as raw:
            assert (await raw.get(f"{base}/v1/a2a/agents/{shown}")).status_code == 404
            assert (await raw.get(f"{base}/.well-known/agent-card.json")).json()["skills"] == []
        with pytest.raises(TaskNotFoundError):
            await workspace.get_task(GetTaskRequest(id=shown_task))
        expose(http, headers, "a2a", "all")
        got = MessageToDict(await workspace.get_task(GetTaskRequest(id=hidden_task)))
        assert got["status"]["state"] == "TASK_STATE_COMPLETED", got
        again = await a2a(f"{base}/v1/a2a/agents/{hidden}")
        card = MessageToDict(await again.get_extended_agent_card(GetExtendedAgentCardRequest()))
        assert card["name"] == f"hidden {tag}", card

    asyncio.run(scenario())


# ---------------------------------------------------------------------------------------
# MCP


def tool_name(name: str) -> str:
    out = ""
    for c in name.lower():
        c = c if (c.isascii() and c.isalnum()) or c == "-" else "_"
        if c == "_" and (not out or out.endswith("_")):
            continue
        out += c
    return out.rstrip("_")


def test_mcp_lists_and_calls_only_the_agents_it_exposes(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key, client, http, headers = new_workspace(turns)
    tag = unique("mcp-exposure")
    shown, hidden = f"Shown {tag}", f"Hidden {tag}"
    shown_id = client.beta.agents.create(name=shown, model=MODEL).id
    client.beta.agents.create(name=hidden, model=MODEL)
    fake_anthropic.script(tag, say(f"shown says {tag}"))

    async def session(body: Any) -> Any:
        http2 = httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30.0, read=120.0))
        async with Client(streamable_http_client(f"{turns.url}/v1/mcp", http_client=http2)) as mcp:
            return await body(mcp)

    async def names(mcp: Any) -> list[str]:
        return [tool.name for tool in (await mcp.list_tools()).tools]

    assert set(asyncio.run(session(names))) == {tool_name(shown), tool_name(hidden)}

    expose(http, headers, "mcp", "listed", [shown_id])

    async def listed(mcp: Any) -> tuple[list[str], str, str, str]:
        tools = await names(mcp)
        with pytest.raises(MCPError) as refused:
            await mcp.call_tool(tool_name(hidden), {"prompt": "x"})
        with pytest.raises(MCPError) as unknown:
            await mcp.call_tool("no_such_tool", {"prompt": "x"})
        assert refused.value.code == unknown.value.code == -32602
        result = await mcp.call_tool(tool_name(shown), {"prompt": f"go {tag}"})
        text = "".join(block.text for block in result.content if block.type == "text")
        return tools, refused.value.error.message, unknown.value.error.message, text

    tools, refused, unknown, text = asyncio.run(session(listed))
    assert tools == [tool_name(shown)]
    assert refused == f'unknown tool "{tool_name(hidden)}"' and unknown == 'unknown tool "no_such_tool"'
    assert text == f"shown says {tag}"

    expose(http, headers, "mcp", "none")
    assert asyncio.run(session(names)) == []
    # A2A's setting is its own.
    a2a = http.get("/v1/config/exposure/a2a", headers=headers)
    assert a2a.json()["mode"] == "all", a2a.text
    expose(http, headers, "mcp", "all")
    assert set(asyncio.run(session(names))) == {tool_name(shown), tool_name(hidden)}


def test_exposure_settings_and_their_problems(agentd: Deployment, model_id: str) -> None:
    key, client, http, headers = new_workspace(agentd)
    agent = client.beta.agents.create(name=unique("exposed"), model=model_id)
    both = http.get("/v1/config/exposure", headers=headers)
    assert both.status_code == 200, both.text
    assert [(s["protocol"], s["mode"], s["agent_ids"], s["updated_at"]) for s in both.json()["data"]] == [
        ("a2a", "all", [], None),
        ("mcp", "all", [], None),
    ]
    set_ = expose(http, headers, "mcp", "listed", [agent.id])
    assert set_["agent_ids"] == [agent.id] and set_["updated_at"]
    assert http.get("/v1/config/exposure/mcp", headers=headers).json() == set_

    _, other_client, _, other_headers = new_workspace(agentd)
    theirs = other_client.beta.agents.create(name=unique("theirs"), model=model_id)
    for body, path in [
        ({"mode": "some"}, "/mode"),
        ({}, "/mode"),
        ({"mode": "listed"}, "/agent_ids"),
        ({"mode": "none", "agent_ids": [agent.id]}, "/agent_ids"),
        ({"mode": "listed", "agent_ids": [theirs.id]}, "/agent_ids/0"),
        ({"mode": "listed", "agent_ids": [agent.id, agent.id]}, "/agent_ids/1"),
        ({"mode": "listed", "agent_ids": ["not-an-id"]}, "/agent_ids/0"),
        ({"mode": "all", "extra": 1}, "/extra"),
    ]:
        refused = problem(http.put("/v1/config/exposure/a2a", json=body, headers=headers), 422, "validation_failed")
        assert refused["errors"][0]["path"] == path, (body, refused)
    problem(http.put("/v1/config/exposure/a2a", content=b"[1]", headers={**headers, "content-type": "application/json"}), 400, "invalid_request")
    problem(http.get("/v1/config/exposure/grpc", headers=headers), 404, "not_found")
    # Each workspace has its own settings.
    assert http.get("/v1/config/exposure/mcp", headers=other_headers).json()["mode"] == "all"
    # The control plane takes API keys only.
    problem(httpx.get(f"{agentd.url}/v1/config/exposure", headers={"authorization": "Bearer nope"}), 401, "unauthenticated")


# ---------------------------------------------------------------------------------------
# The MCP server registry and an agent's MCP servers


def test_mcp_server_registry(agentd: Deployment) -> None:
    key, _, http, headers = new_workspace(agentd)
    server = unique("docs").replace("_", "-")
    path = f"/v1/config/mcp-servers/{server}"
    made = http.put(path, json={"name": "docs", "url": PUBLIC_URL, "description": "the docs"}, headers=headers)
    assert made.status_code == 201, made.text
    body = made.json()
    assert (body["object"], body["id"], body["name"], body["url"], body["description"]) == ("mcp_server", server, "docs", PUBLIC_URL, "the docs")
    replaced = http.put(path, json={"name": "docs", "url": PUBLIC_URL + "/v2"}, headers=headers)
    assert replaced.status_code == 200 and replaced.json()["description"] is None, replaced.text
    assert replaced.json()["created_at"] == body["created_at"]
    assert http.get(path, headers=headers).json() == replaced.json()
    second = http.put("/v1/config/mcp-servers/calc", json={"name": "calc", "url": PUBLIC_URL}, headers=headers)
    assert second.status_code == 201, second.text
    problem(http.put("/v1/config/mcp-servers/calc2", json={"name": "docs", "url": PUBLIC_URL}, headers=headers), 409, "name_taken")
    page = http.get("/v1/config/mcp-servers?limit=1", headers=headers).json()
    assert [s["id"] for s in page["data"]] == ["calc"] and page["next_page"], page
    rest = http.get(f"/v1/config/mcp-servers?limit=10&page={page['next_page']}", headers=headers).json()
    assert [s["id"] for s in rest["data"]] == [server], rest

    for bad, field in [
        ({"url": PUBLIC_URL}, "/name"),
        ({"name": "x"}, "/url"),
        ({"name": "x", "url": "ftp://example.com/x"}, "/url"),
        ({"name": "x", "url": PUBLIC_URL, "secret": 1}, "/secret"),
        # NUL and other control characters: refused, never a 500 from the store.
        ({"name": "x\u0000y", "url": PUBLIC_URL}, "/name"),
        ({"name": "x", "url": PUBLIC_URL + "/a\u0000b"}, "/url"),
        ({"name": "x", "url": PUBLIC_URL, "description": "d\u0000"}, "/description"),
    ]:
        refused = problem(http.put("/v1/config/mcp-servers/bad", json=bad, headers=headers), 422, "validation_failed")
        assert refused["errors"][0]["path"] == field, refused
    # `agentd dev` lets remote tools reach a laptop's servers (mcp-tools.md), and so does
    # the suite's shared gateway (AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE=true, for its local
    # MCP servers): a private URL is accepted there; see the test below for the refusal.
    private = http.put("/v1/config/mcp-servers/local", json={"name": "local", "url": "http://127.0.0.1:9/mcp"}, headers=headers)
    assert private.status_code == 201, private.text
    problem(http.get("/v1/config/mcp-servers/-bad", headers=headers), 404, "not_found")

    # Another workspace's server is missing.
    _, _, _, other = new_workspace(agentd)
    problem(http.get(path, headers=other), 404, "not_found")
    problem(http.delete(path, headers=other), 404, "not_found")
    assert http.get("/v1/config/mcp-servers", headers=other).json()["data"] == []

    assert http.delete(path, headers=headers).status_code == 204
    problem(http.get(path, headers=headers), 404, "not_found")
    problem(http.delete(path, headers=headers), 404, "not_found")


def test_a_private_mcp_server_url_is_refused(agentd: Deployment, launch: Any) -> None:
    """With remote tools limited to public addresses (the gateway role's default), the
    egress guard refuses a private URL when the server is written, naming no address."""
    deployment = launch(agentd.mode, extra_env={"AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE": "false"})
    key, _, http, headers = new_workspace(deployment)
    for url in ["http://127.0.0.1:9/mcp", "https://10.1.2.3/mcp", "http://[::1]:9/mcp", "https://169.254.169.254/"]:
        refused = problem(http.put("/v1/config/mcp-servers/local", json={"name": "local", "url": url}, headers=headers), 422, "validation_failed")
        assert refused["detail"] == "url: must resolve only to public addresses", refused
        assert refused["errors"][0]["path"] == "/url", refused
    problem(http.get("/v1/config/mcp-servers/local", headers=headers), 404, "not_found")
    made = http.put("/v1/config/mcp-servers/public", json={"name": "public", "url": PUBLIC_URL}, headers=headers)
    assert made.status_code == 201, made.text


def test_an_agents_mcp_servers_become_a_new_version(agentd: Deployment, model_id: str) -> None:
    key, client, http, headers = new_workspace(agentd)
    custom = {"type": "custom", "name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}}
    agent = client.beta.agents.create(name=unique("mcp-user"), model=model_id, tools=[custom])
    for server, name in [("docs", "docs"), ("calc", "calculator")]:
        made = http.put(f"/v1/config/mcp-servers/{server}", json={"name": name, "url": f"{PUBLIC_URL}/{server}"}, headers=headers)
        assert made.status_code == 201, made.text
    mcp = f"/v1/config/agents/{agent.id}/mcp"
    empty = http.get(mcp, headers=headers).json()
    assert (empty["servers"], empty["agent_version"], empty["updated_at"]) == ([], None, None), empty

    config = {"servers": [
        {"server_id": "docs"},
        {"server_id": "calc", "tools": ["add", "mul"], "permission_policy": {"type": "always_allow"}},
    ]}
    preview = http.post(f"{mcp}/resolve", json=config, headers=headers)
    assert preview.status_code == 200, preview.text
    assert preview.json()["current"] is False and preview.json()["agent_version"] == agent.version
    put = http.put(mcp, json=config, headers=headers)
    assert put.status_code == 200, put.text
    assert put.json()["agent_version"] == agent.version + 1 and put.json()["updated_at"]
    assert [s["server_id"] for s in put.json()["servers"]] == ["docs", "calc"]

    # The official SDK reads the new version: the servers and their toolsets, the custom
    # tool kept.
    read = client.beta.agents.retrieve(agent.id)
    assert read.version == agent.version + 1
    assert [(s.name, s.url) for s in read.mcp_servers] == [("docs", f"{PUBLIC_URL}/docs"), ("calculator", f"{PUBLIC_URL}/calc")]
    types = [t.type for t in read.tools]
    assert types == ["custom", "mcp_toolset", "mcp_toolset"], types
    calc = read.tools[2].model_dump()
    assert calc["mcp_server_name"] == "calculator" and calc["default_config"]["enabled"] is False
    assert [(c["name"], c["enabled"], c["permission_policy"]["type"]) for c in calc["configs"]] == [
        ("add", True, "always_allow"),
        ("mul", True, "always_allow"),
    ]
    resolved = http.post(f"{mcp}/resolve", headers=headers)
    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["current"] is True
    assert [(s["name"], s["url"]) for s in resolved.json()["mcp_servers"]] == [(s.name, s.url) for s in read.mcp_servers]
    assert [t["mcp_server_name"] for t in resolved.json()["tools"]] == ["docs", "calculator"]
    assert resolved.json()["tools"][1]["configs"] == calc["configs"]
    # Writing the same again writes no version.
    assert http.put(mcp, json=config, headers=headers).json()["agent_version"] == agent.version + 1

    # A registered server's change is not written to the agent until its MCP
    # configuration is written again.
    http.put("/v1/config/mcp-servers/docs", json={"name": "docs", "url": f"{PUBLIC_URL}/moved"}, headers=headers)
    stale = http.post(f"{mcp}/resolve", json={}, headers=headers).json()
    assert stale["current"] is False and stale["mcp_servers"][0]["url"] == f"{PUBLIC_URL}/moved", stale
    assert client.beta.agents.retrieve(agent.id).mcp_servers[0].url == f"{PUBLIC_URL}/docs"
    assert http.put(mcp, json=config, headers=headers).json()["agent_version"] == agent.version + 2
    assert client.beta.agents.retrieve(agent.id).mcp_servers[0].url == f"{PUBLIC_URL}/moved"

    # A server in use cannot be deleted; one the workspace lacks cannot be used.
    in_use = problem(http.delete("/v1/config/mcp-servers/docs", headers=headers), 409, "conflict")
    assert agent.id in in_use["detail"]
    unknown = problem(http.put(mcp, json={"servers": [{"server_id": "nope"}]}, headers=headers), 422, "validation_failed")
    assert unknown["errors"][0]["path"] == "/servers/0/server_id", unknown
    problem(http.put(mcp, json={"servers": [{"server_id": "docs", "tools": "all"}]}, headers=headers), 422, "validation_failed")
    problem(http.put(mcp, json={}, headers=headers), 422, "validation_failed")

    # Clearing takes the servers and their toolsets off the agent.
    cleared = http.put(mcp, json={"servers": []}, headers=headers)
    assert cleared.status_code == 200, cleared.text
    after = client.beta.agents.retrieve(agent.id)
    assert after.mcp_servers == [] and [t.type for t in after.tools] == ["custom"]
    assert http.delete("/v1/config/mcp-servers/docs", headers=headers).status_code == 204

    # Another workspace's agent is missing; so is an archived agent's update refused.
    _, _, _, other = new_workspace(agentd)
    problem(http.get(mcp, headers=other), 404, "not_found")
    problem(http.put(mcp, json={"servers": []}, headers=other), 404, "not_found")
    problem(http.post(f"{mcp}/resolve", json={}, headers=other), 404, "not_found")
    client.beta.agents.archive(agent.id)
    problem(http.put(mcp, json={"servers": [{"server_id": "calc"}]}, headers=headers), 409, "agent_archived")
