"""Harness of the official-client suite: agentd as real processes, driven by `anthropic`.

Every test that takes the `agentd` fixture runs twice:

* ``dev``  — ``agentd dev`` on embedded backends (SQLite in a temporary data dir);
* ``prod`` — ``agentd migrate`` + ``agentd gateway`` + ``agentd worker`` on a fresh
  PostgreSQL database, a private JetStream stream and a private Redis key prefix on the
  servers named by ``AGENTD_TEST_POSTGRES_URL`` / ``AGENTD_TEST_NATS_URL`` /
  ``AGENTD_TEST_REDIS_URL`` (scripts/test starts them).

One server per mode serves the whole session; tests that need their own instance (small
rate limits, two gateways, a Redis that goes away) start it with the ``launch`` fixture.

Every HTTP response any test receives, through the SDK or through raw httpx, is recorded;
at the end of the session no secret value the suite wrote (API keys, and whatever a test
registers with ``recorder.secret``) may appear in any recorded body or header.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import queue
import re
import secrets as _secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

import anthropic
import httpx
import httpx2
import pytest

# The SDK reads ANTHROPIC_* (base URL, custom headers, profiles) from the environment; a
# developer's shell must not leak into the suite.
for _name in list(os.environ):
    if _name.startswith("ANTHROPIC_"):
        del os.environ[_name]

ROOT = Path(__file__).resolve().parents[3]
AGENTD_BIN = os.environ.get("AGENTD_BIN") or str(ROOT / "target" / "debug" / "agentd")
POSTGRES_URL = os.environ.get("AGENTD_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
NATS_URL = os.environ.get("AGENTD_TEST_NATS_URL", "nats://127.0.0.1:4222")
REDIS_URL = os.environ.get("AGENTD_TEST_REDIS_URL", "redis://127.0.0.1:6379")
# The S3-compatible server prod deployments keep their blobs on (scripts/test starts
# moto's standalone server there); each deployment gets a bucket of its own.
S3_ENDPOINT = os.environ.get("AGENTD_TEST_S3_ENDPOINT", "http://127.0.0.1:9000").rstrip("/")

BETA = "managed-agents-2026-04-01"
BETA_HEADERS = {"anthropic-beta": BETA}

# Generous limits for the shared servers; different on purpose so a test can tell which
# bucket metered a response.
GENEROUS_CREATE = 50_000
GENEROUS_READ = 60_000

ANNOUNCE_TIMEOUT = 30.0
READY_TIMEOUT = 30.0
CLI_TIMEOUT = 60.0
HTTP_TIMEOUT = 30.0
# Auto-pagination stops when the server says so; a server that never does must fail a
# test, not hang it.
MAX_ITEMS = 2_000

FALLBACK_MODEL = "claude-sonnet-4-6"


# ---------------------------------------------------------------------------------------
# Recording every response


@dataclass
class Exchange:
    method: str
    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class Recorder:
    """Keeps every HTTP response of the session and every secret the suite wrote."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self.secrets: set[str] = set()
        self._lock = threading.Lock()

    def secret(self, value: str) -> str:
        """Registers a secret value (and its random tail) for the end-of-session audit."""
        with self._lock:
            self.secrets.add(value)
            # The random part alone, so an echo with the prefix cut off is caught too.
            tail = re.sub(r"^sk-agentd-(?:test-|dev-)?", "", value)
            if len(tail) >= 16:
                self.secrets.add(tail)
        return value

    def hook(self, response: Any) -> None:
        """httpx / httpx2 response event hook.

        A live SSE stream is not read here (that would wait for the stream to end): its
        headers are recorded now, and its events by whoever consumes it (`note`)."""
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            self.note(response.request.method, str(response.request.url), response.status_code, b"", response.headers)
            return
        response.read()
        exchange = Exchange(
            method=response.request.method,
            url=str(response.request.url),
            status=response.status_code,
            headers=list(response.headers.items()),
            body=bytes(response.content),
        )
        with self._lock:
            self.exchanges.append(exchange)

    def note(self, method: str, url: str, status: int, body: bytes, headers: Any = ()) -> None:
        """Records a body received outside the hook (e.g. one event of a live stream)."""
        items = list(headers.items()) if hasattr(headers, "items") else list(headers)
        with self._lock:
            self.exchanges.append(Exchange(method=method, url=url, status=status, headers=items, body=body))

    def since(self, mark: int) -> list[Exchange]:
        with self._lock:
            return list(self.exchanges[mark:])

    def mark(self) -> int:
        with self._lock:
            return len(self.exchanges)

    # The routes whose answer is a secret by design (a tunnel's connector token is shown
    # by reveal_token and rotate_token): their bodies are not audited; every other
    # response still is, for those secrets too.
    SHOWN_BY_DESIGN = re.compile(r"/v1/tunnels/tnl_[0-9a-z]+/(reveal_token|rotate_token)$")

    def leaks(self) -> list[str]:
        found = []
        with self._lock:
            exchanges = list(self.exchanges)
            values = sorted(self.secrets)
        for ex in exchanges:
            if ex.status == 200 and self.SHOWN_BY_DESIGN.search(ex.url.split("?")[0]):
                continue
            for value in values:
                needle = value.encode()
                if needle in ex.body:
                    found.append(f"{ex.method} {ex.url} -> {ex.status}: body contains secret {value[:12]}…")
                for name, header in ex.headers:
                    if value in header:
                        found.append(
                            f"{ex.method} {ex.url} -> {ex.status}: header {name} contains secret {value[:12]}…"
                        )
        return found


RECORDER = Recorder()


def new_secret_key() -> str:
    return RECORDER.secret(f"sk-agentd-test-{_secrets.token_hex(24)}")


# ---------------------------------------------------------------------------------------
# Processes


_LIVE: set["Process"] = set()


class Process:
    """A child process whose stdout lines are queued and whose stderr is kept."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], cwd: str | None = None) -> None:
        self.name = name
        self.argv = argv
        self.stdout_lines: "queue.Queue[str | None]" = queue.Queue()
        self.stdout_seen: list[str] = []
        self.stderr_seen: list[str] = []
        # The announced listener (http for gateway/dev, ops for a worker), once known.
        self.url: str | None = None
        # The operations listener (/readyz with backend details, /metrics, /admin/drain).
        self.ops_url: str | None = None
        self.proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            bufsize=1,
        )
        _LIVE.add(self)
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.stdout_seen.append(line)
            self.stdout_lines.put(line)
        self.stdout_lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_seen.append(line.rstrip("\n"))

    def output_tail(self, lines: int = 60) -> str:
        time.sleep(0.1)  # let the pumps catch up with a process that just died
        return (
            f"--- {self.name} (pid {self.pid}, exit {self.proc.poll()}) stdout ---\n"
            + "\n".join(self.stdout_seen[-lines:])
            + f"\n--- {self.name} stderr ---\n"
            + "\n".join(self.stderr_seen[-lines:])
        )

    def wait_for_line(self, prefix: str, timeout: float = ANNOUNCE_TIMEOUT) -> str:
        """Returns the rest of the first stdout line starting with `prefix`."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"{self.name} did not print {prefix!r} within {timeout:.0f} s\n{self.output_tail()}")
            try:
                line = self.stdout_lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if line is None:
                pytest.fail(f"{self.name} exited before printing {prefix!r}\n{self.output_tail()}")
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def wait_for_lines(self, prefixes: list[str], timeout: float = ANNOUNCE_TIMEOUT) -> dict[str, str]:
        """The rest of the first stdout line starting with each of `prefixes`, in any order."""
        found: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        while len(found) < len(prefixes):
            left = deadline - time.monotonic()
            missing = [p for p in prefixes if p not in found]
            if left <= 0:
                pytest.fail(f"{self.name} did not print {missing!r} within {timeout:.0f} s\n{self.output_tail()}")
            try:
                line = self.stdout_lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if line is None:
                pytest.fail(f"{self.name} exited before printing {missing!r}\n{self.output_tail()}")
            for prefix in missing:
                if line.startswith(prefix):
                    found[prefix] = line[len(prefix) :].strip()
        return found

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`; only ever this process's own pid."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        _LIVE.discard(self)


def _stop_leftovers() -> None:
    for process in list(_LIVE):
        process.stop(timeout=5)


atexit.register(_stop_leftovers)


def base_env(**extra: str) -> dict[str, str]:
    """The environment of every agentd process: nothing AGENTD_* from the caller's shell."""
    env = {
        k: os.environ[k] for k in ("PATH", "HOME", "TMPDIR", "LANG", "RUST_LOG", "RUST_BACKTRACE") if k in os.environ
    }
    env.update(extra)
    return env


def wait_ready(base_url: str, process: Process, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    with httpx.Client(trust_env=False, timeout=5.0) as http:
        while time.monotonic() < deadline:
            if not process.alive():
                pytest.fail(f"{process.name} exited while waiting for /readyz\n{process.output_tail()}")
            try:
                response = http.get(f"{base_url}/readyz")
                if response.status_code == 200:
                    return
                last = f"{response.status_code} {response.text[:300]}"
            except httpx.HTTPError as err:
                last = repr(err)
            time.sleep(0.2)
    pytest.fail(f"{process.name}: GET {base_url}/readyz never answered 200 (last: {last})\n{process.output_tail()}")


def start_role(role: str, env: dict[str, str], name: str | None = None, *, ready: bool = True) -> tuple[Process, str]:
    """Starts `agentd <role>`, waits for its announced listener and (unless `ready` is
    false, for a process that may die on purpose at once) /readyz; returns (process, url)."""
    if not os.access(AGENTD_BIN, os.X_OK):
        pytest.fail(f"AGENTD_BIN={AGENTD_BIN} is not an executable: run `cargo build` first (scripts/test does)")
    process = Process(name or f"agentd {role}", [AGENTD_BIN, role], env)
    http, ops = "agentd: http listening on ", "agentd: ops listening on "
    # Every role has its operations listener; a worker has no API.
    announced = process.wait_for_lines([ops] if role == "worker" else [http, ops])
    process.ops_url = announced[ops].rstrip("/")
    url = announced.get(http, announced[ops]).rstrip("/")
    process.url = url
    if ready:
        wait_ready(process.ops_url, process)
    return process, url


def run_cli(args: list[str], env: dict[str, str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [AGENTD_BIN, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"`agentd {' '.join(args)}` exited {result.returncode}\n"
            f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
        )
    return result


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------------------------------
# Backing services for prod mode


def psql(url: str, sql: str) -> str:
    if shutil.which("psql") is None:
        pytest.fail("psql not found: prod mode creates and drops its database with psql (scripts/test installs it)")
    result = subprocess.run(
        ["psql", "-X", "-q", "-w", "-v", "ON_ERROR_STOP=1", "-At", "-d", url, "-c", sql],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0:
        raise RuntimeError(f"psql {sql!r} failed: {result.stderr.strip()}")
    return result.stdout


def with_database(url: str, name: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


def nats_delete_stream(url: str, stream: str, timeout: float = 3.0) -> None:
    """Best effort: `$JS.API.STREAM.DELETE.<stream>` over the plain NATS protocol."""
    parts = urllib.parse.urlsplit(url)
    connect: dict[str, Any] = {"verbose": False, "pedantic": False, "headers": False}
    if parts.username:
        connect["user"] = urllib.parse.unquote(parts.username)
        connect["pass"] = urllib.parse.unquote(parts.password or "")
    inbox = f"_INBOX.{uuid.uuid4().hex}"
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 4222), timeout=timeout) as sock:
            sock.settimeout(timeout)
            buf = sock.recv(4096)  # INFO
            sock.sendall(
                (
                    f"CONNECT {json.dumps(connect)}\r\nSUB {inbox} 1\r\n"
                    f"PUB $JS.API.STREAM.DELETE.{stream} {inbox} 0\r\n\r\nPING\r\n"
                ).encode()
            )
            deadline = time.monotonic() + timeout
            while b"MSG " not in buf and b"-ERR" not in buf and time.monotonic() < deadline:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                buf += chunk
    except OSError:
        pass


def redis_delete_prefix(url: str, prefix: str) -> None:
    """Best effort: drop the keys under the suite's private prefix (needs redis-cli)."""
    if shutil.which("redis-cli") is None:
        return
    try:
        keys = subprocess.run(
            ["redis-cli", "-u", url, "--scan", "--pattern", f"{prefix}*"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.split()
        for start in range(0, len(keys), 200):
            subprocess.run(["redis-cli", "-u", url, "DEL", *keys[start : start + 200]], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        pass


class PrivateRedis:
    """A redis-server of the test's own on a free port, so stopping it disturbs nobody."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.process = Process(
            f"redis-server :{self.port}",
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
            ],
            base_env(),
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if not self.process.alive():
                pytest.fail(f"private redis-server exited\n{self.process.output_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.1)
        pytest.fail(f"private redis-server did not answer PING\n{self.process.output_tail()}")

    def stop(self) -> None:
        self.process.stop(timeout=10)

    def restart(self, timeout: float = 15.0) -> None:
        """Starts the (stopped) server again on the same port, with the same arguments."""
        assert not self.process.alive(), "restart() needs a stopped redis-server"
        self.process = Process(self.process.name, self.process.argv, base_env())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.process.alive():
                pytest.fail(f"private redis-server exited on restart\n{self.process.output_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.1)
        pytest.fail(f"restarted redis-server did not answer PING\n{self.process.output_tail()}")


def _wait_tcp(port: int, timeout: float, alive: Callable[[], bool], what: str, greeting: bytes | None = None) -> None:
    """Waits until 127.0.0.1:`port` accepts (and, with `greeting`, sends a line starting with it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            pytest.fail(f"{what} exited")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                if greeting is None or sock.recv(64).startswith(greeting):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{what} did not answer on port {port} within {timeout:.0f} s")


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own on a free port (initdb + pg_ctl), so stopping
    it disturbs nobody. PostgreSQL refuses to run as root: as root, its binaries run as the
    `postgres` user (runuser) in a directory that user owns."""

    def __init__(self) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
        if not bins:
            pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
        self.bin = bins[-1].parent
        self.as_user: list[str] = []
        import tempfile

        self.dir = Path(tempfile.mkdtemp(prefix="agentd-pytest-pg-"))
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                pytest.skip("running as root without runuser: cannot start a private PostgreSQL")
            import pwd

            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("running as root and there is no `postgres` user")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = self.dir / "data"
        self.port = free_port()
        self.admin_url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        self.running = False
        _PRIVATE_SERVICES.add(self)
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"], 120)
        self.start()

    def _run(self, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*self.as_user, *argv], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
            env=base_env(LC_ALL="C.UTF-8"), cwd=str(self.dir),
        )
        if result.returncode != 0:
            log = ""
            try:
                log = (self.dir / "log").read_text()[-3000:]
            except OSError:
                pass
            pytest.fail(f"{' '.join(argv)} exited {result.returncode}\n{result.stdout}\n{result.stderr}\n--- log ---\n{log}")
        return result

    def start(self, timeout: float = 30) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "-t", str(int(timeout)), "start"], timeout + 10)
        self.running = True

    def stop(self, mode: str = "immediate") -> None:
        """`pg_ctl stop -m <mode>` (immediate: every backend dies at once, like a crash)."""
        if self.running:
            self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"], 60)
            self.running = False

    def create_database(self, name: str) -> str:
        psql(self.admin_url, f'CREATE DATABASE "{name}"')
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def close(self) -> None:
        try:
            self.stop()
        except BaseException as err:  # noqa: BLE001 - best effort, then remove the files
            print(f"stopping the private PostgreSQL failed: {err}")
        shutil.rmtree(self.dir, ignore_errors=True)
        _PRIVATE_SERVICES.discard(self)


class PrivateNats:
    """A nats-server with JetStream of the test's own on a free port; `restart` kills it
    and starts it again on the same port and store directory."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("nats-server") or ("/usr/sbin/nats-server" if os.access("/usr/sbin/nats-server", os.X_OK) else None)
        if binary is None:
            pytest.skip("nats-server is not installed")
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.store = workdir / "jetstream"
        self.store.mkdir(parents=True, exist_ok=True)
        self.argv = [binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store)]
        self.process = Process("private nats-server", self.argv, base_env())
        self._wait()

    def _wait(self, timeout: float = 15.0) -> None:
        _wait_tcp(self.port, timeout, self.process.alive, "private nats-server", greeting=b"INFO")

    def kill(self) -> None:
        if self.process.alive():
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.proc.wait(timeout=10)
        _LIVE.discard(self.process)

    def start(self) -> None:
        assert not self.process.alive(), "start() needs a stopped nats-server"
        self.process = Process(self.process.name, self.argv, base_env())
        self._wait()

    def restart(self, down_for: float = 0.0) -> None:
        self.kill()
        if down_for:
            time.sleep(down_for)
        self.start()

    def stop(self) -> None:
        self.process.stop(timeout=10)


_PRIVATE_SERVICES: set[PrivatePostgres] = set()


def _close_private_services() -> None:
    for service in list(_PRIVATE_SERVICES):
        try:
            service.close()
        except BaseException:  # noqa: BLE001 - exiting anyway
            pass


atexit.register(_close_private_services)


class S3Bucket:
    """A bucket on the S3 test server, for one prod deployment.

    The harness's own requests carry an `Authorization` header that names the test key
    without a real signature: moto checks who asks, not the signature (it refuses
    anonymous object deletes). agentd signs its requests properly with the same key."""

    AUTHORIZATION = (
        "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"
    )

    def __init__(self, endpoint: str, name: str) -> None:
        self.endpoint = endpoint
        self.name = name

    @classmethod
    def create(cls, endpoint: str = S3_ENDPOINT) -> "S3Bucket":
        bucket = cls(endpoint, f"agentd-pytest-{uuid.uuid4().hex[:12]}")
        try:
            response = bucket._request("PUT", "")
        except httpx.HTTPError as err:
            pytest.fail(
                f"the S3 server at {endpoint} does not answer ({err}); start it (scripts/test does) "
                "or point AGENTD_TEST_S3_ENDPOINT at one"
            )
        assert response.is_success, f"creating bucket {bucket.name} on {endpoint}: {response.status_code} {response.text[:300]}"
        return bucket

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        url = f"{self.endpoint}/{self.name}" + (f"/{urllib.parse.quote(path)}" if path else "")
        return httpx.request(
            method, url, headers={"authorization": self.AUTHORIZATION}, trust_env=False, timeout=HTTP_TIMEOUT, **kwargs
        )

    def keys(self) -> list[str]:
        """Every object's key, in the bucket's order."""
        keys: list[str] = []
        after: str | None = None
        while True:
            params = {"list-type": "2"} | ({"start-after": after} if after else {})
            response = self._request("GET", "", params=params)
            response.raise_for_status()
            page = [
                html_unescape(k) for k in re.findall(r"<Key>(.*?)</Key>", response.text, flags=re.DOTALL)
            ]
            keys.extend(page)
            if "<IsTruncated>true</IsTruncated>" not in response.text or not page:
                return keys
            after = page[-1]

    def exists(self, key: str) -> bool:
        return self._request("HEAD", key).status_code == 200

    def remove(self) -> None:
        """Every object, then the bucket."""
        for key in self.keys():
            self._request("DELETE", key)
        self._request("DELETE", "")


def html_unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&apos;", "'").replace("&amp;", "&")


# ---------------------------------------------------------------------------------------
# Deployments


class Deployment:
    """One running agentd (dev process, or gateway+worker on shared backends)."""

    def __init__(self, mode: str, url: str, bootstrap_key: str, cli_env: dict[str, str]) -> None:
        self.mode = mode
        self.url = url
        self.bootstrap_key = bootstrap_key
        self.cli_env = cli_env
        self.processes: list[Process] = []
        self._cleanups: list[Callable[[], None]] = []
        self._keys: dict[str, str] = {}
        self._role_env: dict[str, str] = {}
        # dev only: the `ANTHROPIC_BASE_URL=… ANTHROPIC_API_KEY=…` line it printed, if any.
        self.dev_line: str | None = None
        # Where blobs live: dev, a directory (`<data dir>/blobs`); prod, a bucket whose
        # keys start with `blob_prefix`.
        self.blob_dir: Path | None = None
        self.bucket: S3Bucket | None = None
        self.blob_prefix = ""

    # -- blobs ----------------------------------------------------------------------------

    def blob_keys(self) -> list[str]:
        """The keys of every blob the deployment stores (`files/<workspace id>/<file id>`, …)."""
        if self.bucket is not None:
            prefix = f"{self.blob_prefix}/" if self.blob_prefix else ""
            return [k[len(prefix):] for k in self.bucket.keys() if k.startswith(prefix)]
        assert self.blob_dir is not None, "this deployment has no blob store"
        if not self.blob_dir.exists():
            return []
        return sorted(str(p.relative_to(self.blob_dir)) for p in self.blob_dir.rglob("*") if p.is_file())

    def blob_exists(self, key: str) -> bool:
        """Whether the object store holds a blob at `key` (checked in the bucket or directory itself)."""
        if self.bucket is not None:
            return self.bucket.exists(f"{self.blob_prefix}/{key}" if self.blob_prefix else key)
        assert self.blob_dir is not None, "this deployment has no blob store"
        return (self.blob_dir / key).is_file()

    def file_blob_exists(self, file_id: str) -> bool:
        """Whether the bytes of file `file_id` (of any workspace) are in the object store."""
        return any(k.startswith("files/") and k.endswith(f"/{file_id}") for k in self.blob_keys())

    # -- keys ---------------------------------------------------------------------------

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_cli(list(args), self.cli_env, check=check)

    def create_key(self, workspace: str) -> str:
        """`agentd keys create --workspace <workspace>`: stdout is the secret key and nothing else."""
        result = self.cli("keys", "create", "--workspace", workspace)
        key = result.stdout.strip()
        assert key and len(key.split()) == 1 and "\n" not in key, (
            f"`agentd keys create` must print only the key on stdout, got {result.stdout!r}"
        )
        return RECORDER.secret(key)

    def key_for(self, workspace: str) -> str:
        """A key for `workspace` of organization "default" (created once per deployment)."""
        if workspace == "default":
            return self.bootstrap_key
        if workspace not in self._keys:
            self._keys[workspace] = self.create_key(workspace)
        return self._keys[workspace]

    def list_keys(self) -> list[dict[str, Any]]:
        result = self.cli("keys", "list", "--json")
        try:
            keys = json.loads(result.stdout)
        except json.JSONDecodeError as err:
            pytest.fail(f"`agentd keys list --json` did not print JSON ({err}): {result.stdout[:500]!r}")
        assert isinstance(keys, list), keys
        return keys

    def revoke_key(self, key_id: str) -> None:
        self.cli("keys", "revoke", key_id)

    def workspace_id(self, workspace: str) -> str:
        """The id of a workspace that has at least one key, from `agentd keys list --json`."""
        self.key_for(workspace)
        for entry in self.list_keys():
            if entry.get("workspace") == workspace:
                return entry["workspace_id"]
        pytest.fail(f"`agentd keys list --json` lists no key of workspace {workspace!r}")

    # -- clients ------------------------------------------------------------------------

    def client(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        max_retries: int = 0,
        timeout: float = HTTP_TIMEOUT,
    ) -> anthropic.Anthropic:
        http_client = httpx2.Client(
            event_hooks={"response": [RECORDER.hook]},
            trust_env=False,
            follow_redirects=True,
            timeout=timeout,
        )
        self._cleanups.append(http_client.close)
        return anthropic.Anthropic(
            base_url=base_url or self.url,
            api_key=api_key or self.bootstrap_key,
            _strict_response_validation=True,
            max_retries=max_retries,
            http_client=http_client,
        )

    def http(self, base_url: str | None = None) -> httpx.Client:
        """A raw httpx client on the deployment (no default headers), recorded like the SDK."""
        http = httpx.Client(
            base_url=base_url or self.url,
            event_hooks={"response": [RECORDER.hook]},
            trust_env=False,
            timeout=HTTP_TIMEOUT,
        )
        self._cleanups.append(http.close)
        return http

    def headers(self, api_key: str | None = None, *, beta: bool = True, **extra: str) -> dict[str, str]:
        headers = {"authorization": f"Bearer {api_key or self.bootstrap_key}"}
        if beta:
            headers["anthropic-beta"] = BETA
        headers.update({k.replace("_", "-"): v for k, v in extra.items()})
        return headers

    # -- prod only ------------------------------------------------------------------------

    def start_gateway(self, extra_env: dict[str, str] | None = None) -> str:
        """Another gateway on the same database, NATS stream and Redis prefix; returns its URL."""
        assert self.mode == "prod", "only prod deployments have gateways"
        env = dict(self._role_env) | (extra_env or {})
        process, url = start_role("gateway", env, name=f"agentd gateway #{len(self.processes) + 1}")
        self.processes.append(process)
        return url

    def start_worker(self, extra_env: dict[str, str] | None = None, *, ready: bool = True) -> Process:
        """Another worker on the same database, NATS stream and Redis prefix."""
        assert self.mode == "prod", "only prod deployments have workers"
        workers = sum(1 for p in self.processes if p.name.startswith("agentd worker"))
        env = dict(self._role_env) | (extra_env or {})
        process, _ops = start_role("worker", env, name=f"agentd worker #{workers + 1}", ready=ready)
        self.processes.append(process)
        return process

    def workers(self) -> list[Process]:
        return [p for p in self.processes if p.name.startswith("agentd worker")]

    # -- hands (environment work) ----------------------------------------------------------

    def _create_special_key(self, *args: str) -> str:
        result = self.cli("keys", "create", *args)
        key = result.stdout.strip()
        assert key and len(key.split()) == 1, f"`agentd keys create {' '.join(args)}` printed {result.stdout!r}"
        return RECORDER.secret(key)

    def create_environment_key(self, environment_id: str, workspace: str = "default") -> str:
        """`agentd keys create --environment`: a key for one environment's work queue and sessions."""
        return self._create_special_key("--workspace", workspace, "--environment", environment_id)

    def create_runner_key(self, workspace: str = "default") -> str:
        """`agentd keys create --runner`: the key `agentd runner` serves a workspace's cloud environments with."""
        return self._create_special_key("--workspace", workspace, "--runner")

    def start_runner(
        self, runner_key: str, sandbox_root: Path, extra_env: dict[str, str] | None = None, timeout: float = ANNOUNCE_TIMEOUT
    ) -> Process:
        """`agentd runner` against this deployment's URL; returns once it logs that it polls."""
        runners = sum(1 for p in self.processes if p.name.startswith("agentd runner"))
        env = base_env(
            AGENTD_RUNNER_GATEWAY_URL=self.url,
            AGENTD_RUNNER_KEY=runner_key,
            AGENTD_SANDBOX_ROOT=str(sandbox_root),
            **(extra_env or {}),
        )
        # Readiness is the info line below: keep it visible under a caller's RUST_LOG.
        if env.get("RUST_LOG"):
            env["RUST_LOG"] += ",agentd_runner=info"
        process = Process(f"agentd runner #{runners + 1}", [AGENTD_BIN, "runner"], env)
        self.processes.append(process)
        deadline = time.monotonic() + timeout
        while not any("runner polling cloud work" in line for line in list(process.stderr_seen)):
            if not process.alive():
                pytest.fail(f"{process.name} exited at startup\n{process.output_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{process.name} did not log that it polls within {timeout:.0f} s\n{process.output_tail()}")
            time.sleep(0.05)
        return process

    # -- teardown -----------------------------------------------------------------------

    def close(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        for cleanup in reversed(self._cleanups):
            try:
                cleanup()
            except Exception as err:  # noqa: BLE001 - report, then continue cleaning
                print(f"cleanup of {self.mode} deployment failed: {err}")
        self._cleanups.clear()


def start_dev(
    workdir: Path,
    *,
    create_limit: int = GENEROUS_CREATE,
    read_limit: int = GENEROUS_READ,
    extra_env: dict[str, str] | None = None,
) -> Deployment:
    """`extra_env` (e.g. model provider endpoints) is added to the process environment."""
    data_dir = workdir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    key = new_secret_key()
    env = base_env(
        AGENTD_HTTP_ADDR="127.0.0.1:0",
        AGENTD_OPS_ADDR="127.0.0.1:0",
        AGENTD_DATA_DIR=str(data_dir),
        AGENTD_BOOTSTRAP_API_KEY=key,
        AGENTD_RATE_LIMIT_CREATE=str(create_limit),
        AGENTD_RATE_LIMIT_READ=str(read_limit),
        **(extra_env or {}),
    )
    process, url = start_role("dev", env)
    deployment = Deployment("dev", url, key, base_env(AGENTD_DATA_DIR=str(data_dir)))
    deployment.blob_dir = data_dir / "blobs"
    deployment.processes.append(process)
    # `agentd dev` also mints a development key and prints a ready-to-paste line with it.
    deadline = time.monotonic() + 3
    while deployment.dev_line is None and time.monotonic() < deadline:
        for line in list(process.stdout_seen):
            if "ANTHROPIC_API_KEY=" in line:
                deployment.dev_line = line.strip()
                RECORDER.secret(deployment.dev_line.split("ANTHROPIC_API_KEY=", 1)[1].split()[0])
                break
        else:
            time.sleep(0.05)
    return deployment


def start_prod(
    *,
    create_limit: int = GENEROUS_CREATE,
    read_limit: int = GENEROUS_READ,
    worker: bool = True,
    redis_url: str = REDIS_URL,
    nats_url: str = NATS_URL,
    database_url: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> Deployment:
    """`extra_env` (e.g. model provider endpoints) reaches every role it starts, later
    gateways and workers included. `database_url`: an existing (empty) database to use
    instead of a fresh one on the shared server (the caller owns it: it is not dropped)."""
    suffix = uuid.uuid4().hex[:12]
    db_name = f"agentd_pytest_{suffix}"
    own_database = database_url is None
    if database_url is None:
        database_url = with_database(POSTGRES_URL, db_name)
    stream = f"AGENTD_PYTEST_{suffix.upper()}"
    prefix = f"agentd-pytest-{suffix}"
    key = new_secret_key()

    if own_database:
        try:
            psql(POSTGRES_URL, f'CREATE DATABASE "{db_name}"')
        except RuntimeError as err:
            pytest.fail(f"cannot create the prod-mode database on {POSTGRES_URL}: {err}")
    bucket = S3Bucket.create()

    env = base_env(
        AGENTD_DATABASE_URL=database_url,
        AGENTD_NATS_URL=nats_url,
        AGENTD_REDIS_URL=redis_url,
        AGENTD_HTTP_ADDR="127.0.0.1:0",
        AGENTD_OPS_ADDR="127.0.0.1:0",
        AGENTD_GRPC_ADDR="127.0.0.1:0",
        AGENTD_NATS_STREAM=stream,
        AGENTD_NATS_CONSUMER=f"agentd-pytest-{suffix}",
        AGENTD_REDIS_PREFIX=prefix,
        AGENTD_BOOTSTRAP_API_KEY=key,
        AGENTD_RATE_LIMIT_CREATE=str(create_limit),
        AGENTD_RATE_LIMIT_READ=str(read_limit),
        AGENTD_SECRET_KEY=base64.b64encode(os.urandom(32)).decode(),
        AGENTD_OBJECT_STORE_URL=f"s3://{bucket.name}/agentd",
        AGENTD_OBJECT_STORE_ENDPOINT=bucket.endpoint,
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test",
        AWS_REGION="us-east-1",
        # The suite's MCP servers and A2A agents listen on 127.0.0.1; a worker refuses
        # private targets by default (extra_env may set "false" to test exactly that).
        **({"AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE": "true"} | (extra_env or {})),
    )
    deployment = Deployment("prod", "", key, base_env(AGENTD_DATABASE_URL=database_url))
    deployment._role_env = env
    deployment.bucket = bucket
    deployment.blob_prefix = "agentd"

    def drop_database() -> None:
        psql(POSTGRES_URL, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')

    # Registered first so they run last: processes stop, then the backends are cleaned.
    if own_database:
        deployment._cleanups.append(drop_database)
    deployment._cleanups.append(lambda: nats_delete_stream(nats_url, stream))
    deployment._cleanups.append(lambda: redis_delete_prefix(redis_url, prefix))
    deployment._cleanups.append(bucket.remove)
    try:
        run_cli(["migrate"], env)
        deployment.url = deployment.start_gateway()
        if worker:
            deployment.start_worker()
    except BaseException:
        deployment.close()
        raise
    return deployment


def start_deployment(mode: str, workdir: Path, **limits: Any) -> Deployment:
    if mode == "dev":
        return start_dev(workdir, **limits)
    return start_prod(**limits)


# ---------------------------------------------------------------------------------------
# Helpers for tests


def unique(prefix: str = "pytest") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def collect(items: Iterable[Any], cap: int = MAX_ITEMS) -> list[Any]:
    """Drains an auto-paginating iterator, failing instead of looping forever."""
    out = []
    for item in items:
        out.append(item)
        if len(out) > cap:
            pytest.fail(f"pagination did not stop after {cap} items (is next_page ever null?)")
    return out


def error_body(err: anthropic.APIStatusError) -> dict[str, Any]:
    body = err.response.json()
    assert isinstance(body, dict), body
    return body


def assert_error_envelope(
    response: httpx.Response | httpx2.Response, status: int, error_type: str | None
) -> dict[str, Any]:
    """The managed-route error envelope: status, error.type, message, request_id == header."""
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text[:500]}"
    body = response.json()
    assert body.get("type") == "error", body
    assert isinstance(body.get("error"), dict), body
    if error_type is not None:
        assert body["error"].get("type") == error_type, body
    assert isinstance(body["error"].get("message"), str) and body["error"]["message"], body
    request_id = response.headers.get("request-id")
    assert request_id, f"no request-id header on {status} response"
    assert body.get("request_id") == request_id, f"body request_id {body.get('request_id')!r} != header {request_id!r}"
    return body


def pick_model(client: anthropic.Anthropic) -> str:
    """An active model of the server's catalog, to create agents with."""
    try:
        for model in client.beta.models.list(limit=20):
            if model.lifecycle == "active":
                return model.id
    except anthropic.APIError:
        pass
    return FALLBACK_MODEL


def list_all(http: httpx.Client, path: str, headers: dict[str, str], limit: int = 100) -> list[dict[str, Any]]:
    """Follows `page`/`next_page` cursors over a raw list route."""
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": limit}
    while True:
        response = http.get(path, params=params, headers=headers)
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text[:500]}"
        body = response.json()
        items.extend(body["data"])
        if len(items) > MAX_ITEMS:
            pytest.fail(f"GET {path}: pagination did not stop after {MAX_ITEMS} items")
        if not body.get("next_page"):
            return items
        params["page"] = body["next_page"]


def assert_ratelimit_headers(headers: Any, limit: int) -> int:
    """The three metered-response headers; returns `remaining`."""
    assert headers.get("anthropic-ratelimit-requests-limit") == str(limit), dict(headers)
    remaining_text = headers.get("anthropic-ratelimit-requests-remaining")
    assert remaining_text is not None and remaining_text.isdigit(), dict(headers)
    remaining = int(remaining_text)
    assert 0 <= remaining <= limit
    reset_text = headers.get("anthropic-ratelimit-requests-reset")
    assert reset_text, dict(headers)
    reset = datetime.fromisoformat(reset_text.replace("Z", "+00:00"))
    assert reset.tzinfo is not None, f"reset {reset_text!r} is not RFC 3339 with an offset"
    now = datetime.now(timezone.utc)
    assert now - timedelta(seconds=5) <= reset <= now + timedelta(minutes=2), f"reset {reset_text!r} vs now {now}"
    return remaining
