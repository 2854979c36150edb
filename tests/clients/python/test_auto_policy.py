"""The `auto` permission policy (docs/api/tools.md, "The `auto` permission policy"): before
a tool use under `auto` is committed, the worker asks a judge model call whether it is safe
or high-risk; `allow` runs it like `always_allow`, `deny` does not run it (a synthetic error
result tells the model, and the turn goes on), and any failure of the judge asks, holding
the call like `always_ask`. A response that reaches the session's budget is not judged: its
`auto` calls are denied. The decision is on the committed `agent.mcp_tool_use`
(`evaluated_permission`, `evaluation` of type `auto`), and the judge's tokens count in the
session's usage.

Wire facts: managed-agents-wire.md §4 (`evaluated_permission`, `evaluation`:
`BetaManagedAgentsAgentToolEvaluationAuto` with `{"type":"allow"}` /
`{"type":"ask","reason_code"}` / `{"type":"deny","reason_code"}`, reason codes `high_risk`
and `indeterminate`; `deny` ⇒ the call does not execute and a synthetic error tool result is
appended), §5.4 (`BetaManagedAgentsAutoPolicy`). The tools are an MCP
server's (remote_servers.py); the model is the fake of fake_models.py. The judge's request
carries the conversation, so it takes the next reply of the turn's key: each test scripts
the agent's call, then the judge's answer, then the agent's last reply. Every test runs
against `agentd dev` and gateway+worker (fixture `turns`).
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Callable, Iterable, Iterator

import anthropic
import pytest

from fake_models import FakeAnthropic, Reply, Usage, call, http_error, say, tool_use
from harness import RECORDER, Deployment, collect, list_all, unique
from remote_servers import McpServer

MODEL = "claude-sonnet-4-6"
TURN_TIMEOUT = 30.0
JUDGE_TOOL = "permission_decision"


# ---------------------------------------------------------------------------------------
# Helpers


@pytest.fixture
def client(turns: Deployment) -> anthropic.Anthropic:
    return turns.client()


@pytest.fixture
def mcp_server() -> Iterator[McpServer]:
    server = McpServer(tokens={RECORDER.secret(f"mcp-auto-{secrets.token_hex(16)}")})
    try:
        yield server
    finally:
        server.close()


_ENVIRONMENTS: dict[str, str] = {}


def environment(client: anthropic.Anthropic, deployment: Deployment) -> str:
    if deployment.url not in _ENVIRONMENTS:
        env = client.beta.environments.create(name=unique("auto-env"), config={"type": "cloud"})
        _ENVIRONMENTS[deployment.url] = env.id
    return _ENVIRONMENTS[deployment.url]


def start(
    client: anthropic.Anthropic,
    deployment: Deployment,
    server: McpServer,
    text: str,
    *,
    budget: dict[str, Any] | None = None,
) -> Any:
    """A session of an agent whose `calc` MCP tools are all `auto`, sent `text`."""
    agent = client.beta.agents.create(
        name=unique("auto-agent"),
        model=MODEL,
        mcp_servers=[{"type": "url", "name": "calc", "url": server.url}],
        tools=[
            {
                "type": "mcp_toolset",
                "mcp_server_name": "calc",
                "default_config": {"permission_policy": {"type": "auto"}},
            }
        ],
    )
    vault = client.beta.vaults.create(display_name=unique("auto-vault"))
    token = next(iter(server.tokens or []))
    client.beta.vaults.credentials.create(
        vault.id, auth={"type": "static_bearer", "token": token, "mcp_server_url": server.url}
    )
    extra = {"budget": budget} if budget else {}
    session = client.beta.sessions.create(
        agent=agent.id, environment_id=environment(client, deployment), vault_ids=[vault.id], **extra
    )
    client.beta.sessions.events.send(
        session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}]
    )
    return session


def judge(decision: str, reason: str, **usage: int) -> Reply:
    """The judge's answer: a call of its decision tool."""
    return Reply(
        blocks=[tool_use(JUDGE_TOOL, {"decision": decision, "reason": reason})],
        stop_reason="tool_use",
        usage=Usage(**usage) if usage else Usage(),
    )


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


def result_text(event: Any) -> str:
    return "".join(b.text for b in (event.content or []) if b.type == "text")


def evaluation_reason(use: Any) -> str:
    """`evaluation.reason`, agentd's extension: the judge's reason, or why it gave none."""
    reason = (use.evaluation.model_extra or {}).get("reason")
    assert isinstance(reason, str) and reason, use.evaluation
    return reason


def assert_judge_request(request: Any, key: str, tool: str) -> None:
    """The judge was asked about `tool` with the conversation so far, forced to decide."""
    body = request.body
    assert "permission judge" in body["system"], body["system"]
    assert body["tool_choice"] == {"type": "tool", "name": JUDGE_TOOL}
    assert [t["name"] for t in body["tools"]] == [JUDGE_TOOL]
    assert body["tools"][0]["input_schema"]["properties"]["decision"]["enum"] == ["allow", "deny"]
    (prompt,) = request.texts()
    assert f"tool: {tool}" in prompt and "the MCP server `calc`" in prompt, prompt
    assert key in prompt, "the judge sees the user's message"


def confirm(client: anthropic.Anthropic, session_id: str, use_id: str, result: str) -> None:
    client.beta.sessions.events.send(
        session_id, events=[{"type": "user.tool_confirmation", "tool_use_id": use_id, "result": result}]
    )


# ---------------------------------------------------------------------------------------
# Tests


def test_a_call_the_judge_allows_runs_without_confirmation(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, mcp_server: McpServer
) -> None:
    key = unique("auto-allow")
    fake_anthropic.script(
        key,
        call("add", {"a": 2, "b": 3}),
        judge("allow", "Adding two numbers only reads.", input_tokens=300, output_tokens=11),
        say("The sum is 5."),
    )
    session = start(client, turns, mcp_server, f"add 2 and 3 {key}")
    events = wait_idle(client, session.id)
    assert events[-1].stop_reason.type == "end_turn", types_of(events)
    (use,) = of_type(events, "agent.mcp_tool_use")
    assert use.name == "add" and use.input == {"a": 2, "b": 3}
    assert use.evaluated_permission == "allow"
    assert use.evaluation is not None and use.evaluation.type == "auto"
    assert use.evaluation.evaluated_permission.type == "allow"
    assert evaluation_reason(use) == "Adding two numbers only reads."
    (result,) = of_type(events, "agent.mcp_tool_result")
    assert result.mcp_tool_use_id == use.id and result_text(result) == "5"
    assert mcp_server.calls == [("add", {"a": 2, "b": 3})]
    assert not of_type(events, "user.tool_confirmation")

    first, judged, last = fake_anthropic.wait_requests(key, 3)
    assert "tools" in first.body and JUDGE_TOOL not in str(first.body), "the agent is not offered the judge's tool"
    assert_judge_request(judged, key, "add")
    assert '"a":2' in judged.texts()[0], "the judge sees the call's input"
    assert last.blocks("tool_result"), "the agent's next request carries the result"

    # The judge's tokens count in the request's span and in the session's usage.
    ends = of_type(events, "span.model_request_end")
    assert [e.model_usage.input_tokens for e in ends] == [25 + 300, 25]
    assert [e.model_usage.output_tokens for e in ends] == [7 + 11, 7]
    usage = client.beta.sessions.retrieve(session.id).usage
    assert (usage.input_tokens, usage.output_tokens) == (25 + 300 + 25, 7 + 11 + 7)


def test_a_call_the_judge_denies_does_not_run_and_the_turn_goes_on(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, mcp_server: McpServer
) -> None:
    key = unique("auto-deny")
    fake_anthropic.script(
        key,
        call("bump", {}),
        judge("deny", "It changes a counter the user did not mention."),
        say("I was not allowed to bump the counter."),
    )
    session = start(client, turns, mcp_server, f"do something {key}")
    events = wait_idle(client, session.id)
    assert events[-1].stop_reason.type == "end_turn", types_of(events)
    assert len(of_type(events, "session.status_idle")) == 1, "the turn never waits for the user"
    (use,) = of_type(events, "agent.mcp_tool_use")
    assert use.name == "bump" and use.evaluated_permission == "deny"
    assert use.evaluation is not None and use.evaluation.type == "auto"
    assert use.evaluation.evaluated_permission.type == "deny"
    assert use.evaluation.evaluated_permission.reason_code == "high_risk"
    assert evaluation_reason(use) == "It changes a counter the user did not mention."
    (result,) = of_type(events, "agent.mcp_tool_result")
    assert result.mcp_tool_use_id == use.id and result.is_error is True
    assert "denied by the auto permission policy" in result_text(result), result_text(result)
    assert "It changes a counter the user did not mention." in result_text(result)
    assert mcp_server.calls == [] and mcp_server.counter == 0, "a denied call does not run"
    assert not of_type(events, "user.tool_confirmation")
    assert client.beta.sessions.retrieve(session.id).status == "idle"

    _, judged, last = fake_anthropic.wait_requests(key, 3)
    assert_judge_request(judged, key, "bump")
    (denied,) = last.blocks("tool_result")
    assert denied["tool_use_id"] == use.id and denied["is_error"] is True, denied
    assert "denied by the auto permission policy" in str(denied["content"])
    (message,) = of_type(events, "agent.message")
    assert "not allowed" in "".join(b.text for b in message.content)


def test_a_response_that_reaches_the_budget_is_denied_without_a_judgement(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, mcp_server: McpServer
) -> None:
    """With a 1¢ budget, a response of 5,000 input tokens ($3 per million: 1.5¢) reaches it:
    its `auto` call is denied with reason code `indeterminate`, the judge is not asked, and
    the turn ends `budget_reached` (raw JSON: the SDK's union lacks `session.budget_reached`)."""
    key = unique("auto-budget")
    over = Reply(blocks=[tool_use("bump", {})], stop_reason="tool_use", usage=Usage(input_tokens=5000))
    fake_anthropic.script(key, over, judge("allow", "never asked"), say("never said"))
    budget = {"type": "limit", "max_list_cost": {"amount": "1", "currency": "USD"}}
    session = start(client, turns, mcp_server, f"bump {key}", budget=budget)
    http = turns.http()
    deadline = time.monotonic() + TURN_TIMEOUT
    while True:
        events = list_all(http, f"/v1/sessions/{session.id}/events", turns.headers(), limit=1000)
        kinds = [e["type"] for e in events]
        if "session.status_idle" in kinds:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"no session.status_idle within {TURN_TIMEOUT:.0f} s; history: {kinds}")
        time.sleep(0.05)
    assert events[-1]["stop_reason"]["type"] == "budget_reached", kinds
    (use,) = [e for e in events if e["type"] == "agent.mcp_tool_use"]
    assert use["evaluated_permission"] == "deny"
    assert use["evaluation"]["type"] == "auto"
    assert use["evaluation"]["evaluated_permission"] == {"type": "deny", "reason_code": "indeterminate"}
    assert "budget" in use["evaluation"]["reason"], use["evaluation"]
    (result,) = [e for e in events if e["type"] == "agent.mcp_tool_result"]
    assert result["mcp_tool_use_id"] == use["id"] and result["is_error"] is True
    assert "denied by the auto permission policy" in str(result["content"])
    assert mcp_server.calls == []
    assert "requires_action" not in str([e.get("stop_reason") for e in events])
    assert len(fake_anthropic.received(key)) == 1, "neither the judge nor the agent's model is asked past the budget"


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (http_error(500, "the judge is down"), "the permission judge failed"),
        (say("Sure, go ahead!"), "could not be read"),
        (judge("ask", "not an answer it may give"), "could not be read"),
    ],
    ids=["provider-error", "not-json", "unknown-decision"],
)
def test_a_judge_that_fails_asks(
    turns: Deployment,
    client: anthropic.Anthropic,
    fake_anthropic: FakeAnthropic,
    mcp_server: McpServer,
    answer: Reply,
    why: str,
) -> None:
    key = unique("auto-fail")
    fake_anthropic.script(key, call("bump", {}), answer, say("Understood."))
    session = start(client, turns, mcp_server, f"bump {key}")
    events = wait_idle(client, session.id)
    (use,) = of_type(events, "agent.mcp_tool_use")
    assert use.evaluated_permission == "ask"
    assert use.evaluation is not None and use.evaluation.type == "auto"
    assert use.evaluation.evaluated_permission.type == "ask"
    assert use.evaluation.evaluated_permission.reason_code == "indeterminate"
    assert why in evaluation_reason(use), evaluation_reason(use)
    assert events[-1].stop_reason.type == "requires_action"
    assert events[-1].stop_reason.event_ids == [use.id]
    assert not of_type(events, "session.error"), "a failing judge is not a session error"
    assert mcp_server.calls == []

    confirm(client, session.id, use.id, "deny")
    events = wait_idle(client, session.id, count=2)
    assert events[-1].stop_reason.type == "end_turn"
    (result,) = of_type(events, "agent.mcp_tool_result")
    assert result.mcp_tool_use_id == use.id and result.is_error is True
    assert mcp_server.calls == [] and mcp_server.counter == 0
