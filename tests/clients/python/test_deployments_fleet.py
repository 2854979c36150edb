"""The fleet test of deployments (issue 20, deliverable 7): a `* * * * *` schedule under
two gateways and three workers on PostgreSQL, NATS JetStream and Redis, one worker
SIGKILLed while a fired run's turn streams, observed for three minutes of real time.

What it proves, with the official SDK: exactly one run per slot (the slots are whole
minutes, consecutive from the first after the deployment was created — no duplicate, no
gap), every run has a session and no error, the deployment lists exactly those sessions,
and each session's turn was committed once (one user.message, one agent.message, one
final idle, no event id twice, every model request span closed) although the turn of
one of them died with its worker and was run again by another.

Both gateways run the scheduler with the tests-only fast tick (100 ms), so each slot is
raced for by two claimers about ten times; the production rule (the claim in the store)
is what keeps it once. The model is the scriptable fake: each reply streams for about
three seconds, so the SIGKILL lands mid-turn. The three minutes are real time: the test
is `slow` and has this file to itself, so it can be run apart from (or beside) the rest of
the suite.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any, Callable

import anthropic
import pytest

from fake_models import FakeAnthropic, slow
from harness import Deployment, collect, unique
from test_reliability import kill9, socket_owner, wait_streaming

# Priced in the built-in catalog and served by the Anthropic fake (provider_env).
MODEL = "claude-sonnet-4-5"
OBSERVE_SECS = 180
# How long one reply streams: 12 deltas 0.25 s apart.
REPLY_CHUNKS, REPLY_DELAY = 12, 0.25


def events(client: anthropic.Anthropic, session_id: str) -> list[Any]:
    return collect(client.beta.sessions.events.list(session_id, limit=1000))


def assert_turn_committed_once(history: list[Any], where: str) -> None:
    ids = [e.id for e in history]
    assert len(ids) == len(set(ids)), f"{where}: an event id twice: {ids}"
    kinds = [e.type for e in history]
    for kind in ("user.message", "session.status_running", "agent.message", "session.status_idle"):
        assert kinds.count(kind) == 1, f"{where}: {kinds.count(kind)} × {kind}: {kinds}"
    order = [kinds.index(k) for k in ("user.message", "session.status_running", "agent.message", "session.status_idle")]
    assert order == sorted(order), f"{where}: out of order: {kinds}"
    assert kinds[-1] == "session.status_idle", f"{where}: something after the final idle: {kinds}"
    (idle,) = [e for e in history if e.type == "session.status_idle"]
    assert idle.stop_reason.type == "end_turn", f"{where}: {idle.stop_reason}"
    starts = {e.id for e in history if e.type == "span.model_request_start"}
    ends = {e.model_request_start_id for e in history if e.type == "span.model_request_end"}
    assert starts and starts == ends, f"{where}: model request spans not closed: {sorted(starts - ends)}"


@pytest.mark.slow
def test_a_minutely_schedule_fires_once_per_slot_across_two_gateways_and_three_workers_one_killed(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    fleet = launch(
        "prod",
        worker=False,
        extra_env=provider_env
        | {
            "AGENTD_TEST_DEPLOYMENT_TICK_MS": "100",
            # A dead worker's run is reclaimed within seconds, not after the 30 s defaults.
            "AGENTD_LEASE": "1s",
            "AGENTD_QUEUE_ACK_WAIT": "1s",
            "AGENTD_DRAIN_TIMEOUT": "3s",
        },
    )
    second_gateway = fleet.start_gateway()
    workers = [fleet.start_worker() for _ in range(3)]
    gateways = [p for p in fleet.processes if p.name.startswith("agentd gateway")]
    assert len(gateways) == 2 and len(workers) == 3
    client = fleet.client()
    other = fleet.client(base_url=second_gateway)

    key = unique("fleet")
    fake_anthropic.script(key, *[slow(f"answer for {key}", chunks=REPLY_CHUNKS, delay=REPLY_DELAY)] * 12)
    agent = client.beta.agents.create(name=unique("fleet-agent"), model=MODEL)
    environment = client.beta.environments.create(name=unique("fleet-env"), config={"type": "cloud"})
    started = time.time()
    created = other.beta.deployments.create(
        name=unique("fleet"),
        agent=agent.id,
        environment_id=environment.id,
        initial_events=[{"type": "user.message", "content": [{"type": "text", "text": f"tick {key}"}]}],
        schedule={"type": "cron", "expression": "* * * * *", "timezone": "UTC"},
    )
    assert created.schedule is not None and created.schedule.upcoming_runs_at
    first: datetime = created.schedule.upcoming_runs_at[0]
    assert first.second == 0 and first.microsecond == 0 and 0 < first.timestamp() - started <= 61, first

    # The first slot's turn: SIGKILL the worker streaming it.
    request = wait_streaming(fake_anthropic, key, events=3, timeout=first.timestamp() - time.time() + 30)
    owner = None
    for _ in range(40):
        owner = socket_owner(request.peer[1], [w.pid for w in workers if w.alive()])
        if owner is not None:
            break
        time.sleep(0.05)
    assert owner is not None, f"no worker owns the model connection {request.peer}"
    victim = next(w for w in workers if w.pid == owner)
    assert not request.done.is_set(), "the first slot's reply ended before the kill"
    kill9(victim)
    assert request.done.wait(10) and request.disconnected, "the kill did not cut the first slot's turn short"

    # Observe for three minutes (and at least through the third slot).
    end = max(started + OBSERVE_SECS, first.timestamp() + 122)
    while time.time() < end:
        assert all(g.alive() for g in gateways), [g.output_tail() for g in gateways if not g.alive()]
        time.sleep(min(5.0, max(0.0, end - time.time())))
    expected = []
    slot = first
    while slot.timestamp() <= end - 1:
        expected.append(slot)
        slot += timedelta(minutes=1)
    assert len(expected) >= 3, expected

    def scheduled() -> list[Any]:
        return collect(client.beta.deployment_runs.list(deployment_id=created.id, limit=100))

    # Every run has its session, and every session's turn is over.
    deadline = time.monotonic() + 60
    while True:
        runs = scheduled()
        done = [r for r in runs if r.session_id or r.error]
        idle = [
            r for r in done if r.session_id and any(e.type == "session.status_idle" for e in events(client, r.session_id))
        ]
        if len(runs) >= len(expected) and len(idle) == len(runs):
            break
        assert time.monotonic() < deadline, f"runs not finished: {runs}"
        time.sleep(1)

    # Exactly one run per slot: no duplicate, no gap, nothing outside the window.
    assert all(r.trigger_context.type == "schedule" for r in runs), runs
    slots = sorted(r.trigger_context.scheduled_at for r in runs)  # type: ignore[union-attr]
    assert len(slots) == len(set(slots)), f"a slot fired twice: {slots}"
    assert slots[: len(expected)] == expected, f"slots {slots}, expected {expected}"
    assert len(slots) <= len(expected) + 1, f"more slots than minutes passed: {slots}"
    for run in runs:
        assert run.error is None and run.session_id, run
    sessions = collect(client.beta.sessions.list(deployment_id=created.id, limit=100))
    assert sorted(s.id for s in sessions) == sorted(r.session_id for r in runs)

    # Each session's turn committed once, the killed one included.
    for run in runs:
        assert_turn_committed_once(events(client, run.session_id), f"session of slot {run.trigger_context.scheduled_at}")  # type: ignore[union-attr]
    asked = fake_anthropic.received(key)
    assert len(asked) >= len(runs) + 1, f"the killed turn was not asked again: {len(asked)} requests, {len(runs)} runs"
    assert not victim.alive() and all(w.alive() for w in workers if w is not victim)
    current = client.beta.deployments.retrieve(created.id)
    assert current.status == "active" and current.schedule is not None and current.schedule.last_run_at is not None
    client.beta.deployments.archive(created.id)
