"""Bounded bodies and responses (docs/api/limits.md): every stored field has a maximum,
refused with `invalid_request_error` naming the field; a whole body past the limit is a
413; a list page ends once it passes its byte bound, with a cursor that skips nothing.
Each test runs against `agentd dev` and gateway+worker.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from harness import BETA_HEADERS, collect, error_body, unique

MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_AGENT_BYTES = 1024 * 1024
MAX_LIST_PAGE_BYTES = 4 * 1024 * 1024


def custom_tool(n: int, description_chars: int) -> dict[str, Any]:
    return {
        "type": "custom",
        "name": f"tool_{n}",
        "description": "d" * description_chars,
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
    }


def refused(call: Any, field: str) -> str:
    """`call` fails with a 400 `invalid_request_error` whose message names `field`."""
    with pytest.raises(anthropic.BadRequestError) as caught:
        call()
    body = error_body(caught.value)
    assert body["error"]["type"] == "invalid_request_error", body
    message = body["error"]["message"]
    assert message.startswith(field), f"expected the message to name {field!r}: {message}"
    return message


def test_fields_past_their_maximum_are_refused_naming_the_field(client: anthropic.Anthropic, model_id: str) -> None:
    agents = client.beta.agents
    refused(lambda: agents.create(name="n" * 257, model=model_id), "name")
    refused(lambda: agents.create(name=unique("a"), model=model_id, description="d" * 2049), "description")
    refused(lambda: agents.create(name=unique("a"), model=model_id, system="s" * 100_001), "system")
    refused(lambda: agents.create(name=unique("a"), model=model_id, metadata={"k": "v" * 513}), "metadata.k")
    refused(lambda: agents.create(name=unique("a"), model=model_id, metadata={"k" * 65: "v"}), "metadata")
    huge_schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    tool = {"type": "custom", "name": "t", "description": "d", "input_schema": huge_schema}
    refused(lambda: agents.create(name=unique("a"), model=model_id, tools=[tool]), "tools[0].input_schema")
    # The parts are each within bounds, the whole is not: 200 × 9,000 characters.
    tools = [custom_tool(n, 9_000) for n in range(200)]
    message = refused(lambda: agents.create(name=unique("a"), model=model_id, tools=tools), "agent")
    assert str(MAX_AGENT_BYTES) in message, message
    # The documented maximum itself is accepted.
    agent = agents.create(name=unique("a"), model=model_id, system="s" * 100_000, metadata={"k" * 64: "v" * 512})
    assert len(agent.system or "") == 100_000

    env = client.beta.environments.create(name=unique("limits"), config={"type": "cloud"})
    refused(lambda: client.beta.environments.create(name="e" * 257, config={"type": "cloud"}), "name")
    sessions = client.beta.sessions
    refused(lambda: sessions.create(agent=agent.id, environment_id=env.id, title="t" * 1025), "title")
    many = {f"k{i}": "v" for i in range(17)}
    refused(lambda: sessions.create(agent=agent.id, environment_id=env.id, metadata=many), "metadata")
    refused(lambda: client.beta.vaults.create(display_name="v" * 256), "display_name")


def test_a_body_past_the_limit_is_a_managed_413(client: anthropic.Anthropic, model_id: str) -> None:
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.post(
            "/v1/agents",
            cast_to=object,
            body={"name": unique("big"), "model": model_id, "system": "s" * (MAX_BODY_BYTES + 1)},
            options={"headers": BETA_HEADERS},
        )
    assert caught.value.status_code == 413, caught.value
    body = error_body(caught.value)
    assert body["type"] == "error" and body["error"]["type"] == "request_too_large", body


def test_session_lists_of_the_largest_agents_end_pages_by_bytes_and_skip_nothing(
    client: anthropic.Anthropic, model_id: str
) -> None:
    # Close to the largest allowed agent: ~0.9 MiB of configuration.
    tools = [custom_tool(n, 9_000) for n in range(90)]
    agent = client.beta.agents.create(name=unique("large"), model=model_id, system="s" * 100_000, tools=tools)
    env = client.beta.environments.create(name=unique("large"), config={"type": "cloud"})
    made = [client.beta.sessions.create(agent=agent.id, environment_id=env.id, title=f"s{i}").id for i in range(7)]

    first = client.beta.sessions.with_raw_response.list(agent_id=agent.id, limit=100)
    page = first.parse()
    size = len(first.http_response.content)
    assert 0 < len(page.data) < len(made), f"a {size}-byte page of {len(page.data)} sessions"
    assert size < MAX_LIST_PAGE_BYTES + MAX_AGENT_BYTES + 64 * 1024, size
    assert page.next_page, "a page cut by bytes says there is more"
    assert [s.id for s in page.data] == made[::-1][: len(page.data)]

    # Auto-pagination sees every session once, in order, both ways.
    newest_first = [s.id for s in collect(client.beta.sessions.list(agent_id=agent.id, limit=100))]
    assert newest_first == made[::-1]
    oldest_first = [s.id for s in collect(client.beta.sessions.list(agent_id=agent.id, limit=100, order="asc"))]
    assert oldest_first == made
    second = client.beta.sessions.list(agent_id=agent.id, limit=100, page=page.next_page)
    assert second.prev_page, "the second page leads back"
    back = client.beta.sessions.list(agent_id=agent.id, limit=100, page=second.prev_page)
    assert [s.id for s in back.data] == [s.id for s in page.data]

    # A listed session embeds its agent exactly as retrieve does.
    listed = page.data[0]
    retrieved = client.beta.sessions.retrieve(listed.id)
    assert listed.agent.model_dump() == retrieved.agent.model_dump()
    assert retrieved.agent.id == agent.id and retrieved.agent.version == agent.version
    assert len(retrieved.agent.tools) == 90 and retrieved.agent.system == agent.system
