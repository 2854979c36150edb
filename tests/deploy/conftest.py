"""The deploy suite's stack: deploy/docker-compose.yml in containers, driven through the balancer.

`scripts/test --deploy` runs this suite. The session fixture builds the agentd image from
the binary the suite was given (AGENTD_BIN, copied into the image: `scripts/image
--binary`) and the backing services' images FROM a Debian base (`--local-services`, so no
registry is needed), then brings the stack up with podman-compose under a project name and
host ports of its own, and takes it down (volumes included) at the end.

podman 4.3 cannot wait for a service to be healthy (compose's `service_healthy`), so the
stack comes up in the compose file's dependency order, one stage at a time, each stage
waited for here with the same probes the compose file declares.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import anthropic
import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILES = [
    ROOT / "deploy" / "docker-compose.yml",
    ROOT / "deploy" / "docker-compose.local.yml",
    ROOT / "tests" / "deploy" / "compose.test.yml",
]
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
    compose_cmd: list = field(default_factory=list)

    # -- engine and compose -----------------------------------------------------------

    def podman(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        result = subprocess.run(
            ["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")
        return result

    def compose(self, *args: str, timeout: float = 300) -> None:
        result = subprocess.run(
            [*self.compose_cmd, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if result.returncode != 0:
            raise AssertionError(f"podman-compose {' '.join(args)} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")

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
        wait_until("the S3 server", lambda: self.podman("exec", self.container("minio"), "curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:9000/", check=False).returncode == 0)
        wait_until("nats", lambda: self.running(self.container("nats")))

    def wait_gateways(self) -> None:
        for gateway in ("gateway-1", "gateway-2"):
            wait_until(f"{gateway} /readyz", lambda g=gateway: self.ready(g))
        wait_until("the balancer", self.balancer_ready)

    def up(self) -> None:
        self.compose("up", "-d", "--no-deps", "postgres", "redis", "nats", "minio")
        self.wait_backends()
        self.compose("up", "-d", "--no-deps", "minio-bucket", "migrate")
        for job in ("minio-bucket", "migrate"):
            name = self.container(job)
            wait_until(f"{job} to finish", lambda n=name: not self.running(n))
            assert self.exit_code(name) == 0, f"{job} failed:\n{self.logs(name)}"
        self.compose("up", "-d", "--no-deps", "gateway-1", "gateway-2")
        self.compose("up", "-d", "--no-deps", "--scale", f"worker={WORKERS}", "worker")
        self.compose("up", "-d", "--no-deps", "balancer", "runner")
        self.wait_gateways()
        for worker in self.workers():
            wait_until(f"{worker} running", lambda w=worker: self.running(w))
        wait_until("the runner", lambda: self.running(self.container("runner")))

    def down(self) -> None:
        subprocess.run([*self.compose_cmd, "down", "-v", "-t", "5"], env=self.env, capture_output=True, timeout=300)
        # podman-compose's `down` forgets replicas started with `--scale`: remove whatever
        # still carries the project's label, then its volumes and network.
        label = f"label=io.podman.compose.project={self.project}"
        leftover = self.podman("ps", "-a", "-q", "--filter", label, check=False).stdout.split()
        if leftover:
            self.podman("rm", "-f", "-t", "2", *leftover, check=False)
        volumes = self.podman("volume", "ls", "-q", "--filter", label, check=False).stdout.split()
        if volumes:
            self.podman("volume", "rm", "-f", *volumes, check=False)
        networks = self.podman("network", "ls", "-q", "--filter", label, check=False).stdout.split()
        if networks:
            self.podman("network", "rm", "-f", *networks, check=False)

    def api_key(self) -> str:
        key = self.exec(self.container("gateway-1"), "agentd", "keys", "create", "--workspace", "default", "--name", "deploy-suite")
        return key.strip().splitlines()[-1]


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
    if env.get("DEPLOY_SKIP_BUILD") != "1":
        log(f"building the images (agentd from {binary})")
        subprocess.run(
            [str(ROOT / "scripts" / "image"), "--binary", binary, "--tag", IMAGE, "--local-services"],
            env=env, check=True, timeout=1800,
        )
    containers_conf(env)
    project = f"agentd-deploy-{os.getpid()}-{random.randrange(1 << 16):04x}"
    api_port = free_port()
    ops = {"gateway-1": free_port(), "gateway-2": free_port()}
    env.update(
        AGENTD_IMAGE=IMAGE,
        AGENTD_PORT=str(api_port),
        GATEWAY_1_OPS_PORT=str(ops["gateway-1"]),
        GATEWAY_2_OPS_PORT=str(ops["gateway-2"]),
        MINIO_PORT=str(free_port()),
        MINIO_CONSOLE_PORT=str(free_port()),
        AGENTD_WORKERS=str(WORKERS),
    )
    compose_cmd = [sys.executable, "-m", "podman_compose", "-p", project]
    for file in COMPOSE_FILES:
        compose_cmd += ["-f", str(file)]
    stack = Stack(project=project, env=env, api_port=api_port, ops_ports=ops, compose_cmd=compose_cmd)
    log(f"bringing up {project} (API on {stack.url})")
    try:
        stack.up()
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
