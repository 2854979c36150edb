"""A2A agents as tools (`a2a_agent`, an agentd extension: docs/api/a2a-tools.md): the
worker's A2A client calls a remote agent for the model, and the call is an
`agent.tool_use` / `agent.tool_result` pair in history.

* Against the `a2a-sdk` 1.3 reference server with an echo agent (a2a_echo.py), started
  here on 127.0.0.1, in both harness modes.
* Agent A (agentd) calling agent B (agentd) through agentd's own A2A server
  (`/v1/a2a/agents/{agent_id}`), authenticated with the workspace API key held in a vault.

The model is the scripted fake of fake_models.py.

`a2a_agent` is not a tool type of the Managed Agents schema, so the official SDK in
strict validation mode (the harness's) refuses agent and session bodies that carry one:
agents and sessions are created with raw HTTP here, in a workspace of their own so no
other test lists them; events go through the SDK as usual.
"""

from __future__ import annotations

import secrets
from typing import Any, Iterator

import anthropic
import pytest

from fake_models import FakeAnthropic, call, say
from harness import RECORDER, Deployment, unique
from remote_servers import EchoA2A
from test_mcp_tools import (
    history,
    of_type,
    result_text,
    texts,
    types_of,
    user_message,
    vault_with,
    wait_idle,
)

MODEL = "claude-sonnet-4-6"


WORKSPACE = "a2a-tools"


@pytest.fixture
def client(turns: Deployment) -> anthropic.Anthropic:
    return turns.client(api_key=turns.key_for(WORKSPACE))


def create(deployment: Deployment, path: str, body: dict[str, Any]) -> dict[str, Any]:
    with deployment.http() as http:
        response = http.post(path, json=body, headers=deployment.headers(deployment.key_for(WORKSPACE)))
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def echo() -> Iterator[EchoA2A]:
    server = EchoA2A(tokens={RECORDER.secret(f"a2a-good-{secrets.token_hex(16)}")})
    try:
        yield server
    finally:
        server.close()


def a2a_tool(name: str, url: str, **fields: Any) -> dict[str, Any]:
    return {"type": "a2a_agent", "name": name, "url": url, **fields}


_ENVIRONMENTS: dict[str, str] = {}


def environment(client: anthropic.Anthropic, deployment: Deployment) -> str:
    """One cloud environment per deployment in this test's workspace."""
    if deployment.url not in _ENVIRONMENTS:
        env = client.beta.environments.create(name=unique("a2a-env"), config={"type": "cloud"})
        _ENVIRONMENTS[deployment.url] = env.id
    return _ENVIRONMENTS[deployment.url]


class Ref:
    """The id of a resource created with raw HTTP."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.id = body["id"]
        self.body = body


def caller(deployment: Deployment, *tools: dict[str, Any]) -> Ref:
    agent = create(deployment, "/v1/agents", {"name": unique("a2a-caller"), "model": MODEL, "tools": list(tools)})
    assert [t["type"] for t in agent["tools"]] == ["a2a_agent"] * len(tools)
    return Ref(agent)


def start(client: anthropic.Anthropic, deployment: Deployment, agent: Ref, vault_ids: list[str], text: str) -> Ref:
    session = create(
        deployment,
        "/v1/sessions",
        {"agent": agent.id, "environment_id": environment(client, deployment), "vault_ids": vault_ids},
    )
    client.beta.sessions.events.send(session["id"], events=[user_message(text)])
    return Ref(session)


def bearer(url: str, token: str) -> dict[str, Any]:
    return {"type": "static_bearer", "token": token, "mcp_server_url": url}


def test_a2a_tool_round_trip_keeps_one_remote_context_per_session(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, echo: EchoA2A
) -> None:
    token = next(iter(echo.tokens))
    agent = caller(turns, a2a_tool("echo_agent", echo.url, description="An agent that echoes."))
    assert agent.body["tools"][0] == {
        "type": "a2a_agent",
        "name": "echo_agent",
        "url": echo.url,
        "description": "An agent that echoes.",
        "permission_policy": {"type": "always_allow"},
    }
    vault_id = vault_with(client, bearer(echo.url, token))
    key = unique("a2a-echo")
    fake_anthropic.script(
        key,
        call("echo_agent", {"message": "hello there"}),
        say("It said hello back."),
        call("echo_agent", {"message": "second"}),
        say("Again."),
    )
    session = start(client, turns, agent, [vault_id], f"talk to the echo agent {key}")
    events = wait_idle(client, session.id)
    assert events[-1].stop_reason.type == "end_turn", types_of(events)
    (use,) = of_type(events, "agent.tool_use")
    (result,) = of_type(events, "agent.tool_result")
    assert use.name == "echo_agent" and use.input == {"message": "hello there"}
    assert use.evaluated_permission == "allow"
    assert result.tool_use_id == use.id and not result.is_error
    assert result_text(result) == "echo: hello there"
    assert texts(events) == ["It said hello back."]
    first, second = fake_anthropic.wait_requests(key, 2)
    offered = {t["name"]: t for t in first.body.get("tools", [])}
    assert offered["echo_agent"]["input_schema"]["required"] == ["message"]
    assert offered["echo_agent"]["description"] == "An agent that echoes."
    (tool_result,) = second.blocks("tool_result")
    assert "echo: hello there" in str(tool_result["content"])

    # The remote agent saw the message with the vault's token; the same session's next
    # call continues the same remote context.
    assert echo.authorizations() and all(a == f"Bearer {token}" for a in echo.authorizations())
    client.beta.sessions.events.send(session.id, events=[user_message(f"once more {key}")])
    events = wait_idle(client, session.id, count=2)
    assert result_text(of_type(events, "agent.tool_result")[-1]) == "echo: second"
    (first_context, first_text), (second_context, second_text) = echo.messages
    assert (first_text, second_text) == ("hello there", "second")
    assert first_context and first_context == second_context

    # Another session talks to the agent in another context.
    other_key = unique("a2a-echo-other")
    fake_anthropic.script(other_key, call("echo_agent", {"message": "third"}), say("ok"))
    other = start(client, turns, agent, [vault_id], f"other {other_key}")
    wait_idle(client, other.id)
    assert echo.messages[-1][1] == "third" and echo.messages[-1][0] != first_context
    assert token not in str([e.model_dump() for e in history(client, session.id)])


def test_failed_remote_task_is_an_error_result(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, echo: EchoA2A
) -> None:
    agent = caller(turns, a2a_tool("echo_agent", echo.url))
    vault_id = vault_with(client, bearer(echo.url, next(iter(echo.tokens))))
    key = unique("a2a-fail")
    fake_anthropic.script(key, call("echo_agent", {"message": "fail please"}), say("It refused."))
    session = start(client, turns, agent, [vault_id], f"make it fail {key}")
    events = wait_idle(client, session.id)
    (result,) = of_type(events, "agent.tool_result")
    assert result.is_error is True
    assert "cannot do that: fail please" in result_text(result)
    assert events[-1].stop_reason.type == "end_turn"


def test_without_a_credential_for_its_origin_no_token_is_sent(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, echo: EchoA2A
) -> None:
    # The vault holds a credential, but for another origin: nothing is sent to the agent.
    agent = caller(turns, a2a_tool("echo_agent", echo.url))
    vault_id = vault_with(client, bearer("http://127.0.0.1:1/", RECORDER.secret(f"elsewhere-{secrets.token_hex(8)}")))
    key = unique("a2a-noauth")
    fake_anthropic.script(key, call("echo_agent", {"message": "hi"}), say("No access."))
    session = start(client, turns, agent, [vault_id], f"try {key}")
    events = wait_idle(client, session.id)
    (result,) = of_type(events, "agent.tool_result")
    assert result.is_error is True and "401" in result_text(result)
    assert echo.authorizations() == [""], echo.authorizations()
    assert echo.messages == []


def test_always_ask_a2a_tool_waits_for_the_user(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, echo: EchoA2A
) -> None:
    agent = caller(turns, a2a_tool("echo_agent", echo.url, permission_policy={"type": "always_ask"}))
    vault_id = vault_with(client, bearer(echo.url, next(iter(echo.tokens))))
    key = unique("a2a-ask")
    fake_anthropic.script(key, call("echo_agent", {"message": "may I"}), say("Done."))
    session = start(client, turns, agent, [vault_id], f"ask first {key}")
    events = wait_idle(client, session.id)
    (use,) = of_type(events, "agent.tool_use")
    assert use.evaluated_permission == "ask"
    assert events[-1].stop_reason.type == "requires_action" and events[-1].stop_reason.event_ids == [use.id]
    assert echo.messages == []
    client.beta.sessions.events.send(
        session.id, events=[{"type": "user.tool_confirmation", "tool_use_id": use.id, "result": "allow"}]
    )
    events = wait_idle(client, session.id, count=2)
    assert result_text(of_type(events, "agent.tool_result")[0]) == "echo: may I"
    assert [m[1] for m in echo.messages] == ["may I"]


def test_a2a_tool_config_is_validated(turns: Deployment) -> None:
    for bad in (
        {"type": "a2a_agent", "name": "x"},
        {"type": "a2a_agent", "name": "x", "url": "ftp://example.com"},
        {"type": "a2a_agent", "name": "has space", "url": "https://example.com"},
        {"type": "a2a_agent", "name": "x", "url": "https://example.com", "extra": 1},
        {"type": "a2a_agent", "name": "x", "url": "https://example.com", "permission_policy": {"type": "sometimes"}},
        {"type": "a2a_agent", "name": "x", "url": "https://example.com/agent#card"},
    ):
        with turns.http() as http:
            response = http.post(
                "/v1/agents",
                json={"name": unique("a2a-bad"), "model": MODEL, "tools": [bad]},
                headers=turns.headers(turns.key_for(WORKSPACE)),
            )
        assert response.status_code == 400, (bad, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"
    # A built-in tool's name is refused, whether or not the toolset is enabled.
    for builtin in ("bash", "web_fetch"):
        for tools in (
            [{"type": "a2a_agent", "name": builtin, "url": "https://example.com"}],
            [{"type": "agent_toolset_20260401"}, {"type": "a2a_agent", "name": builtin, "url": "https://example.com"}],
        ):
            with turns.http() as http:
                response = http.post(
                    "/v1/agents",
                    json={"name": unique("a2a-bad"), "model": MODEL, "tools": tools},
                    headers=turns.headers(turns.key_for(WORKSPACE)),
                )
            assert response.status_code == 400, (tools, response.text)
            assert "built-in tool" in response.json()["error"]["message"], response.text


def test_agent_calls_another_agentd_agent_over_a2a(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    """Agent A calls agent B of the same deployment through agentd's A2A server
    (`/v1/a2a/agents/{id}`), with the workspace API key as the vault's bearer credential.
    Needs agentd's A2A server (issue 9 item 1, built on another branch)."""
    if turns.mode != "prod":
        pytest.skip("the distributed stack is the scenario of the issue")
    b = client.beta.agents.create(name=unique("a2a-b"), model=MODEL, system="You are agent B.")
    b_url = f"{turns.url}/v1/a2a/agents/{b.id}"
    a = caller(turns, a2a_tool("agent_b", b_url, description="Ask agent B."))
    key = turns.key_for(WORKSPACE)
    vault_id = vault_with(client, bearer(turns.url, key))
    key_a, key_b = unique("a2a-a"), unique("a2a-b")
    fake_anthropic.script(key_b, say(f"B here, answering {key_b}"))
    fake_anthropic.script(key_a, call("agent_b", {"message": f"hello B {key_b}"}), say("B answered."))
    session = start(client, turns, a, [vault_id], f"ask B {key_a}")
    events = wait_idle(client, session.id)
    assert events[-1].stop_reason.type == "end_turn", types_of(events)
    (use,) = of_type(events, "agent.tool_use")
    (result,) = of_type(events, "agent.tool_result")
    assert result.tool_use_id == use.id and not result.is_error, result_text(result)
    assert f"B here, answering {key_b}" in result_text(result)
    assert texts(events) == ["B answered."]
    (b_request,) = fake_anthropic.wait_requests(key_b, 1)
    assert b_request.body.get("system") and "agent B" in str(b_request.body["system"])
    # B's side is a session of agent B whose history holds the message A sent.
    b_sessions = [s for s in client.beta.sessions.list(agent_id=b.id, limit=100)]
    assert len(b_sessions) == 1, "one remote context, one session of B"
    b_history = history(client, b_sessions[0].id)
    assert any(
        e.type == "user.message" and f"hello B {key_b}" in "".join(c.text for c in e.content if c.type == "text")
        for e in b_history
    )
    assert key not in str([e.model_dump() for e in events])
