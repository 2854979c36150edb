"""Outcomes graded against a rubric (docs/api/outcomes.md): `user.define_outcome` is echoed
with a server `outcome_id` (`outc_…`) and the agent starts work; when its turn ends, a grader
model call (the agent's model, forced to call `outcome_verdict`) evaluates the result. Each
cycle is `span.outcome_evaluation_start` → `span.outcome_evaluation_end`; `needs_revision`
gives the grader's explanation back to the agent and the turn goes on, until `satisfied`, the
last cycle `max_iterations` allows (`max_iterations_reached`: one final, ungraded turn), or a
failure of the grader (`failed`, never a hang). While the grader is asked, a
`span.outcome_evaluation_ongoing` heartbeat is committed every `AGENTD_OUTCOME_HEARTBEAT`. The
session's `outcome_evaluations` shows the state (`running` from the turn that takes the outcome
up, `evaluating` while graded; below `full` content capture without the grader's explanation),
the grader's tokens count in its usage, and each end is the webhook
`session.outcome_evaluation_ended`.

Wire facts: managed-agents-wire.md §2B (`BetaManagedAgentsUserDefineOutcomeEventParams`,
rubric text|file, `max_iterations` default 3, max 20), §2.x (`outcome_evaluations`,
`BetaManagedAgentsOutcomeEvaluationResource`), §4 (`span.outcome_evaluation_*`). The model
is the fake of fake_models.py: the grader's request carries the outcome's description, so it
takes the next reply of the outcome's key. Every test runs against `agentd dev` and
gateway+worker (fixture `turns`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

import anthropic
import pytest

from fake_models import FakeAnthropic, Reply, Usage, http_error, say, text, tool_use
from harness import Deployment, collect, unique
from test_webhooks import Receiver, subscribe, verify

MODEL = "claude-sonnet-4-6"
TURN_TIMEOUT = 30.0
VERDICT_TOOL = "outcome_verdict"
RUBRIC = "The haiku has a title line and exactly three lines of verse."


@pytest.fixture
def client(turns: Deployment) -> anthropic.Anthropic:
    return turns.client()


_ENVIRONMENTS: dict[str, str] = {}


def environment(client: anthropic.Anthropic, deployment: Deployment) -> str:
    if deployment.url not in _ENVIRONMENTS:
        env = client.beta.environments.create(name=unique("outcome-env"), config={"type": "cloud"})
        _ENVIRONMENTS[deployment.url] = env.id
    return _ENVIRONMENTS[deployment.url]


def outcome(key: str, *, rubric: dict[str, Any] | None = None, max_iterations: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "user.define_outcome",
        "description": f"Write a haiku about the sea {key}",
        "rubric": rubric or {"type": "text", "content": RUBRIC},
    }
    if max_iterations is not None:
        event["max_iterations"] = max_iterations
    return event


def start(client: anthropic.Anthropic, deployment: Deployment, event: dict[str, Any]) -> tuple[Any, Any]:
    """A session of a tool-less agent, sent the outcome; the session and the echo."""
    agent = client.beta.agents.create(name=unique("outcome-agent"), model=MODEL)
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment(client, deployment))
    sent = client.beta.sessions.events.send(session.id, events=[event])
    (echo,) = sent.data or []
    return session, echo


def verdict(result: str, explanation: str, gate: str | None = None, **usage: int) -> Reply:
    """The grader's answer: a call of its verdict tool (held until `gate` opens, if any)."""
    return Reply(
        blocks=[tool_use(VERDICT_TOOL, {"result": result, "explanation": explanation})],
        stop_reason="tool_use",
        usage=Usage(**usage) if usage else Usage(),
        gate=gate,
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


def wait_idle(client: anthropic.Anthropic, session_id: str) -> list[Any]:
    return wait_history(client, session_id, lambda events: bool(of_type(events, "session.status_idle")), "idle")


def message_text(event: Any) -> str:
    return "".join(b.text for b in (event.content or []) if b.type == "text")


def assert_grader_request(request: Any, key: str) -> None:
    """The grader was asked with the outcome and the rubric, forced to give a verdict."""
    body = request.body
    assert "outcome grader" in body["system"], body["system"]
    assert body["tool_choice"] == {"type": "tool", "name": VERDICT_TOOL}
    assert [t["name"] for t in body["tools"]] == [VERDICT_TOOL]
    assert body["tools"][0]["input_schema"]["properties"]["result"]["enum"] == ["satisfied", "needs_revision"]
    (prompt,) = request.texts()
    assert key in prompt, "the grader sees the outcome's description"


# ---------------------------------------------------------------------------------------
# Tests


def test_an_outcome_that_fails_once_passes_on_the_second_iteration(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("outcome-revise")
    fake_anthropic.script(
        key,
        say("Waves fold on the shore / salt wind combs the dune grass flat / the tide keeps its time"),
        verdict("needs_revision", "The haiku has no title line.", input_tokens=400, output_tokens=30),
        say("Sea Haiku\nWaves fold on the shore / salt wind combs the dune grass flat / the tide keeps its time"),
        verdict("satisfied", "It has a title and three lines of verse.", input_tokens=500, output_tokens=20),
    )
    session, echo = start(client, turns, outcome(key))
    assert echo.type == "user.define_outcome"
    assert echo.outcome_id.startswith("outc_") and echo.max_iterations == 3, echo
    assert echo.rubric.type == "text" and echo.rubric.content == RUBRIC

    events = wait_idle(client, session.id)
    assert [t for t in types_of(events) if t != "session.usage"] == [
        "user.define_outcome",
        "session.status_running",
        "span.model_request_start",
        "agent.message",
        "span.model_request_end",
        "span.outcome_evaluation_start",
        "span.outcome_evaluation_end",
        "span.model_request_start",
        "agent.message",
        "span.model_request_end",
        "span.outcome_evaluation_start",
        "span.outcome_evaluation_end",
        "session.status_idle",
    ], types_of(events)
    assert events[-1].stop_reason.type == "end_turn"
    starts = of_type(events, "span.outcome_evaluation_start")
    ends = of_type(events, "span.outcome_evaluation_end")
    assert [(s.outcome_id, s.iteration) for s in starts] == [(echo.outcome_id, 0), (echo.outcome_id, 1)]
    assert [(e.result, e.iteration) for e in ends] == [("needs_revision", 0), ("satisfied", 1)]
    assert [e.outcome_evaluation_start_id for e in ends] == [s.id for s in starts]
    assert ends[0].explanation == "The haiku has no title line."
    assert ends[1].explanation == "It has a title and three lines of verse."
    assert [(e.usage.input_tokens, e.usage.output_tokens) for e in ends] == [(400, 30), (500, 20)]

    first, graded, revised, regraded = fake_anthropic.wait_requests(key, 4)
    assert VERDICT_TOOL not in str(first.body), "the agent is not offered the grader's tool"
    assert RUBRIC in str(first.body), "the agent reads the outcome and its text rubric"
    assert_grader_request(graded, key)
    assert RUBRIC in graded.texts()[0] and "Waves fold on the shore" in graded.texts()[0]
    assert "The haiku has no title line." in str(revised.body), "the grader's feedback reaches the agent"
    assert_grader_request(regraded, key)
    assert "iteration 1" in regraded.texts()[0]

    retrieved = client.beta.sessions.retrieve(session.id)
    (evaluation,) = retrieved.outcome_evaluations
    assert evaluation.type == "outcome_evaluation" and evaluation.outcome_id == echo.outcome_id
    assert evaluation.description == f"Write a haiku about the sea {key}"
    assert (evaluation.result, evaluation.iteration) == ("satisfied", 1)
    assert evaluation.explanation == "It has a title and three lines of verse."
    assert evaluation.completed_at is not None
    # The grader's tokens count in the session's usage (each agent reply: 25 in, 7 out).
    assert (retrieved.usage.input_tokens, retrieved.usage.output_tokens) == (25 + 400 + 25 + 500, 7 + 30 + 7 + 20)


def test_the_last_iteration_ends_the_outcome_with_one_final_turn(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("outcome-max")
    fake_anthropic.script(
        key,
        say("A haiku without a title."),
        verdict("needs_revision", "No title line."),
        say("I could not add a title in time."),
    )
    session, echo = start(client, turns, outcome(key, max_iterations=1))
    assert echo.max_iterations == 1
    events = wait_idle(client, session.id)
    (end,) = of_type(events, "span.outcome_evaluation_end")
    assert (end.result, end.iteration, end.explanation) == ("max_iterations_reached", 0, "No title line.")
    last = of_type(events, "agent.message")[-1]
    assert message_text(last) == "I could not add a title in time.", "one final, ungraded turn"
    assert len(of_type(events, "span.outcome_evaluation_start")) == 1
    assert len(of_type(events, "session.status_idle")) == 1
    _, _, final = fake_anthropic.wait_requests(key, 3)
    assert "no evaluation cycles remain" in str(final.body)
    (evaluation,) = client.beta.sessions.retrieve(session.id).outcome_evaluations
    assert (evaluation.result, evaluation.iteration) == ("max_iterations_reached", 0)
    assert evaluation.completed_at is not None


def test_a_grader_failure_ends_the_outcome_failed(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("outcome-fail")
    fake_anthropic.script(key, say("Here is the haiku."), http_error(400, "the grader's request was refused"))
    session, echo = start(client, turns, outcome(key))
    events = wait_idle(client, session.id)
    assert events[-1].type == "session.status_idle" and events[-1].stop_reason.type == "end_turn"
    (end,) = of_type(events, "span.outcome_evaluation_end")
    assert (end.result, end.iteration) == ("failed", 0)
    assert "grader failed" in end.explanation and "refused" in end.explanation, end.explanation
    assert len(of_type(events, "span.model_request_start")) == 1, "no revision follows a failure"
    (evaluation,) = client.beta.sessions.retrieve(session.id).outcome_evaluations
    assert evaluation.outcome_id == echo.outcome_id
    assert (evaluation.result, evaluation.completed_at is not None) == ("failed", True)
    assert "grader failed" in (evaluation.explanation or "")


def test_a_file_rubric_is_read_by_the_grader(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    key = unique("outcome-file")
    rubric_text = f"Graded from a file {key}: the haiku mentions the moon."
    file = client.beta.files.upload(file=("rubric.txt", rubric_text.encode(), "text/plain"))
    fake_anthropic.script(key, say("Moon over the waves."), verdict("satisfied", "The moon is there."))
    session, echo = start(client, turns, outcome(key, rubric={"type": "file", "file_id": file.id}))
    assert echo.rubric.type == "file" and echo.rubric.file_id == file.id
    events = wait_idle(client, session.id)
    (end,) = of_type(events, "span.outcome_evaluation_end")
    assert end.result == "satisfied", end.explanation
    _, graded = fake_anthropic.wait_requests(key, 2)
    assert rubric_text in graded.texts()[0], "the grader reads the file's text"


def test_an_outcome_naming_a_missing_rubric_file_is_refused(
    turns: Deployment, client: anthropic.Anthropic
) -> None:
    event = outcome(unique("outcome-nofile"), rubric={"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"})
    agent = client.beta.agents.create(name=unique("outcome-agent"), model=MODEL)
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment(client, turns))
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.sessions.events.send(session.id, events=[event])
    assert "events[0].rubric.file_id" in refused.value.message
    assert history(client, session.id) == [] and client.beta.sessions.retrieve(session.id).outcome_evaluations == []


def test_a_held_grader_sends_heartbeats_while_the_entry_follows_the_work(
    turns: Deployment, launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """The entry is `running` while the agent works and `evaluating` while the grader is
    held, with a `span.outcome_evaluation_ongoing` every interval (here 200 ms) between
    the cycle's start and end; the end is also the webhook `session.outcome_evaluation_ended`."""
    deployment = launch(turns.mode, extra_env={
        **provider_env,
        "AGENTD_OUTCOME_HEARTBEAT": "200ms",
        "AGENTD_WEBHOOKS_ALLOW_PRIVATE": "true",
        "AGENTD_WEBHOOK_RETRY_BASE": "200ms",
    })
    client = deployment.client()
    receiver = Receiver()
    try:
        secret = subscribe(deployment, "outcomes", receiver.url("/outcomes"), ["session.outcome_evaluation_ended"])["secret"]
        key = unique("outcome-held")
        fake_anthropic.script(
            key,
            Reply(blocks=[text("Sea Haiku\nWaves fold / on the shore / the tide")], gate=f"{key}-agent"),
            verdict("satisfied", "A title and three lines.", gate=f"{key}-grader"),
        )
        session, echo = start(client, deployment, outcome(key))

        wait_history(client, session.id, lambda e: bool(of_type(e, "span.model_request_start")), "the agent's request")
        (entry,) = client.beta.sessions.retrieve(session.id).outcome_evaluations
        assert (entry.outcome_id, entry.result, entry.iteration) == (echo.outcome_id, "running", 0), entry
        fake_anthropic.open_gate(f"{key}-agent")

        held = wait_history(
            client, session.id, lambda e: len(of_type(e, "span.outcome_evaluation_ongoing")) >= 2, "two heartbeats"
        )
        assert not of_type(held, "span.outcome_evaluation_end"), "the grader is still held"
        (entry,) = client.beta.sessions.retrieve(session.id).outcome_evaluations
        assert (entry.result, entry.iteration, entry.completed_at) == ("evaluating", 0, None), entry
        fake_anthropic.open_gate(f"{key}-grader")

        events = wait_idle(client, session.id)
        kinds = types_of(events)
        (start_at,) = [i for i, t in enumerate(kinds) if t == "span.outcome_evaluation_start"]
        (end_at,) = [i for i, t in enumerate(kinds) if t == "span.outcome_evaluation_end"]
        beats = of_type(events, "span.outcome_evaluation_ongoing")
        assert len(beats) >= 2 and len({b.id for b in beats}) == len(beats), [b.id for b in beats]
        assert all(start_at < i < end_at for i, t in enumerate(kinds) if t == "span.outcome_evaluation_ongoing"), kinds
        assert all((b.outcome_id, b.iteration) == (echo.outcome_id, 0) and b.processed_at for b in beats), beats
        assert events[end_at].result == "satisfied"
        (entry,) = client.beta.sessions.retrieve(session.id).outcome_evaluations
        assert (entry.result, entry.explanation) == ("satisfied", "A title and three lines."), entry

        (delivery,) = receiver.wait("/outcomes", lambda got: len(got) >= 1)
        event = verify(client, secret, delivery)
        assert (event.data.type, event.data.id) == ("session.outcome_evaluation_ended", session.id), event
    finally:
        receiver.close()


def test_a_structured_session_keeps_no_grader_explanation(
    turns: Deployment, client: anthropic.Anthropic, fake_anthropic: FakeAnthropic
) -> None:
    """Below `full` content capture (ADR 0019) the session's entry keeps neither the
    outcome's description nor the grader's explanation, and the settled turn's history
    keeps the outcome and the verdict in their wire shape (the SDK reads them) without
    their text."""
    key = unique("outcome-captured")
    canary = f"CANARY {key}"
    marker = "[content not retained: content capture is structured]"
    fake_anthropic.script(key, say("A haiku."), verdict("satisfied", f"It meets the rubric. {canary}"))
    agent = client.beta.agents.create(name=unique("outcome-agent"), model=MODEL)
    session = client.beta.sessions.create(
        agent=agent.id, environment_id=environment(client, turns), extra_body={"content_capture": "structured"}
    )
    client.beta.sessions.events.send(session.id, events=[outcome(key)])
    events = wait_idle(client, session.id)
    (defined,) = of_type(events, "user.define_outcome")
    assert (defined.description, defined.rubric.type, defined.rubric.content) == (marker, "text", marker), defined
    assert defined.max_iterations == 3 and defined.outcome_id.startswith("outc_")
    (end,) = of_type(events, "span.outcome_evaluation_end")
    assert (end.result, end.iteration, end.explanation) == ("satisfied", 0, marker), end
    (entry,) = client.beta.sessions.retrieve(session.id).outcome_evaluations
    assert (entry.result, entry.description, entry.explanation) == ("satisfied", marker, marker), entry
    assert canary not in str([e.model_dump() for e in events])
