"""Hands: the environment work protocol, the official `EnvironmentWorker`, and our runner.

Wire facts: managed-agents-wire.md §2.7 and §3.6 (work routes and objects), §5.2–5.4 (the
SDK's session tool runner, `EnvironmentWorker` and agent toolset), §7 items 5 and 11–13
(poll `null`, answered-call idempotency, heartbeat preconditions, the `secret` payload).

A session whose agent has the built-in toolset (`agent_toolset_20260401`) needs hands: a
work item is queued on its environment, and a built-in call keeps the session running
until a result arrives.

* ``self_hosted``: the customer's worker — here the SDK's `EnvironmentWorker`, unmodified,
  in a subprocess — polls with an environment key and answers with ``user.tool_result``;
* ``cloud``: our runner (in process under ``agentd dev``; ``agentd runner`` next to a
  gateway) answers, committed as ``agent.tool_result``, from a sandbox workdir
  ``<sandbox root>/<session id>`` run as uid 65534 when the runner is root.

The model is the scriptable fake of fake_models.py; each test keys its replies by a
unique token in its user message. Lost hands (leases that expire) are driven by hand
with ``desired_ttl_seconds=5``, the shortest lease the server grants; those tests wait out
two or three 5 s leases (the relay sweeps every 2 s) and are marked ``slow`` (~15–25 s each).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import anthropic
import httpx
import pytest

from fake_models import FakeAnthropic, call, say
from harness import (
    BETA,
    RECORDER,
    Deployment,
    Process,
    assert_error_envelope,
    base_env,
    list_all,
    unique,
)

MODEL = "claude-sonnet-4-6"
TOOLSET = {"type": "agent_toolset_20260401"}
TURN_TIMEOUT = 45.0
# A root runner gives every session its own uid from this range (AGENTD_SANDBOX_UID_BASE/COUNT).
SANDBOX_UID_BASE = 1_500_000_000
SANDBOX_UID_COUNT = 1_000_000
FILE_SIZE_LIMIT = 64 * 1024 * 1024


# ---------------------------------------------------------------------------------------
# Helpers


def workdir_uid(workdir: Path) -> int | None:
    """The uid a session's tools run as: its workdir's owner, from the sandbox range."""
    try:
        uid = workdir.stat().st_uid
    except FileNotFoundError:
        return None
    assert SANDBOX_UID_BASE <= uid < SANDBOX_UID_BASE + SANDBOX_UID_COUNT, f"{workdir} is owned by uid {uid}"
    return uid


def user_message(value: str) -> dict[str, Any]:
    return {"type": "user.message", "content": [{"type": "text", "text": value}]}


def auth(key: str, **extra: str) -> dict[str, str]:
    headers = {"authorization": f"Bearer {key}", "anthropic-beta": BETA}
    headers.update(extra)
    return headers


def make_environment(client: anthropic.Anthropic, kind: str) -> str:
    return client.beta.environments.create(name=unique(f"hands-{kind}"), config={"type": kind}).id


def make_hands_session(client: anthropic.Anthropic, environment_id: str, *, tools: list[Any] | None = None) -> Any:
    agent = client.beta.agents.create(name=unique("hands-agent"), model=MODEL, tools=[TOOLSET] if tools is None else tools)
    return client.beta.sessions.create(agent=agent.id, environment_id=environment_id)


def api_environment_key(deployment: Deployment, api_key: str, environment_id: str, name: str | None = None) -> dict[str, Any]:
    """`POST /v1/ext/environments/{env}/keys`. Sent by an unrecorded client on purpose: this
    one response carries the new secret by design, and the secret audit must not flag it;
    every later response is recorded and audited for it."""
    with httpx.Client(base_url=deployment.url, trust_env=False, timeout=30.0) as raw:
        response = raw.post(
            f"/v1/ext/environments/{environment_id}/keys",
            headers=auth(api_key),
            json={"name": name} if name else None,
        )
    assert response.status_code == 200, response.text[:500]
    body = response.json()
    RECORDER.secret(body["secret"])
    return body


def sessions_token(item: dict[str, Any]) -> str:
    """The per-item bearer inside a polled item's `secret` (URL-safe base64 JSON)."""
    secret = item.get("secret")
    assert isinstance(secret, str) and secret, f"a polled item carries a secret: {item}"
    payload = json.loads(base64.urlsafe_b64decode(secret + "=" * (-len(secret) % 4)))
    token = payload.get("sessions_token")
    assert isinstance(token, str) and token, payload
    return RECORDER.secret(token)


def events_of(http: httpx.Client, headers: dict[str, str], session_id: str) -> list[dict[str, Any]]:
    return list_all(http, f"/v1/sessions/{session_id}/events", headers, limit=1000)


def types_of(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def of_type(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == type_]


def idles(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return of_type(events, "session.status_idle")


def message_texts(events: list[dict[str, Any]]) -> list[str]:
    return [
        "".join(b.get("text", "") for b in e["content"] if b.get("type") == "text")
        for e in of_type(events, "agent.message")
    ]


def result_text(event: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in event.get("content") or [] if b.get("type") == "text")


def wait_events(
    http: httpx.Client,
    headers: dict[str, str],
    session_id: str,
    predicate: Callable[[list[dict[str, Any]]], bool],
    timeout: float = TURN_TIMEOUT,
    what: str = "condition",
    on_timeout: Callable[[], str] = lambda: "",
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        events = events_of(http, headers, session_id)
        if predicate(events):
            return events
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not reached within {timeout:.0f} s; history: {types_of(events)}\n{on_timeout()}")
        time.sleep(0.1)


def wait_idles(http: httpx.Client, headers: dict[str, str], session_id: str, count: int = 1, **kwargs: Any) -> list[dict[str, Any]]:
    return wait_events(
        http, headers, session_id, lambda evs: len(idles(evs)) >= count, what=f"{count} session.status_idle", **kwargs
    )


def assert_unique_ids(events: list[dict[str, Any]]) -> None:
    ids = [e["id"] for e in events]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"duplicate event ids {duplicates}: {types_of(events)}"


def results_by_call(events: list[dict[str, Any]], result_type: str) -> dict[str, dict[str, Any]]:
    """Each agent.tool_use id → its one result of `result_type` (fails on none or several)."""
    results: dict[str, dict[str, Any]] = {}
    for use in of_type(events, "agent.tool_use"):
        answers = [e for e in events if e["type"] == result_type and e.get("tool_use_id") == use["id"]]
        assert len(answers) == 1, f"{use['name']} call {use['id']}: {len(answers)} {result_type} events: {types_of(events)}"
        results[use["id"]] = answers[0]
    return results


def wait_work_state(
    http: httpx.Client, headers: dict[str, str], environment_id: str, work_id: str, state: str, timeout: float = 20.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        response = http.get(f"/v1/environments/{environment_id}/work/{work_id}", headers=headers)
        assert response.status_code == 200, response.text[:500]
        item = response.json()
        if item["state"] == state:
            return item
        if time.monotonic() > deadline:
            pytest.fail(f"work {work_id} is {item['state']!r}, not {state!r}, after {timeout:.0f} s: {item}")
        time.sleep(0.1)


def poll(http: httpx.Client, environment_id: str, key: str, **params: Any) -> httpx.Response:
    headers = auth(key)
    worker_id = params.pop("worker_id", None)
    if worker_id:
        headers["anthropic-worker-id"] = worker_id
    return http.get(f"/v1/environments/{environment_id}/work/poll", params=params, headers=headers)


def poll_item(http: httpx.Client, environment_id: str, key: str, timeout: float = 20.0, **params: Any) -> dict[str, Any]:
    """Polls (blocking 999 ms at a time) until an item is offered."""
    deadline = time.monotonic() + timeout
    while True:
        response = poll(http, environment_id, key, block_ms=999, **params)
        assert response.status_code == 200, response.text[:500]
        if response.json() is not None:
            return response.json()
        if time.monotonic() > deadline:
            pytest.fail(f"no work offered on {environment_id} within {timeout:.0f} s")


def heartbeat(http: httpx.Client, environment_id: str, work_id: str, key: str, expected: str, **params: Any) -> httpx.Response:
    return http.post(
        f"/v1/environments/{environment_id}/work/{work_id}/heartbeat",
        params={"expected_last_heartbeat": expected, **params},
        headers=auth(key),
    )


def stop_work(http: httpx.Client, environment_id: str, work_id: str, key: str, force: bool) -> httpx.Response:
    return http.post(f"/v1/environments/{environment_id}/work/{work_id}/stop", json={"force": force}, headers=auth(key))


def ack(http: httpx.Client, environment_id: str, work_id: str, key: str) -> httpx.Response:
    return http.post(f"/v1/environments/{environment_id}/work/{work_id}/ack", headers=auth(key))


def realpath(path: Path) -> str:
    return os.path.realpath(path)


# ---------------------------------------------------------------------------------------
# The official EnvironmentWorker in a subprocess

WORKER_SCRIPT = """
import asyncio, logging, os, sys

import anthropic

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


async def main() -> None:
    client = anthropic.AsyncAnthropic(base_url=os.environ["WORKER_BASE_URL"], api_key="unused-by-the-worker")
    worker = client.beta.environments.work.worker(
        environment_id=os.environ["WORKER_ENVIRONMENT_ID"],
        environment_key=os.environ["WORKER_ENVIRONMENT_KEY"],
        workdir=os.environ["WORKER_WORKDIR"],
        worker_id=os.environ["WORKER_ID"],
        max_idle=float(os.environ["WORKER_MAX_IDLE"]),
    )
    print("worker: polling", flush=True)
    await worker.run()


asyncio.run(main())
"""


def start_sdk_worker(
    deployment: Deployment,
    tmp_path: Path,
    environment_id: str,
    environment_key: str,
    worker_id: str,
    max_idle: float = 1.0,
) -> tuple[Process, Path]:
    """`AsyncAnthropic(...).beta.environments.work.worker(...).run()`, until the test stops it."""
    script = tmp_path / "sdk_worker.py"
    script.write_text(WORKER_SCRIPT)
    workdir = tmp_path / "worker-workdir"
    workdir.mkdir()
    env = base_env(
        WORKER_BASE_URL=deployment.url,
        WORKER_ENVIRONMENT_ID=environment_id,
        WORKER_ENVIRONMENT_KEY=environment_key,
        WORKER_WORKDIR=str(workdir),
        WORKER_ID=worker_id,
        WORKER_MAX_IDLE=str(max_idle),
        PYTHONUNBUFFERED="1",
    )
    process = Process("sdk EnvironmentWorker", [sys.executable, str(script)], env, cwd=str(tmp_path))
    process.wait_for_line("worker: polling", timeout=30)
    return process, workdir


# ---------------------------------------------------------------------------------------
# Cloud hands per mode: the in-process runner of `agentd dev`, or `agentd runner`


@dataclass
class CloudHands:
    client: anthropic.Anthropic
    api_key: str
    sandbox_root: Path
    runner: Process | None


@pytest.fixture(scope="module")
def cloud_hands(turns: Deployment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CloudHands]:
    if turns.mode == "dev":
        # `agentd dev` serves the cloud environments of workspace "default" in process.
        root = Path(turns.cli_env["AGENTD_DATA_DIR"]) / "sandboxes"
        yield CloudHands(turns.client(), turns.bootstrap_key, root, None)
        return
    # A workspace of its own, so the runner serves nothing of the other tests.
    workspace = unique("hands")
    api_key = turns.create_key(workspace)
    root = tmp_path_factory.mktemp("sandboxes")
    runner = turns.start_runner(turns.create_runner_key(workspace), root, {"AGENTD_RUNNER_IDLE_STOP": "2s"})
    try:
        yield CloudHands(turns.client(api_key), api_key, root, runner)
    finally:
        runner.stop()


def runner_tail(hands: CloudHands) -> str:
    return hands.runner.output_tail() if hands.runner else ""


# ---------------------------------------------------------------------------------------
# 1. The official EnvironmentWorker on a self_hosted environment


def test_sdk_environment_worker_serves_a_self_hosted_session(
    turns: Deployment, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """bash, write, read, edit and a final message, the tools run by the unmodified SDK
    worker with an environment key (from `agentd keys create --environment`)."""
    client = turns.client()
    http = turns.http()
    headers = turns.headers()
    environment_id = make_environment(client, "self_hosted")
    environment_key = turns.create_environment_key(environment_id)
    worker, workdir = start_sdk_worker(turns, tmp_path, environment_id, environment_key, unique("sdk-worker"))
    try:
        key = unique("sdkhands")
        marker = unique("echoed")
        name = f"notes-{unique('f')}.txt"
        fake_anthropic.script(
            key,
            call("bash", {"command": f"echo {marker}"}),
            call("write", {"file_path": name, "content": "alpha\nbeta\n"}),
            call("read", {"file_path": name}),
            call("edit", {"file_path": name, "old_string": "beta", "new_string": "gamma"}),
            say("All four tools ran."),
        )
        session = make_hands_session(client, environment_id)
        client.beta.sessions.events.send(session.id, events=[user_message(f"use your tools {key}")])
        events = wait_idles(http, headers, session.id, on_timeout=worker.output_tail)

        assert_unique_ids(events)
        assert idles(events)[-1]["stop_reason"]["type"] == "end_turn", idles(events)
        assert types_of(events)[-1] == "session.status_idle" and len(idles(events)) == 1, types_of(events)
        assert message_texts(events) == ["All four tools ran."]
        uses = of_type(events, "agent.tool_use")
        assert [u["name"] for u in uses] == ["bash", "write", "read", "edit"], uses
        assert not of_type(events, "agent.tool_result"), "a self_hosted worker's results stay user.tool_result"
        results = results_by_call(events, "user.tool_result")
        bash, write, read, edit = (results[u["id"]] for u in uses)
        for result in (bash, write, read, edit):
            assert not result.get("is_error"), result
        assert result_text(bash).strip() == marker
        assert result_text(write) == f"wrote 11 bytes to {name}"
        assert result_text(read).rstrip("\n") == "alpha\nbeta", "the read reflects the write"
        assert "edited" in result_text(edit) and name in result_text(edit), result_text(edit)
        # The worker ran the tools locally, in its workdir.
        assert (workdir / name).read_text() == "alpha\ngamma\n"
        # Each result went back to the model with its call.
        requests = fake_anthropic.wait_requests(key, 5)
        sent = {b["tool_use_id"]: json.dumps(b["content"]) for b in requests[-1].blocks("tool_result")}
        tool_use_ids = [b["id"] for b in requests[-1].blocks("tool_use")]
        assert len(sent) == 4 and set(sent) == set(tool_use_ids), sent
        assert marker in sent[tool_use_ids[0]]
        # Once the session idled, the worker stopped its item after max_idle: the whole
        # lifecycle (poll, ack, heartbeat, stop) went through.
        (item,) = list_all(http, f"/v1/environments/{environment_id}/work", auth(environment_key))
        assert item["data"] == {"type": "session", "id": session.id}, item
        item = wait_work_state(http, headers, environment_id, item["id"], "stopped")
        assert item["acknowledged_at"] and item["started_at"] and item["latest_heartbeat_at"] and item["stopped_at"], item
        assert item["secret"] is None
        # The worker's Anthropic-Worker-ID reached the queue statistics.
        stats = http.get(f"/v1/environments/{environment_id}/work/stats", headers=auth(environment_key)).json()
        assert stats["workers_polling"] == 1 and stats["depth"] == 0 and stats["pending"] == 0, stats
        # A repeated answer (as the SDK re-sends after transport failures) echoes the first.
        repeat = {"type": "user.tool_result", "tool_use_id": uses[0]["id"], "content": [{"type": "text", "text": "again"}]}
        echoed = http.post(f"/v1/sessions/{session.id}/events", json={"events": [repeat]}, headers=headers)
        assert echoed.status_code == 200, echoed.text[:500]
        assert [e["id"] for e in echoed.json()["data"]] == [bash["id"]]
        after = events_of(http, headers, session.id)
        assert [e["id"] for e in after] == [e["id"] for e in events], "the repeat committed nothing"
        assert client.beta.sessions.retrieve(session.id).status == "idle"
        assert worker.alive(), worker.output_tail()
    finally:
        worker.stop(timeout=5)


# ---------------------------------------------------------------------------------------
# 2. Our runner on a cloud environment


def test_runner_serves_a_cloud_session_in_its_sandbox(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic
) -> None:
    """The same four tools on a `cloud` environment: our runner answers (committed as
    agent.tool_result) from `<sandbox root>/<session id>`, as the session's own uid when root."""
    client = cloud_hands.client
    http = turns.http()
    headers = turns.headers(cloud_hands.api_key)
    environment_id = make_environment(client, "cloud")
    key = unique("cloudhands")
    marker = unique("echoed")
    name = f"notes-{unique('f')}.txt"
    fake_anthropic.script(
        key,
        call("bash", {"command": f"pwd; id -u; echo {marker}"}),
        call("write", {"file_path": name, "content": "alpha\nbeta\n"}),
        call("read", {"file_path": name}),
        call("edit", {"file_path": name, "old_string": "beta", "new_string": "gamma"}),
        say("All four tools ran in the sandbox."),
    )
    session = make_hands_session(client, environment_id)
    client.beta.sessions.events.send(session.id, events=[user_message(f"use your tools {key}")])
    events = wait_idles(http, headers, session.id, on_timeout=lambda: runner_tail(cloud_hands))

    assert_unique_ids(events)
    assert [i["stop_reason"]["type"] for i in idles(events)] == ["end_turn"], types_of(events)
    assert types_of(events)[-1] == "session.status_idle"
    assert message_texts(events) == ["All four tools ran in the sandbox."]
    uses = of_type(events, "agent.tool_use")
    assert [u["name"] for u in uses] == ["bash", "write", "read", "edit"], uses
    assert not of_type(events, "user.tool_result"), "the runner's answers are committed as agent.tool_result"
    results = results_by_call(events, "agent.tool_result")
    bash, write, read, edit = (results[u["id"]] for u in uses)
    for result in (bash, write, read, edit):
        assert not result.get("is_error"), result
    workdir = cloud_hands.sandbox_root / session.id
    lines = result_text(bash).splitlines()
    assert lines[0] == realpath(workdir), f"bash ran in {lines[0]!r}, not the session's workdir {workdir}"
    assert session.id in lines[0]
    if os.geteuid() == 0:
        assert lines[1] == str(workdir_uid(workdir)), f"the sandbox shell runs as uid {lines[1]}"
    assert lines[2] == marker
    assert result_text(write) == f"wrote 11 bytes to {name}"
    assert "alpha" in result_text(read) and "beta" in result_text(read), result_text(read)
    assert result_text(edit).startswith(f"edited {name}"), result_text(edit)
    written = workdir / name
    assert written.read_text() == "alpha\ngamma\n"
    if os.geteuid() == 0:
        assert written.stat().st_uid == workdir_uid(workdir), "files the runner writes belong to the session's uid"
    # Only the runner answers on a cloud environment: an API key's user.tool_result is refused.
    refused = http.post(
        f"/v1/sessions/{session.id}/events",
        json={"events": [{"type": "user.tool_result", "tool_use_id": uses[0]["id"], "content": [{"type": "text", "text": "x"}]}]},
        headers=headers,
    )
    body = assert_error_envelope(refused, 400, "invalid_request_error")
    assert "self_hosted" in body["error"]["message"], body
    assert [e["id"] for e in events_of(http, headers, session.id)] == [e["id"] for e in events]


# ---------------------------------------------------------------------------------------
# 3. The work protocol by hand (raw httpx, an environment key from the keys API)


def test_work_protocol_by_hand(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    http = turns.http()
    headers = turns.headers()
    environment_id = make_environment(client, "self_hosted")
    created = api_environment_key(turns, turns.bootstrap_key, environment_id, name="by-hand")
    assert created["type"] == "environment_key" and created["id"] and created["environment_id"] == environment_id, {
        k: v for k, v in created.items() if k != "secret"
    }
    env_key = created["secret"]
    work = f"/v1/environments/{environment_id}/work"

    # No work: HTTP 200 with the JSON body `null` (the SDK's "nothing to do").
    empty = poll(http, environment_id, env_key)
    assert empty.status_code == 200 and empty.headers["content-type"].startswith("application/json"), empty.headers
    assert empty.content.strip() == b"null"
    assert poll(http, environment_id, env_key, block_ms=50).json() is None
    for bad in (0, 1000):
        assert_error_envelope(poll(http, environment_id, env_key, block_ms=bad), 400, "invalid_request_error")

    key = unique("byhand")
    fake_anthropic.script(key, call("bash", {"command": "echo from-hand"}), say("Got it from your hands."))
    session = make_hands_session(client, environment_id)
    stats = http.get(f"{work}/stats", headers=auth(env_key)).json()
    assert stats["type"] == "work_queue_stats" and stats["depth"] == 1 and stats["pending"] == 0, stats
    assert stats["oldest_queued_at"], stats

    # Offered, with a secret carrying the per-item sessions token.
    worker_id = unique("hand-worker")
    item = poll_item(http, environment_id, env_key, worker_id=worker_id)
    assert item["type"] == "work" and item["id"].startswith("work_"), item
    assert item["data"] == {"type": "session", "id": session.id} and item["environment_id"] == environment_id
    assert item["state"] == "queued", item
    first_token = sessions_token(item)
    stats = http.get(f"{work}/stats", headers=auth(env_key)).json()
    assert (stats["depth"], stats["pending"], stats["workers_polling"]) == (0, 1, 1), stats
    # Offered items are not offered again until they are older than reclaim_older_than_ms.
    assert poll(http, environment_id, env_key).json() is None
    time.sleep(0.05)
    reclaimed = poll(http, environment_id, env_key, reclaim_older_than_ms=1).json()
    assert reclaimed is not None and reclaimed["id"] == item["id"], reclaimed
    token = sessions_token(reclaimed)
    assert token != first_token
    assert http.get(f"/v1/sessions/{session.id}", headers=auth(first_token)).status_code == 401, "the reclaimed offer's token died"
    assert http.get(f"/v1/sessions/{session.id}", headers=auth(token)).status_code == 200

    # Ack, then the lease: NO_HEARTBEAT first, then the exact previous string.
    acked = ack(http, environment_id, item["id"], env_key)
    assert acked.status_code == 200, acked.text[:500]
    assert acked.json()["state"] == "starting" and acked.json()["acknowledged_at"], acked.json()
    assert ack(http, environment_id, item["id"], env_key).status_code == 409, "an item is acknowledged once"
    first = heartbeat(http, environment_id, item["id"], token, "NO_HEARTBEAT")
    assert first.status_code == 200, first.text[:500]
    beat = first.json()
    assert beat["type"] == "work_heartbeat" and beat["lease_extended"] is True and beat["state"] == "active", beat
    assert isinstance(beat["ttl_seconds"], int) and beat["ttl_seconds"] > 0 and beat["last_heartbeat"], beat
    second = heartbeat(http, environment_id, item["id"], token, beat["last_heartbeat"]).json()
    assert second["lease_extended"] is True and second["last_heartbeat"] != beat["last_heartbeat"], second
    for stale in (beat["last_heartbeat"], "NO_HEARTBEAT"):
        refused = heartbeat(http, environment_id, item["id"], env_key, stale)
        body = assert_error_envelope(refused, 412, None)
        details = body["error"].get("details") or {}
        assert details.get("error_code") == "heartbeat_precondition_failed", body
        assert details.get("current_state") == {
            "last_heartbeat": second["last_heartbeat"],
            "lease_extended": False,
            "state": "active",
            "ttl_seconds": second["ttl_seconds"],
        }, body
    # The refusals changed nothing: the holder's string still renews.
    third = heartbeat(http, environment_id, item["id"], token, second["last_heartbeat"]).json()
    assert third["lease_extended"] is True, third

    # Retrieve and update with the API key; the secret is never shown again.
    retrieved = http.get(f"{work}/{item['id']}", headers=headers).json()
    assert retrieved["state"] == "active" and retrieved["secret"] is None and retrieved["latest_heartbeat_at"], retrieved
    updated = http.post(f"{work}/{item['id']}", json={"metadata": {"host": "bench-1", "rack": "7"}}, headers=headers).json()
    assert updated["metadata"] == {"host": "bench-1", "rack": "7"}, updated
    updated = http.post(f"{work}/{item['id']}", json={"metadata": {"rack": None}}, headers=headers).json()
    assert updated["metadata"] == {"host": "bench-1"}, updated
    # Listing is for the environment key; an API key is refused.
    listed = list_all(http, work, auth(env_key))
    assert [w["id"] for w in listed] == [item["id"]] and listed[0]["secret"] is None, listed
    assert_error_envelope(http.get(work, headers=headers), 403, "permission_error")

    # A built-in call waits for the hands: the session runs, with no idle, until they answer.
    client.beta.sessions.events.send(session.id, events=[user_message(f"run it {key}")])
    events = wait_events(http, headers, session.id, lambda evs: bool(of_type(evs, "agent.tool_use")), what="the bash call")
    (use,) = of_type(events, "agent.tool_use")
    assert use["name"] == "bash" and use["input"] == {"command": "echo from-hand"}, use
    time.sleep(0.5)
    assert not idles(events_of(http, headers, session.id)), "no idle while the hands work"
    assert client.beta.sessions.retrieve(session.id).status == "running"
    result = {"type": "user.tool_result", "tool_use_id": use["id"], "content": [{"type": "text", "text": "from-hand"}]}
    sent = http.post(f"/v1/sessions/{session.id}/events", json={"events": [result]}, headers=auth(token))
    assert sent.status_code == 200, sent.text[:500]
    (answer,) = sent.json()["data"]
    assert answer["type"] == "user.tool_result" and answer["tool_use_id"] == use["id"], answer
    again = http.post(f"/v1/sessions/{session.id}/events", json={"events": [result]}, headers=auth(token))
    assert [e["id"] for e in again.json()["data"]] == [answer["id"]], "a duplicate answer echoes the first"
    events = wait_idles(http, headers, session.id)
    assert_unique_ids(events)
    assert idles(events)[-1]["stop_reason"]["type"] == "end_turn"
    assert message_texts(events) == ["Got it from your hands."]
    assert [e["id"] for e in of_type(events, "user.tool_result")] == [answer["id"]]
    (_, follow_up) = fake_anthropic.wait_requests(key, 2)
    assert [b["tool_use_id"] for b in follow_up.blocks("tool_result")] == [use["id"]]

    # Graceful stop of a held item: stopping, and the lease is no longer extended.
    stopping = stop_work(http, environment_id, item["id"], token, force=False)
    assert stopping.status_code == 200 and stopping.json()["state"] == "stopping", stopping.text[:500]
    assert stopping.json()["stop_requested_at"], stopping.json()
    beat = heartbeat(http, environment_id, item["id"], token, third["last_heartbeat"]).json()
    assert beat["lease_extended"] is False and beat["state"] == "stopping", beat
    # Forced stop; a second stop conflicts and says not to retry; the token is dead.
    stopped = stop_work(http, environment_id, item["id"], token, force=True)
    assert stopped.status_code == 200 and stopped.json()["state"] == "stopped" and stopped.json()["stopped_at"], stopped.text
    again = stop_work(http, environment_id, item["id"], env_key, force=True)
    assert_error_envelope(again, 409, None)
    assert again.headers.get("x-should-retry") == "false", dict(again.headers)
    assert_error_envelope(http.get(f"/v1/sessions/{session.id}", headers=auth(token)), 401, "authentication_error")
    # Stopped: heartbeats are not compared, only told the state.
    beat = heartbeat(http, environment_id, item["id"], env_key, "anything").json()
    assert beat["lease_extended"] is False and beat["state"] == "stopped", beat

    # New input with no open item queues a new one.
    fake_anthropic.script(key, say("Second turn."))
    client.beta.sessions.events.send(session.id, events=[user_message(f"once more {key}")])
    newer = poll_item(http, environment_id, env_key)
    assert newer["id"] != item["id"] and newer["data"]["id"] == session.id, newer
    assert [w["id"] for w in list_all(http, work, auth(env_key))] == [newer["id"], item["id"]], "newest first"
    events = wait_idles(http, headers, session.id, count=2)
    assert message_texts(events)[-1] == "Second turn."
    # A queued item stops at once, even gracefully.
    assert stop_work(http, environment_id, newer["id"], env_key, force=False).json()["state"] == "stopped"


# ---------------------------------------------------------------------------------------
# 4. Lost hands: leases that expire are offered again; three lost leases give up


SHORT_TTL = 5  # the shortest lease the server grants (desired_ttl_seconds is clamped to 5..300)
LEASE_WAIT = SHORT_TTL + 10.0  # a lease, two relay sweeps and slack


def take(http: httpx.Client, environment_id: str, env_key: str, worker_id: str, *, beat: bool) -> tuple[dict[str, Any], str, dict[str, Any] | None]:
    """Poll, ack and (with `beat`) a first heartbeat asking for the short lease."""
    item = poll_item(http, environment_id, env_key, worker_id=worker_id)
    token = sessions_token(item)
    assert ack(http, environment_id, item["id"], env_key).status_code == 200
    if not beat:
        return item, token, None
    response = heartbeat(http, environment_id, item["id"], token, "NO_HEARTBEAT", desired_ttl_seconds=SHORT_TTL)
    assert response.status_code == 200, response.text[:500]
    assert response.json()["ttl_seconds"] == SHORT_TTL and response.json()["lease_extended"] is True, response.json()
    return item, token, response.json()


@pytest.mark.slow
def test_lost_leases_are_offered_again_then_given_up(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    """Hands that stop heartbeating lose their lease: the item is queued again (with a
    fresh token) for another poller; the third lost lease gives up: the open call gets an
    error result, the session a session.error (retries exhausted) and one idle."""
    client = turns.client()
    http = turns.http()
    headers = turns.headers()
    environment_id = make_environment(client, "self_hosted")
    env_key = api_environment_key(turns, turns.bootstrap_key, environment_id)["secret"]
    key = unique("lost")
    fake_anthropic.script(key, call("bash", {"command": "echo never answered"}), say("must not be asked"))
    session = make_hands_session(client, environment_id)

    # Lease 1: a worker takes the item, renews once with a 5 s lease, and vanishes.
    item, token, beat = take(http, environment_id, env_key, "worker-a", beat=True)
    assert beat is not None
    client.beta.sessions.events.send(session.id, events=[user_message(f"call a tool {key}")])
    events = wait_events(http, headers, session.id, lambda evs: bool(of_type(evs, "agent.tool_use")), what="the bash call")
    (use,) = of_type(events, "agent.tool_use")
    requeued = wait_work_state(http, headers, environment_id, item["id"], "queued", timeout=LEASE_WAIT)
    assert requeued["acknowledged_at"] is None, requeued
    assert http.get(f"/v1/sessions/{session.id}", headers=auth(token)).status_code == 401, "a lost lease's token dies"
    assert client.beta.sessions.retrieve(session.id).status == "running", "the call still waits for hands"

    # Lease 2: another poller gets the same item; the first worker's renewal now fails
    # with 412, which the SDK worker treats as "lease lost" (it walks away).
    item2, _, _ = take(http, environment_id, env_key, "worker-b", beat=False)
    assert item2["id"] == item["id"]
    stale = heartbeat(http, environment_id, item["id"], env_key, beat["last_heartbeat"])
    body = assert_error_envelope(stale, 412, None)
    assert body["error"]["details"]["error_code"] == "heartbeat_precondition_failed", body
    assert body["error"]["details"]["current_state"]["state"] == "starting", body
    assert body["error"]["details"]["current_state"]["lease_extended"] is False, body
    wait_work_state(http, headers, environment_id, item["id"], "queued", timeout=LEASE_WAIT)
    assert not idles(events_of(http, headers, session.id)), "two lost leases do not end the turn"

    # Lease 3: taken and lost once more: given up.
    take(http, environment_id, env_key, "worker-c", beat=True)
    events = wait_idles(http, headers, session.id, timeout=LEASE_WAIT + 10)
    stopped = wait_work_state(http, headers, environment_id, item["id"], "stopped", timeout=5)
    assert stopped["stopped_at"], stopped
    time.sleep(2.5)  # one more relay sweep: nothing else may be committed
    events = events_of(http, headers, session.id)
    assert_unique_ids(events)
    assert [i["stop_reason"]["type"] for i in idles(events)] == ["retries_exhausted"], types_of(events)
    (result,) = of_type(events, "agent.tool_result")
    assert result["tool_use_id"] == use["id"] and result["is_error"] is True, result
    assert "lost 3 times" in result_text(result), result
    (error,) = of_type(events, "session.error")
    assert error["error"]["retry_status"] == {"type": "exhausted"}, error
    assert types_of(events)[-1] == "session.status_idle", types_of(events)
    assert client.beta.sessions.retrieve(session.id).status == "idle"
    assert len(fake_anthropic.received(key)) == 1, "the given-up turn does not ask the model again"
    assert poll(http, environment_id, env_key).json() is None, "nothing is offered after the give-up"


def test_a_roster_agent_with_sandbox_tools_gives_the_session_hands(turns: Deployment) -> None:
    """A session needs hands when its agent or an agent of its multiagent roster has a
    sandbox tool: the roster's threads share the session's sandbox (ADR 0022 §10). An
    advisor runs no tools; a roster without sandbox tools queues no work."""
    client = turns.client()
    http = turns.http()
    environment_id = make_environment(client, "self_hosted")
    env_key = api_environment_key(turns, turns.bootstrap_key, environment_id)["secret"]
    quiet = client.beta.agents.create(name=unique("hands-quiet"), model=MODEL)
    handy = client.beta.agents.create(name=unique("hands-member"), model=MODEL, tools=[TOOLSET])
    advisor = {"type": "advisor", "model": MODEL}

    def session_of(multiagent: dict[str, Any]) -> str:
        agent = client.beta.agents.create(name=unique("hands-boss"), model=MODEL, multiagent=multiagent)
        return client.beta.sessions.create(agent=agent.id, environment_id=environment_id).id

    session_of({"type": "coordinator", "agents": [quiet.id, advisor]})
    assert poll(http, environment_id, env_key).json() is None, "no agent of the roster has a sandbox tool"
    for multiagent in (
        {"type": "coordinator", "agents": [quiet.id, handy.id]},
        {
            "type": "multiagent_20261001",
            "advisor": {"type": "disabled"},
            "subagents": {"type": "enabled", "predefined_agents": [handy.id]},
            "workflows": {"type": "disabled"},
        },
    ):
        session_id = session_of(multiagent)
        item = poll_item(http, environment_id, env_key)
        assert item["data"] == {"type": "session", "id": session_id}, (multiagent["type"], item)
        stop_work(http, environment_id, item["id"], env_key, force=True)


@pytest.mark.slow
def test_lost_hands_of_a_subagent_give_up_its_sandbox_call_on_its_thread(
    turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    """A coordinator without sandbox tools spawns a subagent that has them; the hands lose
    three leases while the child's bash call waits: that call gets the error result and
    the session.error on the child's thread, ending the child's turn; the primary's
    spawn_thread call is not a sandbox call and is answered by the child's thread, not
    by the give-up."""
    client = turns.client()
    http = turns.http()
    headers = turns.headers()
    environment_id = make_environment(client, "self_hosted")
    env_key = api_environment_key(turns, turns.bootstrap_key, environment_id)["secret"]
    member = client.beta.agents.create(name=unique("hands-member"), model=MODEL, tools=[TOOLSET], description="Runs commands.")
    boss = client.beta.agents.create(
        name=unique("hands-boss"), model=MODEL, multiagent={"type": "coordinator", "agents": [member.id]}
    )
    key, task = unique("lostchild"), unique("childtask")
    fake_anthropic.script(key, call("spawn_thread", {"agent": member.name, "message": task}), say(f"recovered {key}"))
    # The child's one reply: the primary's later requests mention `task` too (the spawn's
    # input), and a key with replies left would take them.
    fake_anthropic.script(task, call("bash", {"command": "echo never answered"}))
    session = client.beta.sessions.create(agent=boss.id, environment_id=environment_id)

    # Lease 1 is taken before the turn; the child's bash call then waits for the hands.
    item, _, beat = take(http, environment_id, env_key, "worker-a", beat=True)
    assert beat is not None
    client.beta.sessions.events.send(session.id, events=[user_message(key)])

    def bash_use(events: list[dict[str, Any]]) -> bool:
        return any(e["type"] == "agent.tool_use" and e["name"] == "bash" for e in events)

    events = wait_events(http, headers, session.id, bash_use, what="the child's bash call")
    (spawn,) = [e for e in of_type(events, "agent.tool_use") if e["name"] == "spawn_thread"]
    (bash,) = [e for e in of_type(events, "agent.tool_use") if e["name"] == "bash"]
    child = bash["session_thread_id"]
    assert child.startswith("sthr_") and child != session.id, bash
    # Leases 2 and 3 are taken and lost too: given up.
    for worker in ("worker-b", "worker-c"):
        wait_work_state(http, headers, environment_id, item["id"], "queued", timeout=LEASE_WAIT)
        assert not idles(events_of(http, headers, session.id)), "fewer than three lost leases do not end the turn"
        take(http, environment_id, env_key, worker, beat=True)
    wait_work_state(http, headers, environment_id, item["id"], "stopped", timeout=LEASE_WAIT + 10)

    own = list_all(http, f"/v1/sessions/{session.id}/threads/{child}/events", headers, limit=1000)
    (result,) = [e for e in of_type(own, "agent.tool_result") if e["tool_use_id"] == bash["id"]]
    assert result["is_error"] is True and "lost 3 times" in result_text(result), result
    (error,) = of_type(own, "session.error")
    assert error["error"]["retry_status"] == {"type": "exhausted"}, error
    assert types_of(own).index("agent.tool_result") < types_of(own).index("session.error"), types_of(own)
    assert len(fake_anthropic.received(task)) == 1, "the given-up child turn does not ask the model again"

    # The primary's spawn_thread call is answered by the child's thread, never by the give-up.
    events = wait_idles(http, headers, session.id, timeout=TURN_TIMEOUT)
    assert_unique_ids(events)
    (answer,) = [e for e in of_type(events, "agent.tool_result") if e["tool_use_id"] == spawn["id"]]
    assert result_text(answer) != result_text(result), answer
    assert "session_thread_id" not in answer or answer["session_thread_id"] in (None, session.id), answer
    primary = list_all(http, f"/v1/sessions/{session.id}/threads/{session.id}/events", headers, limit=1000)
    assert not of_type(primary, "session.error"), types_of(primary)
    assert message_texts(events)[-1] == f"recovered {key}", types_of(events)
    assert poll(http, environment_id, env_key).json() is None, "nothing is offered after the give-up"


@pytest.mark.slow
def test_renewing_a_lease_that_expired_is_a_precondition_failure(turns: Deployment) -> None:
    """A worker whose lease expired (the item is queued again) renews with its last
    string: that no longer matches (the item has no heartbeat now), so 412 with the
    current state, which the SDK worker reads as "lease lost" and walks away at once
    (§2.7: compared in every state but stopping/stopped). A 409 is retryable for the
    SDK: it would keep serving the session until its TTL ran out."""
    client = turns.client()
    http = turns.http()
    environment_id = make_environment(client, "self_hosted")
    env_key = turns.create_environment_key(environment_id)
    make_hands_session(client, environment_id)
    item, _, beat = take(http, environment_id, env_key, "expiring", beat=True)
    assert beat is not None
    wait_work_state(http, turns.headers(), environment_id, item["id"], "queued", timeout=LEASE_WAIT)
    late = heartbeat(http, environment_id, item["id"], env_key, beat["last_heartbeat"])
    body = assert_error_envelope(late, 412, None)
    assert body["error"]["details"]["error_code"] == "heartbeat_precondition_failed", body
    current = body["error"]["details"]["current_state"]
    assert current["state"] == "queued" and current["last_heartbeat"] is None and current["lease_extended"] is False, body


@pytest.mark.slow
def test_sdk_worker_walks_away_when_its_lease_is_taken(turns: Deployment, tmp_path: Path) -> None:
    """The SDK worker holds an item (5 s lease, so it renews every 2.5 s); another holder
    takes the lease over with the exact string the 412 reveals; the worker's next renewal
    gets 412, which it reads as "lease lost": it walks away without stopping the item."""
    client = turns.client()
    http = turns.http()
    headers = turns.headers()
    environment_id = make_environment(client, "self_hosted")
    env_key = turns.create_environment_key(environment_id)
    session = make_hands_session(client, environment_id)
    # The TTL stays with the item: a first holder asks for 5 s and vanishes.
    item, _, _ = take(http, environment_id, env_key, "short-lease", beat=True)
    wait_work_state(http, headers, environment_id, item["id"], "queued", timeout=LEASE_WAIT)

    worker, _ = start_sdk_worker(turns, tmp_path, environment_id, env_key, unique("sdk-worker"), max_idle=60)
    try:
        held = wait_work_state(http, headers, environment_id, item["id"], "active", timeout=20)
        assert held["latest_heartbeat_at"], held
        taken: dict[str, Any] | None = None
        for _ in range(5):  # the worker may renew between our two requests
            refused = heartbeat(http, environment_id, item["id"], env_key, "not-the-string")
            current = assert_error_envelope(refused, 412, None)["error"]["details"]["current_state"]
            assert current["state"] == "active" and current["ttl_seconds"] == SHORT_TTL, current
            response = heartbeat(http, environment_id, item["id"], env_key, current["last_heartbeat"])
            if response.status_code == 200:
                taken = response.json()
                break
        assert taken is not None and taken["lease_extended"] is True, "could not take the lease over"
        line = f"lease lost: heartbeat precondition failed work_id={item['id']}"
        deadline = time.monotonic() + 15
        while not any(line in seen for seen in list(worker.stderr_seen)):
            assert time.monotonic() < deadline, f"the SDK worker did not report a lost lease\n{worker.output_tail()}"
            time.sleep(0.1)
        report = next(seen for seen in worker.stderr_seen if line in seen)
        assert f"server_last_heartbeat={taken['last_heartbeat']}" in report and "server_state=active" in report, report
        time.sleep(1.0)
        # It did not stop the item it no longer holds; the new holder's lease is intact.
        assert http.get(f"/v1/environments/{environment_id}/work/{item['id']}", headers=headers).json()["state"] == "active"
        renewed = heartbeat(http, environment_id, item["id"], env_key, taken["last_heartbeat"])
        assert renewed.status_code == 200 and renewed.json()["lease_extended"] is True, renewed.text[:500]
        assert worker.alive(), worker.output_tail()
    finally:
        worker.stop(timeout=5)
    assert stop_work(http, environment_id, item["id"], env_key, force=True).json()["state"] == "stopped"


@pytest.mark.slow
def test_runner_killed_mid_tool_is_replaced(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Prod: `agentd runner` is SIGKILLed while a bash call runs. Its lease expires, the
    item is offered again, and a second runner runs the unanswered call to the end of the
    turn. (The lease is shortened to 5 s by a first holder that asks for it by hand: the
    runner, like the SDK worker, never sends desired_ttl_seconds, and the TTL stays with
    the item.)"""
    deployment = launch("prod", worker=True, extra_env={**provider_env, "AGENTD_DRAIN_TIMEOUT": "3s"})
    client = deployment.client()
    http = deployment.http()
    headers = deployment.headers()
    environment_id = make_environment(client, "cloud")
    env_key = deployment.create_environment_key(environment_id)
    runner_key = deployment.create_runner_key()
    sandbox_root = tmp_path / "sandboxes"
    key = unique("killed")
    command = "if [ -e started ]; then echo second-run; else touch started; sleep 10; echo first-run; fi"
    fake_anthropic.script(key, call("bash", {"command": command}), say("Recovered after losing a runner."))
    session = make_hands_session(client, environment_id)
    item, _, beat = take(http, environment_id, env_key, "short-lease", beat=True)
    assert beat is not None
    client.beta.sessions.events.send(session.id, events=[user_message(f"run the slow thing {key}")])
    wait_events(http, headers, session.id, lambda evs: bool(of_type(evs, "agent.tool_use")), what="the bash call")
    wait_work_state(http, headers, environment_id, item["id"], "queued", timeout=LEASE_WAIT)

    doomed = deployment.start_runner(runner_key, sandbox_root)
    started = sandbox_root / session.id / "started"
    deadline = time.monotonic() + 20
    while not started.exists():
        assert time.monotonic() < deadline, f"the runner never started the call\n{doomed.output_tail()}"
        time.sleep(0.1)
    held = wait_work_state(http, headers, environment_id, item["id"], "active", timeout=5)
    assert held["latest_heartbeat_at"], held
    # The first holder's string is stale now that the runner holds the lease.
    assert heartbeat(http, environment_id, item["id"], env_key, beat["last_heartbeat"]).status_code == 412
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.proc.wait(timeout=10)
    if os.geteuid() == 0:
        # Nothing the session started outlives the runner that started it (the `sleep 10`).
        uid = workdir_uid(sandbox_root / session.id)
        assert uid is not None
        deadline = time.monotonic() + 10
        while uid_processes(uid):
            assert time.monotonic() < deadline, f"{uid_processes(uid)} sandbox processes outlived the killed runner"
            time.sleep(0.1)
    wait_work_state(http, headers, environment_id, item["id"], "queued", timeout=LEASE_WAIT)
    assert not of_type(events_of(http, headers, session.id), "agent.tool_result"), "the killed runner answered nothing"

    survivor = deployment.start_runner(runner_key, sandbox_root)
    events = wait_idles(http, headers, session.id, on_timeout=survivor.output_tail)
    assert_unique_ids(events)
    assert [i["stop_reason"]["type"] for i in idles(events)] == ["end_turn"], types_of(events)
    assert not of_type(events, "session.error"), "two lost leases are within the budget"
    (result,) = of_type(events, "agent.tool_result")
    assert result["is_error"] is False and result_text(result) == "second-run", result
    assert message_texts(events) == ["Recovered after losing a runner."]
    assert survivor.alive(), survivor.output_tail()


# ---------------------------------------------------------------------------------------
# 5. Sandbox escapes through our runner


def uid_processes(uid: int) -> int:
    """How many tasks of `uid` exist now (Linux /proc), zombies included."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as status:
                for line in status:
                    if line.startswith("Uid:"):
                        count += line.split()[1] == str(uid)
                        break
        except OSError:
            continue
    return count


class UidSampler:
    """Samples a session uid's process count in a thread, keeping the maximum (`uid()` is
    None until the session's workdir exists)."""

    def __init__(self, uid: Callable[[], int | None]) -> None:
        self.uid = uid
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            uid = self.uid()
            if uid is not None:
                self.peak = max(self.peak, uid_processes(uid))
            self._done.wait(0.05)

    def stop(self) -> int:
        self._done.set()
        self._thread.join(timeout=10)
        return self.peak


def test_sandbox_refuses_escapes_and_enforces_limits(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic
) -> None:
    """Escapes tried by the model on a cloud environment: each call comes back refused or
    limited, the turn still ends end_turn, and a later bash call works."""
    client = cloud_hands.client
    http = turns.http()
    headers = turns.headers(cloud_hands.api_key)
    environment_id = make_environment(client, "cloud")
    tag = unique("escape")
    outside_tmp = Path("/tmp") / f"agentd-{tag}"
    outside_etc = Path("/etc") / f"agentd-{tag}"
    outside_root = cloud_hands.sandbox_root / f"{tag}.txt"
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("read", {"file_path": "../../etc/passwd"}),
        ("read", {"file_path": "/etc/passwd"}),
        ("write", {"file_path": f"../{tag}.txt", "content": "out"}),
        ("write", {"file_path": str(outside_tmp), "content": "out"}),
        ("edit", {"file_path": "../../etc/hostname", "old_string": "a", "new_string": "b"}),
        ("glob", {"pattern": "*", "path": "/etc"}),
        ("grep", {"pattern": "root", "path": "../.."}),
        ("bash", {"command": "ln -s /etc e && echo linked"}),
        ("read", {"file_path": "e/passwd"}),
        ("write", {"file_path": f"e/agentd-{tag}", "content": "out"}),
        ("bash", {"command": 'head -c 100M /dev/zero > big; echo "rc=$?"; stat -c "size=%s" big'}),
        # A fork bomb in the foreground (a backgrounded one returns at once).
        ("bash", {"command": "f(){ f | f; }; f", "timeout_ms": 3000}),
        # bash retries a refused fork for a while, so this also waits for the killed
        # bomb's processes to be reaped, if need be.
        ("bash", {"command": "/bin/echo forked-again; ulimit -u; rm -f big"}),
    ]
    key = unique("escapes")
    fake_anthropic.script(key, *(call(name, args) for name, args in attempts), say("Contained."))
    session = make_hands_session(client, environment_id)
    workdir = cloud_hands.sandbox_root / session.id
    sampler = UidSampler(lambda: workdir_uid(workdir)) if os.geteuid() == 0 else None
    try:
        client.beta.sessions.events.send(session.id, events=[user_message(f"try to get out {key}")])
        events = wait_idles(http, headers, session.id, timeout=90, on_timeout=lambda: runner_tail(cloud_hands))
    finally:
        peak = sampler.stop() if sampler else 0

    assert_unique_ids(events)
    assert [i["stop_reason"]["type"] for i in idles(events)] == ["end_turn"], types_of(events)
    assert message_texts(events) == ["Contained."]
    uses = of_type(events, "agent.tool_use")
    assert [(u["name"], u["input"]) for u in uses] == attempts
    results = results_by_call(events, "agent.tool_result")
    outcome = [(results[u["id"]]["is_error"], result_text(results[u["id"]])) for u in uses]
    (
        read_up, read_abs, write_up, write_abs, edit_up, glob_abs, grep_up,
        link, read_link, write_link, big, bomb, after,
    ) = outcome
    for name, (is_error, text) in zip(
        ["read ../..", "read /etc", "write ..", "write /tmp", "edit ../..", "glob /etc", "grep ../..", "read e/", "write e/"],
        [read_up, read_abs, write_up, write_abs, edit_up, glob_abs, grep_up, read_link, write_link],
    ):
        assert is_error is True and "escapes" in text, f"{name}: {is_error} {text!r}"
        assert "root:x:0:0" not in text, f"{name} leaked /etc/passwd"
    assert not outside_tmp.exists() and not outside_etc.exists() and not outside_root.exists(), "a write got out"
    assert link == (False, "linked"), link
    # The file size limit stops the writer; the file holds no more than the limit.
    assert "rc=153" in big[1], f"head was not stopped by SIGXFSZ: {big}"
    size = int(big[1].split("size=")[1].split()[0])
    assert size <= FILE_SIZE_LIMIT, big
    # The fork bomb is cut off by the timeout, and bounded by the process limit meanwhile.
    assert bomb[0] is True and "timed out after 3000 ms" in bomb[1], bomb
    if sampler:
        assert 128 <= peak <= 256 + 8, f"the session's uid peaked at {peak} processes (limit 256)"
    # The session's next shell works and can start processes.
    assert after[0] is False and after[1].splitlines()[:2] == ["forked-again", "256"], after
    assert not (cloud_hands.sandbox_root / session.id / "big").exists()
    if sampler:
        deadline = time.monotonic() + 15
        uid = workdir_uid(workdir)
        assert uid is not None
        while uid_processes(uid) > 10:
            assert time.monotonic() < deadline, f"{uid_processes(uid)} sandbox processes survived the bomb"
            time.sleep(0.2)


def processes_running(argv: list[str]) -> list[int]:
    """Pids whose command line is exactly `argv` (zombies excluded)."""
    wanted = "\0".join(argv) + "\0"
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline") as cmdline:
                if cmdline.read() == wanted:
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def wait_gone(argv: list[str], timeout: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout
    while processes_running(argv) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes_running(argv)


def test_sessions_cannot_reach_each_other_and_their_processes_end_with_them(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic
) -> None:
    """Two sessions on one cloud environment, namespace isolation (the default): the second
    cannot read or write the first's files or see its /tmp, runs as another uid, and every
    process a session detached (`setsid`, `nohup … &`) is gone once the session is deleted
    or archived; the deleted session's workdir goes too."""
    if os.geteuid() != 0:
        pytest.skip("a uid per session needs a root runner")
    client = cloud_hands.client
    http = turns.http()
    headers = turns.headers(cloud_hands.api_key)
    environment_id = make_environment(client, "cloud")
    tag = f"{time.monotonic_ns() % 1000}.{os.getpid()}"
    alice_sleeps = [["sleep", f"4{tag}1"], ["sleep", f"4{tag}2"]]
    bob_sleep = ["sleep", f"4{tag}3"]
    alice = make_hands_session(client, environment_id)
    bob = make_hands_session(client, environment_id)
    alice_dir = cloud_hands.sandbox_root / alice.id
    key_a, key_b = unique("alice"), unique("bob")
    fake_anthropic.script(
        key_a,
        call(
            "bash",
            {
                "command": f"echo alice-secret > mine; echo alice-tmp > /tmp/shared; "
                f"setsid sleep 4{tag}1 </dev/null >/dev/null 2>&1 & nohup sleep 4{tag}2 </dev/null >/dev/null 2>&1 & "
                "id -u"
            },
        ),
        say("Alice is set."),
    )
    client.beta.sessions.events.send(alice.id, events=[user_message(f"set up {key_a}")])
    alice_events = wait_idles(http, headers, alice.id, on_timeout=lambda: runner_tail(cloud_hands))
    (alice_result,) = of_type(alice_events, "agent.tool_result")
    alice_uid = result_text(alice_result).strip()
    assert alice_uid == str(workdir_uid(alice_dir)), alice_result
    for argv in alice_sleeps:
        assert processes_running(argv), f"{argv} did not start"

    attempts = [
        f"cat {alice_dir}/mine",
        f"ls {alice_dir}",
        f"echo planted > {alice_dir}/planted",
        "cat /tmp/shared",
        f"setsid sleep 4{tag}3 </dev/null >/dev/null 2>&1 & id -u",
    ]
    fake_anthropic.script(key_b, *(call("bash", {"command": c}) for c in attempts), say("Bob tried."))
    client.beta.sessions.events.send(bob.id, events=[user_message(f"snoop {key_b}")])
    bob_events = wait_idles(http, headers, bob.id, on_timeout=lambda: runner_tail(cloud_hands))
    results = results_by_call(bob_events, "agent.tool_result")
    outputs = [result_text(results[u["id"]]) for u in of_type(bob_events, "agent.tool_use")]
    for attempt, output in zip(attempts[:4], outputs[:4]):
        assert "exit code:" in output and "alice-" not in output, f"{attempt}: {output!r}"
    assert outputs[4].strip() != alice_uid, "two sessions run as the same uid"
    assert not (alice_dir / "planted").exists()

    client.beta.sessions.delete(alice.id)
    for argv in alice_sleeps:
        assert wait_gone(argv) == [], f"{argv} outlived its deleted session\n{runner_tail(cloud_hands)}"
    # At once while its item is open; otherwise at the runner's next sweep (≥ 10 s apart).
    deadline = time.monotonic() + 45
    while alice_dir.exists():
        assert time.monotonic() < deadline, f"the deleted session's workdir remains\n{runner_tail(cloud_hands)}"
        time.sleep(0.2)
    client.beta.sessions.archive(bob.id)
    assert wait_gone(bob_sleep) == [], f"{bob_sleep} outlived its archived session\n{runner_tail(cloud_hands)}"


def test_limited_networking_means_no_network(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic
) -> None:
    """A `limited` environment with no allowed hosts gets no network at all (not even the
    gateway on loopback); the same probe from an `unrestricted` environment connects."""
    client = cloud_hands.client
    http = turns.http()
    headers = turns.headers(cloud_hands.api_key)
    port = httpx.URL(turns.url).port
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    outcomes = {}
    for networking in ({"type": "unrestricted"}, {"type": "limited", "allowed_hosts": []}):
        environment = client.beta.environments.create(
            name=unique("net"), config={"type": "cloud", "networking": networking}
        )
        key = unique("net")
        fake_anthropic.script(key, call("bash", {"command": probe}), say("Probed."))
        session = make_hands_session(client, environment.id)
        client.beta.sessions.events.send(session.id, events=[user_message(f"probe {key}")])
        events = wait_idles(http, headers, session.id, on_timeout=lambda: runner_tail(cloud_hands))
        (result,) = of_type(events, "agent.tool_result")
        outcomes[networking["type"]] = (result["is_error"], result_text(result))
    assert outcomes["unrestricted"] == (False, "connected"), outcomes
    is_error, text = outcomes["limited"]
    assert is_error is False and "connected" not in text and "exit code:" in text, outcomes


def test_vault_environment_variables_reach_the_shell_and_nothing_else(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic
) -> None:
    """A session whose vault holds an `environment_variable` credential sees it in its bash
    environment; the value appears in no response (the end-of-session audit checks every
    recorded one), not in the session resource or its events, not in any log; only the
    work item's sessions token reads it from the gateway."""
    client = cloud_hands.client
    http = turns.http()
    headers = turns.headers(cloud_hands.api_key)
    value = RECORDER.secret(f"envsecret-{uuid.uuid4().hex}")
    vault = client.beta.vaults.create(display_name=unique("vault"))
    client.beta.vaults.credentials.create(
        vault.id,
        auth={
            "type": "environment_variable",
            "secret_name": "DEPLOY_TOKEN",
            "secret_value": value,
            "networking": {"type": "unrestricted"},
        },
    )
    environment_id = make_environment(client, "cloud")
    agent = client.beta.agents.create(name=unique("hands-agent"), model=MODEL, tools=[TOOLSET])
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment_id, vault_ids=[vault.id])
    other = make_hands_session(client, environment_id)
    key, other_key = unique("envvar"), unique("envvar")
    # The model asks for the value reversed, so the tool result is not the secret itself.
    command = 'printf "%s" "$DEPLOY_TOKEN" | rev'
    fake_anthropic.script(key, call("bash", {"command": command}), say("Read it."))
    fake_anthropic.script(other_key, call("bash", {"command": command + "; echo end"}), say("Nothing."))
    client.beta.sessions.events.send(session.id, events=[user_message(f"read the token {key}")])
    client.beta.sessions.events.send(other.id, events=[user_message(f"read the token {other_key}")])
    events = wait_idles(http, headers, session.id, on_timeout=lambda: runner_tail(cloud_hands))
    (result,) = of_type(events, "agent.tool_result")
    assert result["is_error"] is False and result_text(result) == value[::-1], result
    other_events = wait_idles(http, headers, other.id, on_timeout=lambda: runner_tail(cloud_hands))
    (other_result,) = of_type(other_events, "agent.tool_result")
    assert result_text(other_result) == "end", "a session without the vault sees its variable"

    resource = http.get(f"/v1/sessions/{session.id}", headers=headers)
    assert resource.status_code == 200 and value not in resource.text
    assert value not in json.dumps(events_of(http, headers, session.id))
    # Neither an API key (the workspace's widest credential) nor a runner key or an
    # environment key reads the variables: only the work item's sessions token does.
    others = [cloud_hands.api_key]
    if turns.mode == "dev":  # the hands' workspace is "default" (prod: one of its own)
        others += [turns.create_runner_key(), turns.create_environment_key(environment_id)]
    for other_key in others:
        refused = http.get(f"/v1/ext/sessions/{session.id}/sandbox-environment", headers=turns.headers(other_key))
        assert refused.status_code == 403 and value not in refused.text, refused.text
    processes = list(turns.processes) + ([cloud_hands.runner] if cloud_hands.runner else [])
    for process in processes:
        logged = "\n".join(process.stdout_seen + process.stderr_seen)
        assert value not in logged and value[::-1] not in logged, f"{process.name} logged the secret"


def test_agentd_data_directory_is_private(turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic) -> None:
    """`agentd dev`'s data directory is 0700 and its database, WAL and shared memory 0600
    while it runs; a tool call can neither list nor read them."""
    if turns.mode != "dev":
        pytest.skip("only `agentd dev` keeps a data directory")
    data_dir = Path(turns.cli_env["AGENTD_DATA_DIR"])
    assert data_dir.stat().st_mode & 0o777 == 0o700, oct(data_dir.stat().st_mode)
    files = sorted(p.name for p in data_dir.glob("agentd.db*"))
    assert "agentd.db" in files and "agentd.db-wal" in files, files
    for name in files:
        mode = (data_dir / name).stat().st_mode & 0o777
        assert mode == 0o600, f"{name} is {oct(mode)}"
    client = cloud_hands.client
    http = turns.http()
    headers = turns.headers(cloud_hands.api_key)
    key = unique("snoop")
    command = f"ls {data_dir}; cat {data_dir}/agentd.db-wal | head -c 64 | od -c | head -2"
    fake_anthropic.script(key, call("bash", {"command": command}), say("Tried."))
    session = make_hands_session(client, make_environment(client, "cloud"))
    client.beta.sessions.events.send(session.id, events=[user_message(f"look around {key}")])
    events = wait_idles(http, headers, session.id, on_timeout=lambda: runner_tail(cloud_hands))
    (result,) = of_type(events, "agent.tool_result")
    text = result_text(result)
    assert "agentd.db" not in text.replace(f"{data_dir}/agentd.db-wal", ""), text
    assert "Permission denied" in text or "No such file" in text, text


# ---------------------------------------------------------------------------------------
# 6. What each credential reaches


def test_environment_key_reaches_only_its_environment(turns: Deployment) -> None:
    client = turns.client()
    http = turns.http()
    headers = turns.headers()
    env_a = make_environment(client, "self_hosted")
    env_b = make_environment(client, "self_hosted")
    key_a = turns.create_environment_key(env_a)
    key_b = api_environment_key(turns, turns.bootstrap_key, env_b, name="for-b")
    agent = client.beta.agents.create(name=unique("scope-agent"), model=MODEL)
    session_a = client.beta.sessions.create(agent=agent.id, environment_id=env_a)
    session_b = client.beta.sessions.create(agent=agent.id, environment_id=env_b)
    a = auth(key_a)

    # Its own environment, its sessions and its queue.
    own = http.get(f"/v1/sessions/{session_a.id}", headers=a)
    assert own.status_code == 200 and own.json()["id"] == session_a.id, own.text[:500]
    assert http.get(f"/v1/sessions/{session_a.id}/events", headers=a).status_code == 200
    assert http.get(f"/v1/environments/{env_a}", headers=a).json()["id"] == env_a
    assert http.get(f"/v1/environments/{env_a}/work/stats", headers=a).json()["type"] == "work_queue_stats"

    # Not environment B's: out of reach answers exactly what a missing id answers (404),
    # so the key learns nothing about what exists elsewhere.
    message = {"events": [user_message("from the wrong key")]}
    for method, path, body in [
        ("GET", f"/v1/sessions/{session_b.id}", None),
        ("GET", f"/v1/sessions/{session_b.id}/events", None),
        ("POST", f"/v1/sessions/{session_b.id}/events", message),
        ("GET", f"/v1/environments/{env_b}", None),
        ("GET", f"/v1/environments/{env_b}/work/poll", None),
        ("GET", f"/v1/environments/{env_b}/work/stats", None),
        ("GET", f"/v1/environments/{env_b}/work", None),
    ]:
        response = http.request(method, path, json=body, headers=a)
        assert_error_envelope(response, 404, "not_found_error")
        missing = path.replace(session_b.id, "sesn_" + "0" * 26).replace(env_b, "env_" + "0" * 26)
        assert http.request(method, missing, json=body, headers=a).status_code == 404, missing
    assert not events_of(http, headers, session_b.id), "the refused message was not committed"

    # Nothing else of the workspace: no agents, no new sessions, no keys.
    agent_name = unique("not-created")
    for method, path, body in [
        ("POST", "/v1/agents", {"name": agent_name, "model": MODEL}),
        ("GET", "/v1/agents", None),
        ("GET", "/v1/sessions", None),
        ("POST", "/v1/sessions", {"agent": agent.id, "environment_id": env_a}),
        ("GET", "/v1/environments", None),
        ("POST", f"/v1/ext/environments/{env_a}/keys", {}),
        ("GET", f"/v1/ext/environments/{env_a}/keys", None),
        ("GET", "/v1/ext/runner/work/poll", None),
    ]:
        response = http.request(method, path, json=body, headers=a)
        assert_error_envelope(response, 403, "permission_error")
    assert agent_name not in [x.name for x in client.beta.agents.list(limit=100)]

    # An API key cannot list work (an environment-key route).
    assert_error_envelope(http.get(f"/v1/environments/{env_a}/work", headers=headers), 403, "permission_error")
    assert http.get(f"/v1/environments/{env_a}/work", headers=a).status_code == 200

    # Keys over the API: listed without secrets; a revoked key stops authenticating.
    listed = http.get(f"/v1/ext/environments/{env_b}/keys", headers=headers)
    assert listed.status_code == 200, listed.text[:500]
    (entry,) = listed.json()["data"]
    assert entry["id"] == key_b["id"] and entry["type"] == "environment_key" and entry["name"] == "for-b", entry
    assert "secret" not in entry and entry["revoked_at"] is None, entry
    revoked = http.post(f"/v1/ext/environments/{env_b}/keys/{key_b['id']}/revoke", headers=headers)
    assert revoked.status_code == 200 and revoked.json()["revoked_at"], revoked.text[:500]
    deadline = time.monotonic() + 10  # the gateway caches keys for a moment
    while (status := poll(http, env_b, key_b["secret"]).status_code) != 401:
        assert status == 200 and time.monotonic() < deadline, f"the revoked key still answers {status}"
        time.sleep(0.2)
    assert poll(http, env_a, key_a).status_code == 200, "revoking B's key leaves A's alone"


def test_runner_key_serves_only_cloud_environments(turns: Deployment) -> None:
    # A workspace of its own: under `agentd dev` the in-process runner serves "default".
    workspace = unique("runner-scope")
    api_key = turns.create_key(workspace)
    client = turns.client(api_key)
    http = turns.http()
    runner_key = turns.create_runner_key(workspace)
    self_hosted = make_environment(client, "self_hosted")
    cloud = make_environment(client, "cloud")
    r = auth(runner_key)
    empty = http.get("/v1/ext/runner/work/poll", headers=r)
    assert empty.status_code == 200 and empty.json() is None, empty.text[:500]
    assert http.get(f"/v1/environments/{cloud}", headers=r).status_code == 200
    assert http.get(f"/v1/environments/{cloud}/work/stats", headers=r).status_code == 200
    # A self-hosted environment is out of reach: the 404 of a missing one.
    for path in (f"/v1/environments/{self_hosted}", f"/v1/environments/{self_hosted}/work/poll"):
        assert_error_envelope(http.get(path, headers=r), 404, "not_found_error")
    encoded = self_hosted.replace("_", "%5F")
    assert_error_envelope(http.get(f"/v1/environments/{encoded}/work/poll", headers=r), 404, "not_found_error")
    assert_error_envelope(http.get("/v1/agents", headers=r), 403, "permission_error")
    assert_error_envelope(http.get("/v1/ext/runner/work/poll", headers=auth(api_key)), 403, "permission_error")


def test_memory_stores_refuse_an_environment_key(turns: Deployment) -> None:
    """The memory endpoints take the per-item sessions token but reject an environment
    key (§5.3): 403 permission_error, whatever the memory routes' own state."""
    environment_id = make_environment(turns.client(), "self_hosted")
    env_key = turns.create_environment_key(environment_id)
    http = turns.http()
    memory = auth(env_key, **{"anthropic-beta": "agent-memory-2026-07-22"})
    assert_error_envelope(http.get("/v1/memory_stores", headers=memory), 403, "permission_error")
