"""`limited` networking with allowed hosts in a `namespace` sandbox (docs/api/hands.md
"Networking"), in both modes: the sandbox has no network but loopback; its one way out
is the runner's egress proxy (HTTPS_PROXY / HTTP_PROXY at 127.0.0.1:3128), which lets a
`CONNECT` through only to an allowed host. The allowed host here is a local HTTP server
on the runner's loopback, reached with `curl -p` (a CONNECT tunnel, as for https) and
`--noproxy ''` (the sandbox's NO_PROXY keeps its own loopback off the proxy)."""

from __future__ import annotations

import http.server
import threading
from typing import Any, Iterator

import pytest

from fake_models import FakeAnthropic, call, say
from harness import Deployment, unique
from test_hands import (  # noqa: F401 (the fixture)
    CloudHands,
    cloud_hands,
    make_hands_session,
    of_type,
    result_text,
    runner_tail,
    user_message,
    wait_idles,
)


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        body = b"hello from the allowed host"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def allowed_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()


def bash_results(turns: Deployment, hands: CloudHands, fake: FakeAnthropic, environment_id: str, commands: list[str]) -> list[dict[str, Any]]:
    key = unique("egress")
    fake.script(key, *[call("bash", {"command": c}) for c in commands], say("done"))
    session = make_hands_session(hands.client, environment_id)
    hands.client.beta.sessions.events.send(session.id, events=[user_message(f"go {key}")])
    events = wait_idles(turns.http(), turns.headers(hands.api_key), session.id, on_timeout=lambda: runner_tail(hands))
    return of_type(events, "agent.tool_result")


def test_allowed_hosts_are_reached_through_the_egress_proxy_only(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic, allowed_server: int
) -> None:
    environment = cloud_hands.client.beta.environments.create(
        name=unique("egress"),
        config={"type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["127.0.0.1"]}},
    )
    url = f"http://127.0.0.1:{allowed_server}/"
    allowed, refused, bypass, proxy = bash_results(
        turns,
        cloud_hands,
        fake_anthropic,
        environment.id,
        [
            f"curl -sS -p --noproxy '' --max-time 10 {url}",
            f"curl -sS -p --noproxy '' --max-time 10 http://localhost:{allowed_server}/ 2>&1; echo exit=$?",
            f"curl -sS --noproxy '*' --max-time 5 {url} 2>&1; echo exit=$?",
            "echo $HTTPS_PROXY",
        ],
    )
    assert result_text(allowed) == "hello from the allowed host", allowed
    assert "403" in result_text(refused) and "exit=0" not in result_text(refused), refused
    assert "hello" not in result_text(bypass) and "exit=0" not in result_text(bypass), bypass
    assert result_text(proxy).strip() == "http://127.0.0.1:3128", proxy
