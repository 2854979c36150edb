"""Dreams: every method of `client.beta.dreams`, the create refusals of
docs/api/dreams.md, the lifecycle (pending → running → completed | failed | canceled) run
as a session of the built-in dream agent whose `memory` tool the worker runs, cancel and
archive, the reach of other workspaces, a worker SIGKILLed mid-dream, and the dream policy
extension with its scheduler under two gateways and two workers.

Wire facts: managed-agents-wire.md §2.15 (routes and rules), §2B.12 (DreamCreateParams),
§3.13 (BetaDream), §1.4 (`dreaming-2026-04-21`); prior-art.md §2.4 (the dream policy).
The model is the scripted fake of fake_models.py: a dream's system prompt carries its
`instructions`, so a token in them keys the fake's replies. Strict response validation
is on.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable

import anthropic
import httpx
import pytest

from fake_models import FakeAnthropic, Reply, call, say, text, tool_use
from harness import Deployment, collect, error_body, unique

MODEL = "claude-sonnet-4-6"
DREAMING = "dreaming-2026-04-21"
MISSING_SESSION = "sesn_" + "0" * 26
MISSING_STORE = "memstore_" + "0" * 26
DREAM_TIMEOUT = 60.0

# ---------------------------------------------------------------------------------------
# Helpers


@pytest.fixture
def client(turns: Deployment) -> anthropic.Anthropic:
    return turns.client()


def user_message(value: str) -> dict[str, Any]:
    return {"type": "user.message", "content": [{"type": "text", "text": value}]}


_ENVIRONMENTS: dict[str, str] = {}


def environment(client: anthropic.Anthropic, deployment: Deployment) -> str:
    if deployment.url not in _ENVIRONMENTS:
        _ENVIRONMENTS[deployment.url] = client.beta.environments.create(
            name=unique("dream-env"), config={"type": "cloud"}
        ).id
    return _ENVIRONMENTS[deployment.url]


def finished_session(
    client: anthropic.Anthropic, deployment: Deployment, text: str, memory_store: str | None = None
) -> str:
    """A session (agent without tools, so no hands) whose one turn has ended."""
    agent = client.beta.agents.create(name=unique("dreamed"), model=MODEL)
    resources = [{"type": "memory_store", "memory_store_id": memory_store}] if memory_store else []
    session = client.beta.sessions.create(
        agent=agent.id, environment_id=environment(client, deployment), resources=resources
    )
    client.beta.sessions.events.send(session.id, events=[user_message(text)])
    deadline = time.monotonic() + 30
    while client.beta.sessions.retrieve(session.id).status != "idle" or not any(
        e.type == "session.status_idle" for e in collect(client.beta.sessions.events.list(session.id, limit=100))
    ):
        assert time.monotonic() < deadline, "the session's turn did not end"
        time.sleep(0.05)
    return session.id


def new_store(client: anthropic.Anthropic, **memories: str) -> str:
    store = client.beta.memory_stores.create(name=unique("dream-store"))
    for path, content in memories.items():
        client.beta.memory_stores.memories.create(store.id, path=path, content=content)
    return store.id


def inputs(store_id: str, session_ids: list[str]) -> list[dict[str, Any]]:
    return [
        {"type": "memory_store", "memory_store_id": store_id},
        {"type": "sessions", "session_ids": session_ids},
    ]


def wait_dream(client: anthropic.Anthropic, dream_id: str, statuses: set[str], timeout: float = DREAM_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        dream = client.beta.dreams.retrieve(dream_id)
        if dream.status in statuses:
            return dream
        if time.monotonic() > deadline:
            pytest.fail(f"dream {dream_id} did not reach {statuses} within {timeout:.0f} s: {dream.status}")
        time.sleep(0.1)


def memories_of(client: anthropic.Anthropic, store_id: str) -> dict[str, str]:
    """Path → content of every memory of a store."""
    out: dict[str, str] = {}
    for item in collect(client.beta.memory_stores.memories.list(store_id, limit=100)):
        if item.type == "memory":
            out[item.path] = client.beta.memory_stores.memories.retrieve(item.id, memory_store_id=store_id).content
    return out


def refused(call_: Callable[[], Any], status: int, *fragments: str) -> dict[str, Any]:
    with pytest.raises(anthropic.APIStatusError) as caught:
        call_()
    body = error_body(caught.value)
    assert caught.value.status_code == status, (caught.value.status_code, body)
    for fragment in fragments:
        assert fragment in body["error"]["message"], (fragment, body)
    return body


def transcript_view(session_id: str) -> Reply:
    return call("memory", {"command": "view", "path": f"/transcripts/{session_id}.md"})


def tool_results(fake: FakeAnthropic, key: str) -> list[str]:
    """The text of every tool result the dream's model requests carried (last request)."""
    requests = fake.received(key)
    assert requests, f"the model was never asked for {key}"
    texts = []
    for message in requests[-1].body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content")
                texts.append(
                    content if isinstance(content, str) else "".join(c.get("text", "") for c in content or [])
                )
    return texts


# ---------------------------------------------------------------------------------------
# Create refusals


def test_create_refusals_name_the_field(client: anthropic.Anthropic, turns: Deployment) -> None:
    store = new_store(client)
    session = finished_session(client, turns, unique("refusal"))
    create = client.beta.dreams.create
    ok_inputs = inputs(store, [session])

    refused(lambda: create(inputs=[ok_inputs[0]], model=MODEL), 400, "inputs", "exactly one")
    refused(lambda: create(inputs=[ok_inputs[0], ok_inputs[0], ok_inputs[1]], model=MODEL), 400, "inputs")
    refused(lambda: create(inputs=inputs(store, []), model=MODEL), 400, "inputs[1].session_ids")
    too_many = [f"sesn_{n:026d}" for n in range(101)]
    refused(lambda: create(inputs=inputs(store, too_many), model=MODEL), 400, "inputs[1].session_ids", "100")
    refused(
        lambda: create(inputs=inputs(store, [session, session]), model=MODEL), 400, "inputs[1].session_ids[1]"
    )
    refused(lambda: create(inputs=inputs(store, [session, MISSING_SESSION]), model=MODEL), 400, "session_ids[1]")
    refused(lambda: create(inputs=inputs(store, ["nope"]), model=MODEL), 400, "inputs[1].session_ids[0]")
    refused(lambda: create(inputs=inputs(MISSING_STORE, [session]), model=MODEL), 400, "inputs[0].memory_store_id")
    refused(lambda: create(inputs=ok_inputs, model={"id": MODEL, "speed": "fast"}), 400, "model.speed")
    refused(lambda: create(inputs=ok_inputs, model="no-such-model"), 400, "model")
    refused(lambda: create(inputs=ok_inputs, model=MODEL, instructions=""), 400, "instructions")
    refused(lambda: create(inputs=ok_inputs, model=MODEL, instructions="x" * 4097), 400, "instructions")
    other = new_store(client)
    refused(
        lambda: create(
            inputs=ok_inputs, model=MODEL, output_behavior={"type": "update_existing", "memory_store_id": other}
        ),
        400,
        "output_behavior.memory_store_id",
    )
    archived = new_store(client)
    client.beta.memory_stores.archive(archived)
    refused(lambda: create(inputs=inputs(archived, [session]), model=MODEL), 400, "inputs[0].memory_store_id", "archived")
    # Another workspace's session and store are not this workspace's.
    foreign = turns.client(turns.create_key(unique("dream-foreign")))
    refused(lambda: foreign.beta.dreams.create(inputs=ok_inputs, model=MODEL), 400, "inputs[0].memory_store_id")

    # The selector is required.
    http = turns.http()
    response = http.post(
        "/v1/dreams",
        json={"inputs": ok_inputs, "model": MODEL},
        headers={"authorization": f"Bearer {turns.bootstrap_key}"},
    )
    assert response.status_code == 400 and DREAMING in response.json()["error"]["message"], response.text
    # A credential narrower than an API key may not start dreams (they write memory stores).
    env_key = turns.create_environment_key(environment(client, turns))
    response = http.post(
        "/v1/dreams",
        json={"inputs": ok_inputs, "model": MODEL, "output_behavior": {"type": "update_existing", "memory_store_id": store}},
        headers={"authorization": f"Bearer {env_key}", "anthropic-beta": DREAMING},
    )
    assert response.status_code == 403, response.text
    assert client.beta.dreams.list(limit=100).data == [] or all(
        d.inputs[0].memory_store_id != store for d in collect(client.beta.dreams.list(limit=100))
    ), "no refused request created a dream"


def test_a_second_update_existing_dream_on_a_store_is_a_conflict(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("dreamhold")
    gate = unique("gate")
    # The first dream's model request is held, so it stays running.
    fake_anthropic.script(key, Reply(blocks=[text("later")], gate=gate))
    store = new_store(client, **{"/a.md": "a"})
    session = finished_session(client, turns, unique("conflict"))
    behavior = {"type": "update_existing", "memory_store_id": store}
    first = client.beta.dreams.create(inputs=inputs(store, [session]), model=MODEL, instructions=key, output_behavior=behavior)
    assert (first.status, first.outputs, first.session_id) == ("pending", [], None)
    assert first.output_behavior.type == "update_existing"
    refused(
        lambda: client.beta.dreams.create(inputs=inputs(store, [session]), model=MODEL, output_behavior=behavior),
        409,
        "update_existing",
    )
    # create_new dreams of the same store are not held back.
    client.beta.dreams.cancel(
        client.beta.dreams.create(inputs=inputs(store, [session]), model=MODEL, instructions=unique("free")).id
    )
    canceled = client.beta.dreams.cancel(first.id)
    assert canceled.status == "canceled" and canceled.ended_at is not None
    fake_anthropic.open_gate(gate)
    again = client.beta.dreams.create(inputs=inputs(store, [session]), model=MODEL, output_behavior=behavior)
    client.beta.dreams.cancel(again.id)


# ---------------------------------------------------------------------------------------
# A dream over two sessions


def test_a_dream_reads_two_transcripts_and_writes_a_new_store(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    first_fact, second_fact = unique("tea"), unique("cats")
    first = finished_session(client, turns, f"Remember: I like {first_fact}.")
    second = finished_session(client, turns, f"Also note that {second_fact} are my favourite.")
    store = new_store(client, **{"/notes.md": "old notes\n"})
    key = unique("dreamkey")
    summary = f"# Summary\n- likes {first_fact}\n- favourite {second_fact}\n"
    fake_anthropic.script(
        key,
        call("memory", {"command": "view", "path": "/transcripts/"}),
        transcript_view(first),
        transcript_view(second),
        call("memory", {"command": "view", "path": "/memories/notes.md"}),
        call("memory", {"command": "create", "path": "/memories/summary.md", "file_text": summary}),
        call("memory", {"command": "view", "path": "/etc/passwd"}),
        say("Consolidated the sessions into /memories/summary.md.", input_tokens=100, output_tokens=20),
    )
    dream = client.beta.dreams.create(
        inputs=inputs(store, [second, first]), model=MODEL, instructions=f"Keep it short. {key}"
    )
    assert dream.type == "dream" and dream.status == "pending"
    assert dream.inputs[1].session_ids == sorted([first, second]), "ids are listed sorted"
    assert dream.model.id == MODEL and dream.model.speed == "standard", "the model is always an object"
    assert dream.output_behavior.type == "create_new"
    assert dream.usage.input_tokens == 0 and dream.ended_at is None and dream.error is None

    done = wait_dream(client, dream.id, {"completed", "failed", "canceled"})
    assert done.status == "completed", done
    assert done.session_id and done.session_id.startswith("sesn_") and done.ended_at is not None
    (output,) = done.outputs
    assert output.type == "memory_store" and output.memory_store_id != store
    assert done.usage.input_tokens >= 100 and done.usage.output_tokens >= 20, done.usage

    # The model read both transcripts and the copied note, and was refused a path outside.
    results = tool_results(fake_anthropic, key)
    assert any(first_fact in r for r in results) and any(second_fact in r for r in results), results
    assert any("old notes" in r for r in results), results
    assert any("paths start with /memories/ or /transcripts/" in r for r in results), results

    written = memories_of(client, output.memory_store_id)
    assert written == {"/notes.md": "old notes\n", "/summary.md": summary}, written
    assert memories_of(client, store) == {"/notes.md": "old notes\n"}, "the input store is not changed"
    out_store = client.beta.memory_stores.retrieve(output.memory_store_id)
    assert out_store.name.endswith("(dream)"), out_store.name
    versions = collect(client.beta.memory_stores.memory_versions.list(output.memory_store_id, limit=100))
    assert versions and all(
        v.created_by.type == "session_actor" and v.created_by.session_id == done.session_id for v in versions
    ), versions
    assert sorted(v.path for v in versions) == ["/notes.md", "/summary.md"]
    # The dream's session is a session of the workspace with the dream's events; it
    # takes no input from clients.
    events = collect(client.beta.sessions.events.list(done.session_id, limit=200))
    assert [e.type for e in events].count("session.status_idle") == 1
    refused(
        lambda: client.beta.sessions.events.send(done.session_id, events=[user_message("more")]),
        400,
        "takes no new turns",
    )
    dream_session = client.beta.sessions.retrieve(done.session_id)
    assert dream_session.environment_id == "" and dream_session.status == "idle"
    assert [(t.type, t.name) for t in dream_session.agent.tools] == [("custom", "memory")]
    assert dream_session.agent.model.id == MODEL and dream.instructions in (dream_session.agent.system or "")
    assert done.session_id in [s.id for s in collect(client.beta.sessions.list(limit=100))]

    # Archive only once ended; cancel refused once completed.
    refused(lambda: client.beta.dreams.cancel(dream.id), 400, "completed")
    archived = client.beta.dreams.archive(dream.id)
    assert archived.archived_at is not None
    assert client.beta.dreams.archive(dream.id).archived_at == archived.archived_at, "archive is idempotent"


def test_update_existing_writes_into_the_input_store(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    fact = unique("fact")
    session = finished_session(client, turns, f"The deadline is {fact}.")
    store = new_store(client, **{"/deadlines.md": "none yet\n"})
    key = unique("inplace")
    fake_anthropic.script(
        key,
        transcript_view(session),
        call(
            "memory",
            {"command": "str_replace", "path": "/memories/deadlines.md", "old_str": "none yet", "new_str": fact},
        ),
        call("memory", {"command": "rename", "old_path": "/memories/deadlines.md", "new_path": "/memories/dates.md"}),
        say("Updated."),
    )
    dream = client.beta.dreams.create(
        inputs=inputs(store, [session]),
        model={"id": MODEL},
        instructions=key,
        output_behavior={"type": "update_existing", "memory_store_id": store},
    )
    assert dream.output_behavior.type == "update_existing" and dream.output_behavior.memory_store_id == store
    done = wait_dream(client, dream.id, {"completed", "failed"})
    assert done.status == "completed", done
    assert [o.memory_store_id for o in done.outputs] == [store]
    assert memories_of(client, store) == {"/dates.md": f"{fact}\n"}
    modified = collect(client.beta.memory_stores.memory_versions.list(store, limit=100, operation="modified"))
    assert len(modified) == 2 and all(v.created_by.session_id == done.session_id for v in modified), modified


def test_a_dream_whose_model_fails_ends_failed_with_an_error(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    session = finished_session(client, turns, unique("failing"))
    key = unique("dreamfail")
    fake_anthropic.script(key, *[Reply(status=400, error_type="invalid_request_error", error_message="bad") for _ in range(5)])
    dream = client.beta.dreams.create(inputs=inputs(new_store(client), [session]), model=MODEL, instructions=key)
    done = wait_dream(client, dream.id, {"completed", "failed"})
    assert done.status == "failed" and done.error is not None, done
    assert done.error.type and done.error.message, done.error
    refused(lambda: client.beta.dreams.cancel(dream.id), 400, "failed")


# ---------------------------------------------------------------------------------------
# List, cancel, archive, other workspaces


def test_list_filters_cancel_and_archive(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    ws = turns.client(turns.create_key(unique("dream-list")))
    env = ws.beta.environments.create(name=unique("env"), config={"type": "cloud"}).id
    agent = ws.beta.agents.create(name=unique("a"), model=MODEL)
    session = ws.beta.sessions.create(agent=agent.id, environment_id=env).id
    store = ws.beta.memory_stores.create(name=unique("s")).id
    gate = unique("gate")
    held = []
    for n in range(3):
        key = unique(f"held{n}")
        fake_anthropic.script(key, Reply(blocks=[text("z")], gate=gate))
        held.append(ws.beta.dreams.create(inputs=inputs(store, [session]), model=MODEL, instructions=key))
        time.sleep(0.01)
    ids = [d.id for d in held]
    listed = collect(ws.beta.dreams.list())
    assert [d.id for d in listed] == ids[::-1], "newest first"
    page = ws.beta.dreams.list(limit=2)
    assert [d.id for d in page.data] == ids[:0:-1] and page.next_page
    assert [d.id for d in collect(ws.beta.dreams.list(limit=2))] == ids[::-1], "pages follow"
    between = collect(ws.beta.dreams.list(created_at_gt=held[0].created_at, created_at_lt=held[2].created_at))
    assert [d.id for d in between] == [ids[1]], "created_at bounds are exclusive"

    refused(lambda: ws.beta.dreams.archive(ids[0]), 400, "archived")
    canceled = ws.beta.dreams.cancel(ids[0])
    assert canceled.status == "canceled" and canceled.ended_at
    assert ws.beta.dreams.cancel(ids[0]).ended_at == canceled.ended_at, "cancel is idempotent"
    assert [d.id for d in collect(ws.beta.dreams.list(statuses=["canceled"]))] == [ids[0]]
    open_ids = {d.id for d in collect(ws.beta.dreams.list(statuses=["pending", "running"]))}
    assert open_ids == set(ids[1:]), open_ids
    ws.beta.dreams.archive(ids[0])
    assert ids[0] not in [d.id for d in collect(ws.beta.dreams.list())], "archived dreams are left out"
    assert ids[0] in [d.id for d in collect(ws.beta.dreams.list(include_archived=True))]
    response = turns.http().get(
        "/v1/dreams", params={"statuses[]": "sleeping"}, headers=turns.headers(ws.api_key, beta=False) | {"anthropic-beta": DREAMING}
    )
    assert response.status_code == 400 and "statuses" in response.json()["error"]["message"], response.text

    # Another workspace: every dream route is a 404.
    other = turns.client()
    for attempt in (other.beta.dreams.retrieve, other.beta.dreams.cancel, other.beta.dreams.archive):
        refused(lambda: attempt(ids[1]), 404)
    assert ids[1] not in [d.id for d in collect(other.beta.dreams.list(limit=100))]
    for dream_id in ids[1:]:
        ws.beta.dreams.cancel(dream_id)
    fake_anthropic.open_gate(gate)


# ---------------------------------------------------------------------------------------
# A worker SIGKILLed mid-dream


def test_a_dream_whose_worker_is_killed_ends_exactly_once(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    env = dict(provider_env, AGENTD_LEASE="1s", AGENTD_QUEUE_ACK_WAIT="1s", AGENTD_DRAIN_TIMEOUT="3s")
    deployment = launch("prod", extra_env=env)
    client = deployment.client()
    session = finished_session(client, deployment, unique("killed"))
    key, gate = unique("dreamkill"), unique("gate")
    summary = "# Summary\nsurvived a crash\n"
    create_summary = {"command": "create", "path": "/memories/summary.md", "file_text": summary}
    fake_anthropic.script(
        key,
        transcript_view(session),
        # Held while the worker is killed: the connection dies with it.
        Reply(blocks=[tool_use("memory", create_summary)], stop_reason="tool_use", gate=gate),
        # The next worker makes the request again.
        call("memory", create_summary),
        say("done"),
    )
    dream = client.beta.dreams.create(inputs=inputs(new_store(client), [session]), model=MODEL, instructions=key)
    fake_anthropic.wait_requests(key, 2, timeout=30)
    (worker,) = deployment.workers()
    os.kill(worker.pid, signal.SIGKILL)
    worker.proc.wait(timeout=10)
    deployment.start_worker()
    fake_anthropic.open_gate(gate)
    done = wait_dream(client, dream.id, {"completed", "failed", "canceled"})
    assert done.status == "completed", done
    (output,) = done.outputs
    assert memories_of(client, output.memory_store_id) == {"/summary.md": summary}
    versions = collect(client.beta.memory_stores.memory_versions.list(output.memory_store_id, limit=100))
    assert [(v.operation, v.path) for v in versions] == [("created", "/summary.md")], "one summary version"
    requests = fake_anthropic.received(key)
    assert not requests[1].finished, "the killed worker's request never completed"
    assert len(requests) == 4, f"the cut request was made again once, then the turn ended: {len(requests)}"
    time.sleep(2)
    again = client.beta.dreams.retrieve(dream.id)
    assert (again.status, again.ended_at) == ("completed", done.ended_at), "it ended once"
    idles = [e for e in collect(client.beta.sessions.events.list(done.session_id, limit=500)) if e.type == "session.status_idle"]
    assert len(idles) == 1 and idles[0].stop_reason.type == "end_turn", idles


# ---------------------------------------------------------------------------------------
# The dream policy


def policy_url(store: str) -> str:
    return f"/v1/ext/memory-stores/{store}/dream-policy"


def test_dream_policy_defaults_validation_and_reach(client: anthropic.Anthropic, turns: Deployment) -> None:
    store = new_store(client)
    http = turns.http()
    headers = turns.headers()
    got = http.get(policy_url(store), headers=headers)
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["type"] == "dream_policy" and body["memory_store_id"] == store
    assert (body["enabled"], body["interval_seconds"], body["min_new_sessions"], body["max_sessions"]) == (
        False,
        86400,
        5,
        100,
    )
    assert body["next_due_at"] is None and body["last_completed_cutoff_at"] is None
    for bad, field in [
        ({"interval_seconds": 59}, "interval_seconds"),
        ({"enabled": "yes"}, "enabled"),
        ({"model": {"id": MODEL, "speed": "fast"}}, "model.speed"),
        ({"max_sessions": 101}, "max_sessions"),
        ({"min_new_sessions": 9, "max_sessions": 3}, "min_new_sessions"),
        ({"instructions": ""}, "instructions"),
        ({"cadence": 1}, "cadence"),
    ]:
        response = http.put(policy_url(store), json=bad, headers=headers)
        assert response.status_code == 400, (bad, response.text)
        assert set(response.json()) == {"error"} and field in response.json()["error"], (bad, response.text)
    put = http.put(
        policy_url(store),
        json={"enabled": True, "interval_seconds": 3600, "min_new_sessions": 2, "max_sessions": 10, "model": MODEL},
        headers=headers,
    )
    assert put.status_code == 200, put.text
    assert put.json()["enabled"] is True and put.json()["next_due_at"], put.json()
    assert http.get(policy_url(store), headers=headers).json() == put.json()
    missing = http.get(policy_url(MISSING_STORE), headers=headers)
    assert missing.status_code == 404 and set(missing.json()) == {"error"}, missing.text
    foreign_key = turns.create_key(unique("dream-policy-foreign"))
    foreign = http.get(policy_url(store), headers=turns.headers(foreign_key))
    assert foreign.status_code == 404, foreign.text


@pytest.mark.parametrize("mode", ["dev", "prod"])
def test_a_dream_policy_fires_once_per_due_tick(
    mode: str, launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    env = dict(provider_env, AGENTD_TEST_DREAM_MIN_INTERVAL_SECS="1", AGENTD_DRAIN_TIMEOUT="3s")
    deployment = launch(mode, extra_env=env)
    urls = [deployment.url]
    if mode == "prod":
        # Two gateways (each runs the scheduler) and two workers.
        urls.append(deployment.start_gateway())
        deployment.start_worker()
    client = deployment.client()
    store = new_store(client, **{"/seed.md": "seed"})
    first = finished_session(client, deployment, unique("p1"), memory_store=store)
    second = finished_session(client, deployment, unique("p2"), memory_store=store)
    key = unique("policykey")
    fake_anthropic.script(key, *[say("consolidated") for _ in range(5)])
    http = deployment.http()
    interval = 2
    put = http.put(
        policy_url(store),
        json={
            "enabled": True,
            "interval_seconds": interval,
            "min_new_sessions": 2,
            "max_sessions": 10,
            "model": {"id": MODEL, "speed": "standard"},
            "instructions": key,
        },
        headers=deployment.headers(),
    )
    assert put.status_code == 200, put.text

    def policy_dreams() -> list[Any]:
        return [d for d in collect(client.beta.dreams.list(limit=100)) if d.inputs[0].memory_store_id == store]

    deadline = time.monotonic() + 30
    while not policy_dreams():
        assert time.monotonic() < deadline, "the policy did not fire"
        time.sleep(0.2)
    (dream,) = policy_dreams()
    assert dream.inputs[1].session_ids == sorted([first, second])
    assert dream.output_behavior.type == "update_existing", "a policy consolidates its store in place"
    done = wait_dream(client, dream.id, {"completed", "failed"})
    assert done.status == "completed", done
    # Several due ticks later: no new session, so no second dream, on any gateway.
    time.sleep(interval * 3)
    assert [d.id for d in policy_dreams()] == [dream.id], "exactly one dream for the due ticks"
    policy = http.get(policy_url(store), headers=deployment.headers()).json()
    assert policy["last_completed_cutoff_at"] is not None, policy
    # Fewer than min_new_sessions new sessions: the schedule only advances.
    finished_session(client, deployment, unique("p3"), memory_store=store)
    time.sleep(interval * 2)
    assert [d.id for d in policy_dreams()] == [dream.id]
    # A second one: the next due tick dreams over both, once.
    finished_session(client, deployment, unique("p4"), memory_store=store)
    deadline = time.monotonic() + 30
    while len(policy_dreams()) < 2:
        assert time.monotonic() < deadline, "the policy did not fire again"
        time.sleep(0.2)
    time.sleep(interval * 2)
    dreams = policy_dreams()
    assert len(dreams) == 2 and len(dreams[0].inputs[1].session_ids) == 2, dreams
    for url in urls:
        answer = httpx.get(f"{url}{policy_url(store)}", headers=deployment.headers(), trust_env=False)
        assert answer.status_code == 200 and answer.json()["enabled"] is True
