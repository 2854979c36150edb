"""The distributed stack in containers, through the balancer, with the official SDK.

In file order (they share one stack): a turn whose bash call the runner's container runs
in its sandbox, and the sandbox's escape attempts; a gateway stopped under 100 open
streams; workers killed mid-turn; PostgreSQL, NATS and Redis restarted under load.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time

import httpx
import pytest
import yaml

from conftest import ROOT, log, wait_until

BETA = "managed-agents-2026-04-01"


def text_of(event) -> str:
    return "".join(getattr(block, "text", "") for block in (getattr(event, "content", None) or []))


def history(client, session_id: str) -> list:
    return list(client.beta.sessions.events.list(session_id, limit=1000))


def send(client, session_id: str, text: str) -> None:
    client.beta.sessions.events.send(
        session_id, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}]
    )


def agent_texts(client, session_id: str) -> list[str]:
    """The session's agent messages, stripped (the scripted model ends `say` with a space)."""
    return [text_of(e).strip() for e in history(client, session_id) if e.type == "agent.message"]


def run_turn(client, session_id: str, text: str, timeout: float = 90) -> list:
    """Sends `text` and waits until the session is idle after it; the turn's events."""
    before = len(history(client, session_id))
    send(client, session_id, text)

    def idle_after():
        events = history(client, session_id)[before:]
        return events if any(e.type == "session.status_idle" for e in events[1:]) else None

    return wait_until(f"the turn {text!r} to end", idle_after, timeout=timeout, every=0.3)


# -- a turn, and the sandbox in the runner's container -----------------------------------------


@pytest.mark.parametrize(
    ("privileges", "missing"),
    [
        (["--user", "10001"], "missing: root"),
        (["--user", "0"], "CAP_SYS_ADMIN"),
        (["--user", "0", "--cap-add", "SYS_ADMIN"], "missing: CAP_NET_ADMIN"),
    ],
    ids=["non-root", "no-sys-admin", "no-net-admin"],
)
def test_a_runner_without_its_privileges_refuses_to_start(stack, privileges, missing):
    """Less than root + SYS_ADMIN + NET_ADMIN (ADR 0030): the runner says what is missing."""
    result = stack.podman(
        "run", "--rm", *privileges,
        "-e", "AGENTD_RUNNER_GATEWAY_URL=http://127.0.0.1:9", "-e", "AGENTD_RUNNER_KEY=sk-agentd-runner-unused",
        stack.env["AGENTD_IMAGE"], "runner", check=False, timeout=60,
    )
    assert result.returncode != 0, "the runner started without what its sandbox needs"
    assert "sandbox isolation `namespace` cannot work here" in result.stderr, result.stderr[-1500:]
    assert missing in result.stderr, result.stderr[-1500:]


def test_a_turn_runs_its_bash_call_in_the_runners_sandbox(stack, client, agent, environment):
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    events = run_turn(client, session.id, "use bash: echo hello from $(pwd); id -u")
    results = [text_of(e) for e in events if e.type == "agent.tool_result"]
    assert len(results) == 1, [e.type for e in events]
    assert f"hello from" in results[0] and session.id in results[0], results[0]
    uid = int(results[0].split("\n")[1])
    assert uid != 0, "a session's tools run as a uid of its own, not root"
    assert events[-1].type == "session.status_idle"


def test_the_sandbox_holds_inside_the_runners_container(stack, client, agent, environment):
    """The escape attempts of the sandbox tests, with the runner in its container."""
    first = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    # `limited` networking with nothing allowed: no network at all.
    limited = client.beta.environments.create(name="limited", config={"type": "cloud", "networking": {"type": "limited"}})
    second = client.beta.sessions.create(agent=agent.id, environment_id=limited.id)
    run_turn(client, first.id, "use bash: echo secret-of-the-first > mine.txt && pwd")
    first_dir = f"$(dirname $(pwd))/{first.id}"
    balancer_ip = stack.ip(stack.container("balancer"))
    probes = {
        # Another session's files.
        "other": f"cat {first_dir}/mine.txt 2>&1; ls $(dirname $(pwd)) 2>&1 | grep -c sesn_",
        # The runner's key and agentd's own files.
        "key": "cat /var/lib/agentd/keys/runner 2>&1 | head -c 80",
        # The network.
        "net": f"timeout 3 bash -c 'echo > /dev/tcp/{balancer_ip}/8080' 2>&1; echo rc=$?",
        # The runner's processes.
        "pids": "ls /proc | grep -E '^[0-9]+$' | wc -l; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done",
    }
    outputs = {}
    for name, command in probes.items():
        events = run_turn(client, second.id, f"use bash: {command}")
        outputs[name] = "".join(text_of(e) for e in events if e.type == "agent.tool_result")
    log(f"escape attempts: {json.dumps(outputs)}")
    assert "secret-of-the-first" not in outputs["other"]
    assert "sk-agentd" not in outputs["key"]
    assert "rc=0" not in outputs["net"] and "rc=" in outputs["net"], outputs["net"]
    pid_count = int(outputs["pids"].split()[0])
    assert pid_count < 10, f"the session sees the runner's processes: {outputs['pids']}"
    # Only the sandbox's own processes (bubblewrap as its pid 1, the shell): not the
    # runner, not tini.
    assert "/usr/local/bin/agentd" not in outputs["pids"] and "tini" not in outputs["pids"], outputs["pids"]


# -- a gateway stopped under open streams --------------------------------------------------------


async def follow(url: str, headers: dict, session_id: str, seen: list, stop: asyncio.Event, stats: dict):
    """One stream client: reconnects with Last-Event-ID whenever its stream ends."""
    last_id = None
    async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=60)) as http:
        while not stop.is_set():
            request_headers = dict(headers)
            if last_id:
                request_headers["Last-Event-ID"] = last_id
            try:
                async with http.stream("GET", f"{url}/v1/sessions/{session_id}/events/stream", headers=request_headers) as response:
                    if response.status_code != 200:
                        stats["refused"] = stats.get("refused", 0) + 1
                        await asyncio.sleep(0.2)
                        continue
                    stats["opened"] = stats.get("opened", 0) + 1
                    event_id = None
                    async for line in response.aiter_lines():
                        if line.startswith("id:"):
                            event_id = line[3:].strip()
                        elif line == "" and event_id:
                            seen.append(event_id)
                            last_id = event_id
                            event_id = None
                        if stop.is_set():
                            return
            except (httpx.HTTPError, OSError):
                pass
            stats["reconnects"] = stats.get("reconnects", 0) + 1
            await asyncio.sleep(0.1)


def test_a_stopped_gateway_drains_and_its_streams_resume_elsewhere(stack, client, agent, environment):
    sessions = [client.beta.sessions.create(agent=agent.id, environment_id=environment.id).id for _ in range(10)]
    headers = {"x-api-key": client.api_key, "anthropic-version": "2023-06-01", "anthropic-beta": BETA}
    seen: dict[str, list] = {}
    stats: dict = {}
    gateway = stack.container("gateway-1")

    async def scenario():
        stop = asyncio.Event()
        tasks = []
        for i in range(100):
            session_id = sessions[i % len(sessions)]
            seen[f"{i}"] = []
            tasks.append(asyncio.create_task(follow(stack.url, headers, session_id, seen[f"{i}"], stop, stats)))
        await wait_async(lambda: stats.get("opened", 0) >= 100, "100 open streams")
        loop = asyncio.get_running_loop()
        # Events before, during and after the drain.
        await loop.run_in_executor(None, lambda: [send(client, s, "!say before the drain") for s in sessions])
        started = time.monotonic()
        stopper = loop.run_in_executor(None, lambda: stack.podman("stop", "-t", "60", gateway, timeout=90))
        await asyncio.sleep(1.0)
        await loop.run_in_executor(None, lambda: [send(client, s, "!say during the drain") for s in sessions])
        await stopper
        stopped_after = time.monotonic() - started
        await loop.run_in_executor(None, lambda: [send(client, s, "!say after the drain") for s in sessions])
        await wait_async(lambda: all(settled(client, s) for s in sessions), "every turn to end", timeout=90)
        # Give the streams a moment to receive the last events, then stop them.
        expected = {s: [e.id for e in history(client, s)] for s in sessions}
        await wait_async(lambda: all(seen[f"{i}"][-1:] == expected[sessions[i % len(sessions)]][-1:] for i in range(100)), "every stream to catch up", timeout=60)
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return stopped_after, expected

    stopped_after, expected = asyncio.run(scenario())
    log(f"gateway drain: stopped after {stopped_after:.1f}s, streams {stats}")
    assert stack.exit_code(gateway) == 0, stack.logs(gateway)
    assert stopped_after < 20 + 10, "the drain ends within AGENTD_DRAIN_TIMEOUT (20 s)"
    assert stats.get("reconnects", 0) >= 1, "some streams were on the stopped gateway and reconnected"
    for i in range(100):
        session_id = sessions[i % len(sessions)]
        got = seen[f"{i}"]
        assert len(got) == len(set(got)), f"stream {i} received an event twice"
        assert got == expected[session_id][-len(got):], f"stream {i} missed or reordered events"
        # The stream opened before any event was sent: it must have received them all.
        assert got == expected[session_id], f"stream {i} missed {set(expected[session_id]) - set(got)}"
    # The balancer sends everything to the other gateway now, and gets gateway-1 back.
    stack.podman("start", gateway)
    wait_until("gateway-1 ready again", lambda: stack.ready("gateway-1"))
    stack.wait_gateways()


def settled(client, session_id: str) -> bool:
    events = history(client, session_id)
    replies = sum(1 for e in events if e.type == "agent.message")
    return replies == 3 and events[-1].type == "session.status_idle"


async def wait_async(check, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    loop = asyncio.get_running_loop()
    while time.monotonic() < deadline:
        if await loop.run_in_executor(None, check):
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


# -- workers killed mid-turn ---------------------------------------------------------------------


class Load:
    """Sessions sending one slow turn after another, each with a unique reply."""

    def __init__(self, client, agent, environment, sessions: int = 6, sleep_ms: int = 400):
        self.client = client
        self.sessions = [client.beta.sessions.create(agent=agent.id, environment_id=environment.id).id for _ in range(sessions)]
        self.sleep_ms = sleep_ms
        self.acknowledged: dict[str, list[str]] = {s: [] for s in self.sessions}
        self.stop = threading.Event()
        self.errors: list[str] = []
        # Sends refused even after the SDK's retries (a backend down): never acknowledged,
        # so nothing is owed for them.
        self.refused: list[str] = []
        self.threads = [threading.Thread(target=self.drive, args=(s,), daemon=True) for s in self.sessions]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def drive(self, session_id: str) -> None:
        turn = 0
        while not self.stop.is_set():
            reply = f"reply {session_id[-6:]} {turn}"
            try:
                send(self.client, session_id, f"!sleep {self.sleep_ms}; say {reply}")
            except Exception as error:  # noqa: BLE001 - not acknowledged: not counted
                self.refused.append(repr(error))
                time.sleep(0.5)
                continue
            self.acknowledged[session_id].append(reply)
            turn += 1
            try:
                wait_until(f"{reply}", lambda: reply in agent_texts(self.client, session_id), timeout=120, every=0.3)
            except AssertionError as error:
                self.errors.append(str(error))
                return

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=180)

    def verify(self) -> int:
        """Every acknowledged message answered exactly once; the number of turns."""
        turns = 0
        for session_id in self.sessions:
            wait_until(f"{session_id} idle", lambda s=session_id: history(self.client, s)[-1].type == "session.status_idle", timeout=120)
            texts = agent_texts(self.client, session_id)
            for reply in self.acknowledged[session_id]:
                count = texts.count(reply)
                assert count == 1, f"{reply!r} answered {count} times (0 = lost, 2+ = duplicated)"
            assert len(texts) == len(self.acknowledged[session_id]), (texts, self.acknowledged[session_id])
            turns += len(texts)
        return turns


def test_workers_killed_mid_turn_lose_nothing_and_duplicate_nothing(stack, client, agent, environment):
    kills = int(os.environ.get("DEPLOY_WORKER_KILLS", "50"))
    rng = random.Random(17)
    with Load(client, agent, environment) as load:
        time.sleep(2)
        for n in range(kills):
            worker = rng.choice(stack.workers())
            stack.podman("kill", "-s", "KILL", worker, check=False)
            time.sleep(rng.uniform(0.2, 0.8))
            stack.podman("start", worker)
            time.sleep(rng.uniform(0.3, 1.0))
            assert not load.errors, load.errors
    turns = load.verify()
    log(f"worker kills: {kills} kills, {turns} turns, 0 lost, 0 duplicated")
    assert not load.errors, load.errors
    assert turns >= kills // 2, "the load kept running through the kills"


# -- backends restarted under load ---------------------------------------------------------------


@pytest.mark.parametrize("backend", ["postgres", "nats", "redis"])
def test_a_backend_restarted_under_load_loses_no_acknowledged_input(stack, client, agent, environment, backend):
    with Load(client, agent, environment, sessions=4, sleep_ms=200) as load:
        time.sleep(2)
        stack.podman("restart", "-t", "10", stack.container(backend), timeout=120)
        stack.wait_backends()
        time.sleep(5)
    turns = load.verify()
    log(f"{backend} restarted: {turns} turns, every acknowledged message answered once; {len(load.refused)} sends refused")
    assert not load.errors, load.errors
    for gateway in ("gateway-1", "gateway-2"):
        wait_until(f"{gateway} ready after the {backend} restart", lambda g=gateway: stack.ready(g))


# -- the scaler's signal -------------------------------------------------------------------------


def keda_lag(stack, trigger: dict) -> int:
    """The lag KEDA's nats-jetstream scaler computes (KEDA >= 2.8): GET
    /jsz?acc=<account>&consumers=true&config=true on the monitoring endpoint, the named
    account's stream's consumer, num_pending + num_ack_pending."""
    url = f"http://127.0.0.1:{stack.nats_monitoring_port}/jsz?acc={trigger['account']}&consumers=true&config=true"
    body = httpx.get(url, timeout=5).json()
    accounts = [a for a in body.get("account_details") or [] if a["name"] == trigger["account"]]
    assert accounts, f"no account {trigger['account']!r} in /jsz: {body.get('account_details')}"
    streams = [s for s in accounts[0].get("stream_detail") or [] if s["name"] == trigger["stream"]]
    assert streams, f"no stream {trigger['stream']!r}: the ScaledObject's names drifted from agentd's"
    consumers = [c for c in streams[0].get("consumer_detail") or [] if c["name"] == trigger["consumer"]]
    assert consumers, f"no consumer {trigger['consumer']!r}: the ScaledObject's names drifted from agentd's"
    return consumers[0]["num_pending"] + consumers[0]["num_ack_pending"]


def test_the_scalers_signal_counts_queued_turns(stack, client, agent, environment):
    """deploy/keda/scaledobject.yaml's trigger read as KEDA reads it: with the workers
    stopped, 200 queued turns are a lag of 200; scaled to 3 workers, it falls to 0."""
    manifest = yaml.safe_load((ROOT / "deploy" / "keda" / "scaledobject.yaml").read_text())
    trigger = next(t["metadata"] for t in manifest["spec"]["triggers"] if t["type"] == "nats-jetstream")
    assert keda_lag(stack, trigger) == 0, "the queue is empty before the test"
    for worker in stack.workers():
        stack.podman("stop", "-t", "30", worker, timeout=60)
    sessions = [client.beta.sessions.create(agent=agent.id, environment_id=environment.id).id for _ in range(200)]
    for n, session_id in enumerate(sessions):
        send(client, session_id, f"!say queued {n}")
    lag = wait_until("a lag of 200", lambda: (lambda lag: lag if lag >= 200 else None)(keda_lag(stack, trigger)), timeout=60)
    assert lag == 200, f"KEDA would see a lag of {lag} for 200 queued turns"
    started = time.monotonic()
    stack.stack("scale", str(len(stack.workers())))
    wait_until("the lag to fall to 0", lambda: keda_lag(stack, trigger) == 0, timeout=180)
    drained_after = time.monotonic() - started
    for n, session_id in enumerate(sessions):
        wait_until(f"session {n} answered", lambda s=session_id, n=n: agent_texts(client, s) == [f"queued {n}"], timeout=60)
    log(f"scaler signal: lag 200 with the workers stopped, 0 after {drained_after:.1f}s with {len(stack.workers())}")
