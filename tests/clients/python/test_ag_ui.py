"""AG-UI (issue 8): the official `@ag-ui/client` HttpAgent driven headless by
tests/clients/node/ag_ui.mjs against both modes: a plain run, a frontend tool answered
by a tool message in a second run, a client disconnect that interrupts the run, the
thread history route — and one conversation across AI SDK, the managed API and AG-UI."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import anthropic
import pytest

from fake_models import FakeAnthropic, call, say, slow
from harness import Deployment, unique

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
MODEL = "claude-sonnet-4-5"

pytestmark = pytest.mark.skipif(
    not (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir() or shutil.which("node") is None,
    reason="the node clients are not installed (scripts/test runs npm ci in tests/clients/node)",
)


def drive(script: str, scenario: str, deployment: Deployment, **options: Any) -> dict[str, Any]:
    options = {"url": deployment.url, "key": deployment.bootstrap_key, **options}
    result = subprocess.run(
        ["node", script, scenario, json.dumps(options)],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "SUPPRESS_TRANSFORMATION_WARNINGS": "1"},
    )
    assert result.returncode == 0, f"node {script} {scenario} failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def agent(client: anthropic.Anthropic, **fields: Any) -> str:
    return client.beta.agents.create(name=unique("agui-agent"), model=MODEL, **fields).id


def history(deployment: Deployment, thread: str) -> dict[str, Any]:
    response = deployment.http().get(f"/v1/ag-ui/threads/{thread}/messages", headers=deployment.headers())
    assert response.status_code == 200, response.text
    return response.json()


def test_plain_run_in_the_order_the_client_enforces(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key, thread = unique("agui"), unique("thread")
    fake_anthropic.script(key, say(f"hello over AG-UI {key}"))
    report = drive("ag_ui.mjs", "send", turns, thread=thread, agent=agent(turns.client()), text=f"hi {key}")
    assert report["failures"] == [] and report["runErrors"] == [], report
    assert report["seen"][0] == "RUN_STARTED" and report["seen"][-1] == "RUN_FINISHED", report["seen"]
    assert "TEXT_MESSAGE_CONTENT" in report["seen"] and "STEP_STARTED" in report["seen"]
    assistant = [m for m in report["messages"] if m["role"] == "assistant"]
    assert assistant[-1]["content"] == f"hello over AG-UI {key}"
    page = history(turns, thread)
    assert [(m["role"], m["content"]) for m in page["data"]] == [("user", f"hi {key}"), ("assistant", f"hello over AG-UI {key}")]


def test_frontend_tool_round_trip(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("agui-tool")
    fake_anthropic.script(key, call("lookup_city", {"city": "Oslo"}), say("Oslo is cold."))
    report = drive(
        "ag_ui.mjs", "tool", turns, thread=unique("thread"), agent=agent(turns.client()),
        text=f"weather {key}", tool="lookup_city", output="minus five",
    )
    assert report["failures"] == [] and report["runErrors"] == [], report
    assert report["seen"].count("RUN_STARTED") == 2 and report["seen"].count("RUN_FINISHED") == 2
    assert "TOOL_CALL_START" in report["seen"]
    first, second = fake_anthropic.wait_requests(key, 2)
    assert [t["name"] for t in first.body["tools"]] == ["lookup_city"], "the frontend tool was offered to the model"
    (result,) = second.blocks("tool_result")
    assert "minus five" in json.dumps(result["content"])
    assert report["messages"][-1]["content"] == "Oslo is cold."


def test_client_disconnect_interrupts_the_run(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key, thread = unique("agui-abort"), unique("thread")
    fake_anthropic.script(key, slow("a long answer " * 10, chunks=40, delay=0.25))
    drive("ag_ui.mjs", "abort", turns, thread=thread, agent=agent(client), text=f"go {key}")
    session_id = history(turns, thread)["session_id"]
    deadline = time.monotonic() + 30
    while True:
        events = [e.type for e in client.beta.sessions.events.list(session_id)]
        if "session.status_idle" in events:
            break
        assert time.monotonic() < deadline, events
        time.sleep(0.2)
    assert "user.interrupt" in events, events


def test_one_conversation_across_ai_sdk_managed_api_and_ag_ui(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key, thread = unique("cross"), unique("thread")
    fake_anthropic.script(key, say("via ai sdk"), say("via the managed api"))
    agent_id = agent(client)
    sent = drive("ai_sdk.mjs", "send", turns, thread=thread, agent=agent_id, text=f"one {key}")
    assert sent["status"] == "ready", sent
    session_id = history(turns, thread)["session_id"]
    client.beta.sessions.events.send(session_id, events=[{"type": "user.message", "content": [{"type": "text", "text": f"two {key}"}]}])
    deadline = time.monotonic() + 30
    while len(history(turns, thread)["data"]) < 4:
        assert time.monotonic() < deadline, history(turns, thread)
        time.sleep(0.1)
    assert [(m["role"], m["content"]) for m in history(turns, thread)["data"]] == [
        ("user", f"one {key}"), ("assistant", "via ai sdk"), ("user", f"two {key}"), ("assistant", "via the managed api"),
    ]


def test_bad_requests(turns: Deployment) -> None:
    http = turns.http()
    headers = turns.headers(beta=False)
    base = {"threadId": unique("t"), "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]}
    no_agent = http.post("/v1/ag-ui", json=base, headers=headers)
    assert no_agent.status_code == 400 and no_agent.json()["error"]["type"] == "invalid_request_error", no_agent.text
    assert http.post("/v1/ag-ui", json={**base, "messages": []}, headers=headers).status_code == 400
    assert http.post("/v1/ag-ui", json={"runId": "r", "messages": []}, headers=headers).status_code == 400
    assert http.post("/v1/ag-ui", json=base).status_code == 401
    assert http.get(f"/v1/ag-ui/threads/{unique('none')}/messages", headers=headers).status_code == 404


def test_a_subagents_turn_is_a_step_of_the_run(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    """docs/api/multiagent.md: `spawn_thread` is a tool call of the run and the subagent's
    turn a step, in an order the official client's verifier accepts."""
    client = turns.client()
    helper = client.beta.agents.create(name=unique("agui-helper"), model=MODEL)
    boss = agent(client, multiagent={"type": "coordinator", "agents": [helper.id]})
    key, job = unique("agui-boss"), unique("agui-job")
    fake_anthropic.script(key, call("spawn_thread", {"agent": helper.name, "message": job}), say(f"done {key}"))
    fake_anthropic.script(job, say("the child's answer"))
    report = drive("ag_ui.mjs", "send", turns, thread=unique("thread"), agent=boss, text=f"go {key}")
    assert report["failures"] == [] and report["runErrors"] == [], report
    seen = report["seen"]
    assert seen[-1] == "RUN_FINISHED", seen
    # Two model requests of the primary and the subagent's turn.
    assert seen.count("STEP_STARTED") == seen.count("STEP_FINISHED") == 3, seen
    assert "TOOL_CALL_RESULT" in seen
    assistant = [m for m in report["messages"] if m["role"] == "assistant"]
    assert assistant[-1]["content"] == f"done {key}"
