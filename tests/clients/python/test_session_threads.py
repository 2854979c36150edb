"""Session threads at work (docs/api/multiagent.md, ADR 0022): a coordinator's primary thread
spawns subagents as session threads through its `spawn_thread` tool, messages them through
`message_thread` and consults an advisor through `consult_advisor`; every thread runs under
the same durable machinery as the primary (its own run, fenced claims, retry budget).

Wire facts: managed-agents-wire.md §2.5 (thread routes), §3.3 (the thread resource), §4
(`session.thread_created`, `session.thread_status_*`, `agent.thread_message_sent` /
`_received`, `session_thread_id` on cross-posted events and on `user.interrupt`). The model
is the fake of fake_models.py, keyed by content: the primary's requests carry the user's
message, a child's requests carry the message it was spawned with. Every test runs against
`agentd dev` and gateway+worker (fixture `turns`).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable

import anthropic
import httpx
import pytest

from fake_models import FakeAnthropic, Reply, Usage, http_error, say, text, tool_use
from harness import Deployment, collect, unique

MODEL = "claude-sonnet-4-6"
TURN_TIMEOUT = 30.0
SPAWN = "spawn_thread"
MESSAGE = "message_thread"
ADVISE = "consult_advisor"


@pytest.fixture
def client(turns: Deployment) -> anthropic.Anthropic:
    return turns.client()


_ENVIRONMENTS: dict[str, str] = {}


def environment(client: anthropic.Anthropic, deployment: Deployment) -> str:
    if deployment.url not in _ENVIRONMENTS:
        env = client.beta.environments.create(name=unique("threads-env"), config={"type": "cloud"})
        _ENVIRONMENTS[deployment.url] = env.id
    return _ENVIRONMENTS[deployment.url]


def subagent(client: anthropic.Anthropic, role: str) -> Any:
    return client.beta.agents.create(
        name=unique(role), model=MODEL, description=f"The {role}.", system=f"You are the {role}."
    )


def coordinator(client: anthropic.Anthropic, *members: Any, **multiagent: Any) -> Any:
    config = multiagent or {"type": "coordinator", "agents": [m.id for m in members]}
    return client.beta.agents.create(name=unique("coordinator"), model=MODEL, multiagent=config)


def start(client: anthropic.Anthropic, deployment: Deployment, agent: Any, message: str) -> Any:
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment(client, deployment))
    client.beta.sessions.events.send(
        session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": message}]}]
    )
    return session


def spawn(agent_name: str, message: str) -> dict[str, Any]:
    return tool_use(SPAWN, {"agent": agent_name, "message": message})


def calls(*blocks: dict[str, Any]) -> Reply:
    return Reply(blocks=list(blocks), stop_reason="tool_use")


def history(client: anthropic.Anthropic, session_id: str) -> list[Any]:
    return collect(client.beta.sessions.events.list(session_id, limit=1000))


def thread_history(client: anthropic.Anthropic, session_id: str, thread_id: str) -> list[Any]:
    return collect(client.beta.sessions.threads.events.list(thread_id, session_id=session_id, limit=1000))


def types_of(events: Iterable[Any]) -> list[str]:
    return [e.type for e in events]


def of_type(events: Iterable[Any], type_: str) -> list[Any]:
    return [e for e in events if e.type == type_]


def texts(event: Any) -> str:
    return "".join(b.text for b in (event.content or []) if getattr(b, "type", None) == "text")


def result_text(event: Any) -> str:
    content = event.content or []
    return "".join(b.text for b in content if getattr(b, "type", None) == "text")


def wait_until(probe: Callable[[], Any], what: str, timeout: float = TURN_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not reached within {timeout:.0f} s")
        time.sleep(0.05)


def wait_session(client: anthropic.Anthropic, session_id: str, status: str) -> Any:
    return wait_until(
        lambda: (s := client.beta.sessions.retrieve(session_id)).status == status and s, f"session {status}"
    )


def wait_idle(client: anthropic.Anthropic, session_id: str, count: int = 1) -> list[Any]:
    def probe() -> list[Any] | None:
        events = history(client, session_id)
        idles = [e for e in of_type(events, "session.status_idle")]
        return events if len(idles) >= count and client.beta.sessions.retrieve(session_id).status == "idle" else None

    return wait_until(probe, "session idle")


def children(client: anthropic.Anthropic, session_id: str) -> list[Any]:
    threads = collect(client.beta.sessions.threads.list(session_id))
    return [t for t in threads if t.parent_thread_id]


# ---------------------------------------------------------------------------------------


def test_coordinator_runs_two_subagents_in_parallel_and_idles_only_when_both_are_done(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    researcher, writer = subagent(client, "researcher"), subagent(client, "writer")
    boss = coordinator(client, researcher, writer)
    key = unique("fanout")
    alpha, beta = unique("alpha"), unique("beta")
    fake_anthropic.script(key, calls(spawn(researcher.name, alpha), spawn(writer.name, beta)), say(f"both done {key}"))
    gate = unique("gate")
    fake_anthropic.script(alpha, Reply(blocks=[text("alpha found it")], gate=gate))
    fake_anthropic.script(beta, say("beta wrote it"))

    session = start(client, turns, boss, key)

    # The writer finishes while the researcher is still held: the session keeps running.
    def writer_idle() -> Any:
        threads = children(client, session.id)
        return len(threads) == 2 and [t for t in threads if t.agent.name == writer.name and t.status == "idle"]

    wait_until(writer_idle, "the writer's thread idle")
    running = client.beta.sessions.retrieve(session.id)
    assert running.status == "running", "a session is idle only when every thread is"
    listed = collect(client.beta.sessions.threads.list(session.id, statuses=["running"]))
    assert {t.agent.name for t in listed} >= {researcher.name}
    assert writer.name not in {t.agent.name for t in listed}

    fake_anthropic.open_gate(gate)
    events = wait_idle(client, session.id)

    # The primary's view: both spawns, the cross-posted thread statuses, the final answer.
    created = of_type(events, "session.thread_created")
    assert sorted(e.agent_name for e in created) == sorted([researcher.name, writer.name])
    thread_ids = {e.agent_name: e.session_thread_id for e in created}
    assert all(t.startswith("sthr_") for t in thread_ids.values())
    sent = of_type(events, "agent.thread_message_sent")
    assert {(e.to_session_thread_id, texts(e)) for e in sent} == {
        (thread_ids[researcher.name], alpha),
        (thread_ids[writer.name], beta),
    }
    replies = [e for e in of_type(events, "agent.thread_message_received")]
    assert {(e.from_session_thread_id, texts(e)) for e in replies} == {
        (thread_ids[researcher.name], "alpha found it"),
        (thread_ids[writer.name], "beta wrote it"),
    }
    uses = [e for e in of_type(events, "agent.tool_use") if e.name == SPAWN]
    results = {e.tool_use_id: e for e in of_type(events, "agent.tool_result")}
    assert len(uses) == 2
    for use in uses:
        result = results[use.id]
        assert not result.is_error
        assert thread_ids[next(n for n in thread_ids if n in str(use.input))] in result_text(result)
    cross_posted = [e for e in of_type(events, "session.thread_status_idle")]
    assert {e.session_thread_id for e in cross_posted} == set(thread_ids.values())
    assert texts(of_type(events, "agent.message")[-1]) == f"both done {key}"
    assert "alpha found it" not in [texts(e) for e in of_type(events, "agent.message")], (
        "a child's own messages stay on its thread"
    )

    # Each child's own history: the request as its input, its answer, its statuses.
    for name, message, answer in ((researcher.name, alpha, "alpha found it"), (writer.name, beta, "beta wrote it")):
        own = thread_history(client, session.id, thread_ids[name])
        received = of_type(own, "agent.thread_message_received")
        assert [texts(e) for e in received] == [message]
        assert received[0].from_session_thread_id == session.id
        assert [texts(e) for e in of_type(own, "agent.message")] == [answer]
        assert "session.thread_status_running" in types_of(own)
        assert "session.thread_status_idle" in types_of(own)
        assert "session.status_idle" not in types_of(own)
        thread = client.beta.sessions.threads.retrieve(thread_ids[name], session_id=session.id)
        assert thread.status == "idle" and thread.parent_thread_id == session.id
        assert thread.agent.name == name
        assert thread.usage is not None and thread.usage.input_tokens > 0

    # Every thread's model calls count in the session's usage: primary twice, two children.
    final = client.beta.sessions.retrieve(session.id)
    assert final.usage.input_tokens >= 4 * 25
    # The child's request carried its own system prompt and its message, not the primary's.
    (child_request,) = fake_anthropic.received(beta)
    assert "You are the writer." in str(child_request.body.get("system"))
    assert key not in str(child_request.body["messages"])


def test_message_thread_sends_a_follow_up_to_an_idle_subagent(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    helper = subagent(client, "helper")
    boss = coordinator(client, helper)
    key = unique("followup")
    first, second = unique("first"), unique("second")
    fake_anthropic.script(key, calls(spawn(helper.name, first)))
    fake_anthropic.script(first, say("one"))
    session = start(client, turns, boss, key)
    wait_idle(client, session.id)
    (thread_id,) = [t.id for t in children(client, session.id)]

    fake_anthropic.script(key, calls(tool_use(MESSAGE, {"session_thread_id": thread_id, "message": second})), say("fin"))
    fake_anthropic.script(second, say("two"))
    client.beta.sessions.events.send(
        session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": key}]}]
    )
    events = wait_idle(client, session.id, count=2)
    messages = [e for e in of_type(events, "agent.tool_use") if e.name == MESSAGE]
    assert len(messages) == 1
    result = {e.tool_use_id: e for e in of_type(events, "agent.tool_result")}[messages[0].id]
    assert not result.is_error and "two" in result_text(result)
    own = thread_history(client, session.id, thread_id)
    assert [texts(e) for e in of_type(own, "agent.thread_message_received")] == [first, second]
    # The child's second request held its whole history.
    (request,) = fake_anthropic.received(second)
    assert first in str(request.body["messages"]) and "one" in str(request.body["messages"])


def test_a_failing_subagent_reaches_its_parent_as_a_tool_error(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    helper = subagent(client, "flaky")
    boss = coordinator(client, helper)
    key = unique("failing")
    task = unique("task")
    fake_anthropic.script(key, calls(spawn(helper.name, task)), say(f"recovered {key}"))
    fake_anthropic.script(task, http_error(400, "bad request, never retried"))
    session = start(client, turns, boss, key)
    events = wait_idle(client, session.id)
    use = next(e for e in of_type(events, "agent.tool_use") if e.name == SPAWN)
    result = {e.tool_use_id: e for e in of_type(events, "agent.tool_result")}[use.id]
    assert result.is_error, result
    assert "thread stopped" in result_text(result)
    assert texts(of_type(events, "agent.message")[-1]) == f"recovered {key}"


def test_refused_thread_calls_create_nothing(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    helper = subagent(client, "only")
    boss = coordinator(client, helper)
    key = unique("refused")
    fake_anthropic.script(
        key,
        calls(
            spawn("nobody-by-that-name", unique("x")),
            tool_use(SPAWN, {"inline_agent": {"name": "adhoc", "system": "be brief"}, "message": unique("y")}),
            tool_use(MESSAGE, {"session_thread_id": "sthr_doesnotexist", "message": "hi"}),
        ),
        say("gave up"),
    )
    session = start(client, turns, boss, key)
    events = wait_idle(client, session.id)
    results = of_type(events, "agent.tool_result")
    assert len(results) == 3 and all(r.is_error for r in results)
    assert children(client, session.id) == []
    assert of_type(events, "session.thread_created") == []


def test_interrupt_names_one_thread_or_all_of_them(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    slow_one, slow_two = subagent(client, "slow-one"), subagent(client, "slow-two")
    boss = coordinator(client, slow_one, slow_two)
    key = unique("interrupts")
    one, two = unique("one"), unique("two")
    gate = unique("never")
    fake_anthropic.script(key, calls(spawn(slow_one.name, one), spawn(slow_two.name, two)), say(f"after {key}"))
    fake_anthropic.script(one, Reply(blocks=[text("never finishes")], gate=gate))
    fake_anthropic.script(two, Reply(blocks=[text("never finishes")], gate=gate))
    session = start(client, turns, boss, key)
    wait_until(lambda: len(fake_anthropic.received(one)) == 1 and len(fake_anthropic.received(two)) == 1, "both asked")
    threads = {t.agent.name: t.id for t in children(client, session.id)}

    # A thread id of another session, or garbage, is refused naming the field.
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.beta.sessions.events.send(
            session.id, events=[{"type": "user.interrupt", "session_thread_id": "sthr_unknown"}]
        )
    assert "session_thread_id" in str(bad.value)

    client.beta.sessions.events.send(
        session.id, events=[{"type": "user.interrupt", "session_thread_id": threads[slow_one.name]}]
    )
    wait_until(
        lambda: client.beta.sessions.threads.retrieve(threads[slow_one.name], session_id=session.id).status == "idle",
        "the named thread idle",
    )
    assert client.beta.sessions.threads.retrieve(threads[slow_two.name], session_id=session.id).status == "running"
    assert client.beta.sessions.retrieve(session.id).status == "running"

    # Without a thread: every non-archived thread stops, and the session idles.
    client.beta.sessions.events.send(session.id, events=[{"type": "user.interrupt"}])
    events = wait_idle(client, session.id)
    fake_anthropic.open_gate(gate)
    uses = [e for e in of_type(events, "agent.tool_use") if e.name == SPAWN]
    results = {e.tool_use_id: e for e in of_type(events, "agent.tool_result")}
    assert all(results[u.id].is_error for u in uses if u.id in results)
    for thread_id in threads.values():
        assert client.beta.sessions.threads.retrieve(thread_id, session_id=session.id).status == "idle"


def test_archive_a_child_thread_but_never_the_primary(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    helper = subagent(client, "archivable")
    boss = coordinator(client, helper)
    key, job = unique("archive"), unique("job")
    fake_anthropic.script(key, calls(spawn(helper.name, job)), say("ok"))
    fake_anthropic.script(job, say("job done"))
    session = start(client, turns, boss, key)
    wait_idle(client, session.id)
    (child,) = children(client, session.id)

    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.threads.archive(session.id, session_id=session.id)
    archived = client.beta.sessions.threads.archive(child.id, session_id=session.id)
    assert archived.archived_at is not None and archived.status == "terminated"
    own = thread_history(client, session.id, child.id)
    assert types_of(own)[-1] == "session.thread_status_terminated"
    assert [t.id for t in collect(client.beta.sessions.threads.list(session.id, statuses=["terminated"]))] == [child.id]

    # A message to an archived thread is refused to the model and creates nothing.
    fake_anthropic.script(key, calls(tool_use(MESSAGE, {"session_thread_id": child.id, "message": "again"})), say("k"))
    client.beta.sessions.events.send(
        session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": key}]}]
    )
    events = wait_idle(client, session.id, count=2)
    use = [e for e in of_type(events, "agent.tool_use") if e.name == MESSAGE][-1]
    assert {e.tool_use_id: e for e in of_type(events, "agent.tool_result")}[use.id].is_error


def test_advisor_is_consulted_through_a_tool_and_counted(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    agent = client.beta.agents.create(
        name=unique("advised"),
        model=MODEL,
        multiagent={
            "type": "multiagent_20261001",
            "advisor": {"type": "enabled", "model": "claude-opus-4-6"},
            "subagents": {"type": "disabled"},
            "workflows": {"type": "disabled"},
        },
    )
    key = unique("advice")
    question = unique("question")
    fake_anthropic.script(key, calls(tool_use(ADVISE, {"question": question})), say("thanks"))
    fake_anthropic.script(question, say("use a hash map", input_tokens=1000, output_tokens=50))
    session = start(client, turns, agent, key)
    events = wait_idle(client, session.id)
    (request,) = fake_anthropic.received(question)
    assert request.body["model"] == "claude-opus-4-6"
    use = next(e for e in of_type(events, "agent.tool_use") if e.name == ADVISE)
    result = {e.tool_use_id: e for e in of_type(events, "agent.tool_result")}[use.id]
    assert not result.is_error and "use a hash map" in result_text(result)
    usage = client.beta.sessions.retrieve(session.id).usage
    assert usage.input_tokens >= 1000 + 2 * 25, "the advisor's tokens count in the session's usage"


def follow(stream: Any, until: Callable[[Any], bool], into: list[Any]) -> threading.Thread:
    """Reads `stream` in the background into `into` until an event satisfies `until`."""

    def run() -> None:
        with stream:
            for event in stream:
                into.append(event)
                if until(event):
                    return

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    return reader


def test_a_thread_stream_shows_the_childs_own_work_and_the_session_stream_its_summary(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    helper = subagent(client, "streamer")
    boss = coordinator(client, helper)
    key, job, gate = unique("streams"), unique("job"), unique("gate")
    fake_anthropic.script(key, calls(spawn(helper.name, job)), say(f"summary {key}"))
    fake_anthropic.script(job, Reply(blocks=[text("the child's own words")], gate=gate))
    session = start(client, turns, boss, key)
    fake_anthropic.wait_requests(job, 1)
    (child,) = children(client, session.id)

    own: list[Any] = []
    view: list[Any] = []
    own_reader = follow(
        client.beta.sessions.threads.events.stream(child.id, session_id=session.id),
        lambda e: e.type == "agent.thread_message_sent",
        own,
    )
    view_reader = follow(client.beta.sessions.events.stream(session.id), lambda e: e.type == "session.status_idle", view)
    time.sleep(0.3)  # both streams are subscribed before the child's answer is released
    fake_anthropic.open_gate(gate)
    own_reader.join(TURN_TIMEOUT)
    view_reader.join(TURN_TIMEOUT)
    assert not own_reader.is_alive() and not view_reader.is_alive(), (types_of(own), types_of(view))

    messages = of_type(own, "agent.message")
    assert [texts(e) for e in messages] == ["the child's own words"]
    assert all(e.session_thread_id == child.id for e in messages)
    assert of_type(own, "agent.thread_message_sent")[0].to_session_thread_id == session.id

    assert "the child's own words" not in [texts(e) for e in of_type(view, "agent.message")]
    assert texts(of_type(view, "agent.message")[-1]) == f"summary {key}"
    (idled,) = of_type(view, "session.thread_status_idle")
    assert idled.session_thread_id == child.id and idled.agent_name == helper.name


def test_a_child_waiting_for_the_client_idles_the_session_until_answered(
    client: anthropic.Anthropic, turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    helper = client.beta.agents.create(
        name=unique("asker"),
        model=MODEL,
        tools=[
            {
                "type": "custom",
                "name": "lookup",
                "description": "Looks a word up.",
                "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}},
            }
        ],
    )
    boss = coordinator(client, helper)
    key, job = unique("asks"), unique("job")
    fake_anthropic.script(key, calls(spawn(helper.name, job)), say(f"finished {key}"))
    fake_anthropic.script(job, calls(tool_use("lookup", {"word": "ocean"})), say("looked it up"))
    session = start(client, turns, boss, key)

    events = wait_idle(client, session.id)
    idle = of_type(events, "session.status_idle")[-1]
    assert idle.stop_reason.type == "requires_action"
    (use,) = of_type(events, "agent.custom_tool_use")
    (child,) = children(client, session.id)
    assert use.session_thread_id == child.id, "a child's custom tool use is cross-posted, naming its thread"
    assert idle.stop_reason.event_ids == [use.id]

    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.custom_tool_result", "custom_tool_use_id": use.id, "content": [{"type": "text", "text": "blue"}]}],
    )
    events = wait_idle(client, session.id, count=2)
    assert of_type(events, "session.status_idle")[-1].stop_reason.type == "end_turn"
    assert texts(of_type(events, "agent.message")[-1]) == f"finished {key}"
    spawn_use = next(e for e in of_type(events, "agent.tool_use") if e.name == SPAWN)
    result = {e.tool_use_id: e for e in of_type(events, "agent.tool_result")}[spawn_use.id]
    assert not result.is_error and "looked it up" in result_text(result)
    own = thread_history(client, session.id, child.id)
    assert [e.type for e in own if e.type == "user.custom_tool_result"] == ["user.custom_tool_result"]
