"""Multiagent configuration and the thread routes (ADR 0022 §1, §8, §9; docs/api/multiagent.md).

An agent's `multiagent` is either a `coordinator` roster or a `multiagent_20261001`
configuration. A string id is pinned to the agent's latest version, every roster agent is
a live agent of the workspace, entries are distinct, `self` follows the agent's updates,
and an update of a `multiagent_20261001` merges level by level. What this agentd cannot
run is a 400 naming the field: workflow runs (enabled by default!), an advisor model
outside the catalog, a custom tool named like an enabled thread tool. A session snapshots
the resolved configuration with every roster agent's full definition. The thread routes
serve the primary thread and answer 404 for an unknown thread; an interrupt naming a
thread that is not one of the session's is a 400.

Wire facts: managed-agents-wire.md §2.1 (multiagent create and update rules), §2B.1
(`BetaManagedAgentsMultiagent*Params`), §2.5 (thread routes), §3.1 / §3.2 (the resolved
shapes on the agent and on the session), §3.3 (the thread), §4 (`user.interrupt` with
`session_thread_id`). Threads at work are in test_session_threads.py. Every test runs
against `agentd dev` and gateway+worker.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import anthropic
import pytest

from fake_models import FakeAnthropic
from harness import RECORDER, Deployment, collect, unique

DISABLED = {"type": "disabled"}
# Workflow runs are not available: every accepted `multiagent_20261001` disables them.
NO_WORKFLOWS = {"workflows": DISABLED}
BUDGET = {"type": "limit", "max_list_cost": {"amount": "100000", "currency": "USD"}}
# Well formed, and no agent has it.
UNKNOWN_AGENT = "agent_" + "0" * 26
THREAD_AGENT_FIELDS = {
    "type", "id", "version", "name", "description", "system", "model", "tools", "mcp_servers", "skills",
    "execution_identity",
}


def member(client: anthropic.Anthropic, model_id: str, role: str = "member", **fields: Any) -> Any:
    return client.beta.agents.create(name=unique(role), model=model_id, system=f"You are the {role}.", **fields)


def refused(call: Callable[[], Any], *fragments: str) -> str:
    """The call is a 400 whose message has every fragment; the message."""
    with pytest.raises(anthropic.BadRequestError) as caught:
        call()
    message = caught.value.message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def raw(client: anthropic.Anthropic, agent_id: str) -> dict[str, Any]:
    """The agent as JSON (the SDK's models drop nothing, but a dict compares whole)."""
    return client.get(f"/v1/agents/{agent_id}", cast_to=object, options={"headers": {"anthropic-beta": "managed-agents-2026-04-01"}})


_ENVIRONMENTS: dict[str, str] = {}


def environment(client: anthropic.Anthropic) -> str:
    key = str(client.base_url) + str(client.api_key)
    if key not in _ENVIRONMENTS:
        _ENVIRONMENTS[key] = client.beta.environments.create(name=unique("multi-env"), config={"type": "cloud"}).id
    return _ENVIRONMENTS[key]


# ---------------------------------------------------------------------------------------
# Configuration accepted and resolved


def test_a_coordinator_roster_is_resolved_and_self_follows_the_agent(
    client: anthropic.Anthropic, model_id: str
) -> None:
    first = member(client, model_id, "researcher")
    first = client.beta.agents.update(first.id, version=first.version, system="You research, v2.")
    second = member(client, model_id, "writer")
    roster = [
        first.id,
        {"type": "agent", "id": second.id, "version": 1},
        {"type": "self"},
        {"type": "advisor", "model": model_id},
    ]
    agent = client.beta.agents.create(name=unique("coordinator"), model=model_id, multiagent={"type": "coordinator", "agents": roster})
    multiagent = raw(client, agent.id)["multiagent"]
    assert multiagent == {
        "type": "coordinator",
        "agents": [
            {"type": "agent", "id": first.id, "version": 2},
            {"type": "agent", "id": second.id, "version": 1},
            {"type": "agent", "id": agent.id, "version": 1},
            {"type": "advisor", "model": model_id},
        ],
    }
    # The SDK reads it as its types.
    assert agent.multiagent is not None and agent.multiagent.type == "coordinator"
    assert [getattr(a, "id", None) for a in agent.multiagent.agents] == [first.id, second.id, agent.id, None]
    # `self` is the agent itself at every version: not pinned to the first.
    updated = client.beta.agents.update(agent.id, version=agent.version, description="Leads.")
    assert updated.version == 2
    assert raw(client, agent.id)["multiagent"]["agents"][2] == {"type": "agent", "id": agent.id, "version": 2}
    assert client.beta.agents.retrieve(agent.id, version=1).multiagent.agents[2].version == 1
    versions = {v.version: v.multiagent.agents[2].version for v in collect(client.beta.agents.versions.list(agent.id))}
    assert versions == {1: 1, 2: 2}
    # A roster member's later version is not picked up: the roster pinned version 2.
    client.beta.agents.update(first.id, system="You research, v3.")
    assert raw(client, agent.id)["multiagent"]["agents"][0]["version"] == 2


def test_a_multiagent_20261001_configuration_gets_its_defaults(client: anthropic.Anthropic, model_id: str) -> None:
    agent = client.beta.agents.create(
        name=unique("multi"), model=model_id, multiagent={"type": "multiagent_20261001", **NO_WORKFLOWS}
    )
    assert raw(client, agent.id)["multiagent"] == {
        "type": "multiagent_20261001",
        "advisor": {"type": "disabled"},
        "subagents": {"type": "enabled", "inline_agents": {"type": "enabled"}, "predefined_agents": []},
        "workflows": {"type": "disabled"},
    }
    helper = member(client, model_id)
    full = {
        "type": "multiagent_20261001",
        "advisor": {"type": "enabled", "model": model_id},
        "subagents": {"type": "enabled", "inline_agents": DISABLED, "predefined_agents": [helper.id, {"type": "self"}]},
        **NO_WORKFLOWS,
    }
    agent = client.beta.agents.create(name=unique("multi"), model=model_id, multiagent=full)
    assert agent.multiagent.type == "multiagent_20261001"
    assert raw(client, agent.id)["multiagent"]["subagents"] == {
        "type": "enabled",
        "inline_agents": {"type": "disabled"},
        "predefined_agents": [
            {"type": "agent", "id": helper.id, "version": 1},
            {"type": "agent", "id": agent.id, "version": 1},
        ],
    }
    # A custom tool may take a thread tool's name when that tool is not enabled.
    tool = {"type": "custom", "name": "consult_advisor", "description": "d", "input_schema": {"type": "object"}}
    quiet = {"type": "multiagent_20261001", "advisor": DISABLED, **NO_WORKFLOWS}
    assert client.beta.agents.create(name=unique("multi"), model=model_id, multiagent=quiet, tools=[tool]).tools


def test_an_update_merges_a_multiagent_20261001_level_by_level(client: anthropic.Anthropic, model_id: str) -> None:
    one, two = member(client, model_id, "one"), member(client, model_id, "two")
    stored = {
        "type": "multiagent_20261001",
        "advisor": {"type": "enabled", "model": model_id},
        "subagents": {"type": "enabled", "inline_agents": DISABLED, "predefined_agents": [one.id]},
        **NO_WORKFLOWS,
    }
    agent = client.beta.agents.create(name=unique("merged"), model=model_id, multiagent=stored)

    def update(multiagent: Any) -> dict[str, Any]:
        client.beta.agents.update(agent.id, multiagent=multiagent)
        return raw(client, agent.id)["multiagent"]

    ref = lambda a: {"type": "agent", "id": a.id, "version": 1}  # noqa: E731
    # Omitted keys keep their stored values, down to the member's own keys.
    got = update({"type": "multiagent_20261001", "subagents": {"type": "enabled", "predefined_agents": [one.id, two.id]}})
    assert got["advisor"] == {"type": "enabled", "model": model_id}
    assert got["subagents"] == {"type": "enabled", "inline_agents": {"type": "disabled"}, "predefined_agents": [ref(one), ref(two)]}
    assert got["workflows"] == {"type": "disabled"}
    # Only the type: nothing changes, and no version is written.
    version = client.beta.agents.retrieve(agent.id).version
    assert update({"type": "multiagent_20261001"}) == got
    assert client.beta.agents.retrieve(agent.id).version == version
    # A key sent as null takes its default.
    got = update({"type": "multiagent_20261001", "advisor": None})
    assert got["advisor"] == {"type": "disabled"} and got["subagents"]["predefined_agents"] == [ref(one), ref(two)]
    got = update({"type": "multiagent_20261001", "subagents": {"type": "enabled", "inline_agents": None}})
    assert got["subagents"]["inline_agents"] == {"type": "enabled"}
    # A member whose type changes is replaced whole, its keys from their defaults.
    assert update({"type": "multiagent_20261001", "subagents": DISABLED})["subagents"] == DISABLED
    got = update({"type": "multiagent_20261001", "subagents": {"type": "enabled"}})
    assert got["subagents"] == {"type": "enabled", "inline_agents": {"type": "enabled"}, "predefined_agents": []}
    # `workflows: null` takes its default, enabled: refused, and nothing is written.
    version = client.beta.agents.retrieve(agent.id).version
    refused(lambda: update({"type": "multiagent_20261001", "workflows": None}), "multiagent.workflows", "not available")
    # The merge result is checked like a create: inline agents disabled with no predefined one.
    refused(
        lambda: update({"type": "multiagent_20261001", "subagents": {"type": "enabled", "inline_agents": DISABLED}}),
        "multiagent.subagents.predefined_agents",
    )
    assert client.beta.agents.retrieve(agent.id).version == version
    # Omitting `multiagent` keeps it; another type replaces it; null clears it.
    client.beta.agents.update(agent.id, description="unrelated")
    assert raw(client, agent.id)["multiagent"] == got
    coordinator = {"type": "coordinator", "agents": [one.id]}
    assert update(coordinator) == {"type": "coordinator", "agents": [ref(one)]}
    assert update({"type": "multiagent_20261001", **NO_WORKFLOWS})["subagents"]["predefined_agents"] == []
    assert update(None) is None


# ---------------------------------------------------------------------------------------
# Refusals: a 400 naming the field, nothing stored


def test_workflows_are_refused_including_by_default(client: anthropic.Anthropic, model_id: str) -> None:
    name = unique("workflows")
    for workflows in ({}, {"workflows": None}, {"workflows": {"type": "enabled"}}):
        message = refused(
            lambda: client.beta.agents.create(name=name, model=model_id, multiagent={"type": "multiagent_20261001", **workflows}),
            "multiagent.workflows",
            "workflow runs are not available",
            '{"type":"disabled"}',
        )
        assert message
    assert not [a for a in client.beta.agents.list(limit=100) if a.name == name], "nothing was stored"


@pytest.mark.parametrize(
    "case",
    [
        "empty_roster",
        "roster_of_21",
        "predefined_of_21",
        "two_selves",
        "two_advisors",
        "named_twice",
        "not_an_agent_id",
        "unknown_agent",
        "version_beyond_latest",
        "archived_agent",
        "inline_disabled_without_predefined",
        "advisor_model_outside_catalog",
        "coordinator_advisor_outside_catalog",
        "custom_tool_named_spawn_thread",
        "custom_tool_named_consult_advisor",
        "unknown_type",
        "unknown_field",
    ],
)
def test_a_multiagent_configuration_is_refused(client: anthropic.Anthropic, model_id: str, case: str) -> None:
    helper = member(client, model_id)
    archived = member(client, model_id, "archived")
    client.beta.agents.archive(archived.id)
    tool = lambda name: {"type": "custom", "name": name, "description": "d", "input_schema": {"type": "object"}}  # noqa: E731
    subagents = lambda **fields: {"type": "multiagent_20261001", "subagents": {"type": "enabled", **fields}, **NO_WORKFLOWS}  # noqa: E731
    coordinator = lambda *agents: {"type": "coordinator", "agents": list(agents)}  # noqa: E731
    cases: dict[str, tuple[dict[str, Any], dict[str, Any], tuple[str, ...]]] = {
        "empty_roster": (coordinator(), {}, ("multiagent.agents", "1 to 20")),
        "roster_of_21": (coordinator(*[helper.id] * 21), {}, ("multiagent.agents", "at most 20")),
        "predefined_of_21": (subagents(predefined_agents=[helper.id] * 21), {}, ("multiagent.subagents.predefined_agents", "at most 20")),
        "two_selves": (coordinator({"type": "self"}, {"type": "self"}), {}, ("multiagent.agents[1]", "self")),
        "two_advisors": (
            coordinator({"type": "advisor", "model": model_id}, {"type": "advisor", "model": model_id}),
            {},
            ("multiagent.agents[1]", "advisor"),
        ),
        "named_twice": (coordinator(helper.id, {"type": "agent", "id": helper.id, "version": 1}), {}, ("multiagent.agents[1]", "twice")),
        "not_an_agent_id": (coordinator("not-an-agent"), {}, ("multiagent.agents[0]", "not an agent id")),
        "unknown_agent": (coordinator(UNKNOWN_AGENT), {}, ("multiagent.agents[0].id", "no agent", UNKNOWN_AGENT)),
        "version_beyond_latest": (coordinator({"type": "agent", "id": helper.id, "version": 9}), {}, ("multiagent.agents[0].version", "no version 9")),
        "archived_agent": (subagents(predefined_agents=[archived.id]), {}, ("multiagent.subagents.predefined_agents[0].id", "archived")),
        "inline_disabled_without_predefined": (
            subagents(inline_agents=DISABLED),
            {},
            ("multiagent.subagents.predefined_agents", "at least one predefined agent"),
        ),
        "advisor_model_outside_catalog": (
            {"type": "multiagent_20261001", "advisor": {"type": "enabled", "model": "claude-not-in-the-catalog"}, **NO_WORKFLOWS},
            {},
            ("multiagent.advisor.model", "claude-not-in-the-catalog", "catalog"),
        ),
        "coordinator_advisor_outside_catalog": (
            coordinator(helper.id, {"type": "advisor", "model": "claude-not-in-the-catalog"}),
            {},
            ("multiagent.agents[1].model", "catalog"),
        ),
        "custom_tool_named_spawn_thread": (subagents(), {"tools": [tool("get_time"), tool("spawn_thread")]}, ("tools[1].name", "spawn_thread")),
        "custom_tool_named_consult_advisor": (
            coordinator(helper.id, {"type": "advisor", "model": model_id}),
            {"tools": [tool("consult_advisor")]},
            ("tools[0].name", "consult_advisor"),
        ),
        "unknown_type": ({"type": "swarm"}, {}, ("multiagent.type",)),
        "unknown_field": ({"type": "coordinator", "agents": [helper.id], "depth": 2}, {}, ("multiagent", "depth")),
    }
    multiagent, fields, fragments = cases[case]
    name = unique("refused")
    refused(lambda: client.beta.agents.create(name=name, model=model_id, multiagent=multiagent, **fields), *fragments)
    assert not [a for a in client.beta.agents.list(limit=100) if a.name == name], "nothing was stored"
    # An update is refused the same way, and the agent keeps its version.
    agent = client.beta.agents.create(name=name, model=model_id)
    refused(lambda: client.beta.agents.update(agent.id, version=agent.version, multiagent=multiagent, **fields), *fragments)
    after = client.beta.agents.retrieve(agent.id)
    assert (after.version, after.multiagent) == (1, None)


def test_self_named_by_id_too_is_a_duplicate(client: anthropic.Anthropic, model_id: str) -> None:
    agent = client.beta.agents.create(name=unique("selfish"), model=model_id)
    refused(
        lambda: client.beta.agents.update(agent.id, multiagent={"type": "coordinator", "agents": [{"type": "self"}, agent.id]}),
        "multiagent.agents[1].id",
        "self",
    )


def test_an_agent_of_another_workspace_is_not_in_the_roster(
    client: anthropic.Anthropic, workspace_client: Callable[[], anthropic.Anthropic], model_id: str
) -> None:
    elsewhere = member(workspace_client(), model_id, "elsewhere")
    refused(
        lambda: client.beta.agents.create(name=unique("c"), model=model_id, multiagent={"type": "coordinator", "agents": [elsewhere.id]}),
        "multiagent.agents[0].id",
        "no agent",
    )


# ---------------------------------------------------------------------------------------
# Sessions snapshot the resolved configuration


def test_a_session_snapshots_every_roster_agent_at_its_pinned_version(client: anthropic.Anthropic, model_id: str) -> None:
    helper = member(client, model_id, "helper", description="Helps.")
    roster = [helper.id, {"type": "self"}, {"type": "advisor", "model": model_id}]
    agent = client.beta.agents.create(name=unique("coordinator"), model=model_id, multiagent={"type": "coordinator", "agents": roster})
    # The helper changes after the roster pinned it: the session runs version 1.
    client.beta.agents.update(helper.id, system="You are the helper, v2.")
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment(client))
    multiagent = session.agent.multiagent
    assert multiagent is not None and multiagent.type == "coordinator"
    pinned, own, advisor = multiagent.agents
    assert (pinned.type, pinned.id, pinned.version, pinned.name) == ("agent", helper.id, 1, helper.name)
    assert (pinned.system, pinned.description, pinned.model.id) == ("You are the helper.", "Helps.", model_id)
    assert (own.id, own.version, own.name) == (agent.id, 1, agent.name)
    assert (advisor.type, advisor.model) == ("advisor", model_id)
    body = client.get(f"/v1/sessions/{session.id}", cast_to=object, options={"headers": {"anthropic-beta": "managed-agents-2026-04-01"}})
    for definition in body["agent"]["multiagent"]["agents"][:2]:
        assert set(definition) == THREAD_AGENT_FIELDS, definition
    assert not any(key.startswith("_") for key in body), "internal fields stay internal"

    # A multiagent_20261001 session: its predefined agents in full.
    multi = client.beta.agents.create(
        name=unique("multi"),
        model=model_id,
        multiagent={"type": "multiagent_20261001", "subagents": {"type": "enabled", "predefined_agents": [helper.id]}, **NO_WORKFLOWS},
    )
    session = client.beta.sessions.create(agent=multi.id, environment_id=environment(client))
    subagents = session.agent.multiagent.subagents
    assert subagents.type == "enabled" and subagents.inline_agents.type == "enabled"
    (definition,) = subagents.predefined_agents
    assert (definition.id, definition.version, definition.system) == (helper.id, 2, "You are the helper, v2.")
    assert session.agent.multiagent.advisor.type == "disabled"
    assert session.agent.multiagent.workflows.type == "disabled"

    # A roster agent archived since: the coordinator cannot start sessions.
    client.beta.agents.archive(helper.id)
    refused(lambda: client.beta.sessions.create(agent=agent.id, environment_id=environment(client)), "agent", helper.id, "archived")


def test_a_budget_needs_a_price_for_every_model_a_thread_may_run(agentd: Deployment, model_id: str) -> None:
    """In a workspace of its own, a configured model without a list price (its offering
    only): a subagent on it makes a budgeted session unbudgetable."""
    key = agentd.create_key(unique("multi-ws"))
    client = agentd.client(key)
    headers = agentd.headers(key, beta=False)
    unpriced = unique("cfg-unpriced")
    fake = FakeAnthropic(api_key=RECORDER.secret(f"sk-ant-multi-{uuid.uuid4().hex}{uuid.uuid4().hex}"))
    try:
        with agentd.http() as http:
            def ok(method: str, path: str, body: Any) -> dict[str, Any]:
                response = http.request(method, f"/v1/config{path}", json=body, headers=headers)
                assert response.status_code in (200, 201), (path, response.text)
                return response.json()

            ok("PUT", "/providers/fakes", {"kind": "anthropic", "display_name": "The fakes"})
            credential = ok("POST", "/credentials", {"name": "first", "secret": fake.api_key})
            ok("PUT", "/providers/fakes/endpoints/main", {"base_url": fake.url, "credential_id": credential["id"]})
            ok("POST", "/offerings", {"model_id": unpriced, "provider_id": "fakes", "provider_model": "claude-upstream"})
    finally:
        fake.close()
    helper = member(client, unpriced, "unpriced")
    agent = client.beta.agents.create(name=unique("c"), model=model_id, multiagent={"type": "coordinator", "agents": [helper.id]})
    env = client.beta.environments.create(name=unique("multi-env"), config={"type": "cloud"}).id
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.sessions.create(agent=agent.id, environment_id=env, budget=BUDGET)
    assert unpriced in caught.value.message and "budget" in caught.value.message
    body = caught.value.body if isinstance(caught.value.body, dict) else {}
    details = (body.get("error") or body).get("details") or {}
    assert details.get("error_code") == "model_not_budgetable", body
    # Without a budget it starts; an advisor on the unpriced model is refused the same way.
    assert client.beta.sessions.create(agent=agent.id, environment_id=env).agent.multiagent is not None
    advised = client.beta.agents.create(
        name=unique("c"), model=model_id, multiagent={"type": "coordinator", "agents": [{"type": "advisor", "model": unpriced}]}
    )
    refused(lambda: client.beta.sessions.create(agent=advised.id, environment_id=env, budget=BUDGET), unpriced)
    # Every model priced: the budgeted session starts.
    priced = client.beta.agents.create(name=unique("c"), model=model_id, multiagent={"type": "coordinator", "agents": [{"type": "self"}]})
    assert client.beta.sessions.create(agent=priced.id, environment_id=env, budget=BUDGET).budget is not None


# ---------------------------------------------------------------------------------------
# Thread routes


def test_the_primary_thread_is_listed_and_retrieved(client: anthropic.Anthropic, model_id: str) -> None:
    helper = member(client, model_id)
    agent = client.beta.agents.create(name=unique("c"), model=model_id, multiagent={"type": "coordinator", "agents": [helper.id]})
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment(client))
    (primary,) = collect(client.beta.sessions.threads.list(session.id))
    assert (primary.id, primary.session_id, primary.parent_thread_id, primary.status) == (session.id, session.id, None, "idle")
    assert primary.type == "session_thread" and primary.archived_at is None
    assert (primary.agent.type, primary.agent.id, primary.agent.name) == ("agent", agent.id, agent.name)
    assert collect(client.beta.sessions.threads.list(session.id, statuses=["idle"]))[0].id == session.id
    assert collect(client.beta.sessions.threads.list(session.id, statuses=["running", "terminated"])) == []
    assert len(collect(client.beta.sessions.threads.list(session.id, limit=1))) == 1
    retrieved = client.beta.sessions.threads.retrieve(session.id, session_id=session.id)
    assert (retrieved.id, retrieved.status, retrieved.agent.name) == (session.id, "idle", agent.name)
    assert collect(client.beta.sessions.threads.events.list(session.id, session_id=session.id)) == []
    refused(lambda: client.beta.sessions.threads.archive(session.id, session_id=session.id), "primary")
    for limit in (0, 1001):
        with pytest.raises(anthropic.BadRequestError):
            client.beta.sessions.threads.list(session.id, limit=limit)


def test_an_unknown_thread_is_not_found_on_every_thread_route(client: anthropic.Anthropic, model_id: str) -> None:
    agent = client.beta.agents.create(name=unique("single"), model=model_id)
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment(client))
    unknown = "sthr_" + uuid.uuid4().hex[:24]
    routes: list[Callable[[], Any]] = [
        lambda: client.beta.sessions.threads.retrieve(unknown, session_id=session.id),
        lambda: client.beta.sessions.threads.archive(unknown, session_id=session.id),
        lambda: client.beta.sessions.threads.events.list(unknown, session_id=session.id),
        lambda: client.beta.sessions.threads.events.stream(unknown, session_id=session.id),
    ]
    for route in routes:
        with pytest.raises(anthropic.NotFoundError) as caught:
            route()
        assert unknown in caught.value.message
    # Another session's primary is not a thread of this one.
    other = client.beta.sessions.create(agent=agent.id, environment_id=environment(client))
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.threads.retrieve(other.id, session_id=session.id)


def test_an_interrupt_names_a_thread_of_the_session(client: anthropic.Anthropic, model_id: str) -> None:
    helper = member(client, model_id)
    for multiagent in (None, {"type": "coordinator", "agents": [helper.id]}):
        agent = client.beta.agents.create(name=unique("c"), model=model_id, multiagent=multiagent)
        session = client.beta.sessions.create(agent=agent.id, environment_id=environment(client))
        other = client.beta.sessions.create(agent=agent.id, environment_id=environment(client))
        for bad in ("sthr_" + uuid.uuid4().hex[:24], other.id, "not-a-thread"):
            refused(
                lambda: client.beta.sessions.events.send(session.id, events=[{"type": "user.interrupt", "session_thread_id": bad}]),
                "session_thread_id",
            )
        # The primary is a thread of the session: the interrupt is echoed with it.
        sent = client.beta.sessions.events.send(session.id, events=[{"type": "user.interrupt", "session_thread_id": session.id}])
        (echo,) = sent.data or []
        assert echo.type == "user.interrupt" and echo.session_thread_id == session.id
