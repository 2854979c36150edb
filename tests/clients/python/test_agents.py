"""Agents and agent versions: every method of `client.beta.agents` and `.versions`.

Wire facts: managed-agents-wire.md §2.1 (routes, rules), §2B.1 (request shapes), §3.1
(the `agent` object). Each test runs against `agentd dev` and gateway+worker.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import anthropic
import pytest
from anthropic.types.beta import BetaManagedAgentsAgent

from harness import BETA_HEADERS, Deployment, assert_error_envelope, collect, unique

EFFORT_LEVELS = {"low", "medium", "high", "xhigh", "max"}
UNKNOWN_AGENT = "agent_pytest_does_not_exist"

CUSTOM_TOOL = {
    "type": "custom",
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
}


def create_agent(client: anthropic.Anthropic, model_id: str, **fields: Any) -> BetaManagedAgentsAgent:
    fields.setdefault("name", unique("agent"))
    return client.beta.agents.create(model=fields.pop("model", model_id), **fields)


def assert_full_agent_json(body: dict[str, Any]) -> None:
    """A server should emit every field of the agent object, `null` where allowed (§3.1)."""
    missing = set(BetaManagedAgentsAgent.model_fields) - set(body)
    assert not missing, f"agent JSON lacks fields {sorted(missing)}: {body}"
    assert body["type"] == "agent"
    assert isinstance(body["model"], dict), f"model must be an object in responses, got {body['model']!r}"


def post_raw(client: anthropic.Anthropic, path: str, body: Any) -> Any:
    """A POST the typed SDK methods cannot express, through the same client and headers."""
    return client.post(path, cast_to=object, body=body, options={"headers": BETA_HEADERS})


# ---------------------------------------------------------------------------------------
# create


def test_create_with_bare_model_string(client: anthropic.Anthropic, model_id: str) -> None:
    name = unique("bare")
    raw = client.beta.agents.with_raw_response.create(name=name, model=model_id)
    agent = raw.parse()
    body = raw.json()
    assert isinstance(body, dict)
    assert_full_agent_json(body)

    assert agent.type == "agent"
    assert agent.id
    assert agent.name == name
    assert agent.version == 1
    assert agent.model.id == model_id
    # "Always present; resolved to the per-model default at save time when not supplied."
    assert isinstance(body["model"].get("effort"), dict), body["model"]
    assert body["model"]["effort"]["type"] in EFFORT_LEVELS
    assert agent.archived_at is None
    assert agent.description is None
    assert agent.system is None
    assert agent.metadata == {}
    assert agent.tools == []
    assert agent.skills == []
    assert agent.mcp_servers == []
    assert agent.multiagent is None
    assert agent.execution_identity.type == "service_account"
    assert agent.created_at.tzinfo is not None
    assert agent.updated_at >= agent.created_at
    assert raw.headers.get("request-id")


def test_create_with_model_config_object(client: anthropic.Anthropic, model_id: str) -> None:
    raw = client.beta.agents.with_raw_response.create(name=unique("effort"), model={"id": model_id, "effort": "high"})
    agent = raw.parse()
    body = raw.json()
    assert isinstance(body, dict)
    assert body["model"]["id"] == model_id
    # Requests may send the bare level; responses always carry the object form.
    assert body["model"]["effort"] == {"type": "high"}
    assert agent.model.effort is not None and agent.model.effort.type == "high"

    # The object form of the level is accepted too.
    other = create_agent(client, model_id, model={"id": model_id, "effort": {"type": "low"}})
    assert other.model.effort is not None and other.model.effort.type == "low"
    assert client.beta.agents.retrieve(other.id).model.effort.type == "low"


def test_create_with_every_kind_of_tool(client: anthropic.Anthropic, model_id: str) -> None:
    mcp_server = {"type": "url", "name": "docs", "url": "https://mcp.example.com/sse"}
    tools = [
        {
            "type": "agent_toolset_20260401",
            "default_config": {"permission_policy": {"type": "always_ask"}},
            "configs": [{"name": "bash", "enabled": False}],
        },
        {"type": "mcp_toolset", "mcp_server_name": "docs"},
        CUSTOM_TOOL,
    ]
    created = create_agent(
        client,
        model_id,
        description="has tools",
        system="You are terse.",
        metadata={"team": "qa"},
        mcp_servers=[mcp_server],
        tools=tools,
    )

    for agent in (created, client.beta.agents.retrieve(created.id)):
        assert [t.type for t in agent.tools] == ["agent_toolset_20260401", "mcp_toolset", "custom"]
        toolset, mcp, custom = agent.tools

        assert toolset.type == "agent_toolset_20260401"
        bash = [c for c in toolset.configs if c.name == "bash"]
        assert len(bash) == 1, toolset.configs
        assert bash[0].type == "bash"
        assert bash[0].enabled is False
        assert toolset.default_config.permission_policy.type == "always_ask"
        assert toolset.default_config.enabled is True  # "Defaults to true if not specified."

        assert mcp.type == "mcp_toolset"
        assert mcp.mcp_server_name == "docs"
        assert isinstance(mcp.configs, list)

        assert custom.type == "custom"
        assert custom.name == CUSTOM_TOOL["name"]
        assert custom.description == CUSTOM_TOOL["description"]
        assert custom.input_schema.type == "object"
        assert custom.input_schema.properties == CUSTOM_TOOL["input_schema"]["properties"]
        assert custom.input_schema.required == ["city"]

        assert [s.model_dump() for s in agent.mcp_servers] == [mcp_server]
        assert agent.description == "has tools"
        assert agent.system == "You are terse."
        assert agent.metadata == {"team": "qa"}


def test_create_accepts_sixteen_metadata_pairs_at_their_size_limits(client: anthropic.Anthropic, model_id: str) -> None:
    metadata = {f"k{i:02d}".ljust(64, "x"): "v" * 512 for i in range(16)}
    agent = create_agent(client, model_id, metadata=metadata)
    assert agent.metadata == metadata


# ---------------------------------------------------------------------------------------
# retrieve


def test_retrieve_latest_and_a_given_version(client: anthropic.Anthropic, model_id: str) -> None:
    first_name, second_name = unique("v1"), unique("v2")
    created = create_agent(client, model_id, name=first_name, system="one")
    updated = client.beta.agents.update(created.id, version=1, name=second_name, system="two")
    assert updated.version == 2

    latest = client.beta.agents.retrieve(created.id)
    assert (latest.id, latest.version, latest.name, latest.system) == (created.id, 2, second_name, "two")

    v1 = client.beta.agents.retrieve(created.id, version=1)
    assert (v1.id, v1.version, v1.name, v1.system) == (created.id, 1, first_name, "one")

    v2 = client.beta.agents.retrieve(created.id, version=2)
    assert (v2.version, v2.name) == (2, second_name)


def test_retrieve_unknown_agent_is_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.beta.agents.retrieve(UNKNOWN_AGENT)
    assert_error_envelope(caught.value.response, 404, "not_found_error")


def test_retrieve_version_out_of_range(client: anthropic.Anthropic, model_id: str) -> None:
    agent = create_agent(client, model_id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.agents.retrieve(agent.id, version=7)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.agents.retrieve(agent.id, version=0)  # "Must be at least 1"
    assert "version" in (caught.value.api_message or "").lower()


# ---------------------------------------------------------------------------------------
# update


def test_update_tri_state_semantics(client: anthropic.Anthropic, model_id: str) -> None:
    name = unique("tri")
    agent = create_agent(
        client,
        model_id,
        name=name,
        description="describes",
        system="instructs",
        metadata={"a": "1", "b": "2"},
        tools=[CUSTOM_TOOL],
    )
    assert agent.version == 1

    # Omitted fields are preserved; a changed field bumps the version.
    renamed = client.beta.agents.update(agent.id, version=1, name=name + "-renamed")
    assert renamed.version == 2
    assert renamed.name == name + "-renamed"
    assert renamed.description == "describes"
    assert renamed.system == "instructs"
    assert renamed.metadata == {"a": "1", "b": "2"}
    assert [t.type for t in renamed.tools] == ["custom"]
    assert renamed.model.id == model_id
    assert renamed.created_at == agent.created_at
    assert renamed.updated_at >= agent.updated_at

    # null clears (sent as JSON null: "system": null).
    cleared = client.beta.agents.update(agent.id, version=2, system=None)
    assert cleared.version == 3
    assert cleared.system in (None, "")
    assert cleared.description == "describes"

    # Metadata is a patch: a string upserts, null deletes, absent keys stay.
    patched = client.beta.agents.update(agent.id, version=3, metadata={"a": None, "c": "3"})
    assert patched.version == 4
    assert patched.metadata == {"b": "2", "c": "3"}

    # Lists are full replacements; null clears them.
    no_tools = client.beta.agents.update(agent.id, version=4, tools=None, description="")
    assert no_tools.version == 5
    assert no_tools.tools == []
    assert no_tools.description in (None, "")
    assert no_tools.metadata == {"b": "2", "c": "3"}

    # The model is replaced as a whole, and the new effort shows in object form.
    remodeled = client.beta.agents.update(agent.id, version=5, model={"id": model_id, "effort": "low"})
    assert remodeled.version == 6
    assert remodeled.model.effort is not None and remodeled.model.effort.type == "low"

    latest = client.beta.agents.retrieve(agent.id)
    assert latest.model_dump() == remodeled.model_dump()
    # Every earlier version is still retrievable as it was.
    assert client.beta.agents.retrieve(agent.id, version=3).metadata == {"a": "1", "b": "2"}


def test_update_without_version_applies_unconditionally(client: anthropic.Anthropic, model_id: str) -> None:
    agent = create_agent(client, model_id)
    first = client.beta.agents.update(agent.id, description="one")
    second = client.beta.agents.update(agent.id, description="two")
    assert (first.version, second.version) == (2, 3)
    assert client.beta.agents.retrieve(agent.id).description == "two"


def test_update_with_stale_version_conflicts_and_changes_nothing(
    agentd: Deployment, model_id: str, recorder: Any
) -> None:
    # Default retries on: a deterministic 409 must carry `x-should-retry: false` so the SDK
    # sends the stale update exactly once.
    client = agentd.client(max_retries=2)
    agent = create_agent(client, model_id, name=unique("stale"), description="kept")
    current = client.beta.agents.update(agent.id, version=1, description="current")
    assert current.version == 2

    mark = recorder.mark()
    with pytest.raises(anthropic.ConflictError) as caught:
        client.beta.agents.update(agent.id, version=1, description="lost update", name="clobbered")
    err = caught.value
    assert err.status_code == 409
    assert err.response.headers.get("x-should-retry") == "false"
    assert_error_envelope(err.response, 409, None)
    attempts = [ex for ex in recorder.since(mark) if ex.method == "POST" and ex.url.endswith(f"/v1/agents/{agent.id}")]
    assert len(attempts) == 1, f"the stale update was sent {len(attempts)} times"

    after = client.beta.agents.retrieve(agent.id)
    assert after.version == 2
    assert after.description == "current"
    assert after.name == agent.name
    assert after.model_dump() == current.model_dump()


def test_update_rejects_empty_name_and_version_zero(client: anthropic.Anthropic, model_id: str) -> None:
    agent = create_agent(client, model_id)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.agents.update(agent.id, name="")
    assert "name" in (caught.value.api_message or "").lower()
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.agents.update(agent.id, version=0, description="x")
    assert "version" in (caught.value.api_message or "").lower()
    assert client.beta.agents.retrieve(agent.id).version == 1


def test_update_unknown_agent_is_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError):
        client.beta.agents.update(UNKNOWN_AGENT, description="x")


# ---------------------------------------------------------------------------------------
# list


def test_list_auto_paginates_with_small_pages(workspace_client: Any, model_id: str) -> None:
    client = workspace_client()  # an empty workspace: the listing is exactly ours
    created = {create_agent(client, model_id).id for _ in range(5)}

    first = client.beta.agents.list(limit=2)
    assert len(first.data) == 2
    assert first.next_page, "a first page of 2 out of 5 must name the next page"
    pages = list(first.iter_pages())
    assert len(pages) == 3, [len(p.data) for p in pages]
    assert all(len(p.data) <= 2 for p in pages)
    assert not pages[-1].next_page, "the last page must have next_page null"

    listed = [a.id for a in collect(client.beta.agents.list(limit=2))]
    assert len(listed) == len(set(listed)), f"duplicates across pages: {listed}"
    assert set(listed) == created


def test_list_include_archived(workspace_client: Any, model_id: str) -> None:
    client = workspace_client()
    kept = create_agent(client, model_id)
    archived = create_agent(client, model_id)
    client.beta.agents.archive(archived.id)

    default = {a.id for a in collect(client.beta.agents.list())}
    assert default == {kept.id}

    everything = {a.id: a for a in collect(client.beta.agents.list(include_archived=True, limit=1))}
    assert set(everything) == {kept.id, archived.id}
    assert everything[archived.id].archived_at is not None
    assert everything[kept.id].archived_at is None
    assert {a.id for a in collect(client.beta.agents.list(include_archived=False))} == {kept.id}


def test_list_created_at_bounds(workspace_client: Any, model_id: str) -> None:
    client = workspace_client()
    early = create_agent(client, model_id)
    late = create_agent(client, model_id)
    for _ in range(50):  # distinct timestamps for an exact split
        if late.created_at > early.created_at:
            break
        time.sleep(0.02)
        late = create_agent(client, model_id)
    assert late.created_at > early.created_at, "created_at never advanced"
    everyone = {a.id: a for a in collect(client.beta.agents.list())}

    since_late = {a.id for a in collect(client.beta.agents.list(created_at_gte=late.created_at))}
    expected = {i for i, a in everyone.items() if a.created_at >= late.created_at}
    assert late.id in since_late, "created_at[gte] is inclusive"
    assert early.id not in since_late
    assert since_late == expected

    until_early = {a.id for a in collect(client.beta.agents.list(created_at_lte=early.created_at))}
    assert early.id in until_early, "created_at[lte] is inclusive"
    assert late.id not in until_early

    future = datetime.now(timezone.utc) + timedelta(days=1)
    assert collect(client.beta.agents.list(created_at_gte=future)) == []
    # A string bound is sent as-is.
    assert collect(client.beta.agents.list(created_at_lte="2000-01-01T00:00:00Z")) == []


@pytest.mark.parametrize("limit", [0, 101])
def test_list_limit_out_of_range_is_rejected(client: anthropic.Anthropic, limit: int) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.agents.list(limit=limit)
    body = assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert "limit" in body["error"]["message"].lower()


# ---------------------------------------------------------------------------------------
# archive


def test_archive(client: anthropic.Anthropic, model_id: str) -> None:
    agent = create_agent(client, model_id)
    archived = client.beta.agents.archive(agent.id)  # POST with an empty body
    assert archived.id == agent.id
    assert archived.archived_at is not None
    assert archived.archived_at >= agent.created_at

    fetched = client.beta.agents.retrieve(agent.id)
    assert fetched.archived_at is not None
    assert agent.id not in {a.id for a in collect(client.beta.agents.list(limit=100))}

    with pytest.raises(anthropic.NotFoundError):
        client.beta.agents.archive(UNKNOWN_AGENT)


# ---------------------------------------------------------------------------------------
# versions


def test_versions_list_returns_every_version(client: anthropic.Anthropic, model_id: str) -> None:
    names = [unique("ver") for _ in range(3)]
    agent = create_agent(client, model_id, name=names[0])
    client.beta.agents.update(agent.id, version=1, name=names[1])
    client.beta.agents.update(agent.id, version=2, name=names[2])

    versions = collect(client.beta.agents.versions.list(agent.id, limit=2))
    assert sorted(v.version for v in versions) == [1, 2, 3], [v.version for v in versions]
    assert all(v.id == agent.id for v in versions)
    by_version = {v.version: v for v in versions}
    assert [by_version[n].name for n in (1, 2, 3)] == names

    # The reference leaves the order open (§2.1); it must be one consistent direction.
    order = [v.version for v in versions]
    assert order in ([1, 2, 3], [3, 2, 1]), f"versions listed out of order: {order}"

    first = client.beta.agents.versions.list(agent.id, limit=2)
    assert len(first.data) == 2 and first.next_page


def test_versions_list_unknown_agent_is_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError):
        collect(client.beta.agents.versions.list(UNKNOWN_AGENT))


# ---------------------------------------------------------------------------------------
# disable (service extension)


def test_disable_extension(client: anthropic.Anthropic, model_id: str) -> None:
    agent = create_agent(client, model_id)
    response = client.post(
        f"/v1/agents/{agent.id}/disable",
        cast_to=object,
        body={},
        options={"headers": BETA_HEADERS},
    )
    assert isinstance(response, dict), response
    assert response.get("id") == agent.id
    assert response.get("type") == "agent"
    assert isinstance(response.get("disabled_at"), str) and response["disabled_at"], response
    # Disabling blocks new sessions; the configuration itself stays readable.
    assert client.beta.agents.retrieve(agent.id).id == agent.id

    with pytest.raises(anthropic.NotFoundError):
        client.post(f"/v1/agents/{UNKNOWN_AGENT}/disable", cast_to=object, body={}, options={"headers": BETA_HEADERS})


# ---------------------------------------------------------------------------------------
# validation


def test_create_without_name_is_rejected(client: anthropic.Anthropic, model_id: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        post_raw(client, "/v1/agents", {"model": model_id})
    body = assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert "name" in body["error"]["message"].lower()


INVALID_CREATES = {
    "name of the wrong type": ({"name": 123}, "name"),
    "unknown effort level": ({"model": {"effort": "turbo"}}, "effort"),
    "unreferenced mcp server": (
        {"mcp_servers": [{"type": "url", "name": "orphan", "url": "https://mcp.example.com/sse"}]},
        "mcp",
    ),
    "seventeen metadata pairs": ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    "metadata key too long": ({"metadata": {"k" * 65: "v"}}, "metadata"),
    "metadata value too long": ({"metadata": {"k": "v" * 513}}, "metadata"),
    "unknown tool type": ({"tools": [{"type": "teleporter"}]}, "tools"),
}


@pytest.mark.parametrize("case", list(INVALID_CREATES), ids=lambda c: c.replace(" ", "-"))
def test_create_validation(client: anthropic.Anthropic, model_id: str, case: str) -> None:
    fields, field_name = INVALID_CREATES[case]
    fields = json.loads(json.dumps(fields))
    fields.setdefault("name", unique("invalid"))
    if isinstance(fields.get("model"), dict):
        fields["model"]["id"] = model_id
    fields.setdefault("model", model_id)
    before = {a.id for a in collect(client.beta.agents.list(limit=100, include_archived=True))}

    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.agents.create(**fields)
    body = assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert field_name in body["error"]["message"].lower(), f"message should name {field_name!r}: {body}"

    after = {a.id for a in collect(client.beta.agents.list(limit=100, include_archived=True))}
    assert after == before, "a rejected create must not store an agent"


def test_malformed_json_is_rejected(agentd: Deployment, http: Any) -> None:
    response = http.post(
        "/v1/agents",
        content=b'{"name": "broken", "model": ',
        headers={**agentd.headers(), "content-type": "application/json"},
    )
    assert_error_envelope(response, 400, "invalid_request_error")
