"""`/readyz` tells the truth about the process's own components, not only its backends.

A component that stops (the in-process runner of `agentd dev`, a worker's consumer) is
restarted with backoff, and while it is down `/readyz` answers 503 naming it and why
(the operations listener; the public listener gives the status alone). The failures are
injected with the fail points of `schema/src/faults.rs` (`AGENTD_FAULT_FAIL_AT`): the
first starts of the component fail, the next one runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from fake_models import FakeAnthropic, say
from harness import Deployment, Process, base_env, new_secret_key, start_role, unique
from test_reliability import fast_env, make_session, user_message, wait_idles

# Three failed starts: down at once, restarted after 1 s and 2 s more, running after 4 s
# more — a 503 window of about 7 s.
FAILED_STARTS = 3


def readiness(ops_url: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{ops_url}/readyz", timeout=5.0, trust_env=False)
    return response.status_code, response.json()


def wait_readiness(ops_url: str, process: Process, want: Callable[[int, dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: tuple[int, dict[str, Any]] | None = None
    while time.monotonic() < deadline:
        assert process.alive(), f"{process.name} exited\n{process.output_tail()}"
        last = readiness(ops_url)
        if want(*last):
            return last[1]
        time.sleep(0.1)
    pytest.fail(f"{what}: /readyz never did (last: {last})\n{process.output_tail()}")


def down(component: str) -> Callable[[int, dict[str, Any]], bool]:
    return lambda code, body: code == 503 and body.get("components", {}).get(component, {}).get("ok") is False


def up(component: str) -> Callable[[int, dict[str, Any]], bool]:
    return lambda code, body: code == 200 and body["components"].get(component) == {"ok": True}


def restarts(ops_url: str, component: str) -> float:
    text = httpx.get(f"{ops_url}/metrics", timeout=5.0, trust_env=False).text
    for line in text.splitlines():
        if line.startswith("agentd_component_restarts_total{") and f'component="{component}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_dev_server_whose_runner_cannot_start_is_not_ready_until_it_runs(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = base_env(
        AGENTD_HTTP_ADDR="127.0.0.1:0",
        AGENTD_OPS_ADDR="127.0.0.1:0",
        AGENTD_DATA_DIR=str(data_dir),
        AGENTD_BOOTSTRAP_API_KEY=new_secret_key(),
        AGENTD_FAULT_FAIL_AT=f"runner.start@{FAILED_STARTS}",
    )
    process, url = start_role("dev", env, ready=False)
    try:
        assert process.ops_url
        body = wait_readiness(process.ops_url, process, down("runner"), 5.0, "the runner reported down")
        assert body["status"] == "unavailable"
        assert "runner.start failed on purpose" in body["components"]["runner"]["error"]
        assert all(check["ok"] for check in body["backends"].values()), "the backends themselves are fine"
        public = httpx.get(f"{url}/readyz", timeout=5.0, trust_env=False)
        assert public.status_code == 503 and public.json() == {"status": "unavailable"}
        body = wait_readiness(process.ops_url, process, up("runner"), 20.0, "the runner restarted")
        assert body["status"] == "ready"
        assert {"consumer", "outbox_relay", "runner"} <= set(body["components"])
        assert restarts(process.ops_url, "runner") == FAILED_STARTS
        assert httpx.get(f"{url}/readyz", timeout=5.0, trust_env=False).status_code == 200
        assert any("the in-process runner stopped" in line or "runner.start" in line for line in process.stderr_seen)
    finally:
        process.stop()


def test_a_worker_whose_consumer_stops_is_not_ready_and_runs_turns_once_restarted(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    deployment = launch("prod", worker=False, extra_env=fast_env(provider_env))
    worker = deployment.start_worker({"AGENTD_FAULT_FAIL_AT": f"consumer.start@{FAILED_STARTS}"}, ready=False)
    assert worker.ops_url
    body = wait_readiness(worker.ops_url, worker, down("consumer"), 5.0, "the consumer reported down")
    assert "consumer.start failed on purpose" in body["components"]["consumer"]["error"]
    # The gateway is another process: it is ready, and takes the turn meanwhile.
    client = deployment.client()
    key = unique("ready")
    fake_anthropic.script(key, say("after the restart"))
    session = make_session(client)
    client.beta.sessions.events.send(session.id, events=[user_message(f"hello {key}")])
    wait_readiness(worker.ops_url, worker, up("consumer"), 20.0, "the consumer restarted")
    events = wait_idles(deployment, session.id)
    assert [e["content"][0]["text"] for e in events if e["type"] == "agent.message"] == ["after the restart"]
    assert restarts(worker.ops_url, "consumer") == FAILED_STARTS
