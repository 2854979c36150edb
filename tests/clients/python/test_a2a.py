"""A2A server (issue 9, docs/api/a2a.md): the official `a2a-sdk` 1.3 client (JSON-RPC and
HTTP+JSON bindings) against both modes, with the model played by the fake; raw httpx for
error shapes and the v0.3 wire; a local receiver for push notifications; and the
`@a2a-js/sdk` client (tests/clients/node/a2a.mjs) for send and stream."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.client.errors import A2AClientError
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    InvalidParamsError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value

from fake_models import FakeAnthropic, call, http_error, say, slow
from harness import RECORDER, Deployment, unique

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
MODEL = "claude-sonnet-4-5"
WEATHER = {
    "type": "custom",
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
ASK_TOOLS = [{"type": "agent_toolset_20260401", "default_config": {"permission_policy": {"type": "always_ask"}}}]
T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


def agent(deployment: Deployment, **fields: Any) -> str:
    return deployment.client().beta.agents.create(name=unique("a2a-agent"), model=MODEL, **fields).id


def http_client(deployment: Deployment, key: str | None = None) -> httpx.AsyncClient:
    key = key or deployment.bootstrap_key
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)


async def client_for(deployment: Deployment, base: str, *, streaming: bool = False, binding: str = "JSONRPC", headers: dict[str, str] | None = None) -> Any:
    http = http_client(deployment)
    if headers:
        http.headers.update(headers)
    config = ClientConfig(streaming=streaming, supported_protocol_bindings=[binding], httpx_client=http)
    return await ClientFactory(config).create_from_url(base)


def user(text: str, *, context: str | None = None, task: str | None = None, agent_id: str | None = None, data: dict[str, Any] | None = None) -> SendMessageRequest:
    parts = [Part(text=text)] if text else []
    if data is not None:
        value = Value()
        value.struct_value.update(data)
        parts.append(Part(data=value))
    message = Message(message_id=unique("m"), role=Role.ROLE_USER, parts=parts)
    if context:
        message.context_id = context
    if task:
        message.task_id = task
    if agent_id:
        message.metadata.update({"agent": agent_id})
    return SendMessageRequest(message=message)


async def collect(client: Any, request: SendMessageRequest) -> list[dict[str, Any]]:
    return [MessageToDict(ev) async for ev in client.send_message(request)]


def agent_base(deployment: Deployment, agent_id: str) -> str:
    return f"{deployment.url}/v1/a2a/agents/{agent_id}"


def answer(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


# ---------------------------------------------------------------------------------------
# Cards


def test_card_discovery_root_and_per_agent(turns: Deployment) -> None:
    agent_id = agent(turns, description="Answers questions.")

    async def scenario() -> None:
        async with http_client(turns) as http:
            root = await http.get(f"{turns.url}/.well-known/agent-card.json")
            assert root.status_code == 200, root.text
            card = root.json()
            assert [(i["protocolBinding"], i["url"], i["protocolVersion"]) for i in card["supportedInterfaces"]] == [
                ("JSONRPC", f"{turns.url}/v1/a2a", "1.0"),
                ("HTTP+JSON", f"{turns.url}/v1/a2a", "1.0"),
            ]
            assert card["capabilities"]["streaming"] and card["capabilities"]["pushNotifications"]
            assert agent_id in [s["id"] for s in card["skills"]]
            assert "bearer" in card["securitySchemes"]
            etag = root.headers["etag"]
            again = await http.get(f"{turns.url}/.well-known/agent-card.json", headers={"If-None-Match": etag})
            assert again.status_code == 304
            # Behind a proxy the card names the public address.
            proxied = await http.get(
                f"{turns.url}/.well-known/agent-card.json",
                headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "agents.example.com"},
            )
            assert proxied.json()["supportedInterfaces"][0]["url"] == "https://agents.example.com/v1/a2a"
            per_agent = await http.get(f"{agent_base(turns, agent_id)}/.well-known/agent-card.json")
            assert per_agent.status_code == 200
            assert per_agent.json()["supportedInterfaces"][0]["url"] == agent_base(turns, agent_id)
            assert per_agent.json()["description"] == "Answers questions."
            assert (await http.get(agent_base(turns, agent_id))).json() == per_agent.json()
            missing = await http.get(f"{turns.url}/v1/a2a/agents/agent_nope/.well-known/agent-card.json")
            assert missing.status_code == 404
        async with httpx.AsyncClient() as anonymous:
            # Without a key: the public card (no agent of the workspace), and every call is 401.
            public = await anonymous.get(f"{turns.url}/.well-known/agent-card.json")
            assert public.status_code == 200 and public.json()["skills"] == [], public.text
            assert agent_id not in public.text
            assert (await anonymous.post(f"{turns.url}/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}})).status_code == 401
            assert (await anonymous.get(f"{turns.url}/v1/a2a/extendedAgentCard")).status_code == 401
        client = await client_for(turns, agent_base(turns, agent_id))
        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert card.name and card.supported_interfaces[0].protocol_version == "1.0"
        assert card.supported_interfaces[0].url == agent_base(turns, agent_id)
        await client.close()

    run(scenario())


def test_configured_public_url_names_the_interfaces(turns: Deployment, launch: Callable[..., Deployment]) -> None:
    deployment = launch(turns.mode, extra_env={"AGENTD_A2A_PUBLIC_URL": "https://agents.example.com/agentd/"})
    response = deployment.http().get(f"{deployment.url}/.well-known/agent-card.json", headers={"Authorization": f"Bearer {deployment.bootstrap_key}"})
    assert response.status_code == 200, response.text
    assert {i["url"] for i in response.json()["supportedInterfaces"]} == {"https://agents.example.com/agentd/v1/a2a"}


# ---------------------------------------------------------------------------------------
# Public discovery (docs/api/a2a.md, "Discovery")

PUBLIC = {"a2a.public": "true"}


class KeyFor(CredentialService):
    """Gives the API key for the card's `bearer` scheme, as a client configured with a
    credential per scheme does: the key rides only because the public card asks for it."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.asked: list[str] = []

    async def get_credentials(self, security_scheme_name: str, context: Any) -> str | None:
        self.asked.append(security_scheme_name)
        return self.key if security_scheme_name == "bearer" else None


def public_base(deployment: Deployment, agent_id: str, workspace: str = "default") -> str:
    return f"{deployment.url}/v1/workspaces/{deployment.workspace_id(workspace)}/a2a/agents/{agent_id}"


def without(card: AgentCard, agent_id: str) -> str:
    return json.dumps(MessageToDict(card), sort_keys=True).replace(agent_id, "<id>")


def test_an_anonymous_client_discovers_a_public_agent_then_calls_it_with_a_key(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("public")
    name = unique("public-agent")
    shown = turns.client().beta.agents.create(name=name, model=MODEL, description="Answers in public.", tools=[WEATHER], metadata=PUBLIC).id
    fake_anthropic.script(key, say(f"public answer {key}"))

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=60) as anonymous:
            # The official resolver, no credential: the public card names the agent, its
            # interfaces, the bearer scheme; no tool of the agent.
            card = await A2ACardResolver(anonymous, public_base(turns, shown)).get_agent_card()
            assert (card.name, card.description) == (name, "Answers in public."), card
            assert [(s.id, list(s.tags)) for s in card.skills] == [(shown, ["agent"])]
            assert card.capabilities.extended_agent_card and card.capabilities.streaming
            assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
            assert {i.url for i in card.supported_interfaces} == {agent_base(turns, shown)}
            assert "get_weather" not in json.dumps(MessageToDict(card))
            # Its calls take the key: without one the same client is refused ...
            bare = ClientFactory(ClientConfig(streaming=False, supported_protocol_bindings=["JSONRPC"], httpx_client=anonymous)).create(card)
            with pytest.raises(A2AClientError, match="401"):
                await collect(bare, user(f"no key {key}"))
            # ... and with the credential the card's scheme asks for, the task runs.
            credentials = KeyFor(turns.bootstrap_key)
            for binding in ("JSONRPC", "HTTP+JSON"):
                config = ClientConfig(streaming=False, supported_protocol_bindings=[binding], httpx_client=anonymous)
                client = ClientFactory(config).create(card, interceptors=[AuthInterceptor(credentials)])
                if binding == "JSONRPC":
                    (event,) = await collect(client, user(f"hello {key}"))
                    assert event["task"]["status"]["state"] == "TASK_STATE_COMPLETED", event
                    assert answer(event["task"]) == f"public answer {key}"
                # The extended card, with the key: the full card, tools and all.
                full = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
                assert full.name == name and "get_weather" in list(full.skills[0].tags), (binding, full)
            assert "bearer" in credentials.asked

    run(scenario())


def test_a_private_agents_public_card_is_a_missing_agents(agentd: Deployment, model_id: str) -> None:
    # A workspace of its own: the test changes its A2A exposure.
    workspace = unique("ws-public")
    key = agentd.key_for(workspace)
    sdk = agentd.client(key)
    name = unique("private-agent")
    hidden = sdk.beta.agents.create(name=name, model=model_id, description="Never shown.").id
    public = sdk.beta.agents.create(name=unique("public-agent"), model=model_id, metadata=PUBLIC).id
    missing = "agent_" + "0" * 26

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=60) as anonymous:
            async def card(base: str) -> AgentCard:
                return await A2ACardResolver(anonymous, base).get_agent_card()

            absent = without(await card(agent_base(agentd, missing)), missing)
            for private in (public_base(agentd, hidden, workspace), agent_base(agentd, hidden)):
                shown = without(await card(private), hidden)
                assert shown == absent and name not in shown and "Never shown" not in shown
            assert without(await card(public_base(agentd, missing, workspace)), missing) == absent
            assert (await card(public_base(agentd, public, workspace))).skills[0].id == public
            # The flat path names no workspace: a public agent shows there as any other.
            assert without(await card(agent_base(agentd, public)), public) == absent
            # Another workspace's path does not show it either.
            assert without(await card(public_base(agentd, public)), public) == absent
            # With a key, the private agent's card is its full card, as before.
            full = await anonymous.get(f"{agent_base(agentd, hidden)}/.well-known/agent-card.json", headers={"Authorization": f"Bearer {key}"})
            assert full.json()["name"] == name, full.text
            # A public agent is private again once A2A stops exposing it.
            exposed = agentd.http().put("/v1/config/exposure/a2a", json={"mode": "listed", "agent_ids": [hidden]}, headers={"Authorization": f"Bearer {key}"})
            assert exposed.status_code == 200, exposed.text
            assert without(await card(public_base(agentd, public, workspace)), public) == absent

    run(scenario())


def test_anonymous_discovery_has_its_own_rate_limit(agentd: Deployment, launch: Callable[..., Deployment]) -> None:
    deployment = launch(agentd.mode, read_limit=5)
    http = deployment.http()
    answers = [http.get("/.well-known/agent-card.json") for _ in range(8)]
    assert [a.status_code for a in answers[:5]] == [200] * 5, [a.text for a in answers]
    refused = answers[-1]
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1, refused.text
    assert refused.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    # Anonymous callers spent their own bucket, not the organization's.
    keyed = http.get("/.well-known/agent-card.json", headers={"Authorization": f"Bearer {deployment.bootstrap_key}"})
    assert keyed.status_code == 200, keyed.text
    # The bucket is the client address's: a header cannot pick another one (no trusted
    # proxies), but a client at another address has its own.
    spoofed = http.get("/.well-known/agent-card.json", headers={"X-Forwarded-For": "198.51.100.7"})
    assert spoofed.status_code == 429, spoofed.text
    with httpx.Client(base_url=deployment.url, transport=httpx.HTTPTransport(local_address="127.0.0.2")) as other:
        assert other.get("/.well-known/agent-card.json").status_code == 200


def test_behind_a_trusted_proxy_the_forwarded_client_has_the_bucket(
    agentd: Deployment, launch: Callable[..., Deployment]
) -> None:
    deployment = launch(agentd.mode, read_limit=3, extra_env={"AGENTD_TRUSTED_PROXIES": "127.0.0.1/32"})
    http = deployment.http()

    def card(client: str) -> int:
        # The proxy appends the address it saw; anything before it is the client's own claim.
        forwarded = f"10.9.9.9, {client}"
        return http.get("/.well-known/agent-card.json", headers={"X-Forwarded-For": forwarded}).status_code

    assert [card("198.51.100.1") for _ in range(4)] == [200, 200, 200, 429]
    assert card("198.51.100.2") == 200, "another client behind the same proxy has its own bucket"


# ---------------------------------------------------------------------------------------
# Send, stream, get, context continuity


def test_send_then_get_and_context_continuity(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("send")
    agent_id = agent(turns)
    fake_anthropic.script(key, say(f"first answer {key}"), say("second answer"))

    async def scenario() -> None:
        client = await client_for(turns, agent_base(turns, agent_id))
        (event,) = await collect(client, user(f"hello {key}"))
        task = event["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert answer(task) == f"first answer {key}"
        assert [m["role"] for m in task["history"]] == ["ROLE_USER", "ROLE_AGENT"]
        context = task["contextId"]
        got = MessageToDict(await client.get_task(GetTaskRequest(id=task["id"], history_length=1)))
        assert got["id"] == task["id"] and len(got["history"]) == 1 and got["history"][0]["role"] == "ROLE_AGENT"
        # The second message on the context is a new task; the model sees the first exchange.
        (second,) = await collect(client, user(f"and again {key}", context=context))
        assert second["task"]["contextId"] == context and second["task"]["id"] != task["id"]
        assert answer(second["task"]) == "second answer"
        _, request = fake_anthropic.wait_requests(key, 2)
        assert f"first answer {key}" in json.dumps(request.messages)
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))
        await client.close()

    run(scenario())


def test_stream_and_client_supplied_context(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("stream")
    agent_id = agent(turns)
    context = unique("ctx")
    fake_anthropic.script(key, say(f"streamed {key}"))

    async def scenario() -> None:
        client = await client_for(turns, f"{turns.url}", streaming=True, headers={"x-agentd-agent": agent_id})
        events = await collect(client, user(f"hi {key}", context=context))
        kinds = [next(iter(e)) for e in events]
        assert kinds[0] == "task" and events[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED", events
        assert events[0]["task"]["contextId"] == context
        assert "statusUpdate" in kinds and kinds[-2:] == ["artifactUpdate", "statusUpdate"], kinds
        assert events[-2]["artifactUpdate"]["artifact"]["parts"] == [{"text": f"streamed {key}"}]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        states = [e["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e]
        assert states[0] == "TASK_STATE_WORKING"
        await client.close()

    run(scenario())


def test_list_with_filters_and_paging(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("list")
    agent_id = agent(turns)
    context = unique("ctx")
    fake_anthropic.script(key, say("one"), say("two"), say("three"))

    async def scenario() -> None:
        client = await client_for(turns, agent_base(turns, agent_id))
        ids = []
        for word in ("a", "b", "c"):
            (event,) = await collect(client, user(f"{word} {key}", context=context))
            ids.append(event["task"]["id"])
        listed = MessageToDict(await client.list_tasks(ListTasksRequest(context_id=context)))
        assert [t["id"] for t in listed["tasks"]] == ids[::-1] and listed["totalSize"] == 3
        first = MessageToDict(await client.list_tasks(ListTasksRequest(context_id=context, page_size=2, history_length=0)))
        assert [t["id"] for t in first["tasks"]] == ids[:0:-1] and first["nextPageToken"]
        assert all("history" not in t for t in first["tasks"])
        rest = MessageToDict(await client.list_tasks(ListTasksRequest(context_id=context, page_size=2, page_token=first["nextPageToken"])))
        assert [t["id"] for t in rest["tasks"]] == [ids[0]] and not rest.get("nextPageToken")
        done = MessageToDict(await client.list_tasks(ListTasksRequest(context_id=context, status=TaskState.TASK_STATE_COMPLETED)))
        assert done["totalSize"] == 3
        working = MessageToDict(await client.list_tasks(ListTasksRequest(context_id=context, status=TaskState.TASK_STATE_WORKING)))
        assert working.get("totalSize", 0) == 0 and not working.get("tasks")
        first_done = MessageToDict(await client.get_task(GetTaskRequest(id=ids[0])))["status"]["timestamp"]
        since = ListTasksRequest(context_id=context)
        since.status_timestamp_after.FromJsonString(first_done)
        later = MessageToDict(await client.list_tasks(since))
        # Inclusive: the task whose status has exactly that timestamp is listed too.
        assert [t["id"] for t in later["tasks"]] == ids[::-1], later
        last_done = MessageToDict(await client.get_task(GetTaskRequest(id=ids[-1])))["status"]["timestamp"]
        since.status_timestamp_after.FromJsonString(last_done)
        assert [t["id"] for t in MessageToDict(await client.list_tasks(since))["tasks"]] == [ids[-1]]
        await client.close()

    run(scenario())


# ---------------------------------------------------------------------------------------
# Parameter bounds (A2A 1.0 proto): -32602 / 400 naming the field, on both bindings


def test_parameter_bounds_name_their_field_on_both_bindings(agentd: Deployment) -> None:
    agent_id = agent(agentd)
    context = unique("ctx")

    async def scenario() -> None:
        seeded = await client_for(agentd, agent_base(agentd, agent_id))
        task_ids = [(await collect(seeded, user(f"task {i}", context=context)))[0]["task"]["id"] for i in range(3)]
        await seeded.close()
        for binding in ("JSONRPC", "HTTP+JSON"):
            client = await client_for(agentd, agent_base(agentd, agent_id), binding=binding)
            for request, field in [
                (ListTasksRequest(page_size=0), "pageSize"),
                (ListTasksRequest(page_size=101), "pageSize"),
                (ListTasksRequest(page_size=-1), "pageSize"),
                (ListTasksRequest(history_length=-1), "historyLength"),
                (ListTasksRequest(status=99), "status"),  # type: ignore[arg-type]
                (ListTasksRequest(page_token="invalid-token-xyz"), "pageToken"),
                # A task id is not a page token: tokens are this server's, for one listing.
                (ListTasksRequest(context_id=context, page_token=task_ids[1]), "pageToken"),
            ]:
                with pytest.raises(InvalidParamsError) as refused:
                    await client.list_tasks(request)
                assert refused.value.data == {"field": field}, (binding, request, refused.value)
                assert str(refused.value).startswith(f"{field}: "), refused.value
            with pytest.raises(InvalidParamsError) as refused:
                await client.get_task(GetTaskRequest(id=task_ids[0], history_length=-1))
            assert refused.value.data == {"field": "historyLength"}
            # The bounds themselves are accepted.
            for size in (1, 100):
                listed = MessageToDict(await client.list_tasks(ListTasksRequest(context_id=context, page_size=size)))
                assert len(listed["tasks"]) == min(size, 3)
            # A page token is good only for the listing that issued it.
            first = MessageToDict(await client.list_tasks(ListTasksRequest(context_id=context, page_size=2)))
            token = first["nextPageToken"]
            rest = MessageToDict(await client.list_tasks(ListTasksRequest(context_id=context, page_size=2, page_token=token)))
            assert [t["id"] for t in first["tasks"] + rest["tasks"]] == task_ids[::-1]
            with pytest.raises(InvalidParamsError) as refused:
                await client.list_tasks(ListTasksRequest(context_id=context, status=TaskState.TASK_STATE_COMPLETED, page_token=token))
            assert refused.value.data == {"field": "pageToken"}
            with pytest.raises(InvalidParamsError):
                await client.list_tasks(ListTasksRequest(page_token=token))
            await client.close()
        # Another workspace's key cannot use this workspace's token.
        other = http_client(agentd, agentd.key_for(unique("ws")))
        config = ClientConfig(streaming=False, supported_protocol_bindings=["JSONRPC"], httpx_client=other)
        stranger = await ClientFactory(config).create_from_url(agentd.url)
        with pytest.raises(InvalidParamsError) as refused:
            await stranger.list_tasks(ListTasksRequest(context_id=context, page_size=2, page_token=token))
        assert refused.value.data == {"field": "pageToken"}
        await stranger.close()

    run(scenario())


def test_invalid_timestamps_and_states_are_refused_on_the_wire(agentd: Deployment) -> None:
    """What the official clients cannot send: timestamps out of RFC 3339 or the proto's
    range, unknown state names; both bindings, the field named in the ErrorInfo and in a
    BadRequest field violation."""
    headers = {"Authorization": f"Bearer {agentd.bootstrap_key}"}
    http = agentd.http()
    for field, value in [
        ("statusTimestampAfter", "yesterday"),
        ("statusTimestampAfter", "2024-02-30T00:00:00Z"),
        ("statusTimestampAfter", "0000-06-01T00:00:00Z"),
        ("status", "TASK_STATE_FINISHED"),
        ("includeArtifacts", "perhaps"),
    ]:
        rpc = http.post("/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {field: value}}, headers=headers).json()
        assert rpc["error"]["code"] == -32602, rpc
        assert rpc["error"]["data"][0]["metadata"] == {"field": field}, rpc
        rest = http.get("/v1/a2a/tasks", params={field: value}, headers=headers)
        assert rest.status_code == 400, rest.text
        error = rest.json()["error"]
        assert error["status"] == "INVALID_ARGUMENT" and error["message"].startswith(f"{field}: "), error
        assert error["details"][1]["fieldViolations"][0]["field"] == field, error
    rpc = http.post("/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"statusTimestampAfter": 1700000000}}, headers=headers).json()
    assert rpc["error"]["data"][0]["metadata"] == {"field": "statusTimestampAfter"}, rpc
    # v0.3: its historyLength meets the same bound.
    legacy = http.post("/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x", "historyLength": -1}}, headers=headers).json()
    assert legacy["error"]["code"] == -32602 and legacy["error"]["data"][0]["metadata"] == {"field": "historyLength"}, legacy


def test_cancel_running_then_terminal(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("cancel")
    agent_id = agent(turns)
    fake_anthropic.script(key, slow("this takes a long while", chunks=60, delay=0.25))

    async def scenario() -> None:
        http = http_client(turns)
        config = ClientConfig(streaming=False, polling=True, supported_protocol_bindings=["JSONRPC"], httpx_client=http)
        client = await ClientFactory(config).create_from_url(agent_base(turns, agent_id))
        (event,) = await collect(client, user(f"slow {key}"))
        task_id = event["task"]["id"]
        assert event["task"]["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        await asyncio.to_thread(fake_anthropic.wait_requests, key, 1)
        canceled = MessageToDict(await client.cancel_task(CancelTaskRequest(id=task_id)))
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED", canceled
        got = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
        assert got["status"]["state"] == "TASK_STATE_CANCELED"
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task_id))
        await client.close()

    run(scenario())


def test_subscribe_mid_turn_then_terminal(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("subscribe")
    agent_id = agent(turns)
    fake_anthropic.script(key, slow(f"worth the wait {key}", chunks=10, delay=0.2))

    async def scenario() -> None:
        http = http_client(turns)
        config = ClientConfig(streaming=True, polling=True, supported_protocol_bindings=["JSONRPC"], httpx_client=http)
        client = await ClientFactory(config).create_from_url(agent_base(turns, agent_id))
        poller = await ClientFactory(ClientConfig(streaming=False, polling=True, httpx_client=http_client(turns))).create_from_url(agent_base(turns, agent_id))
        (event,) = await collect(poller, user(f"wait {key}"))
        task_id = event["task"]["id"]
        await asyncio.to_thread(fake_anthropic.wait_requests, key, 1)
        events = [MessageToDict(ev) async for ev in client.subscribe(SubscribeToTaskRequest(id=task_id))]
        assert events[0]["task"]["id"] == task_id and events[0]["task"]["status"]["state"] == "TASK_STATE_WORKING", events
        assert events[-2]["artifactUpdate"]["artifact"]["parts"] == [{"text": f"worth the wait {key}"}]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        with pytest.raises(UnsupportedOperationError):
            async for _ in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                pass
        await client.close()
        await poller.close()

    run(scenario())


def test_context_task_mismatch_is_invalid_params(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("mismatch")
    agent_id = agent(turns)
    fake_anthropic.script(key, say("done"))

    async def scenario() -> None:
        # The workspace endpoint: the agent of a new context from message.metadata.agent.
        client = await client_for(turns, turns.url)
        (event,) = await collect(client, user(f"hi {key}", agent_id=agent_id))
        assert event["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        with pytest.raises(InvalidParamsError):
            await collect(client, user("more", task=event["task"]["id"], context=unique("other")))
        await client.close()
        # Another agent's endpoint does not take over this context.
        other = await client_for(turns, agent_base(turns, agent(turns)))
        with pytest.raises(InvalidParamsError) as refused:
            await collect(other, user("hijack", context=event["task"]["contextId"]))
        assert "another agent" in str(refused.value)
        await other.close()

    run(scenario())


def test_racing_messages_start_one_task_per_context(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("race")
    agent_id = agent(turns)
    context = unique("ctx")
    fake_anthropic.script(key, slow("only one", chunks=10, delay=0.3), say("unexpected"))

    async def scenario() -> None:
        http = http_client(turns)
        config = ClientConfig(streaming=False, polling=True, supported_protocol_bindings=["JSONRPC"], httpx_client=http)
        client = await ClientFactory(config).create_from_url(agent_base(turns, agent_id))
        outcomes = await asyncio.gather(
            *(collect(client, user(f"race {key} {i}", context=context)) for i in range(4)), return_exceptions=True
        )
        started = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(started) == 1, outcomes
        assert all(isinstance(o, InvalidParamsError) for o in refused), refused
        listed = MessageToDict(await client.list_tasks(ListTasksRequest(context_id=context)))
        assert listed["totalSize"] == 1
        await client.close()

    run(scenario())


def test_input_required_then_completion(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("input")
    agent_id = agent(turns, tools=[WEATHER])
    fake_anthropic.script(key, call("get_weather", {"city": "Paris"}, preface="Let me check."), say("Sunny in Paris."))

    async def scenario() -> None:
        streaming = await client_for(turns, agent_base(turns, agent_id), streaming=True)
        events = await collect(streaming, user(f"weather {key}"))
        await streaming.close()
        # The agent's words before the tool call are a WORKING update; the stream ends
        # at the interruption.
        notes = [e["statusUpdate"]["status"]["message"] for e in events if e.get("statusUpdate", {}).get("status", {}).get("message")]
        assert notes[0]["role"] == "ROLE_AGENT" and notes[0]["parts"] == [{"text": "Let me check."}], events
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", events
        client = await client_for(turns, agent_base(turns, agent_id))
        task = MessageToDict(await client.get_task(GetTaskRequest(id=events[0]["task"]["id"])))
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        assert task["status"] == events[-1]["statusUpdate"]["status"]
        parts = task["status"]["message"]["parts"]
        assert "get_weather" in parts[0]["text"]
        (awaited,) = parts[1]["data"]["awaiting"]
        assert awaited["awaiting"] == "user.custom_tool_result" and awaited["input"] == {"city": "Paris"}
        answer_body = {"type": "user.custom_tool_result", "custom_tool_use_id": awaited["id"], "content": [{"type": "text", "text": "sunny, 24C"}]}
        (done,) = await collect(client, user("", task=task["id"], context=task["contextId"], data=answer_body))
        assert done["task"]["id"] == task["id"] and done["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
        assert answer(done["task"]) == "Sunny in Paris."
        _, second = fake_anthropic.wait_requests(key, 2)
        assert "sunny, 24C" in json.dumps(second.blocks("tool_result"))
        await client.close()

    run(scenario())


def test_input_required_confirmation_denied(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("confirm")
    agent_id = agent(turns, tools=ASK_TOOLS)
    fake_anthropic.script(key, call("bash", {"command": "rm -rf /"}), say("Understood, not running it."))

    async def scenario() -> None:
        client = await client_for(turns, agent_base(turns, agent_id))
        (event,) = await collect(client, user(f"clean up {key}"))
        task = event["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        (awaited,) = task["status"]["message"]["parts"][1]["data"]["awaiting"]
        assert awaited["awaiting"] == "user.tool_confirmation" and awaited["name"] == "bash"
        decision = {"type": "user.tool_confirmation", "tool_use_id": awaited["id"], "result": "deny", "deny_message": "too dangerous"}
        (done,) = await collect(client, user("", task=task["id"], data=decision))
        assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
        assert answer(done["task"]) == "Understood, not running it."
        roles = [m["role"] for m in done["task"]["history"]]
        assert roles[0] == "ROLE_USER" and "ROLE_AGENT" in roles
        _, second = fake_anthropic.wait_requests(key, 2)
        (result,) = second.blocks("tool_result")
        assert result["is_error"] is True and "too dangerous" in json.dumps(result["content"])
        await client.close()

    run(scenario())


def test_provider_failure_is_a_failed_task_with_the_reason(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("fail")
    agent_id = agent(turns)
    fake_anthropic.script(key, *[http_error(500, "upstream broke")] * 6)

    async def scenario() -> None:
        client = await client_for(turns, agent_base(turns, agent_id), streaming=True)
        events = await collect(client, user(f"hi {key}"))
        status = events[-1]["statusUpdate"]["status"]
        assert status["state"] == "TASK_STATE_FAILED", events
        assert status["message"]["role"] == "ROLE_AGENT" and status["message"]["parts"][0]["text"]
        assert not any("artifactUpdate" in e for e in events)
        await client.close()

    run(scenario())


# ---------------------------------------------------------------------------------------
# HTTP+JSON binding and error shapes


def test_rest_binding_send_get_cancel_errors(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("rest")
    agent_id = agent(turns)
    fake_anthropic.script(key, say(f"over rest {key}"))

    async def scenario() -> None:
        client = await client_for(turns, agent_base(turns, agent_id), binding="HTTP+JSON")
        (event,) = await collect(client, user(f"hi {key}"))
        assert answer(event["task"]) == f"over rest {key}"
        got = MessageToDict(await client.get_task(GetTaskRequest(id=event["task"]["id"])))
        assert got["status"]["state"] == "TASK_STATE_COMPLETED"
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=event["task"]["id"]))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="nope"))
        await client.close()
        async with http_client(turns) as http:
            raw = await http.get(f"{agent_base(turns, agent_id)}/tasks/nope")
            assert raw.status_code == 404
            assert raw.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
            ok = await http.get(f"{agent_base(turns, agent_id)}/tasks/{event['task']['id']}")
            assert ok.headers["content-type"].startswith("application/a2a+json")
            terminal = await http.get(f"{agent_base(turns, agent_id)}/tasks/{event['task']['id']}:subscribe")
            assert terminal.status_code == 400
            assert terminal.json()["error"]["details"][0]["reason"] == "UNSUPPORTED_OPERATION"
            listed = await http.get(f"{agent_base(turns, agent_id)}/tasks", params={"pageSize": "1", "historyLength": "0"})
            assert listed.status_code == 200 and len(listed.json()["tasks"]) == 1 and listed.json()["pageSize"] == 1
            refused = await http.post(f"{agent_base(turns, agent_id)}/tasks/{event['task']['id']}/pushNotificationConfigs", json={"url": "https://10.0.0.1/x"})
            assert refused.status_code == 400 and "public addresses" in refused.json()["error"]["message"]

    run(scenario())


def test_rest_stream_disconnect_keeps_running_and_subscribe(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("rest-sub")
    agent_id = agent(turns)
    fake_anthropic.script(key, slow(f"still here {key}", chunks=10, delay=0.2))

    async def scenario() -> None:
        client = await client_for(turns, agent_base(turns, agent_id), streaming=True, binding="HTTP+JSON")
        stream = client.send_message(user(f"go {key}"))
        first = MessageToDict(await stream.__anext__())
        await stream.aclose()  # the client leaves mid-turn: the task goes on
        task_id = first["task"]["id"]
        events = [MessageToDict(ev) async for ev in client.subscribe(SubscribeToTaskRequest(id=task_id))]
        assert events[0]["task"]["id"] == task_id
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", events
        got = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
        assert answer(got) == f"still here {key}"
        with pytest.raises(UnsupportedOperationError):
            async for _ in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                pass
        await client.close()

    run(scenario())


def test_jsonrpc_error_shapes(turns: Deployment) -> None:
    def rpc(body: Any, **headers: str) -> dict[str, Any]:
        raw = body if isinstance(body, (bytes, str)) else json.dumps(body)
        response = turns.http().post(
            f"{turns.url}/v1/a2a", content=raw,
            headers={"Authorization": f"Bearer {turns.bootstrap_key}", "Content-Type": "application/json", **headers},
        )
        assert response.status_code == 200, response.text
        return response.json()

    unknown = rpc({"jsonrpc": "2.0", "id": "1", "method": "NoSuchMethod", "params": {}})
    assert unknown["error"]["code"] == -32601 and unknown["id"] == "1"
    assert unknown["error"]["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    bad = rpc({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {}})
    assert bad["error"]["code"] == -32602 and bad["error"]["data"][0]["reason"] == "INVALID_PARAMS"
    assert rpc("{not json")["error"]["code"] == -32700
    version = rpc({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "x"}}, **{"A2A-Version": "2.0"})
    assert version["error"]["code"] == -32009
    missing = rpc({"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": "x"}}, **{"A2A-Version": "1.0"})
    assert missing["error"]["code"] == -32001 and missing["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    no_agent = rpc({"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {"message": message}})
    assert no_agent["error"]["code"] == -32602 and "agent" in no_agent["error"]["message"]
    files = rpc({"jsonrpc": "2.0", "id": 6, "method": "SendMessage", "params": {"message": {**message, "parts": [{"url": "https://x/y.png"}]}}})
    assert files["error"]["code"] == -32005
    not_rpc = rpc({"id": 7, "method": "GetTask"})
    assert not_rpc["error"]["code"] == -32600


def test_v03_wire_on_the_same_endpoint(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("legacy")
    agent_id = agent(turns)
    fake_anthropic.script(key, say("legacy one"), say("legacy two"))
    http = turns.http()
    headers = {"Authorization": f"Bearer {turns.bootstrap_key}", "A2A-Version": "0.3"}
    message = {"kind": "message", "messageId": unique("m"), "role": "user", "parts": [{"kind": "text", "text": f"hi {key}"}]}
    sent = http.post(f"{agent_base(turns, agent_id)}", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}).json()
    task = sent["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed", sent
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "legacy one"}]
    assert [m["role"] for m in task["history"]] == ["user", "agent"]
    got = http.post(f"{agent_base(turns, agent_id)}", headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task["id"]}}).json()
    assert got["result"]["id"] == task["id"] and got["result"]["status"]["state"] == "completed"
    message = {**message, "messageId": unique("m"), "contextId": task["contextId"], "parts": [{"kind": "text", "text": f"again {key}"}]}
    with http.stream("POST", f"{agent_base(turns, agent_id)}", headers=headers, json={"jsonrpc": "2.0", "id": 3, "method": "message/stream", "params": {"message": message}}) as response:
        frames = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
    results = [f["result"] for f in frames]
    assert results[0]["kind"] == "task" and results[0]["status"]["state"] == "submitted"
    assert results[-1]["kind"] == "status-update" and results[-1]["final"] is True and results[-1]["status"]["state"] == "completed"
    assert any(r["kind"] == "artifact-update" for r in results)
    cancel = http.post(f"{agent_base(turns, agent_id)}", headers=headers, json={"jsonrpc": "2.0", "id": 4, "method": "tasks/cancel", "params": {"id": task["id"]}}).json()
    assert cancel["error"]["code"] == -32002


def test_v03_python_client_from_a_hand_made_card(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("legacy-client")
    agent_id = agent(turns)
    fake_anthropic.script(key, say(f"legacy answer {key}"), say(f"legacy stream {key}"))
    card = AgentCard(
        name="legacy", description="a v0.3 card", version="1",
        supported_interfaces=[AgentInterface(url=agent_base(turns, agent_id), protocol_binding="JSONRPC", protocol_version="0.3")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
    )

    async def scenario() -> None:
        for streaming in (False, True):
            http = http_client(turns)
            client = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)
            word = "stream" if streaming else "answer"
            events = await collect(client, user(f"{word} {key}"))
            final = events[-1]
            if streaming:
                assert "task" in events[0], events
                assert final["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", events
                assert any("artifactUpdate" in e for e in events)
                task_id = events[0]["task"]["id"]
            else:
                assert final["task"]["status"]["state"] == "TASK_STATE_COMPLETED", final
                assert answer(final["task"]) == f"legacy answer {key}"
                task_id = final["task"]["id"]
            got = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
            assert got["status"]["state"] == "TASK_STATE_COMPLETED"
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=task_id))
            await client.close()

    run(scenario())


# ---------------------------------------------------------------------------------------
# Push notifications


class Receiver:
    """A local webhook receiver recording every POST."""

    def __init__(self, fail_first: int = 0, fail_status: int = 503) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.failures: list[tuple[dict[str, str], bytes]] = []
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with outer.lock:
                    failing = len(outer.failures) < outer.fail_first
                    (outer.failures if failing else outer.requests).append((headers, body))
                self.send_response(outer.fail_status if failing else 200)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30) -> tuple[dict[str, str], bytes]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for headers, body in self.requests:
                    if predicate(json.loads(body)):
                        return headers, body
            time.sleep(0.1)
        raise AssertionError(f"no matching notification; got {self.requests}")

    def close(self) -> None:
        self.server.shutdown()


def test_push_configs_ssrf_refusal(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("ssrf")
    agent_id = agent(turns)
    fake_anthropic.script(key, say("ok"))

    async def scenario() -> None:
        client = await client_for(turns, agent_base(turns, agent_id))
        (event,) = await collect(client, user(f"hi {key}"))
        task_id = event["task"]["id"]
        for url, words in (("https://127.0.0.1/hook", "public addresses"), ("http://example.com/hook", "https"), ("https://169.254.169.254/latest", "public addresses")):
            with pytest.raises(InvalidParamsError) as refused:
                await client.create_task_push_notification_config(TaskPushNotificationConfig(task_id=task_id, url=url))
            assert words in str(refused.value) and "127.0.0.1" not in str(refused.value), refused.value
        await client.close()

    run(scenario())


def test_push_config_crud_and_signed_delivery(turns: Deployment, launch: Callable[..., Deployment], fake_anthropic: FakeAnthropic, provider_env: dict[str, str]) -> None:
    deployment = launch(turns.mode, extra_env={**provider_env, "AGENTD_A2A_PUSH_ALLOW_PRIVATE": "true"})
    receiver = Receiver()
    key = unique("push")
    agent_id = agent(deployment)
    fake_anthropic.script(key, slow(f"pushed {key}", chunks=8, delay=0.25))
    token = unique("tok") + "x" * 20
    credentials = RECORDER.secret(unique("cred") + "y" * 20)

    async def scenario() -> None:
        http = http_client(deployment)
        config = ClientConfig(streaming=False, polling=True, supported_protocol_bindings=["JSONRPC"], httpx_client=http)
        client = await ClientFactory(config).create_from_url(agent_base(deployment, agent_id))
        (event,) = await collect(client, user(f"notify {key}"))
        task_id = event["task"]["id"]
        created = MessageToDict(await client.create_task_push_notification_config(TaskPushNotificationConfig(
            task_id=task_id, id="hook-1", url=receiver.url, token=token,
            authentication={"scheme": "Bearer", "credentials": credentials},
        )))
        assert created["id"] == "hook-1" and created["url"] == receiver.url and created["token"] == token
        assert created["authentication"] == {"scheme": "Bearer"}, "credentials are write-only"
        await client.create_task_push_notification_config(TaskPushNotificationConfig(task_id=task_id, id="hook-2", url=receiver.url + "2"))
        got = MessageToDict(await client.get_task_push_notification_config(GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1")))
        assert got == created
        listed = MessageToDict(await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task_id)))
        assert [c["id"] for c in listed["configs"]] == ["hook-1", "hook-2"]
        assert credentials not in json.dumps(listed)
        await client.delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="hook-2"))
        listed = MessageToDict(await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task_id)))
        assert [c["id"] for c in listed["configs"]] == ["hook-1"]
        await client.close()
        # The same configs over the HTTP+JSON routes.
        async with http_client(deployment) as raw:
            routes = f"{agent_base(deployment, agent_id)}/tasks/{task_id}/pushNotificationConfigs"
            assert [c["id"] for c in (await raw.get(routes)).json()["configs"]] == ["hook-1"]
            one = (await raw.get(f"{routes}/hook-1")).json()
            assert one["authentication"] == {"scheme": "Bearer"} and credentials not in json.dumps(one)
            assert (await raw.delete(f"{routes}/hook-9")).status_code == 400
        return task_id

    task_id = run(scenario())

    async def configured_on_send() -> str:
        fake_anthropic.script(key + "-b", say("second"))
        http = http_client(deployment)
        push = TaskPushNotificationConfig(url=receiver.url + "/on-send", token=token)
        config = ClientConfig(streaming=False, supported_protocol_bindings=["JSONRPC"], httpx_client=http, push_notification_config=push)
        client = await ClientFactory(config).create_from_url(agent_base(deployment, agent_id))
        (event,) = await collect(client, user(f"again {key}-b"))
        await client.close()
        return event["task"]["id"]

    try:
        headers, body = receiver.wait(lambda b: b.get("statusUpdate", {}).get("taskId") == task_id and b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
        second = run(configured_on_send())
        receiver.wait(lambda b: b.get("statusUpdate", {}).get("taskId") == second and b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
        payload = json.loads(body)
        assert payload["statusUpdate"]["taskId"] == task_id
        assert headers["x-a2a-notification-token"] == token
        assert headers["authorization"] == f"Bearer {credentials}"
        signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
        expected = base64.b64encode(hmac.new(token.encode(), signed, hashlib.sha256).digest()).decode()
        assert headers["webhook-signature"] == f"v1,{expected}"
        assert abs(int(headers["webhook-timestamp"]) - time.time()) < 120
    finally:
        receiver.close()


def test_push_retries_keep_the_notification_id(turns: Deployment, launch: Callable[..., Deployment], fake_anthropic: FakeAnthropic, provider_env: dict[str, str]) -> None:
    deployment = launch(turns.mode, extra_env={**provider_env, "AGENTD_A2A_PUSH_ALLOW_PRIVATE": "true"})
    receiver = Receiver(fail_first=2)
    key = unique("retry")
    agent_id = agent(deployment)
    fake_anthropic.script(key, say("done"))

    async def scenario() -> str:
        client = await client_for(deployment, agent_base(deployment, agent_id))
        (event,) = await collect(client, user(f"hi {key}"))
        task_id = event["task"]["id"]
        await client.create_task_push_notification_config(TaskPushNotificationConfig(task_id=task_id, url=receiver.url, token="t" * 32))
        await client.close()
        return task_id

    task_id = run(scenario())
    try:
        headers, _ = receiver.wait(lambda b: b["statusUpdate"]["taskId"] == task_id)
        # Two refused attempts, then the same notification (same id, re-signed) got through.
        assert [h["webhook-id"] for h, _ in receiver.failures] == [headers["webhook-id"]] * 2
        assert len([h for h, _ in receiver.requests if h["webhook-id"] == headers["webhook-id"]]) == 1
    finally:
        receiver.close()


def test_push_refused_for_good_is_not_retried(turns: Deployment, launch: Callable[..., Deployment], fake_anthropic: FakeAnthropic, provider_env: dict[str, str]) -> None:
    deployment = launch(turns.mode, extra_env={**provider_env, "AGENTD_A2A_PUSH_ALLOW_PRIVATE": "true"})
    receiver = Receiver(fail_first=100, fail_status=404)
    key = unique("gone")
    agent_id = agent(deployment)
    fake_anthropic.script(key, say("done"))

    async def scenario() -> str:
        client = await client_for(deployment, agent_base(deployment, agent_id))
        (event,) = await collect(client, user(f"hi {key}"))
        task_id = event["task"]["id"]
        await client.create_task_push_notification_config(TaskPushNotificationConfig(task_id=task_id, url=receiver.url))
        await client.close()
        return task_id

    run(scenario())
    try:
        deadline = time.monotonic() + 30
        while not receiver.failures and time.monotonic() < deadline:
            time.sleep(0.1)
        assert receiver.failures, "the notification was attempted"
        # A retry would come after 1 s of backoff; a 404 is final.
        time.sleep(5)
        assert len(receiver.failures) == 1, [h["webhook-id"] for h, _ in receiver.failures]
    finally:
        receiver.close()


def test_push_a_second_input_required_is_notified(turns: Deployment, launch: Callable[..., Deployment], fake_anthropic: FakeAnthropic, provider_env: dict[str, str]) -> None:
    deployment = launch(turns.mode, extra_env={**provider_env, "AGENTD_A2A_PUSH_ALLOW_PRIVATE": "true"})
    receiver = Receiver()
    key = unique("again")
    agent_id = agent(deployment, tools=[WEATHER])
    fake_anthropic.script(key, call("get_weather", {"city": "Paris"}), call("get_weather", {"city": "Rome"}), say("Sunny in both."))

    def awaited(task: dict[str, Any]) -> dict[str, Any]:
        (one,) = task["status"]["message"]["parts"][1]["data"]["awaiting"]
        return {"type": "user.custom_tool_result", "custom_tool_use_id": one["id"], "content": [{"type": "text", "text": "sunny"}]}

    def states(task_id: str) -> list[tuple[str, str]]:
        with receiver.lock:
            bodies = [(h["webhook-id"], json.loads(b)["statusUpdate"]) for h, b in receiver.requests]
        return [(i, u["status"]["state"]) for i, u in bodies if u["taskId"] == task_id]

    async def scenario() -> None:
        http = http_client(deployment)
        push = TaskPushNotificationConfig(url=receiver.url)
        config = ClientConfig(streaming=False, supported_protocol_bindings=["JSONRPC"], httpx_client=http, push_notification_config=push)
        client = await ClientFactory(config).create_from_url(agent_base(deployment, agent_id))
        (first,) = await collect(client, user(f"weather {key}"))
        task = first["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        receiver.wait(lambda b: b["statusUpdate"]["taskId"] == task["id"] and b["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED")
        # The answer makes the agent ask again at once: WORKING may never be seen by the
        # watcher, the second INPUT_REQUIRED must still be notified.
        (second,) = await collect(client, user("", task=task["id"], context=task["contextId"], data=awaited(task)))
        assert second["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", second
        # The client repeats its push config with every message, so the task has two
        # configs by now; notification ids read "{task}.{input}.{state}.{config}".
        def inputs_asked() -> set[str]:
            return {i.split(".")[1] for i, s in states(task["id"]) if s == "TASK_STATE_INPUT_REQUIRED"}

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(inputs_asked()) < 2:
            await asyncio.sleep(0.1)
        assert len(inputs_asked()) == 2, states(task["id"])
        (done,) = await collect(client, user("", task=task["id"], context=task["contextId"], data=awaited(second["task"])))
        assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
        receiver.wait(lambda b: b["statusUpdate"]["taskId"] == task["id"] and b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
        await client.close()

    try:
        run(scenario())
    finally:
        receiver.close()


# ---------------------------------------------------------------------------------------
# The JS client


def drive(scenario: str, deployment: Deployment, **options: Any) -> dict[str, Any]:
    options = {"url": deployment.url, "key": deployment.bootstrap_key, **options}
    result = subprocess.run(["node", "a2a.mjs", scenario, json.dumps(options)], cwd=NODE_DIR, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"node {scenario} failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


js_client = pytest.mark.skipif(
    not (NODE_DIR / "node_modules" / "@a2a-js" / "sdk").is_dir() or shutil.which("node") is None,
    reason="the node clients are not installed (scripts/test runs npm ci in tests/clients/node)",
)


@js_client
def test_js_client_send_and_stream(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("js")
    agent_id = agent(turns)
    fake_anthropic.script(key, say(f"from js {key}"), say(f"streamed to js {key}"))
    sent = drive("send", turns, agent=agent_id, text=f"hello {key}")
    assert sent["state"] == "TASK_STATE_COMPLETED" and sent["answer"] == f"from js {key}", sent
    streamed = drive("stream", turns, agent=agent_id, text=f"stream {key}")
    kinds = [e["kind"] for e in streamed["events"]]
    assert kinds[0] == "task" and kinds[-2:] == ["artifactUpdate", "statusUpdate"], streamed
    assert streamed["events"][-2]["text"] == f"streamed to js {key}"
    assert streamed["events"][-1]["state"] == "TASK_STATE_COMPLETED"


@js_client
def test_js_client_discovers_a_public_agent_without_a_key(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("js-public")
    name = unique("js-public-agent")
    shown = turns.client().beta.agents.create(name=name, model=MODEL, description="Public to JS.", tools=[WEATHER], metadata=PUBLIC).id
    private = agent(turns, description="Private to JS.")
    fake_anthropic.script(key, say(f"from js {key}"))
    for binding in ("JSONRPC", "HTTP+JSON"):
        found = drive("discover", turns, base=public_base(turns, shown), text=f"hello {key}" if binding == "JSONRPC" else f"again {key}", binding=binding)
        # Resolved with no credential: the public card, the agent's name and no tool.
        assert found["public"]["name"] == name and found["public"]["description"] == "Public to JS.", found
        assert found["public"]["skills"] == [{"id": shown, "tags": ["agent"]}], found
        assert found["public"]["extendedAgentCard"] and set(found["public"]["interfaces"]) == {agent_base(turns, shown)}
        # Then with the key: the extended card, and the task.
        assert found["extended"]["name"] == name and "get_weather" in found["extended"]["skills"][0]["tags"], found
        assert found["state"] == "TASK_STATE_COMPLETED", found
        if binding == "JSONRPC":
            assert found["answer"] == f"from js {key}", found
    hidden = drive("discover", turns, base=public_base(turns, private), text=f"hi {unique('js-private')}")
    assert hidden["public"]["skills"] == [] and "Private to JS" not in json.dumps(hidden["public"]), hidden
    assert hidden["extended"]["skills"][0]["id"] == private and hidden["state"] == "TASK_STATE_COMPLETED", hidden


def test_a_coordinators_task_answers_with_the_primarys_words_only(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    """docs/api/multiagent.md: a task of a coordinator is the primary thread's exchange; its
    subagents' messages are their threads' own and never the task's answer or history."""
    helper = agent(turns)
    helper_name = turns.client().beta.agents.retrieve(helper).name
    boss = agent(turns, multiagent={"type": "coordinator", "agents": [helper]})
    key, job = unique("a2a-boss"), unique("a2a-job")
    fake_anthropic.script(key, call("spawn_thread", {"agent": helper_name, "message": job}), say(f"the primary's answer {key}"))
    fake_anthropic.script(job, say("the subagent's words"))

    async def scenario() -> None:
        client = await client_for(turns, agent_base(turns, boss))
        (event,) = await collect(client, user(f"go {key}"))
        task = event["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert answer(task) == f"the primary's answer {key}"
        assert "the subagent's words" not in json.dumps(task)
        await client.close()

    run(scenario())
