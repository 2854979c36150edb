"""Turns: sessions, events and live streams driven through the official SDK, with the
model played by the scriptable fakes of fake_models.py.

Wire facts: managed-agents-wire.md §2.2–2.5 (routes), §4.1–4.2 (event types, stop
reasons, previews, permissions, errors), §5.1 (SSE). Every test runs against a dedicated
`agentd dev` and a dedicated gateway+worker deployment (fixture `turns`) whose
ANTHROPIC_BASE_URL / OPENAI_BASE_URL point at the fakes. Each test keys its scripted
replies by a unique token it puts in its user message, so tests never take each other's
replies.

The SIGKILL recovery test (prod only, marked ``slow``) waits out a worker lease (30 s)
and dominates the run time; deselect it with ``-m "not slow"`` or ``-k "not sigkill"``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from typing import Any, Callable, Iterable

import anthropic
import pytest

from fake_models import (
    FakeAnthropic,
    FakeOpenAI,
    Reply,
    Usage,
    call,
    http_error,
    overloaded,
    say,
    slow,
    text,
    thinking,
    tool_use,
)
from harness import BETA_HEADERS, RECORDER, Deployment, collect, unique

MODEL = "claude-sonnet-4-6"
OPENAI_MODEL = "openai/gpt-4o-mini"
TURN_TIMEOUT = 30.0

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
ASK_TOOLSET = {
    "type": "agent_toolset_20260401",
    "default_config": {"permission_policy": {"type": "always_ask"}},
}
PLAIN_TURN = [
    "user.message",
    "session.status_running",
    "span.model_request_start",
    "agent.message",
    "span.model_request_end",
    "session.usage",
    "session.status_idle",
]


# ---------------------------------------------------------------------------------------
# Helpers


def user_message(value: str) -> dict[str, Any]:
    return {"type": "user.message", "content": [{"type": "text", "text": value}]}


def make_agent(client: anthropic.Anthropic, **fields: Any) -> Any:
    fields.setdefault("name", unique("turn-agent"))
    fields.setdefault("model", MODEL)
    return client.beta.agents.create(**fields)


_ENVIRONMENTS: dict[tuple[str, str], str] = {}


def environment(client: anthropic.Anthropic, deployment: Deployment, kind: str = "cloud") -> str:
    """One environment of each kind per deployment."""
    key = (deployment.url, kind)
    if key not in _ENVIRONMENTS:
        env = client.beta.environments.create(name=unique(f"turn-{kind}"), config={"type": kind})
        _ENVIRONMENTS[key] = env.id
    return _ENVIRONMENTS[key]


def new_session(
    client: anthropic.Anthropic, deployment: Deployment, agent: Any, *, kind: str = "cloud", **fields: Any
) -> Any:
    return client.beta.sessions.create(
        agent=agent if isinstance(agent, (str, dict)) else agent.id,
        environment_id=fields.pop("environment_id", None) or environment(client, deployment, kind),
        **fields,
    )


def history(client: anthropic.Anthropic, session_id: str, **params: Any) -> list[Any]:
    return collect(client.beta.sessions.events.list(session_id, limit=1000, **params))


def types_of(events: Iterable[Any]) -> list[str]:
    return [e.type for e in events]


def of_type(events: Iterable[Any], type_: str) -> list[Any]:
    return [e for e in events if e.type == type_]


def texts(events: Iterable[Any]) -> list[str]:
    return ["".join(b.text for b in e.content if b.type == "text") for e in events if e.type == "agent.message"]


def wait_history(
    client: anthropic.Anthropic,
    session_id: str,
    predicate: Callable[[list[Any]], bool],
    timeout: float = TURN_TIMEOUT,
    what: str = "condition",
) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        events = history(client, session_id)
        if predicate(events):
            return events
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not reached within {timeout:.0f} s; history: {types_of(events)}")
        time.sleep(0.05)


def wait_idle(client: anthropic.Anthropic, session_id: str, count: int = 1, timeout: float = TURN_TIMEOUT) -> list[Any]:
    """History once it holds `count` session.status_idle events."""
    return wait_history(
        client,
        session_id,
        lambda events: len(of_type(events, "session.status_idle")) >= count,
        timeout,
        f"{count} session.status_idle event(s)",
    )


def stop_reason(event: Any) -> str:
    return event.stop_reason.type


def assert_unique_ids(events: list[Any], where: str) -> None:
    ids = [e.id for e in events]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"{where}: duplicate event ids {duplicates}: {types_of(events)}"


def settle(seconds: float = 0.6) -> None:
    """Lets anything that would (wrongly) still happen happen."""
    time.sleep(seconds)


class Reader:
    """One live stream (`events.stream` or `threads.events.stream`) read by a thread."""

    def __init__(
        self,
        deployment: Deployment,
        session_id: str,
        *,
        event_deltas: list[str] | None = None,
        thread: bool = False,
        base_url: str | None = None,
    ) -> None:
        self.client = deployment.client(base_url=base_url, timeout=60.0)
        kwargs: dict[str, Any] = {}
        if event_deltas is not None:
            kwargs["event_deltas"] = event_deltas
        if thread:
            self.stream = self.client.beta.sessions.threads.events.stream(session_id, session_id=session_id, **kwargs)
        else:
            self.stream = self.client.beta.sessions.events.stream(session_id, **kwargs)
        self.url = str(self.stream.response.url)
        self.events: list[Any] = []
        self.error: BaseException | None = None
        self.ended = threading.Event()
        self._closing = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self.stream:
                RECORDER.note("SSE", self.url, 200, json.dumps(event.model_dump(mode="json")).encode())
                with self._cond:
                    self.events.append(event)
                    self._cond.notify_all()
        except BaseException as err:  # noqa: BLE001 - reported by wait()
            if not self._closing:
                self.error = err
        finally:
            self.ended.set()
            with self._cond:
                self._cond.notify_all()

    def committed(self) -> list[Any]:
        """What the stream delivered, without previews."""
        with self._cond:
            return [e for e in self.events if e.type not in ("event_start", "event_delta")]

    def wait(self, predicate: Callable[[list[Any]], bool], timeout: float = TURN_TIMEOUT, what: str = "condition") -> list[Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.events):
                if self.error is not None:
                    pytest.fail(f"stream failed before {what}: {self.error!r}; got {types_of(self.events)}")
                if self.ended.is_set():
                    pytest.fail(f"stream ended before {what}; got {types_of(self.events)}")
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"stream: {what} not seen within {timeout:.0f} s; got {types_of(self.events)}")
                self._cond.wait(min(left, 0.2))
            return list(self.events)

    def wait_idle(self, count: int = 1, timeout: float = TURN_TIMEOUT) -> list[Any]:
        return self.wait(
            lambda events: len(of_type(events, "session.status_idle")) >= count,
            timeout,
            f"{count} session.status_idle event(s)",
        )

    def close(self) -> None:
        """Hangs up at once (a blocked read in the reader thread is interrupted)."""
        self._closing = True
        try:
            sock = self.stream.response.extensions["network_stream"].get_extra_info("socket")
            sock.shutdown(socket.SHUT_RDWR)
        except Exception:  # noqa: BLE001 - already closed, or no socket to reach
            pass
        try:
            self.stream.close()
        except Exception:  # noqa: BLE001 - closing a stream mid-read may complain
            pass
        self._thread.join(timeout=10)


@pytest.fixture
def readers() -> Iterable[list[Reader]]:
    """Stream readers of one test, closed at its end."""
    opened: list[Reader] = []
    yield opened
    for reader in opened:
        reader.close()


@pytest.fixture
def client(turns: Deployment) -> anthropic.Anthropic:  # shadows conftest's: the turn deployment
    return turns.client()


def open_reader(readers: list[Reader], deployment: Deployment, session_id: str, **options: Any) -> Reader:
    reader = Reader(deployment, session_id, **options)
    readers.append(reader)
    return reader


# ---------------------------------------------------------------------------------------
# The fakes themselves, checked against the official SDK (no agentd involved)


def test_fake_anthropic_speaks_the_messages_protocol(fake_anthropic: FakeAnthropic) -> None:
    """The official SDK's Messages stream accumulator accepts what the fake sends."""
    key = unique("selfcheck")
    fake_anthropic.script(
        key,
        Reply(
            blocks=[thinking("let me see"), text("Hello there"), tool_use("get_weather", {"city": "Paris"})],
            stop_reason="tool_use",
            usage=Usage(input_tokens=11, output_tokens=22, cache_read_input_tokens=33, cache_creation_input_tokens=44),
        ),
        overloaded(),
        Reply(stream_error="overloaded_error"),
    )
    sdk = anthropic.Anthropic(base_url=fake_anthropic.url, api_key=fake_anthropic.api_key, max_retries=0, _strict_response_validation=True)
    try:
        with sdk.messages.stream(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": key}]) as stream:
            message = stream.get_final_message()
        assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
        assert message.content[0].thinking == "let me see" and message.content[0].signature
        assert message.content[1].text == "Hello there"
        assert message.content[2].input == {"city": "Paris"}
        assert message.stop_reason == "tool_use"
        assert (message.usage.input_tokens, message.usage.output_tokens) == (11, 22)
        assert (message.usage.cache_read_input_tokens, message.usage.cache_creation_input_tokens) == (33, 44)

        with pytest.raises(anthropic.APIStatusError) as caught:
            sdk.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": key}], stream=True)
        assert caught.value.status_code == 529

        with pytest.raises(anthropic.APIStatusError) as caught:
            for _ in sdk.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": key}], stream=True):
                pass
        assert "overloaded_error" in str(caught.value.body)
    finally:
        sdk.close()


# ---------------------------------------------------------------------------------------
# A plain turn


def test_plain_turn_through_list_and_stream(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, readers: list[Reader]
) -> None:
    key = unique("plain")
    usage = Usage(input_tokens=321, output_tokens=45, cache_read_input_tokens=67, cache_creation_input_tokens=89)
    fake_anthropic.script(
        key,
        Reply(blocks=[text(f"Hello back, {key}", chunks=4)], usage=usage),
        Reply(blocks=[text("Second answer.")], usage=Usage(input_tokens=400, output_tokens=5)),
    )
    agent = make_agent(client, system="You are terse.")
    session = new_session(client, turns, agent)
    assert session.status == "idle"

    reader = open_reader(readers, turns, session.id)  # opened BEFORE the send
    sent = client.beta.sessions.events.send(session.id, events=[user_message(f"hello {key}")])
    assert len(sent.data) == 1
    echo = sent.data[0]
    assert echo.type == "user.message" and echo.id and echo.processed_at is not None
    assert echo.content[0].text == f"hello {key}"

    events = wait_idle(client, session.id)
    assert types_of(events) == PLAIN_TURN, types_of(events)
    assert events[0].id == echo.id
    assert texts(events) == [f"Hello back, {key}"]
    start, end, usage, idle = events[2], events[4], events[5], events[6]
    assert stop_reason(idle) == "end_turn"
    assert usage.usage.input_tokens == 321 and usage.usage.output_tokens == 45, "the snapshot is cumulative"
    assert usage.budget is None
    assert end.model_request_start_id == start.id
    assert not end.is_error
    assert end.model_usage.input_tokens == 321
    assert end.model_usage.output_tokens == 45
    assert end.model_usage.cache_read_input_tokens == 67
    assert end.model_usage.cache_creation_input_tokens == 89
    assert_unique_ids(events, "history")
    assert [e.id for e in history(client, session.id, order="desc")] == [e.id for e in events][::-1]
    assert [e.id for e in collect(client.beta.sessions.events.list(session.id, limit=2))] == [e.id for e in events]
    assert [e.id for e in history(client, session.id, types=["agent.message", "session.status_idle"])] == [
        events[3].id,
        events[6].id,
    ]

    live = reader.wait_idle()
    assert [e.id for e in live] == [e.id for e in events], "the stream must carry exactly the listed events, in order"
    for streamed, listed in zip(live, events):
        assert streamed.model_dump() == listed.model_dump()

    retrieved = client.beta.sessions.retrieve(session.id)
    assert retrieved.status == "idle"
    assert retrieved.usage.input_tokens == 321
    assert retrieved.usage.output_tokens == 45
    assert retrieved.usage.cache_read_input_tokens == 67
    assert retrieved.usage.cache_creation is not None
    assert retrieved.usage.cache_creation.ephemeral_5m_input_tokens == 89
    active = retrieved.stats.active_seconds
    assert active is not None and 0 <= active <= retrieved.stats.duration_seconds, retrieved.stats
    running_ms = int((idle.processed_at - events[1].processed_at).total_seconds() * 1000)
    assert abs(active * 1000 - running_ms) <= 2, (active, running_ms)

    (request,) = fake_anthropic.wait_requests(key, 1)
    assert request.path == "/v1/messages"
    assert request.headers.get("x-api-key") == fake_anthropic.api_key
    assert request.headers.get("anthropic-version")
    assert request.body["model"] == MODEL
    assert request.body["stream"] is True
    assert request.body["system"] == "You are terse."
    assert request.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": f"hello {key}"}]}]

    # A second turn carries the conversation and adds to the usage.
    client.beta.sessions.events.send(session.id, events=[user_message("and again")])
    events = wait_idle(client, session.id, count=2)
    assert types_of(events) == PLAIN_TURN * 2
    _, second = fake_anthropic.wait_requests(key, 2)
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user"]
    assert second.messages[1]["content"] == [{"type": "text", "text": f"Hello back, {key}"}]
    assert second.messages[2]["content"] == [{"type": "text", "text": "and again"}]
    retrieved = client.beta.sessions.retrieve(session.id)
    assert (retrieved.usage.input_tokens, retrieved.usage.output_tokens) == (721, 50)
    live = reader.wait_idle(count=2)
    assert [e.id for e in live] == [e.id for e in events]


def test_thinking_and_several_blocks_are_separate_events(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("blocks")
    fake_anthropic.script(key, Reply(blocks=[thinking("hmm " * 5), text("First."), text("Second.")]))
    session = new_session(client, turns, make_agent(client))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    events = wait_idle(client, session.id)
    assert types_of(events) == [
        "user.message",
        "session.status_running",
        "span.model_request_start",
        "agent.thinking",
        "agent.message",
        "agent.message",
        "span.model_request_end",
        "session.usage",
        "session.status_idle",
    ]
    assert texts(events) == ["First.", "Second."]


def test_system_message_accompanies_a_user_message(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("system")
    fake_anthropic.script(key, say("Yes, captain."))
    session = new_session(client, turns, make_agent(client, system="Agent prompt."))
    system = {"type": "system.message", "content": [{"type": "text", "text": "Address the user as captain."}]}
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.events.send(session.id, events=[system, user_message(key)])  # must come last
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.events.send(session.id, events=[system])  # must accompany an input
    echoed = client.beta.sessions.events.send(session.id, events=[user_message(key), system]).data
    assert [e.type for e in echoed] == ["user.message", "system.message"]
    events = wait_idle(client, session.id)
    assert types_of(events)[:2] == ["user.message", "system.message"]
    assert stop_reason(events[-1]) == "end_turn"
    (request,) = fake_anthropic.wait_requests(key, 1)
    assert "Agent prompt." in request.body.get("system", "")
    assert "Address the user as captain." in json.dumps(request.body.get("system")), request.body.get("system")
    assert request.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": key}]}]


# ---------------------------------------------------------------------------------------
# Previews


def test_previews_only_with_event_deltas(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, readers: list[Reader]
) -> None:
    key = unique("preview")
    answer = "Streaming previews arrive in pieces."
    fake_anthropic.script(key, Reply(blocks=[thinking("considering"), text(answer, chunks=5)], delay=0.02))
    session = new_session(client, turns, make_agent(client))
    messages_only = open_reader(readers, turns, session.id, event_deltas=["agent.message"])
    both = open_reader(readers, turns, session.id, event_deltas=["agent.message", "agent.thinking"])
    plain = open_reader(readers, turns, session.id)

    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    events = wait_idle(client, session.id)
    final = of_type(events, "agent.message")[0]
    thought = of_type(events, "agent.thinking")[0]

    seen = messages_only.wait_idle()
    starts = [(i, e) for i, e in enumerate(seen) if e.type == "event_start"]
    assert [e.event.type for _, e in starts] == ["agent.message"], "only previews of the requested type"
    start_at, start = starts[0]
    assert start.event.id == final.id, "the preview announces the id of the event it becomes"
    deltas = [(i, e) for i, e in enumerate(seen) if e.type == "event_delta"]
    assert deltas, "no event_delta for a streamed agent.message"
    assert all(e.event_id == final.id for _, e in deltas)
    final_at = next(i for i, e in enumerate(seen) if e.type == "agent.message")
    assert start_at < min(i for i, _ in deltas) and max(i for i, _ in deltas) < final_at
    # The SDK's accumulation rule: index null → 0; fragments at an index append.
    content: list[str] = []
    for _, delta in deltas:
        index = delta.delta.index or 0
        assert index <= len(content), f"delta index {index} beyond the end of content"
        if index == len(content):
            content.append("")
        content[index] += delta.delta.content.text
    assert content == [answer]
    assert seen[final_at].content[0].text == answer
    for _, preview in starts + deltas:
        dumped = preview.model_dump()
        assert "id" not in dumped and "processed_at" not in dumped, dumped

    seen_both = both.wait_idle()
    thinking_starts = [e for e in seen_both if e.type == "event_start" and e.event.type == "agent.thinking"]
    assert [e.event.id for e in thinking_starts] == [thought.id]
    assert not [e for e in seen_both if e.type == "event_delta" and e.event_id == thought.id], "thinking previews are start-only"

    seen_plain = plain.wait_idle()
    assert not [e for e in seen_plain if e.type in ("event_start", "event_delta")], "previews without event_deltas"

    for reader in (messages_only, both, plain):
        assert [e.id for e in reader.committed()] == [e.id for e in events]


def test_unknown_event_delta_type_is_rejected(turns: Deployment, client: anthropic.Anthropic) -> None:
    session = new_session(client, turns, make_agent(client))
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.events.stream(session.id, event_deltas=["agent.tool_use"])  # type: ignore[list-item]
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.events.stream("sesn_does_not_exist")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.events.send("sesn_does_not_exist", events=[user_message("hello?")])


# ---------------------------------------------------------------------------------------
# Custom tools


def test_custom_tool_round_trip(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, readers: list[Reader]
) -> None:
    key = unique("custom")
    fake_anthropic.script(
        key,
        call("get_weather", {"city": "Paris"}, preface="Let me check."),
        say("It is sunny in Paris."),
    )
    agent = make_agent(client, tools=[CUSTOM_TOOL])
    session = new_session(client, turns, agent)
    reader = open_reader(readers, turns, session.id)
    client.beta.sessions.events.send(session.id, events=[user_message(f"weather? {key}")])

    events = wait_idle(client, session.id)
    assert types_of(events) == [
        "user.message",
        "session.status_running",
        "span.model_request_start",
        "agent.message",
        "agent.custom_tool_use",
        "span.model_request_end",
        "session.usage",
        "session.status_idle",
    ]
    use = events[4]
    assert use.name == "get_weather" and use.input == {"city": "Paris"}
    idle = events[-1]
    assert stop_reason(idle) == "requires_action"
    assert idle.stop_reason.event_ids == [use.id]
    assert client.beta.sessions.retrieve(session.id).status == "idle"
    (first,) = fake_anthropic.wait_requests(key, 1)
    assert [t["name"] for t in first.body.get("tools", [])] == ["get_weather"]
    assert first.body["tools"][0]["input_schema"] == CUSTOM_TOOL["input_schema"]

    result = {
        "type": "user.custom_tool_result",
        "custom_tool_use_id": use.id,
        "content": [{"type": "text", "text": "sunny, 24 C"}],
    }
    echoed = client.beta.sessions.events.send(session.id, events=[result]).data[0]
    assert echoed.type == "user.custom_tool_result" and echoed.custom_tool_use_id == use.id

    events = wait_idle(client, session.id, count=2)
    assert stop_reason(events[-1]) == "end_turn"
    assert texts(events) == ["Let me check.", "It is sunny in Paris."]
    _, second = fake_anthropic.wait_requests(key, 2)
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user"]
    assistant = second.messages[1]["content"]
    assert {"type": "text", "text": "Let me check."} in assistant
    (call_block,) = [b for b in assistant if b["type"] == "tool_use"]
    assert call_block["name"] == "get_weather" and call_block["input"] == {"city": "Paris"}
    (result_block,) = second.blocks("tool_result")
    assert result_block["tool_use_id"] == call_block["id"]
    assert result_block["content"] == [{"type": "text", "text": "sunny, 24 C"}]
    assert not result_block.get("is_error")

    # The same answer again is idempotent: the first echo comes back, nothing is committed.
    count, requests = len(events), len(fake_anthropic.received(key))
    again = client.beta.sessions.events.send(session.id, events=[result]).data
    assert [e.id for e in again] == [echoed.id]
    settle()
    assert len(history(client, session.id)) == count
    assert len(fake_anthropic.received(key)) == requests

    live = reader.wait_idle(count=2)
    assert [e.id for e in live] == [e.id for e in events]

    # Answers must name an open call.
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.events.send(
            session.id,
            events=[{"type": "user.custom_tool_result", "custom_tool_use_id": "sevt_nope", "content": []}],
        )


def test_custom_tools_answered_one_at_a_time(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("two-tools")
    fake_anthropic.script(
        key,
        Reply(blocks=[tool_use("get_weather", {"city": "Oslo"}), tool_use("get_weather", {"city": "Rome"})], stop_reason="tool_use"),
        say("Cold and warm."),
    )
    session = new_session(client, turns, make_agent(client, tools=[CUSTOM_TOOL]))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    events = wait_idle(client, session.id)
    oslo, rome = of_type(events, "agent.custom_tool_use")
    assert events[-1].stop_reason.event_ids == [oslo.id, rome.id]

    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.custom_tool_result", "custom_tool_use_id": rome.id, "content": [{"type": "text", "text": "warm"}]}],
    )
    events = wait_idle(client, session.id, count=2)
    assert stop_reason(events[-1]) == "requires_action"
    assert events[-1].stop_reason.event_ids == [oslo.id], "answering fewer re-idles with the remainder"
    assert len(fake_anthropic.received(key)) == 1

    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.custom_tool_result", "custom_tool_use_id": oslo.id, "content": [{"type": "text", "text": "cold"}]}],
    )
    events = wait_idle(client, session.id, count=3)
    assert stop_reason(events[-1]) == "end_turn"
    _, second = fake_anthropic.wait_requests(key, 2)
    results = {b["tool_use_id"]: b["content"][0]["text"] for b in second.blocks("tool_result")}
    assert results == {oslo.id: "cold", rome.id: "warm"}


def test_custom_tool_result_sent_as_soon_as_the_call_streams(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, readers: list[Reader]
) -> None:
    """The client "can send it as soon as this event arrives, without waiting for
    session.status_idle": the result is consumed exactly once and the turn ends."""
    key = unique("early")
    fake_anthropic.script(key, call("get_weather", {"city": "Lima"}), say("Mild in Lima."))
    session = new_session(client, turns, make_agent(client, tools=[CUSTOM_TOOL]))
    reader = open_reader(readers, turns, session.id)
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    seen = reader.wait(lambda evs: "agent.custom_tool_use" in types_of(evs), what="agent.custom_tool_use")
    (use,) = of_type(seen, "agent.custom_tool_use")
    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.custom_tool_result", "custom_tool_use_id": use.id, "content": [{"type": "text", "text": "mild"}]}],
    )
    events = wait_history(
        client,
        session.id,
        lambda evs: types_of(evs)[-1] == "session.status_idle" and stop_reason(evs[-1]) == "end_turn",
        what="end_turn",
    )
    settle()
    events = history(client, session.id)
    assert stop_reason(events[-1]) == "end_turn"
    assert texts(events) == ["Mild in Lima."]
    requests = fake_anthropic.received(key)
    assert len(requests) == 2, "the result reaches the model exactly once"
    assert [b["tool_use_id"] for b in requests[1].blocks("tool_result")] == [use.id]
    assert [e.id for e in reader.wait_idle(count=len(of_type(events, "session.status_idle")))] == [e.id for e in events]


def test_duplicate_results_in_one_request_echo_the_same_event(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("dup-batch")
    fake_anthropic.script(key, call("get_weather", {"city": "Baku"}), say("Windy."))
    session = new_session(client, turns, make_agent(client, tools=[CUSTOM_TOOL]))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    events = wait_idle(client, session.id)
    (use,) = of_type(events, "agent.custom_tool_use")
    result = {"type": "user.custom_tool_result", "custom_tool_use_id": use.id, "content": [{"type": "text", "text": "windy"}]}
    first, second = client.beta.sessions.events.send(session.id, events=[result, result]).data
    assert first.id == second.id, "one answer, one event"
    assert first.processed_at == second.processed_at, (
        f"the repeated answer echoes the committed event, processed_at {second.processed_at} vs {first.processed_at}"
    )
    events = wait_idle(client, session.id, count=2)
    assert len(of_type(events, "user.custom_tool_result")) == 1
    (committed,) = of_type(events, "user.custom_tool_result")
    assert committed.id == first.id and committed.processed_at == first.processed_at


# ---------------------------------------------------------------------------------------
# always_ask on a self_hosted environment


def ask_session(client: anthropic.Anthropic, turns: Deployment, fake: FakeAnthropic, key: str, *replies: Reply) -> tuple[Any, Any]:
    fake.script(key, call("bash", {"command": "ls"}), *replies)
    session = new_session(client, turns, make_agent(client, tools=[ASK_TOOLSET]), kind="self_hosted")
    client.beta.sessions.events.send(session.id, events=[user_message(f"list files {key}")])
    events = wait_idle(client, session.id)
    (use,) = of_type(events, "agent.tool_use")
    assert use.name == "bash" and use.input == {"command": "ls"}
    assert use.evaluated_permission == "ask"
    assert use.evaluation is not None and use.evaluation.type == "always_ask"
    assert stop_reason(events[-1]) == "requires_action"
    assert events[-1].stop_reason.event_ids == [use.id]
    (first,) = fake.wait_requests(key, 1)
    assert "bash" in [t["name"] for t in first.body.get("tools", [])]
    return session, use


def test_always_ask_allow_then_self_hosted_result(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("ask-allow")
    session, use = ask_session(client, turns, fake_anthropic, key, say("Two files."))

    # A confirmation must name a call that awaits one.
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.events.send(
            session.id, events=[{"type": "user.tool_confirmation", "tool_use_id": "sevt_nope", "result": "allow"}]
        )

    client.beta.sessions.events.send(
        session.id, events=[{"type": "user.tool_confirmation", "tool_use_id": use.id, "result": "allow"}]
    )
    # Allowed: the call is out with the environment's hands (the customer's worker on a
    # self_hosted environment). The session runs without idling until they answer.
    deadline = time.monotonic() + TURN_TIMEOUT
    while client.beta.sessions.retrieve(session.id).status != "running":
        assert time.monotonic() < deadline, "the allowed call did not resume the session"
        time.sleep(0.05)
    time.sleep(0.5)
    assert len(of_type(history(client, session.id), "session.status_idle")) == 1, "no idle while the hands work"
    assert client.beta.sessions.retrieve(session.id).status == "running"
    assert len(fake_anthropic.received(key)) == 1
    environment_id = client.beta.sessions.retrieve(session.id).environment_id
    stats = turns.http().get(f"/v1/environments/{environment_id}/work/stats", headers=turns.headers()).json()
    assert stats["type"] == "work_queue_stats" and stats["depth"] + stats["pending"] >= 1, stats
    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.tool_result", "tool_use_id": use.id, "content": [{"type": "text", "text": "a.txt b.txt"}]}],
    )
    events = wait_idle(client, session.id, count=2)
    assert stop_reason(events[-1]) == "end_turn"
    assert texts(events) == ["Two files."]
    _, second = fake_anthropic.wait_requests(key, 2)
    (result,) = second.blocks("tool_result")
    assert result["tool_use_id"] == use.id
    assert result["content"] == [{"type": "text", "text": "a.txt b.txt"}]
    assert not result.get("is_error")


def test_always_ask_deny_appends_a_synthetic_error_result(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("ask-deny")
    session, use = ask_session(client, turns, fake_anthropic, key, say("Understood, I will not."))
    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.tool_confirmation", "tool_use_id": use.id, "result": "deny", "deny_message": "not today"}],
    )
    events = wait_idle(client, session.id, count=2)
    assert stop_reason(events[-1]) == "end_turn"
    (synthetic,) = of_type(events, "agent.tool_result")
    assert synthetic.tool_use_id == use.id
    assert synthetic.is_error is True
    assert "not today" in synthetic.content[0].text
    assert texts(events) == ["Understood, I will not."]
    _, second = fake_anthropic.wait_requests(key, 2)
    (result,) = second.blocks("tool_result")
    assert result["tool_use_id"] == use.id and result["is_error"] is True
    assert "not today" in json.dumps(result["content"])


def test_tool_result_is_only_for_self_hosted(turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic) -> None:
    """On a cloud environment an always_ask call still asks; a user.tool_result is refused."""
    key = unique("cloud-ask")
    fake_anthropic.script(key, call("bash", {"command": "pwd"}))
    session = new_session(client, turns, make_agent(client, tools=[ASK_TOOLSET]))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    events = wait_idle(client, session.id)
    (use,) = of_type(events, "agent.tool_use")
    assert use.evaluated_permission == "ask"
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.events.send(
            session.id, events=[{"type": "user.tool_result", "tool_use_id": use.id, "content": []}]
        )


# ---------------------------------------------------------------------------------------
# Interrupts and mid-turn input


def wait_streaming(fake: FakeAnthropic, key: str, blocks: int = 1, timeout: float = TURN_TIMEOUT) -> Any:
    """The first request of `key`, once its reply is past `blocks` blocks and streaming."""
    (request,) = fake.wait_requests(key, 1, timeout)[:1]
    fake.wait_for(lambda: request.blocks_done >= blocks and request.events_sent >= 5, timeout, "the slow reply streaming")
    return request


def test_interrupt_during_a_slow_model_response(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, readers: list[Reader]
) -> None:
    key = unique("interrupt")
    # A completed first block, then ~9 s of trickle.
    fake_anthropic.script(key, slow("never finished " * 10, chunks=30, delay=0.3, preface="Partial answer."), say("Fresh start."))
    session = new_session(client, turns, make_agent(client))
    reader = open_reader(readers, turns, session.id)
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    request = wait_streaming(fake_anthropic, key)
    assert client.beta.sessions.retrieve(session.id).status == "running"

    started = time.monotonic()
    echoed = client.beta.sessions.events.send(session.id, events=[{"type": "user.interrupt"}]).data[0]
    assert echoed.type == "user.interrupt" and echoed.id
    live = reader.wait_idle(timeout=10)
    took = time.monotonic() - started
    assert took < 3.0, f"the interrupt took {took:.1f} s to idle the session (the reply had ~9 s left)"
    assert stop_reason(of_type(live, "session.status_idle")[-1]) == "end_turn"
    assert not request.finished

    events = history(client, session.id)
    assert texts(events) == ["Partial answer."], "completed blocks are committed, the cut one is not"
    assert types_of(events)[-1] == "session.status_idle"
    assert types_of(events).count("span.model_request_end") == 1
    assert events.index(next(e for e in events if e.type == "user.interrupt")) > types_of(events).index("span.model_request_start")
    assert client.beta.sessions.retrieve(session.id).status == "idle"
    # The provider connection was dropped.
    fake_anthropic.wait_for(lambda: request.disconnected, 5, "the provider connection closing")

    # The session takes the next turn normally.
    client.beta.sessions.events.send(session.id, events=[user_message("start over")])
    events = wait_idle(client, session.id, count=2)
    assert stop_reason(events[-1]) == "end_turn"
    assert texts(events) == ["Partial answer.", "Fresh start."]
    _, second = fake_anthropic.wait_requests(key, 2)
    assert second.messages[-1]["content"] == [{"type": "text", "text": "start over"}]


def test_interrupt_while_retrying_a_failing_provider(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    """An interrupt stops the turn while the worker backs off between provider retries:
    no further model request, and the session idles with end_turn at once."""
    key = unique("interrupt-retry")
    fake_anthropic.script(key, *[overloaded() for _ in range(8)])
    session = new_session(client, turns, make_agent(client))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    wait_history(client, session.id, lambda evs: bool(of_type(evs, "session.error")), what="the first session.error")
    requests_before = len(fake_anthropic.received(key))
    started = time.monotonic()
    client.beta.sessions.events.send(session.id, events=[{"type": "user.interrupt"}])
    events = wait_idle(client, session.id, timeout=20)
    took = time.monotonic() - started
    settle()
    requests_after = len(fake_anthropic.received(key))
    assert stop_reason(events[-1]) == "end_turn", (
        f"the interrupted turn ended with {stop_reason(events[-1])!r} after {took:.1f} s "
        f"and {requests_after - requests_before} more model request(s): {types_of(events)}"
    )
    assert took < 2.0, f"the interrupt took {took:.1f} s"
    assert requests_after == requests_before, f"{requests_after - requests_before} model request(s) after the interrupt"


def test_message_sent_mid_turn_reaches_the_next_model_request(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("midturn")
    fake_anthropic.script(key, slow("first reply", chunks=8, delay=0.2), say("second reply"))
    session = new_session(client, turns, make_agent(client))
    client.beta.sessions.events.send(session.id, events=[user_message(f"one {key}")])
    wait_streaming(fake_anthropic, key, blocks=0)
    client.beta.sessions.events.send(session.id, events=[user_message("two, while you were talking")])

    events = wait_history(
        client,
        session.id,
        lambda evs: len(of_type(evs, "agent.message")) >= 2 and types_of(evs)[-1] == "session.status_idle",
        what="both replies and an idle",
    )
    settle()
    events = history(client, session.id)
    assert len(of_type(events, "session.status_idle")) == 1, f"one turn, one idle: {types_of(events)}"
    assert stop_reason(events[-1]) == "end_turn"
    assert texts(events) == ["first reply", "second reply"]
    requests = fake_anthropic.received(key)
    assert len(requests) == 2, "the mid-turn message is consumed once, by the next request"
    assert [m["role"] for m in requests[1].messages] == ["user", "assistant", "user"]
    assert requests[1].messages[2]["content"] == [{"type": "text", "text": "two, while you were talking"}]


# ---------------------------------------------------------------------------------------
# Stream disconnects


def test_stream_disconnect_and_reconnect(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, readers: list[Reader]
) -> None:
    key = unique("reconnect")
    fake_anthropic.script(
        key,
        Reply(
            blocks=[text("one", chunks=3, delay=0.3), text("two", chunks=3, delay=0.3), text("three", chunks=3, delay=0.3)],
            delay=0.05,
        ),
    )
    session = new_session(client, turns, make_agent(client))
    first = open_reader(readers, turns, session.id)
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    first.wait(lambda evs: "span.model_request_start" in types_of(evs), what="the model request starting")
    first.close()
    seen_first = first.committed()

    # Reconnect while the turn is still running.
    second = open_reader(readers, turns, session.id)
    assert client.beta.sessions.retrieve(session.id).status == "running"
    second.wait_idle()
    events = wait_idle(client, session.id)
    settle(0.3)
    seen_second = second.committed()

    listed = [e.id for e in events]
    assert_unique_ids(events, "history")
    assert_unique_ids(seen_first, "first stream")
    assert_unique_ids(seen_second, "second stream")
    union = [e.id for e in seen_first] + [e.id for e in seen_second]
    assert len(set(union)) == len(union), "the two connections overlap"
    assert set(union) <= set(listed), "a stream delivered an event the list does not have"
    # Each connection saw a gap-free run of history: from its first event on, nothing
    # committed while it was open is missing, and the second one runs to the end.
    for name, seen in (("first", seen_first), ("second", seen_second)):
        ids = [e.id for e in seen]
        assert ids, f"the {name} stream saw nothing"
        at = listed.index(ids[0])
        assert listed[at : at + len(ids)] == ids, f"the {name} stream skipped events: {ids} vs {listed}"
    assert seen_first[0].type == "user.message"
    assert [e.id for e in seen_second][-1] == listed[-1]
    assert texts(events) == ["one", "two", "three"]
    assert seen_second[-1].type == "session.status_idle"


def read_sse_ids(response: Any, until: Callable[[list[str]], bool]) -> list[str]:
    """The `id:` of each SSE event read from a streaming httpx response until `until`."""
    ids: list[str] = []
    current = None
    for line in response.iter_lines():
        if line.startswith("id:"):
            current = line[3:].strip()
        elif line == "" and current:
            ids.append(current)
            current = None
            if until(ids):
                break
    return ids


def test_stream_resumed_with_last_event_id_gets_what_it_missed(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    """A client (or proxy) that reconnects with Last-Event-ID gets every event committed
    since that one, from the store, then the live ones: nothing missed, nothing twice."""
    first_key, second_key = unique("resume-a"), unique("resume-b")
    fake_anthropic.script(first_key, Reply(blocks=[text("first answer")]))
    fake_anthropic.script(second_key, Reply(blocks=[text("second answer")]))
    session = new_session(client, turns, make_agent(client))
    url = f"{turns.url}/v1/sessions/{session.id}/events/stream"
    http = turns.http()
    client.beta.sessions.events.send(session.id, events=[user_message(first_key)])
    with http.stream("GET", url, headers=turns.headers(), timeout=30) as response:
        assert response.status_code == 200
        # History up to the open is the client's to list: wait for this turn's events.
        wait_idle(client, session.id)
    listed = [e.id for e in client.beta.sessions.events.list(session.id)]
    last_seen = listed[1]  # as if the stream had received up to the second event only

    # Away: a whole second turn is committed meanwhile.
    client.beta.sessions.events.send(session.id, events=[user_message(second_key)])
    wait_idle(client, session.id, count=2)
    listed = [e.id for e in client.beta.sessions.events.list(session.id)]

    with http.stream("GET", url, headers=turns.headers(last_event_id=last_seen), timeout=30) as response:
        assert response.status_code == 200
        resumed = read_sse_ids(response, lambda ids: ids[-1:] == listed[-1:])
    assert resumed == listed[listed.index(last_seen) + 1 :], "the resumed stream is the history after the event"

    # An id that is not an event of this session is refused, not silently ignored.
    other = new_session(client, turns, make_agent(client))
    refused = http.get(f"{turns.url}/v1/sessions/{other.id}/events/stream", headers=turns.headers(last_event_id=last_seen))
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["type"] == "invalid_request_error"
    assert "Last-Event-ID" in refused.json()["error"]["message"]


# ---------------------------------------------------------------------------------------
# Provider errors


def test_overloaded_until_retries_are_exhausted(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("overloaded")
    fake_anthropic.script(key, *[overloaded() for _ in range(8)])
    session = new_session(client, turns, make_agent(client))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    events = wait_idle(client, session.id, timeout=45)
    errors = of_type(events, "session.error")
    assert len(errors) >= 2
    assert all(e.error.type == "model_overloaded_error" for e in errors), [e.error.type for e in errors]
    assert [e.error.retry_status.type for e in errors[:-1]] == ["retrying"] * (len(errors) - 1)
    assert errors[-1].error.retry_status.type == "exhausted"
    assert types_of(events)[-2:] == ["session.error", "session.status_idle"]
    assert stop_reason(events[-1]) == "retries_exhausted"
    assert len(of_type(events, "session.status_idle")) == 1
    assert len(fake_anthropic.received(key)) == len(errors), "one request per error"
    assert len(errors) >= 4, "three-plus overloaded answers are retried before giving up"
    ends = of_type(events, "span.model_request_end")
    assert len(ends) == len(errors) and all(e.is_error for e in ends)
    assert client.beta.sessions.retrieve(session.id).status == "idle"
    assert not of_type(events, "agent.message")


def test_bad_request_fails_at_once(turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic) -> None:
    key = unique("badreq")
    fake_anthropic.script(key, http_error(400, "messages: bad"), say("never"))
    session = new_session(client, turns, make_agent(client))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    events = wait_idle(client, session.id)
    (error,) = of_type(events, "session.error")
    assert error.error.type == "model_request_failed_error"
    assert error.error.retry_status.type == "exhausted"
    assert stop_reason(events[-1]) == "retries_exhausted"
    settle()
    assert len(fake_anthropic.received(key)) == 1, "a 400 is not retried"


TRANSIENT = {
    "529": (overloaded(), "model_overloaded_error"),
    "429": (http_error(429, "slow down"), "model_rate_limited_error"),
    "500": (http_error(500, "boom"), "model_request_failed_error"),
    "in-stream overloaded": (Reply(stream_error="overloaded_error"), "model_overloaded_error"),
    "connection dropped": (Reply(blocks=[text("lost")], cut_after=0), "model_request_failed_error"),
}


@pytest.mark.parametrize("failure", list(TRANSIENT), ids=list(TRANSIENT))
def test_transient_failure_is_retried(
    failure: str, turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    reply, error_type = TRANSIENT[failure]
    key = unique("transient")
    fake_anthropic.script(key, reply, say("recovered"))
    session = new_session(client, turns, make_agent(client))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    events = wait_idle(client, session.id)
    (error,) = of_type(events, "session.error")
    assert error.error.type == error_type
    assert error.error.retry_status.type == "retrying"
    assert "session.status_rescheduled" in types_of(events)
    assert stop_reason(events[-1]) == "end_turn"
    assert texts(events) == ["recovered"]
    assert len(fake_anthropic.received(key)) == 2
    assert client.beta.sessions.retrieve(session.id).status == "idle"


def test_stream_that_ends_without_message_stop_is_not_a_success(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    """A body that ends cleanly but before `message_stop` is an incomplete response: it
    must surface as a provider error (and be retried), not as a finished turn."""
    key = unique("truncated")
    fake_anthropic.script(key, Reply(blocks=[text("half an ans")], truncate_after=0), say("complete answer"))
    session = new_session(client, turns, make_agent(client))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    events = wait_idle(client, session.id)
    assert of_type(events, "session.error"), f"a truncated stream ended the turn silently: {types_of(events)}"
    assert texts(events) == ["complete answer"]
    assert stop_reason(events[-1]) == "end_turn"


# ---------------------------------------------------------------------------------------
# Sessions API


def test_create_variants_snapshot_the_agent(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    agent = make_agent(client, system="v1 system", tools=[CUSTOM_TOOL])
    v2 = client.beta.agents.update(agent.id, version=agent.version, system="v2 system")
    assert v2.version == 2

    latest = new_session(client, turns, agent.id, title="latest", metadata={"case": "string"})
    assert latest.agent.id == agent.id and latest.agent.version == 2 and latest.agent.system == "v2 system"
    assert latest.title == "latest" and latest.metadata == {"case": "string"}
    assert latest.status == "idle" and latest.archived_at is None

    pinned = new_session(client, turns, {"type": "agent", "id": agent.id, "version": 1})
    assert pinned.agent.version == 1 and pinned.agent.system == "v1 system"

    overridden = new_session(
        client, turns, {"type": "agent_with_overrides", "id": agent.id, "system": "override system", "tools": []}
    )
    assert overridden.agent.system == "override system"
    assert overridden.agent.tools == []

    # Later agent changes do not reach existing sessions; the snapshot is what the model sees.
    client.beta.agents.update(agent.id, version=2, system="v3 system")
    assert client.beta.sessions.retrieve(pinned.id).agent.system == "v1 system"
    for session, system, tools in ((pinned, "v1 system", ["get_weather"]), (overridden, "override system", [])):
        key = unique("snapshot")
        fake_anthropic.script(key, say("noted"))
        client.beta.sessions.events.send(session.id, events=[user_message(key)])
        wait_idle(client, session.id)
        (request,) = fake_anthropic.wait_requests(key, 1)
        assert request.body.get("system") == system
        assert [t["name"] for t in request.body.get("tools", [])] == tools

    with pytest.raises(anthropic.BadRequestError):
        new_session(client, turns, {"type": "agent", "id": agent.id, "version": 99})
    with pytest.raises(anthropic.BadRequestError):
        new_session(client, turns, "agent_does_not_exist")


def test_initial_events_start_a_turn(turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic) -> None:
    key = unique("initial")
    fake_anthropic.script(key, say("started by initial_events"))
    session = new_session(client, turns, make_agent(client), initial_events=[user_message(f"go {key}")])
    events = wait_idle(client, session.id)
    assert types_of(events) == PLAIN_TURN
    assert events[0].content[0].text == f"go {key}"
    assert texts(events) == ["started by initial_events"]
    (request,) = fake_anthropic.wait_requests(key, 1)
    assert request.body["messages"][0]["content"][0]["text"] == f"go {key}"


def test_sessions_cannot_start_from_archived_or_disabled_resources(turns: Deployment, client: anthropic.Anthropic) -> None:
    agent = make_agent(client)
    archived_env = client.beta.environments.create(name=unique("archived-env"), config={"type": "cloud"})
    client.beta.environments.archive(archived_env.id)
    with pytest.raises(anthropic.BadRequestError) as caught:
        new_session(client, turns, agent, environment_id=archived_env.id)
    assert "archived" in caught.value.message.lower()

    archived_agent = make_agent(client)
    client.beta.agents.archive(archived_agent.id)
    with pytest.raises(anthropic.BadRequestError) as caught:
        new_session(client, turns, archived_agent)
    assert "archived" in caught.value.message.lower()

    disabled = make_agent(client)
    client.post(f"/v1/agents/{disabled.id}/disable", cast_to=object, body={}, options={"headers": BETA_HEADERS})
    with pytest.raises(anthropic.BadRequestError) as caught:
        new_session(client, turns, disabled)
    assert "disabled" in caught.value.message.lower()


def test_update_emits_only_the_changed_fields(turns: Deployment, client: anthropic.Anthropic, readers: list[Reader]) -> None:
    session = new_session(client, turns, make_agent(client), title="before", metadata={"a": "1"})
    reader = open_reader(readers, turns, session.id)

    def updates() -> list[dict[str, Any]]:
        raw = client.beta.sessions.events.with_raw_response.list(session.id, types=["session.updated"], limit=100)
        return [{k: v for k, v in e.items() if k not in ("id", "processed_at")} for e in raw.json()["data"]]

    updated = client.beta.sessions.update(session.id, title="after")
    assert updated.title == "after" and updated.metadata == {"a": "1"}
    assert updates() == [{"type": "session.updated", "title": "after"}]

    client.beta.sessions.update(session.id, title="after")  # no change, no event
    assert len(updates()) == 1

    updated = client.beta.sessions.update(session.id, metadata={"b": "2"})
    assert updated.metadata == {"a": "1", "b": "2"}
    assert updates()[-1] == {"type": "session.updated", "metadata": {"a": "1", "b": "2"}}

    updated = client.beta.sessions.update(session.id, title="both", metadata={"a": None})
    assert updated.title == "both" and updated.metadata == {"b": "2"}
    assert updates()[-1] == {"type": "session.updated", "title": "both", "metadata": {"b": "2"}}
    assert len(updates()) == 3

    retrieved = client.beta.sessions.retrieve(session.id)
    assert retrieved.title == "both" and retrieved.metadata == {"b": "2"}
    live = reader.wait(lambda evs: len(of_type(evs, "session.updated")) >= 3, what="three session.updated")
    assert [e.id for e in of_type(live, "session.updated")] == [e.id for e in history(client, session.id, types=["session.updated"])]


def test_list_filters_and_pages_both_ways(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    agent = make_agent(client)
    other = make_agent(client)
    made = []
    for i in range(5):
        made.append(new_session(client, turns, agent, title=f"s{i}"))
        time.sleep(0.01)
    new_session(client, turns, other)
    ids = [s.id for s in made]

    newest_first = collect(client.beta.sessions.list(agent_id=agent.id))
    assert [s.id for s in newest_first] == ids[::-1], "default order is newest first"
    oldest_first = collect(client.beta.sessions.list(agent_id=agent.id, order="asc"))
    assert [s.id for s in oldest_first] == ids

    page1 = client.beta.sessions.list(agent_id=agent.id, limit=2)
    assert [s.id for s in page1.data] == [ids[4], ids[3]]
    assert page1.next_page
    page2 = client.beta.sessions.list(agent_id=agent.id, limit=2, page=page1.next_page)
    assert [s.id for s in page2.data] == [ids[2], ids[1]]
    assert page2.prev_page and page2.next_page
    back = client.beta.sessions.list(agent_id=agent.id, limit=2, page=page2.prev_page)
    assert [s.id for s in back.data] == [ids[4], ids[3]], "prev_page leads back to the first page"
    assert not back.prev_page
    page3 = client.beta.sessions.list(agent_id=agent.id, limit=2, page=page2.next_page)
    assert [s.id for s in page3.data] == [ids[0]]
    assert not page3.next_page

    versioned = collect(client.beta.sessions.list(agent_id=agent.id, agent_version=1))
    assert len(versioned) == 5
    assert collect(client.beta.sessions.list(agent_id=agent.id, agent_version=2)) == []
    since = collect(client.beta.sessions.list(agent_id=agent.id, created_at_gte=made[3].created_at, order="asc"))
    assert [s.id for s in since] == ids[3:]

    # statuses[]: one session running a slow reply.
    key = unique("running")
    fake_anthropic.script(key, slow("still talking", chunks=20, delay=0.2))
    client.beta.sessions.events.send(ids[0], events=[user_message(key)])
    wait_streaming(fake_anthropic, key, blocks=0)
    running = collect(client.beta.sessions.list(agent_id=agent.id, statuses=["running"]))
    idle = collect(client.beta.sessions.list(agent_id=agent.id, statuses=["idle"]))
    either = collect(client.beta.sessions.list(agent_id=agent.id, statuses=["idle", "running"]))
    assert [s.id for s in running] == [ids[0]]
    assert ids[0] not in {s.id for s in idle} and len(idle) == 4
    assert len(either) == 5
    client.beta.sessions.events.send(ids[0], events=[{"type": "user.interrupt"}])
    wait_idle(client, ids[0], timeout=10)
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.list(statuses=["sleeping"])  # type: ignore[list-item]


def test_archive_and_delete(turns: Deployment, client: anthropic.Anthropic, readers: list[Reader]) -> None:
    agent = make_agent(client)
    archived = new_session(client, turns, agent)
    kept = new_session(client, turns, agent)
    result = client.beta.sessions.archive(archived.id)
    assert result.id == archived.id and result.archived_at is not None
    assert client.beta.sessions.retrieve(archived.id).archived_at is not None
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.events.send(archived.id, events=[user_message("hello?")])
    assert [s.id for s in collect(client.beta.sessions.list(agent_id=agent.id))] == [kept.id]
    assert {s.id for s in collect(client.beta.sessions.list(agent_id=agent.id, include_archived=True))} == {kept.id, archived.id}

    reader = open_reader(readers, turns, kept.id)
    deleted = client.beta.sessions.delete(kept.id)
    assert deleted.id == kept.id and deleted.type == "session_deleted"
    seen = reader.wait(lambda evs: "session.deleted" in types_of(evs), timeout=10, what="session.deleted")
    assert types_of(seen)[-1] == "session.deleted"
    assert reader.ended.wait(10), "session.deleted must end the stream"
    assert reader.error is None, reader.error
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.retrieve(kept.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.events.list(kept.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.delete(kept.id)


def test_primary_thread_routes(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic, readers: list[Reader]
) -> None:
    key = unique("thread")
    fake_anthropic.script(key, say("on the thread"), say("second"))
    session = new_session(client, turns, make_agent(client))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    events = wait_idle(client, session.id)

    threads = collect(client.beta.sessions.threads.list(session.id))
    assert len(threads) == 1
    (thread,) = threads
    assert thread.id == session.id and thread.session_id == session.id
    assert thread.parent_thread_id is None and thread.status == "idle"
    assert client.beta.sessions.threads.retrieve(session.id, session_id=session.id).id == session.id
    assert collect(client.beta.sessions.threads.list(session.id, statuses=["running"])) == []
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.threads.retrieve("sthr_nope", session_id=session.id)

    listed = collect(client.beta.sessions.threads.events.list(session.id, session_id=session.id))
    assert [e.id for e in listed] == [e.id for e in events]

    reader = open_reader(readers, turns, session.id, thread=True, event_deltas=["agent.message"])
    client.beta.sessions.events.send(session.id, events=[user_message("more")])
    events = wait_idle(client, session.id, count=2)
    seen = reader.wait_idle()
    assert [e.id for e in reader.committed()] == [e.id for e in events[len(listed) :]]
    assert [e for e in seen if e.type == "event_start"], "thread streams take event_deltas too"


# ---------------------------------------------------------------------------------------
# Distributed mode only


def require_prod(deployment: Deployment) -> None:
    if deployment.mode != "prod":
        pytest.skip("distributed mode only")


_SECOND_GATEWAY: dict[str, str] = {}


def test_stream_on_one_gateway_send_on_another(
    turns: Deployment, fake_anthropic: FakeAnthropic, readers: list[Reader]
) -> None:
    require_prod(turns)
    if turns.url not in _SECOND_GATEWAY:
        _SECOND_GATEWAY[turns.url] = turns.start_gateway()
    other = _SECOND_GATEWAY[turns.url]
    first_client, other_client = turns.client(), turns.client(base_url=other)
    key = unique("gateways")
    fake_anthropic.script(key, Reply(blocks=[text("across gateways", chunks=4)], delay=0.02), say("and back"))
    session = new_session(first_client, turns, make_agent(first_client))

    reader = open_reader(readers, turns, session.id, event_deltas=["agent.message"])  # gateway 1
    other_client.beta.sessions.events.send(session.id, events=[user_message(key)])  # gateway 2
    events = wait_idle(first_client, session.id)
    seen = reader.wait_idle()
    assert [e.id for e in reader.committed()] == [e.id for e in events]
    assert [e for e in seen if e.type == "event_delta"], "previews travel to the other gateway too"

    reverse = open_reader(readers, turns, session.id, base_url=other)  # gateway 2
    first_client.beta.sessions.events.send(session.id, events=[user_message("reverse")])  # gateway 1
    events = wait_idle(other_client, session.id, count=2)
    reverse.wait_idle()
    assert [e.id for e in reverse.committed()] == [e.id for e in events[len(PLAIN_TURN) :]]


@pytest.mark.slow
def test_sigkill_worker_mid_response_does_not_lose_the_turn(
    turns: Deployment,
    launch: Callable[..., Deployment],
    provider_env: dict[str, str],
    fake_anthropic: FakeAnthropic,
) -> None:
    """SLOW (~30–45 s): a worker SIGKILLed while the model streams; another finishes the turn."""
    require_prod(turns)
    deployment = launch("prod", worker=False, extra_env=provider_env)
    doomed = deployment.start_worker()
    client = deployment.client()
    key = unique("sigkill")
    fake_anthropic.script(key, slow("a long answer " * 8, chunks=40, delay=0.25), say("answer after recovery"))
    session = new_session(client, deployment, make_agent(client))
    client.beta.sessions.events.send(session.id, events=[user_message(f"question {key}")])
    first = wait_streaming(fake_anthropic, key, blocks=0)

    survivor = deployment.start_worker()
    assert first.events_sent >= 3 and not first.done.is_set(), "the first worker must still be streaming"
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.proc.wait(timeout=10)
    killed_at = len(history(client, session.id))

    events = wait_history(
        client,
        session.id,
        lambda evs: len(evs) > killed_at and types_of(evs)[-1] == "session.status_idle",
        timeout=75,
        what="the turn finishing on the surviving worker",
    )
    settle(1.0)
    events = history(client, session.id)
    assert survivor.alive(), survivor.output_tail()

    problems = []
    ids = [e.id for e in events]
    if len(set(ids)) != len(ids):
        problems.append(f"duplicate event ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    idles = of_type(events, "session.status_idle")
    if len(idles) != 1:
        problems.append(f"expected exactly one session.status_idle, got {len(idles)}")
    if stop_reason(events[-1]) != "end_turn":
        problems.append(f"final stop_reason {stop_reason(events[-1])!r}, expected end_turn")
    messages = texts(events)
    if len(messages) != len(set(messages)):
        problems.append(f"an agent.message was committed twice: {messages}")
    if len(fake_anthropic.received(key)) < 2:
        problems.append(
            "the surviving worker never asked the model again: the user's message was left unanswered "
            f"(history: {types_of(events)})"
        )
    if "answer after recovery" not in messages:
        problems.append(f"no agent.message answers the question after the recovery: {messages}")
    starts = {e.id for e in of_type(events, "span.model_request_start")}
    closed = {e.model_request_start_id for e in of_type(events, "span.model_request_end")}
    if starts - closed:
        problems.append(f"span.model_request_start without a span.model_request_end: {sorted(starts - closed)}")
    if not first.disconnected and not first.finished:
        fake_anthropic.wait_for(lambda: first.done.is_set(), 5, "the killed worker's provider connection closing")
    assert not problems, "\n".join(problems) + f"\nhistory: {types_of(events)}"


# ---------------------------------------------------------------------------------------
# The OpenAI-compatible provider


def test_openai_compatible_provider(
    turns: Deployment, client: anthropic.Anthropic, fake_openai: FakeOpenAI
) -> None:
    try:
        agent = make_agent(client, model=OPENAI_MODEL, tools=[CUSTOM_TOOL])
    except anthropic.BadRequestError as err:
        pytest.xfail(f"agents cannot be created with {OPENAI_MODEL} yet: {err.message}")
    key = unique("openai")
    fake_openai.script(
        key,
        Reply(blocks=[text("Checking."), tool_use("get_weather", {"city": "Oslo"})], stop_reason="tool_use", usage=Usage(input_tokens=50, output_tokens=9, cache_read_input_tokens=20)),
        say("It is cold in Oslo."),
    )
    session = new_session(client, turns, agent)
    client.beta.sessions.events.send(session.id, events=[user_message(f"weather {key}")])
    events = wait_idle(client, session.id)
    assert stop_reason(events[-1]) == "requires_action", types_of(events)
    (use,) = of_type(events, "agent.custom_tool_use")
    assert use.name == "get_weather" and use.input == {"city": "Oslo"}
    assert texts(events) == ["Checking."]
    end = of_type(events, "span.model_request_end")[0]
    assert (end.model_usage.input_tokens, end.model_usage.output_tokens, end.model_usage.cache_read_input_tokens) == (50, 9, 20)
    (first,) = fake_openai.wait_requests(key, 1)
    assert first.body["model"] == OPENAI_MODEL.removeprefix("openai/")
    assert first.body["stream"] is True
    assert [t["function"]["name"] for t in first.body["tools"]] == ["get_weather"]

    client.beta.sessions.events.send(
        session.id,
        events=[{"type": "user.custom_tool_result", "custom_tool_use_id": use.id, "content": [{"type": "text", "text": "-5 C"}]}],
    )
    events = wait_idle(client, session.id, count=2)
    assert stop_reason(events[-1]) == "end_turn"
    assert texts(events) == ["Checking.", "It is cold in Oslo."]
    _, second = fake_openai.wait_requests(key, 2)
    roles = [m["role"] for m in second.messages]
    assert roles == ["user", "assistant", "tool"], roles
    assert second.messages[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert json.loads(second.messages[1]["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    assert second.messages[2]["tool_call_id"] == second.messages[1]["tool_calls"][0]["id"]
    assert second.messages[2]["content"] == "-5 C"
