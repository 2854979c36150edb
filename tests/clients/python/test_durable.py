"""Durable run control (issue 7): `/v1/durable/threads/{thread}/…`, raw HTTP against
real deployments. Routes: submit_background, cancel, dispatches, messages, reconcile,
quarantine-retry-exhausted, dead-letters, requeue, purge (docs/api/durable.md).

The acceptance scenario runs on the distributed stack with workers armed to crash at
their first commit (AGENTD_FAULT_CRASH_AT): a run that crashes on every attempt ends
`retries_exhausted` on its own (no dead letter); a second one, quarantined explicitly,
is a dead letter, is requeued after the fault is gone and completes; purge removes only
that thread's dead letters.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import anthropic
import httpx
import pytest

from fake_models import FakeAnthropic, say, slow
from harness import Deployment, Process, unique
from test_reliability import (
    PRICED_MODEL,
    assert_turns_well_formed,
    events_of,
    fast_env,
    stop_reasons,
    user_message,
    wait_events,
    wait_idles,
)

TIMEOUT = 30.0


def durable(deployment: Deployment, thread: str, verb: str, *, method: str = "POST", **kwargs: Any) -> httpx.Response:
    http = deployment.http()
    return http.request(method, f"/v1/durable/threads/{thread}/{verb}", headers=deployment.headers(), **kwargs)


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return response.json()


def error_of(response: httpx.Response, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == kind, body
    return body["error"]["message"]


def new_session(client: anthropic.Anthropic) -> str:
    agent = client.beta.agents.create(name=unique("durable-agent"), model=PRICED_MODEL)
    environment = client.beta.environments.create(name=unique("durable-env"), config={"type": "cloud"})
    return client.beta.sessions.create(agent=agent.id, environment_id=environment.id).id


def test_submit_background_dispatches_and_messages(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key = unique("bg")
    fake_anthropic.script(key, say(f"background answer {key}"))
    thread = new_session(client)
    submitted = ok(durable(turns, thread, "submit_background", json={"text": f"question {key}"}))
    assert submitted["queued"] is True and submitted["run_id"].startswith("run_")
    wait_events(turns, thread, lambda evs: any(e["type"] == "session.status_idle" for e in evs), TIMEOUT, "idle")
    messages = ok(durable(turns, thread, "messages", method="GET"))["messages"]
    assert [(m["role"], m["text"]) for m in messages] == [
        ("user", f"question {key}"),
        ("assistant", f"background answer {key}"),
    ]
    (dispatch,) = ok(durable(turns, thread, "dispatches", method="GET"))["dispatches"]
    assert dispatch["run_id"] == submitted["run_id"]
    assert dispatch["status"] in ("awaiting", "done"), dispatch
    # Failure cases in the managed envelope.
    error_of(durable(turns, thread, "submit_background", json={}), 400, "invalid_request_error")
    error_of(durable(turns, thread, "submit_background", json={"text": "x", "bogus": 1}), 400, "invalid_request_error")
    error_of(durable(turns, "sesn_nope", "dispatches", method="GET"), 404, "not_found_error")
    error_of(durable(turns, thread, "cancel", json={"run_id": "run_nope"}), 404, "not_found_error")
    error_of(durable(turns, thread, "cancel", json={}), 400, "invalid_request_error")
    error_of(durable(turns, thread, "quarantine-retry-exhausted", params={"now_ms": "soon"}), 400, "invalid_request_error")
    conflict = durable(turns, thread, f"dead-letters/{submitted['run_id']}/requeue")
    error_of(conflict, 409, "conflict_error")
    assert conflict.headers.get("x-should-retry") == "false"
    assert ok(durable(turns, thread, "dead-letters", method="GET")) == {"dead_letters": []}
    assert ok(durable(turns, thread, "dead-letters/purge")) == {"purged": 0}
    assert ok(durable(turns, thread, "quarantine-retry-exhausted", params={"max_attempts": "3"})) == {"quarantined": 0}
    assert ok(durable(turns, thread, "reconcile")) == {"recovered": []}
    # Another workspace's key does not see the thread.
    other = turns.http().get(
        f"/v1/durable/threads/{thread}/dispatches", headers=turns.headers(turns.create_key(unique("ws")))
    )
    error_of(other, 404, "not_found_error")


def test_cancel_of_a_leased_run_fences_its_worker(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key = unique("cancel")
    fake_anthropic.script(key, slow("this reply never lands " * 4, chunks=40, delay=0.2))
    thread = new_session(client)
    run_id = ok(durable(turns, thread, "submit_background", json={"text": f"question {key}"}))["run_id"]
    request = fake_anthropic.wait_requests(key, 1, TIMEOUT)[0]
    fake_anthropic.wait_for(lambda: request.events_sent >= 4, TIMEOUT, "the reply streaming")
    cancelled = ok(durable(turns, thread, "cancel", json={"run_id": run_id}))
    assert cancelled["cancelled"] is True and cancelled["run_id"] == run_id
    events = wait_idles(turns, thread, timeout=TIMEOUT)
    time.sleep(9)  # the slow reply would have finished by now; nothing of it may land
    events = events_of(turns, thread)
    assert_turns_well_formed(events, 1)
    assert stop_reasons(events) == ["end_turn"]
    assert not [e for e in events if e["type"] == "agent.message"], "the fenced attempt committed nothing"
    (dispatch,) = ok(durable(turns, thread, "dispatches", method="GET"))["dispatches"]
    assert (dispatch["status"], dispatch["outcome"], dispatch["cancel_requested"]) == ("done", "cancelled", True)
    error_of(durable(turns, thread, "cancel", json={"run_id": run_id}), 409, "conflict_error")
    # The thread takes new work afterwards.
    fake_anthropic.script(key, say("after the cancel"))
    client.beta.sessions.events.send(thread, events=[user_message(f"again {key}")])
    wait_idles(turns, thread, count=2, timeout=TIMEOUT)


CRASH = {"AGENTD_FAULT_CRASH_AT": "commit.after@1"}


def crash_until(deployment: Deployment, thread: str, crashes: int) -> None:
    """Runs armed workers one at a time until `crashes` of them died on the thread's run."""
    for _ in range(crashes):
        worker: Process = deployment.start_worker(CRASH, ready=False)
        deadline = time.monotonic() + TIMEOUT
        while worker.alive():
            assert time.monotonic() < deadline, "the armed worker never reached its crash point"
            time.sleep(0.1)
        assert "crashing at commit.after" in worker.output_tail(200)


def test_quarantine_requeue_and_purge_after_repeated_crashes(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    deployment = launch("prod", worker=False, extra_env=fast_env(provider_env, AGENTD_MAX_ATTEMPTS="2"))
    client = deployment.client()
    key = unique("crashy")
    fake_anthropic.script(key, *[say(f"finally {key}")] * 10)

    # 1. Crashing on every attempt ends retries_exhausted on its own, with no dead letter.
    first = new_session(client)
    client.beta.sessions.events.send(first, events=[user_message(f"one {key}")])
    crash_until(deployment, first, 2)
    deployment.start_worker(CRASH, ready=False)  # its claim finds the budget spent and settles without committing a turn
    events = wait_idles(deployment, first, timeout=TIMEOUT)
    assert stop_reasons(events) == ["retries_exhausted"], [e["type"] for e in events]
    assert ok(durable(deployment, first, "dead-letters", method="GET")) == {"dead_letters": []}
    for worker in deployment.workers():
        worker.stop()

    # 2. Two more threads, one after the other, crash twice each (no worker is left to
    # reclaim them, so their leases expire with attempts = 1).
    second, third = new_session(client), new_session(client)
    client.beta.sessions.events.send(second, events=[user_message(f"two {key}")])
    crash_until(deployment, second, 2)
    time.sleep(1.5)  # the lease (1 s) expires
    # Quarantine is scoped to the addressed thread: the third thread has nothing yet,
    # and the second thread's eligible run is left alone.
    assert ok(durable(deployment, third, "quarantine-retry-exhausted")) == {"quarantined": 0}
    assert ok(durable(deployment, second, "quarantine-retry-exhausted", params={"max_attempts": "5"})) == {
        "quarantined": 0
    }, "attempts below max_attempts stay"
    assert ok(durable(deployment, second, "quarantine-retry-exhausted", params={"max_attempts": "1"})) == {
        "quarantined": 1
    }
    (dead,) = ok(durable(deployment, second, "dead-letters", method="GET"))["dead_letters"]
    assert dead["status"] == "dead_letter"
    client.beta.sessions.events.send(third, events=[user_message(f"three {key}")])
    crash_until(deployment, third, 2)
    time.sleep(1.5)
    (third_run,) = ok(durable(deployment, third, "dispatches", method="GET"))["dispatches"]
    assert third_run["status"] == "leased"
    # Omitted max_attempts is 0: every expired leased run of the thread.
    assert ok(durable(deployment, third, "quarantine-retry-exhausted")) == {"quarantined": 1}
    # Requeue only in the run's own thread.
    error_of(durable(deployment, third, f"dead-letters/{dead['run_id']}/requeue"), 409, "conflict_error")
    # Purge removes only the addressed thread's dead letters.
    assert ok(durable(deployment, third, "dead-letters/purge")) == {"purged": 1}
    assert ok(durable(deployment, third, "dead-letters", method="GET")) == {"dead_letters": []}
    assert [d["run_id"] for d in ok(durable(deployment, second, "dead-letters", method="GET"))["dead_letters"]] == [
        dead["run_id"]
    ]
    # 3. With the fault gone, the requeued run completes once, with a fresh budget.
    deployment.start_worker()
    assert ok(durable(deployment, second, f"dead-letters/{dead['run_id']}/requeue")) == {
        "run_id": dead["run_id"],
        "requeued": True,
    }
    events = wait_idles(deployment, second, timeout=TIMEOUT)
    assert_turns_well_formed(events, 1)
    assert stop_reasons(events) == ["end_turn"]
    time.sleep(2)
    assert not [e for e in events_of(deployment, third) if e["type"] == "session.status_idle"], (
        "the purged run never ran again"
    )


ASK_TOOLS = [{"type": "agent_toolset_20260401", "default_config": {"permission_policy": {"type": "always_ask"}}}]


def test_deliver_answers_the_awaiting_call_once(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    from fake_models import call

    client = turns.client()
    key = unique("deliver")
    fake_anthropic.script(key, call("bash", {"command": "pwd"}), say("denied, fine"))
    agent = client.beta.agents.create(name=unique("durable-agent"), model=PRICED_MODEL, tools=ASK_TOOLS)
    environment = client.beta.environments.create(name=unique("durable-env"), config={"type": "cloud"})
    thread = client.beta.sessions.create(agent=agent.id, environment_id=environment.id).id
    error_of(durable(turns, thread, "deliver", json={}), 409, "conflict_error")
    client.beta.sessions.events.send(thread, events=[user_message(f"go {key}")])
    events = wait_idles(turns, thread, timeout=TIMEOUT)
    (use,) = [e for e in events if e["type"] == "agent.tool_use"]
    error_of(durable(turns, thread, "deliver", json={"allow": "yes"}), 400, "invalid_request_error")
    staged = ok(durable(turns, thread, "deliver", json={"allow": False}))
    assert staged["staged"] is True and staged["tool_use_ids"] == [use["id"]]
    # The duplicate finds nothing awaiting: applied exactly once.
    error_of(durable(turns, thread, "deliver", json={"allow": False}), 409, "conflict_error")
    events = wait_idles(turns, thread, count=2, timeout=TIMEOUT)
    confirmations = [e for e in events if e["type"] == "user.tool_confirmation"]
    assert [(c["tool_use_id"], c["result"]) for c in confirmations] == [(use["id"], "deny")]
    assert stop_reasons(events) == ["requires_action", "end_turn"]


def test_supersede_replaces_the_awaiting_run(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key = unique("supersede")
    fake_anthropic.script(key, say("first"), say("second"))
    thread = new_session(client)
    first = ok(durable(turns, thread, "submit_background", json={"text": f"one {key}"}))["run_id"]
    wait_idles(turns, thread, timeout=TIMEOUT)
    assert ok(durable(turns, thread, "superseded", method="GET")) == {"superseded": []}
    replaced = ok(durable(turns, thread, "supersede", json={"text": f"two {key}"}))
    assert replaced["superseded"] == [first] and replaced["run_id"] != first
    events = wait_idles(turns, thread, count=2, timeout=TIMEOUT)
    assert_turns_well_formed(events, 2)
    assert ok(durable(turns, thread, "superseded", method="GET")) == {"superseded": [first]}
    statuses = {d["run_id"]: d["status"] for d in ok(durable(turns, thread, "dispatches", method="GET"))["dispatches"]}
    assert statuses[first] == "superseded"
    # A superseded run is terminal: it cannot be cancelled or requeued.
    error_of(durable(turns, thread, "cancel", json={"run_id": first}), 409, "conflict_error")
    error_of(durable(turns, thread, f"dead-letters/{first}/requeue"), 409, "conflict_error")
    error_of(durable(turns, "sesn_nope", "supersede", json={"text": "x"}), 404, "not_found_error")
    error_of(durable(turns, thread, "supersede", json={}), 400, "invalid_request_error")


# ---------------------------------------------------------------------------------------
# Live inbox (/v1/ext/sessions/{id}/live-inbox)


def inbox(deployment: Deployment, session: str, suffix: str = "", *, method: str = "GET", base: str | None = None, **kw: Any) -> httpx.Response:
    http = deployment.http(base) if base else deployment.http()
    return http.request(method, f"/v1/ext/sessions/{session}/live-inbox{suffix}", headers=deployment.headers(), **kw)


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def test_live_inbox_is_served_by_any_gateway_and_delivered_at_the_next_request(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    deployment = launch("prod", extra_env=provider_env)
    other_gateway = deployment.start_gateway()
    client = deployment.client()
    key = unique("inbox")
    fake_anthropic.script(key, slow("thinking about it " * 4, chunks=30, delay=0.2), say("read your notes"))
    session = new_session(client)
    # No live run: the snapshot is inactive and mutations are refused with 410.
    idle = ok(inbox(deployment, session))
    assert (idle["active"], idle["messages"]) == (False, [])
    error_of(inbox(deployment, session, method="POST", json=text("early")), 410, "invalid_request_error")
    client.beta.sessions.events.send(session, events=[user_message(f"question {key}")])
    request = fake_anthropic.wait_requests(key, 1, TIMEOUT)[0]
    fake_anthropic.wait_for(lambda: request.events_sent >= 3, TIMEOUT, "the reply streaming")
    # Through the other gateway, while the run streams on the worker.
    first = ok(inbox(deployment, session, method="POST", base=other_gateway, json=text("note one")))
    second = ok(inbox(deployment, session, method="POST", json=text("note two")))
    third = ok(inbox(deployment, session, method="POST", base=other_gateway, json=text("note three")))
    assert third["active"] is True and [m["id"] for m in third["messages"]] == [first["id"], second["id"], third["id"]]
    error_of(inbox(deployment, session, method="POST", json={"content": [], "x": 1}), 400, "invalid_request_error")
    error_of(inbox(deployment, session, method="POST", json={"content": [{"type": "image"}]}), 400, "invalid_request_error")
    version = third["version"]
    # Reorder: exact permutation at the current version only.
    stale = inbox(deployment, session, "/order", method="PUT", json={"version": version - 1, "order": [third["id"], first["id"], second["id"]]})
    error_of(stale, 409, "conflict_error")
    partial = inbox(deployment, session, "/order", method="PUT", json={"version": version, "order": [third["id"], first["id"]]})
    error_of(partial, 409, "conflict_error")
    reordered = ok(inbox(deployment, session, "/order", method="PUT", base=other_gateway, json={"version": version, "order": [third["id"], first["id"], second["id"]]}))
    assert [m["id"] for m in reordered["messages"]] == [third["id"], first["id"], second["id"]]
    replaced = ok(inbox(deployment, session, f"/{first['id']}", method="PUT", json=text("note one, edited")))
    assert replaced["messages"][1]["content"] == [{"type": "text", "text": "note one, edited"}]
    ok(inbox(deployment, session, f"/{second['id']}", method="DELETE"))
    error_of(inbox(deployment, session, f"/{second['id']}", method="DELETE"), 404, "not_found_error")
    error_of(inbox(deployment, session, "/inbox_nope", method="PUT", json=text("x")), 404, "not_found_error")
    # Delivered with the run's next model request, in order, committed once.
    events = wait_idles(deployment, session, timeout=TIMEOUT)
    assert_turns_well_formed([e for e in events if e["type"] != "user.message" or e["content"][0]["text"].startswith("question")], 1)
    delivered = [e for e in events if e["type"] == "user.message"][1:]
    assert [e["content"][0]["text"] for e in delivered] == ["note three", "note one, edited"]
    assert [e["id"] for e in delivered] == [third["id"].replace("inbox_", "sevt_"), first["id"].replace("inbox_", "sevt_")]
    _, follow_up = fake_anthropic.wait_requests(key, 2, TIMEOUT)
    sent = str(follow_up.body["messages"][-1])
    assert "note three" in sent and "note one, edited" in sent and sent.index("note three") < sent.index("note one, edited")
    assert stop_reasons(events) == ["end_turn"]
    after = ok(inbox(deployment, session))
    assert (after["active"], after["messages"]) == (False, [])
    error_of(inbox(deployment, "sesn_nope"), 404, "not_found_error")


def test_pause_parks_the_run_and_resume_releases_it_after_a_worker_restart(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    deployment = launch("prod", worker=False, extra_env=fast_env(provider_env))
    worker = deployment.start_worker()
    client = deployment.client()
    key = unique("pause")
    fake_anthropic.script(key, slow("first part " * 4, chunks=20, delay=0.2), say("picked up again"))
    thread = new_session(client)
    error_of(durable(deployment, thread, "pause", json={}), 409, "conflict_error")
    error_of(durable(deployment, thread, "resume", json={"text": "go on"}), 409, "conflict_error")
    run_id = ok(durable(deployment, thread, "submit_background", json={"text": f"start {key}"}))["run_id"]
    request = fake_anthropic.wait_requests(key, 1, TIMEOUT)[0]
    fake_anthropic.wait_for(lambda: request.events_sent >= 3, TIMEOUT, "the reply streaming")
    # Mid-turn input would normally make the run ask the model again right away.
    client.beta.sessions.events.send(thread, events=[user_message("also this")])
    paused = ok(durable(deployment, thread, "pause", json={"run_id": run_id}))
    assert paused == {"paused": True, "run_id": run_id}
    events = wait_idles(deployment, thread, timeout=TIMEOUT)
    time.sleep(1.5)
    assert len(fake_anthropic.received(key)) == 1, "paused at the step boundary: no further model request"
    (dispatch,) = ok(durable(deployment, thread, "dispatches", method="GET"))["dispatches"]
    assert (dispatch["status"], dispatch["paused"]) == ("awaiting", True), dispatch
    error_of(durable(deployment, thread, "wake", json={"run_id": run_id}), 409, "conflict_error")
    error_of(durable(deployment, thread, "wake", json={"run_id": "run_nope"}), 404, "not_found_error")
    # The worker goes away; the ticket is durable.
    worker.stop()
    deployment.start_worker()
    error_of(durable(deployment, thread, "resume", json={}), 400, "invalid_request_error")
    assert ok(durable(deployment, thread, "resume", json={"text": "go on"})) == {"resumed": True, "run_id": run_id}
    error_of(durable(deployment, thread, "resume", json={"text": "again"}), 409, "conflict_error")
    events = wait_events(
        deployment, thread, lambda evs: sum(e["type"] == "session.status_idle" for e in evs) >= 2, TIMEOUT, "resumed turn"
    )
    _, second = fake_anthropic.wait_requests(key, 2, TIMEOUT)
    sent = str(second.body["messages"])
    assert "also this" in sent and "go on" in sent
    assert [e["content"][0]["text"] for e in events if e["type"] == "agent.message"][-1] == "picked up again"
    assert len({e["id"] for e in events}) == len(events)
    (dispatch,) = ok(durable(deployment, thread, "dispatches", method="GET"))["dispatches"]
    assert dispatch["paused"] is False
