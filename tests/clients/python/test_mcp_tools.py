"""MCP toolsets for agents: an agent's `mcp_servers` + `mcp_toolset` tools, run by the
worker's MCP client (rmcp, streamable HTTP) against a real MCP server (the Python `mcp`
2.3 server, started here on 127.0.0.1) with a bearer credential from the session's vault.

Wire facts: managed-agents-wire.md §4 (`agent.mcp_tool_use` / `agent.mcp_tool_result`,
`session.error` with `mcp_connection_failed_error` / `mcp_authentication_failed_error`,
`requires_action` and `user.tool_confirmation`). The model is the scripted fake of
fake_models.py; every test runs against `agentd dev` and gateway+worker (fixture `turns`).
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from typing import Any, Callable, Iterable, Iterator

import anthropic
import pytest

from fake_models import FakeAnthropic, Reply, call, say, tool_use
from harness import RECORDER, Deployment, collect, free_port, unique
from remote_servers import McpServer

MODEL = "claude-sonnet-4-6"
TURN_TIMEOUT = 30.0


# ---------------------------------------------------------------------------------------
# Helpers


@pytest.fixture
def client(turns: Deployment) -> anthropic.Anthropic:
    return turns.client()


@pytest.fixture
def mcp_server() -> Iterator[McpServer]:
    server = McpServer(tokens={RECORDER.secret(f"mcp-good-{secrets.token_hex(16)}")})
    try:
        yield server
    finally:
        server.close()


def token_of(server: McpServer) -> str:
    assert server.tokens
    return next(iter(server.tokens))


def user_message(value: str) -> dict[str, Any]:
    return {"type": "user.message", "content": [{"type": "text", "text": value}]}


_ENVIRONMENTS: dict[str, str] = {}


def environment(client: anthropic.Anthropic, deployment: Deployment) -> str:
    if deployment.url not in _ENVIRONMENTS:
        env = client.beta.environments.create(name=unique("mcp-env"), config={"type": "cloud"})
        _ENVIRONMENTS[deployment.url] = env.id
    return _ENVIRONMENTS[deployment.url]


def toolset(server: str, policy: str = "always_allow", **fields: Any) -> dict[str, Any]:
    return {
        "type": "mcp_toolset",
        "mcp_server_name": server,
        "default_config": {"permission_policy": {"type": policy}},
        **fields,
    }


def mcp_agent(client: anthropic.Anthropic, servers: dict[str, str], tools: list[dict[str, Any]]) -> Any:
    return client.beta.agents.create(
        name=unique("mcp-agent"),
        model=MODEL,
        mcp_servers=[{"type": "url", "name": name, "url": url} for name, url in servers.items()],
        tools=tools,
    )


def vault_with(client: anthropic.Anthropic, *auths: dict[str, Any]) -> str:
    vault = client.beta.vaults.create(display_name=unique("mcp-vault"))
    for auth in auths:
        client.beta.vaults.credentials.create(vault.id, auth=auth)
    return vault.id


def bearer(url: str, token: str) -> dict[str, Any]:
    return {"type": "static_bearer", "token": token, "mcp_server_url": url}


def start(client: anthropic.Anthropic, deployment: Deployment, agent: Any, vault_ids: list[str], text: str) -> Any:
    session = client.beta.sessions.create(
        agent=agent.id, environment_id=environment(client, deployment), vault_ids=vault_ids
    )
    client.beta.sessions.events.send(session.id, events=[user_message(text)])
    return session


def history(client: anthropic.Anthropic, session_id: str) -> list[Any]:
    return collect(client.beta.sessions.events.list(session_id, limit=1000))


def types_of(events: Iterable[Any]) -> list[str]:
    return [e.type for e in events]


def of_type(events: Iterable[Any], type_: str) -> list[Any]:
    return [e for e in events if e.type == type_]


def wait_history(
    client: anthropic.Anthropic, session_id: str, predicate: Callable[[list[Any]], bool], what: str
) -> list[Any]:
    deadline = time.monotonic() + TURN_TIMEOUT
    while True:
        events = history(client, session_id)
        if predicate(events):
            return events
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not reached within {TURN_TIMEOUT:.0f} s; history: {types_of(events)}")
        time.sleep(0.05)


def wait_idle(client: anthropic.Anthropic, session_id: str, count: int = 1) -> list[Any]:
    return wait_history(
        client,
        session_id,
        lambda events: len(of_type(events, "session.status_idle")) >= count,
        f"{count} session.status_idle event(s)",
    )


def texts(events: Iterable[Any]) -> list[str]:
    return ["".join(b.text for b in e.content if b.type == "text") for e in events if e.type == "agent.message"]


def result_text(event: Any) -> str:
    return "".join(b.text for b in (event.content or []) if b.type == "text")


# ---------------------------------------------------------------------------------------
# Tests


def test_mcp_tool_is_offered_called_and_recorded(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, mcp_server: McpServer
) -> None:
    key = unique("mcp-add")
    fake_anthropic.script(key, call("add", {"a": 2, "b": 3}, preface="Let me add."), say("The sum is 5."))
    # `fail` is disabled for this agent: it must not be offered.
    agent = mcp_agent(
        client, {"calc": mcp_server.url}, [toolset("calc", configs=[{"name": "fail", "enabled": False}])]
    )
    vault_id = vault_with(client, bearer(mcp_server.url, token_of(mcp_server)))
    session = start(client, turns, agent, [vault_id], f"add 2 and 3 {key}")

    events = wait_idle(client, session.id)
    assert events[-1].stop_reason.type == "end_turn", types_of(events)
    kinds = types_of(events)
    use_at, result_at = kinds.index("agent.mcp_tool_use"), kinds.index("agent.mcp_tool_result")
    assert use_at < result_at < len(kinds) - 1
    use, result = events[use_at], events[result_at]
    assert use.name == "add" and use.mcp_server_name == "calc" and use.input == {"a": 2, "b": 3}
    assert use.evaluated_permission == "allow"
    assert result.mcp_tool_use_id == use.id
    assert not result.is_error
    assert result_text(result) == "5"
    assert texts(events) == ["Let me add.", "The sum is 5."]
    assert kinds.index("agent.message", result_at) > result_at, "the final answer follows the result"

    # The server saw exactly that call, with the vault's token, and nothing without it.
    assert mcp_server.calls == [("add", {"a": 2, "b": 3})]
    seen = mcp_server.authorizations()
    assert seen and all(a == f"Bearer {token_of(mcp_server)}" for a in seen), seen

    first, second = fake_anthropic.wait_requests(key, 2)
    offered = {t["name"]: t for t in first.body.get("tools", [])}
    assert {"add", "bump"} <= set(offered) and "fail" not in offered, sorted(offered)
    assert offered["add"]["input_schema"]["properties"].keys() == {"a", "b"}
    (tool_result,) = second.blocks("tool_result")
    assert tool_result["tool_use_id"] == use.id
    assert "5" in str(tool_result["content"])
    # The token never appears in history.
    assert token_of(mcp_server) not in str([e.model_dump() for e in events])


def test_tool_error_results_reach_the_model(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, mcp_server: McpServer
) -> None:
    key = unique("mcp-fail")
    fake_anthropic.script(key, call("fail", {}), say("It failed."))
    agent = mcp_agent(client, {"calc": mcp_server.url}, [toolset("calc")])
    vault_id = vault_with(client, bearer(mcp_server.url, token_of(mcp_server)))
    session = start(client, turns, agent, [vault_id], f"try failing {key}")
    events = wait_idle(client, session.id)
    (result,) = of_type(events, "agent.mcp_tool_result")
    assert result.is_error is True
    assert "failed on purpose" in result_text(result)
    assert events[-1].stop_reason.type == "end_turn"
    assert not of_type(events, "session.error"), "a tool's own error is not a session error"


def test_wrong_token_is_an_authentication_error_naming_the_server(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, mcp_server: McpServer
) -> None:
    key = unique("mcp-badtoken")
    fake_anthropic.script(key, call("add", {"a": 1, "b": 1}), say("never"))
    wrong = RECORDER.secret(f"mcp-wrong-{secrets.token_hex(16)}")
    agent = mcp_agent(client, {"calc": mcp_server.url}, [toolset("calc")])
    vault_id = vault_with(client, bearer(mcp_server.url, wrong))
    session = start(client, turns, agent, [vault_id], f"add {key}")
    events = wait_idle(client, session.id)
    (error,) = of_type(events, "session.error")
    assert error.error.type == "mcp_authentication_failed_error"
    assert error.error.mcp_server_name == "calc"
    assert error.error.retry_status.type == "exhausted"
    assert wrong not in error.error.message
    assert events[-1].stop_reason.type == "retries_exhausted"
    assert client.beta.sessions.retrieve(session.id).status == "idle"
    assert mcp_server.calls == [], "no tool ran"
    assert f"Bearer {wrong}" in mcp_server.authorizations(), "the credential's token was the one sent"
    assert fake_anthropic.received(key) == [], "the model is not asked without the agent's tools"


def test_unreachable_server_is_a_connection_error(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("mcp-down")
    url = f"http://127.0.0.1:{free_port()}/mcp"
    agent = mcp_agent(client, {"gone": url}, [toolset("gone")])
    session = start(client, turns, agent, [], f"anything {key}")
    events = wait_idle(client, session.id)
    (error,) = of_type(events, "session.error")
    assert error.error.type == "mcp_connection_failed_error"
    assert error.error.mcp_server_name == "gone"
    assert error.error.message
    assert events[-1].stop_reason.type == "retries_exhausted"

    # The turn is over, not the session: the next message tries again (and fails again).
    client.beta.sessions.events.send(session.id, events=[user_message(f"again {key}")])
    events = wait_idle(client, session.id, count=2)
    assert len(of_type(events, "session.error")) == 2


def test_worker_refuses_a_private_mcp_server_without_the_setting(
    turns: Deployment,
    launch: Callable[..., Deployment],
    provider_env: dict[str, str],
    fake_anthropic: FakeAnthropic,
    mcp_server: McpServer,
) -> None:
    """A `worker` role refuses MCP servers on private addresses unless
    AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE=true (the suite's other deployments set it)."""
    if turns.mode != "prod":
        pytest.skip("the worker role's default; `agentd dev` allows private targets")
    deployment = launch("prod", extra_env={**provider_env, "AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE": "false"})
    client = deployment.client()
    key = unique("mcp-private")
    fake_anthropic.script(key, call("add", {"a": 1, "b": 2}), say("done"))
    agent = mcp_agent(client, {"local": mcp_server.url}, [toolset("local")])
    vault_id = vault_with(client, bearer(mcp_server.url, token_of(mcp_server)))
    session = start(client, deployment, agent, [vault_id], f"add {key}")
    events = wait_idle(client, session.id)
    (error,) = of_type(events, "session.error")
    assert error.error.type == "mcp_connection_failed_error"
    assert error.error.mcp_server_name == "local"
    assert "public addresses" in error.error.message and "127.0.0.1" not in error.error.message
    assert mcp_server.calls == [] and mcp_server.authorizations() == [], "nothing reached the server"
    assert fake_anthropic.received(key) == [], "the model is not asked without the agent's tools"


def ask_turn(
    turns: Deployment, client: anthropic.Anthropic, fake: FakeAnthropic, server: McpServer, key: str, answer: str
) -> tuple[Any, Any]:
    fake.script(key, call("bump", {}), say(answer))
    agent = mcp_agent(
        client,
        {"calc": server.url},
        [toolset("calc", configs=[{"name": "bump", "permission_policy": {"type": "always_ask"}}])],
    )
    vault_id = vault_with(client, bearer(server.url, token_of(server)))
    session = start(client, turns, agent, [vault_id], f"bump it {key}")
    events = wait_idle(client, session.id)
    (use,) = of_type(events, "agent.mcp_tool_use")
    assert use.name == "bump" and use.evaluated_permission == "ask"
    assert use.evaluation is not None and use.evaluation.type == "always_ask"
    assert events[-1].stop_reason.type == "requires_action"
    assert events[-1].stop_reason.event_ids == [use.id]
    assert server.calls == [], "nothing runs before the user allows it"
    return session, use


def test_always_ask_then_allow_runs_the_call(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, mcp_server: McpServer
) -> None:
    key = unique("mcp-allow")
    session, use = ask_turn(turns, client, fake_anthropic, mcp_server, key, "Bumped.")
    client.beta.sessions.events.send(
        session.id, events=[{"type": "user.tool_confirmation", "tool_use_id": use.id, "result": "allow"}]
    )
    events = wait_idle(client, session.id, count=2)
    assert events[-1].stop_reason.type == "end_turn"
    (result,) = of_type(events, "agent.mcp_tool_result")
    assert result.mcp_tool_use_id == use.id and not result.is_error
    assert result_text(result) == "counter=1"
    assert mcp_server.calls == [("bump", {})] and mcp_server.counter == 1
    assert texts(events)[-1] == "Bumped."


def test_always_ask_then_deny_does_not_run_the_call(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, mcp_server: McpServer
) -> None:
    key = unique("mcp-deny")
    session, use = ask_turn(turns, client, fake_anthropic, mcp_server, key, "Understood.")
    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.tool_confirmation", "tool_use_id": use.id, "result": "deny", "deny_message": "not now"}],
    )
    events = wait_idle(client, session.id, count=2)
    assert events[-1].stop_reason.type == "end_turn"
    (result,) = of_type(events, "agent.mcp_tool_result")
    assert result.mcp_tool_use_id == use.id and result.is_error is True
    assert "not now" in result_text(result)
    assert mcp_server.calls == [] and mcp_server.counter == 0
    assert texts(events)[-1] == "Understood."
    _, second = fake_anthropic.wait_requests(key, 2)
    (tool_result,) = second.blocks("tool_result")
    assert tool_result["tool_use_id"] == use.id and tool_result["is_error"] is True


def test_credentials_go_only_to_their_own_origin(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, mcp_server: McpServer
) -> None:
    other = McpServer(tokens=None, prefix="other_")  # open: records what it is sent
    try:
        key = unique("mcp-origin")
        fake_anthropic.script(key, call("other_add", {"a": 4, "b": 4}), call("add", {"a": 1, "b": 2}), say("Done."))
        agent = mcp_agent(
            client, {"calc": mcp_server.url, "other": other.url}, [toolset("calc"), toolset("other")]
        )
        vault_id = vault_with(client, bearer(mcp_server.url, token_of(mcp_server)))
        session = start(client, turns, agent, [vault_id], f"both {key}")
        events = wait_idle(client, session.id)
        assert events[-1].stop_reason.type == "end_turn", types_of(events)
        results = of_type(events, "agent.mcp_tool_result")
        assert [result_text(r) for r in results] == ["8", "3"]
        assert other.calls == [("other_add", {"a": 4, "b": 4})]
        assert mcp_server.calls == [("add", {"a": 1, "b": 2})]
        assert other.authorizations() and all(a == "" for a in other.authorizations()), other.authorizations()
        assert all(a == f"Bearer {token_of(mcp_server)}" for a in mcp_server.authorizations())
    finally:
        other.close()


@pytest.mark.slow
def test_a_call_cut_off_by_a_crash_is_repeated_only_when_safe(
    turns: Deployment,
    launch: Callable[..., Deployment],
    provider_env: dict[str, str],
    fake_anthropic: FakeAnthropic,
    mcp_server: McpServer,
) -> None:
    """SLOW (prod only): a worker is SIGKILLed while an MCP call runs. The next worker
    records the side-effecting `bump` as interrupted (never sent again), and repeats the
    read-only `add`."""
    if turns.mode != "prod":
        pytest.skip("needs separate worker processes")
    deployment = launch("prod", worker=False, extra_env={**provider_env, "AGENTD_LEASE": "1s"})
    client = deployment.client()
    agent = mcp_agent(client, {"calc": mcp_server.url}, [toolset("calc")])
    vault_id = vault_with(client, bearer(mcp_server.url, token_of(mcp_server)))
    mcp_server.bump_delay = mcp_server.add_delay = 4.0

    def crash_during(tool: str, args: dict[str, Any], key: str) -> list[Any]:
        doomed = deployment.start_worker()
        fake_anthropic.script(key, call(tool, args), say(f"after {tool}"))
        session = start(client, deployment, agent, [vault_id], f"{tool} {key}")
        deadline = time.monotonic() + TURN_TIMEOUT
        while not any(name == tool for name, _ in mcp_server.calls):
            assert time.monotonic() < deadline, f"{tool} never reached the server"
            time.sleep(0.02)
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.proc.wait(timeout=10)
        survivor = deployment.start_worker()
        try:
            return wait_history(
                client,
                session.id,
                lambda events: bool(events) and events[-1].type == "session.status_idle",
                f"the turn finishing after the crash during {tool}",
            )
        finally:
            survivor.stop()

    events = crash_during("bump", {}, unique("mcp-crash-bump"))
    (use,) = of_type(events, "agent.mcp_tool_use")
    (result,) = of_type(events, "agent.mcp_tool_result")
    assert result.mcp_tool_use_id == use.id and result.is_error is True
    assert "may or may not have taken effect" in result_text(result)
    assert [c for c in mcp_server.calls if c[0] == "bump"] == [("bump", {})], "never sent twice"
    assert texts(events)[-1] == "after bump"

    mcp_server.calls.clear()
    events = crash_during("add", {"a": 2, "b": 3}, unique("mcp-crash-add"))
    (result,) = of_type(events, "agent.mcp_tool_result")
    assert result.is_error is False and result_text(result) == "5"
    assert mcp_server.calls == [("add", {"a": 2, "b": 3})] * 2, "the read-only call was repeated"
    assert texts(events)[-1] == "after add"


def test_oauth_token_is_refreshed_once_and_written_back(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    server = McpServer(tokens=set())
    try:
        refresh_token = RECORDER.secret(f"refresh-{secrets.token_hex(16)}")
        client_secret = RECORDER.secret(f"csecret-{secrets.token_hex(16)}")
        server.refresh_tokens[refresh_token] = ("pytest-client", client_secret)
        stale = RECORDER.secret(f"stale-{secrets.token_hex(16)}")
        auth = {
            "type": "mcp_oauth",
            "mcp_server_url": server.url,
            "access_token": stale,
            "refresh": {
                "client_id": "pytest-client",
                "refresh_token": refresh_token,
                "token_endpoint": server.token_url,
                "token_endpoint_auth": {"type": "client_secret_post", "client_secret": client_secret},
            },
        }
        vault_id = vault_with(client, auth)
        agent = mcp_agent(client, {"calc": server.url}, [toolset("calc")])
        for round_ in range(2):
            key = unique(f"mcp-oauth{round_}")
            fake_anthropic.script(key, call("add", {"a": round_, "b": 10}), say("ok"))
            session = start(client, turns, agent, [vault_id], f"add {key}")
            events = wait_idle(client, session.id)
            assert events[-1].stop_reason.type == "end_turn", types_of(events)
            (result,) = of_type(events, "agent.mcp_tool_result")
            assert result_text(result) == str(round_ + 10)
        # One refresh: the second session reused the token written back to the vault.
        assert len(server.token_requests) == 1, server.token_requests
        (fresh,) = server.issued
        RECORDER.secret(fresh)
        seen = server.authorizations()
        assert seen[0] == f"Bearer {stale}"
        assert all(a == f"Bearer {fresh}" for a in seen[1:]), "after the refresh only the new token is sent"
        assert f"Bearer {stale}" not in seen[1:]
    finally:
        server.close()


def test_token_revoked_mid_turn_is_refreshed_and_the_call_made_once(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    access = RECORDER.secret(f"access-{secrets.token_hex(16)}")
    server = McpServer(tokens={access})
    try:
        refresh_token = RECORDER.secret(f"refresh-{secrets.token_hex(16)}")
        server.refresh_tokens[refresh_token] = ("pytest-client", "")
        auth = {
            "type": "mcp_oauth",
            "mcp_server_url": server.url,
            "access_token": access,
            "refresh": {
                "client_id": "pytest-client",
                "refresh_token": refresh_token,
                "token_endpoint": server.token_url,
                "token_endpoint_auth": {"type": "none"},
            },
        }
        vault_id = vault_with(client, auth)
        agent = mcp_agent(client, {"calc": server.url}, [toolset("calc")])
        key = unique("mcp-revoked")
        # The model takes a while: the token is revoked after the tools were listed.
        slow_call = Reply(blocks=[tool_use("add", {"a": 20, "b": 22})], stop_reason="tool_use", delay=0.5)
        fake_anthropic.script(key, slow_call, say("ok"))
        session = start(client, turns, agent, [vault_id], f"add {key}")
        fake_anthropic.wait_requests(key, 1)
        assert server.tokens is not None
        server.tokens.discard(access)
        events = wait_idle(client, session.id)
        errors = [e.error.message for e in of_type(events, "session.error")]
        assert events[-1].stop_reason.type == "end_turn", (types_of(events), errors, server.authorizations())
        (result,) = of_type(events, "agent.mcp_tool_result")
        assert result_text(result) == "42" and not result.is_error
        assert server.calls == [("add", {"a": 20, "b": 22})], "refused calls did not run; the retry ran once"
        assert len(server.token_requests) == 1
        RECORDER.secret(server.issued[0])
    finally:
        server.close()
