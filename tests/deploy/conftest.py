"""The deploy suite's stack: deploy/docker-compose.yml in containers, driven through the balancer.

`scripts/test --deploy` runs this suite. The session fixture brings the stack up with
`scripts/stack up` — the same command a user runs — from the binary the suite was given
(AGENTD_BIN, copied into the image), with 3 workers, under a project name and host ports
of its own, and takes it down (volumes included) with `scripts/stack down` at the end.
tests/deploy/compose.test.yml shortens drains and leases so faults play out quickly.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import anthropic
import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/agentd:deploy-test"
WORKERS = 3
MODEL = "agentd-script"


def log(message: str) -> None:
    print(f"[deploy] {message}", file=sys.stderr, flush=True)


def wait_until(what: str, check, timeout: float = 90.0, every: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as error:  # noqa: BLE001 - any failure means "not yet"
            last = error
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last error: {last!r})")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Stack:
    project: str
    env: dict
    api_port: int
    ops_ports: dict
    nats_monitoring_port: int

    # -- engine and compose -----------------------------------------------------------

    def podman(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        # scripts/image may have written the containers.conf only while this suite's stack
        # came up (a machine's first run): without it, `podman run` fails on rlimits here.
        containers_conf(self.env)
        result = subprocess.run(
            ["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")
        return result

    def stack(self, *args: str, timeout: float = 1800) -> str:
        """`scripts/stack <args>` for this suite's project; its stdout."""
        result = subprocess.run(
            [str(ROOT / "scripts" / "stack"), *args], env=self.env, stdout=subprocess.PIPE, text=True, timeout=timeout
        )
        if result.returncode != 0:
            raise AssertionError(f"scripts/stack {' '.join(args)} failed ({result.returncode})")
        return result.stdout

    def container(self, service: str, index: int = 1) -> str:
        return f"{self.project}_{service}_{index}"

    def workers(self) -> list[str]:
        return [self.container("worker", i) for i in range(1, WORKERS + 1)]

    def running(self, name: str) -> bool:
        out = self.podman("inspect", "--format", "{{.State.Running}}", name, check=False)
        return out.stdout.strip() == "true"

    def exit_code(self, name: str) -> int:
        return int(self.podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip())

    def exec(self, name: str, *cmd: str) -> str:
        return self.podman("exec", name, *cmd).stdout

    def ip(self, name: str) -> str:
        return self.podman("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name).stdout.strip()

    def logs(self, name: str, tail: int = 40) -> str:
        out = self.podman("logs", "--tail", str(tail), name, check=False)
        return out.stdout + out.stderr

    # -- probes -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def ready(self, gateway: str) -> bool:
        port = self.ops_ports[gateway]
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200

    def balancer_ready(self) -> bool:
        return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200

    def wait_backends(self) -> None:
        wait_until("postgres", lambda: self.podman("exec", self.container("postgres"), "pg_isready", "-U", "agentd", "-d", "agentd", check=False).returncode == 0)
        wait_until("redis", lambda: "PONG" in self.exec(self.container("redis"), "redis-cli", "ping"))
        wait_until("nats", lambda: httpx.get(f"http://127.0.0.1:{self.nats_monitoring_port}/healthz?js-enabled-only=true", timeout=2).status_code == 200)

    def wait_gateways(self) -> None:
        for gateway in ("gateway-1", "gateway-2"):
            wait_until(f"{gateway} /readyz", lambda g=gateway: self.ready(g))
        wait_until("the balancer", self.balancer_ready)

    def up(self, binary: str | None) -> None:
        args = ["up", "--workers", str(WORKERS), "-f", str(ROOT / "tests" / "deploy" / "compose.test.yml")]
        args += ["--binary", binary] if binary else ["--no-build"]
        self.stack(*args)
        self.wait_gateways()

    def down(self) -> None:
        self.stack("down", timeout=300)

    def api_key(self) -> str:
        return self.stack("key").strip().splitlines()[-1]


def containers_conf(env: dict) -> None:
    """The containers.conf scripts/image writes where podman's defaults fail here."""
    if "CONTAINERS_CONF" not in env:
        conf = Path(env.get("XDG_RUNTIME_DIR", "/tmp")) / "agentd-containers.conf"
        if conf.exists():
            env["CONTAINERS_CONF"] = str(conf)


@pytest.fixture(scope="session")
def stack():
    env = dict(os.environ)
    binary = env.get("AGENTD_BIN") or str(ROOT / "target" / "debug" / "agentd")
    containers_conf(env)
    project = f"agentd-deploy-{os.getpid()}-{random.randrange(1 << 16):04x}"
    api_port = free_port()
    ops = {"gateway-1": free_port(), "gateway-2": free_port()}
    nats_monitoring = free_port()
    env.update(
        AGENTD_STACK_PROJECT=project,
        AGENTD_IMAGE=IMAGE,
        AGENTD_PORT=str(api_port),
        GATEWAY_1_OPS_PORT=str(ops["gateway-1"]),
        GATEWAY_2_OPS_PORT=str(ops["gateway-2"]),
        NATS_MONITORING_PORT=str(nats_monitoring),
        MINIO_PORT=str(free_port()),
        MINIO_CONSOLE_PORT=str(free_port()),
        # The suite drives containers with podman (kill, exec, inspect): so does the stack.
        AGENTD_STACK_ENGINE="podman",
        PODMAN_COMPOSE=f"{sys.executable} -m podman_compose",
    )
    stack = Stack(project=project, env=env, api_port=api_port, ops_ports=ops, nats_monitoring_port=nats_monitoring)
    log(f"bringing up {project} (API on {stack.url}; agentd from {binary})")
    try:
        stack.up(None if env.get("DEPLOY_SKIP_BUILD") == "1" else binary)
        yield stack
    finally:
        log(f"taking {project} down")
        stack.down()


@pytest.fixture(scope="session")
def client(stack) -> anthropic.Anthropic:
    # The SDK's own retries ride out a gateway that drains or a backend that restarts.
    return anthropic.Anthropic(base_url=stack.url, api_key=stack.api_key(), max_retries=8, timeout=60)


@pytest.fixture(scope="session")
def agent(client):
    return client.beta.agents.create(name="deploy", model=MODEL, tools=[{"type": "agent_toolset_20260401"}])


@pytest.fixture(scope="session")
def environment(client):
    return client.beta.environments.create(name="deploy", config={"type": "cloud"})
