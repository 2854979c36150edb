"""A real browser (issue 8): the minimal React + useChat page of tests/clients/web, built
with Vite and served by `vite preview` (proxying /v1 to agentd), driven by headless
Chromium through playwright-core with the system browser: type a message, see the
streamed answer rendered, reload, see the history restored from the thread messages
route. Screenshots land in tests/clients/web/artifacts/<mode>/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from fake_models import FakeAnthropic, say
from harness import Deployment, free_port, unique

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or not (WEB_DIR / "node_modules" / "vite").is_dir(),
    reason="needs the system chromium and tests/clients/web/node_modules (scripts/test installs both)",
)


@pytest.fixture(scope="module")
def built() -> Path:
    result = subprocess.run(["npx", "vite", "build"], cwd=WEB_DIR, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    return WEB_DIR / "dist"


@pytest.fixture
def page_server(built: Path, turns: Deployment) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "AGENTD_URL": turns.url}
    server = subprocess.Popen(
        ["npx", "vite", "preview", "--strictPort", "--port", str(port)],
        cwd=WEB_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(base, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "vite preview did not start"
            time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_browser_chats_and_restores_history_after_reload(
    turns: Deployment, fake_anthropic: FakeAnthropic, page_server: str
) -> None:
    key = unique("browser")
    fake_anthropic.script(key, say(f"Rendered in the browser {key}"))
    agent = turns.client().beta.agents.create(name=unique("web-agent"), model="claude-sonnet-4-5").id
    shots = WEB_DIR / "artifacts" / turns.mode
    shots.mkdir(parents=True, exist_ok=True)
    url = f"{page_server}/?key={turns.bootstrap_key}&agent={agent}&thread={unique('web-thread')}"
    result = subprocess.run(
        ["node", "browser.mjs", url, CHROMIUM, str(shots), f"hello {key}", f"Rendered in the browser {key}"],
        cwd=WEB_DIR, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    expected = [["user", f"hello {key}"], ["assistant", f"Rendered in the browser {key}"]]
    assert report["before"] == expected, report
    assert report["after"] == expected, "the reload restored the thread from the messages route"
    assert (shots / "answered.png").stat().st_size > 1000 and (shots / "restored.png").stat().st_size > 1000


def test_a_browser_chats_with_an_application_access_token(
    turns: Deployment, fake_anthropic: FakeAnthropic, page_server: str
) -> None:
    """The same page, holding no API key: its backend (here, the test) created the
    session and issued a token bound to the page's thread (docs/api/app-tokens.md)."""
    key = unique("browser-token")
    fake_anthropic.script(key, say(f"Rendered with a token {key}"))
    client = turns.client()
    agent = client.beta.agents.create(name=unique("web-agent"), model="claude-sonnet-4-5").id
    environment = client.beta.environments.create(name=unique("web-env"), config={"type": "cloud"}).id
    session = client.beta.sessions.create(agent=agent, environment_id=environment).id
    thread = unique("web-thread")
    issued = turns.http().post(
        "/v1/application-access-tokens",
        json={
            "authority_id": "web-test",
            "application_scope": "browser",
            "protocols": ["ai-sdk"],
            "operations": ["thread.run", "thread.messages.read"],
            "thread_bindings": [{"external_thread_id": thread, "managed_session_id": session}],
        },
        headers=turns.headers(beta=False),
    )
    assert issued.status_code == 201, issued.text
    token = issued.json()["access_token"]
    shots = WEB_DIR / "artifacts" / f"{turns.mode}-token"
    shots.mkdir(parents=True, exist_ok=True)
    url = f"{page_server}/?key={token}&agent={agent}&thread={thread}"
    result = subprocess.run(
        ["node", "browser.mjs", url, CHROMIUM, str(shots), f"hello {key}", f"Rendered with a token {key}"],
        cwd=WEB_DIR, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    expected = [["user", f"hello {key}"], ["assistant", f"Rendered with a token {key}"]]
    assert report["before"] == expected and report["after"] == expected, report
    # The turn ran in the session the token binds.
    assert "agent.message" in [e.type for e in client.beta.sessions.events.list(session)]
