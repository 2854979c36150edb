"""Live previews in every adapter (issue 16, ADR 0007): while the model writes, each
official client sees the text grow — the `ai` chat engine and `@ag-ui/client` (driven
headless by tests/clients/node), the `a2a-sdk` streaming client and the `mcp` client with
a progress callback — and ends with exactly the committed text. The fake model streams
20 deltas 50 ms apart; a client must observe at least 10 distinct partial texts.

Committed history stays authoritative: a worker killed mid-message (its previews stop,
the message is redone by a new attempt under another id) leaves a streaming client and a
client that reconnected mid-message with the committed text only, never the cut one."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import anthropic
import httpx
import httpx2
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types import Message, Part, Role, SendMessageRequest, Task, TaskState
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from fake_models import FakeAnthropic, say, slow
from harness import Deployment, unique

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
MODEL = "claude-sonnet-4-5"
DELTAS = 20
NODE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "SUPPRESS_TRANSFORMATION_WARNINGS": "1"}

node_clients = pytest.mark.skipif(
    not (NODE_DIR / "node_modules" / "ai").is_dir() or shutil.which("node") is None,
    reason="the node clients are not installed (scripts/test runs npm ci in tests/clients/node)",
)


def reply(key: str) -> str:
    """A reply long enough to split into 20 deltas, unique to the test."""
    return f"Streaming one small piece at a time, this answer for {key} grows live until it is whole."


def streamed(value: str) -> Any:
    return slow(value, chunks=DELTAS, delay=0.05)


def agent(client: anthropic.Anthropic) -> str:
    return client.beta.agents.create(name=unique("preview-agent"), model=MODEL).id


def committed_texts(deployment: Deployment, session_id: str) -> list[str]:
    events = deployment.client().beta.sessions.events.list(session_id, limit=1000)
    return ["".join(b.text for b in e.content if b.type == "text") for e in events if e.type == "agent.message"]


def thread_session(deployment: Deployment, surface: str, thread: str) -> str:
    response = deployment.http().get(f"/v1/{surface}/threads/{thread}/messages", headers=deployment.headers())
    assert response.status_code == 200, response.text
    return response.json()["session_id"]


def assert_grew(partials: list[str], final: str, what: str) -> None:
    """At least 10 distinct proper prefixes of the final text were shown before it was whole."""
    growing = {p for p in partials if p and p != final and final.startswith(p)}
    assert len(growing) >= 10, f"{what}: {len(growing)} distinct partial texts: {partials}"
    strays = [p for p in partials if not final.startswith(p)]
    assert not strays, f"{what}: texts that are not the committed one as it grew: {strays}"


def node(script: str, scenario: str, deployment: Deployment, **options: Any) -> dict[str, Any]:
    options = {"url": deployment.url, "key": deployment.bootstrap_key, **options}
    result = subprocess.run(
        ["node", script, scenario, json.dumps(options)], cwd=NODE_DIR, capture_output=True, text=True, timeout=90, env=NODE_ENV
    )
    assert result.returncode == 0, f"node {script} {scenario} failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def texts(message: dict[str, Any]) -> list[str]:
    return [p["text"] for p in message["parts"] if p["type"] == "text"]


# ---------------------------------------------------------------------------------------
# Each client sees the text grow, in both modes


@node_clients
def test_ai_sdk_streams_text_deltas(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key, thread = unique("pv-aisdk"), unique("thread")
    final = reply(key)
    fake_anthropic.script(key, streamed(final))
    report = node("ai_sdk.mjs", "send", turns, thread=thread, agent=agent(turns.client()), text=f"hi {key}")
    assert report["status"] == "ready" and report["errors"] == [], report
    assistant = report["messages"][-1]
    assert texts(assistant) == [final], assistant
    assert_grew(report["partials"], final, "ai")
    assert committed_texts(turns, thread_session(turns, "ai-sdk", thread)) == [final]


@node_clients
def test_ag_ui_streams_text_message_content(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key, thread = unique("pv-agui"), unique("thread")
    final = reply(key)
    fake_anthropic.script(key, streamed(final))
    report = node("ag_ui.mjs", "send", turns, thread=thread, agent=agent(turns.client()), text=f"hi {key}")
    assert report["failures"] == [] and report["runErrors"] == [], report
    assert report["seen"][-1] == "RUN_FINISHED", report["seen"]
    assert report["seen"].count("TEXT_MESSAGE_CONTENT") >= 10, report["seen"]
    assistant = [m for m in report["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in assistant] == [final], report["messages"]
    assert_grew(report["partials"], final, "@ag-ui/client")
    assert committed_texts(turns, thread_session(turns, "ag-ui", thread)) == [final]


def test_a2a_streams_artifact_chunks(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("pv-a2a")
    final = reply(key)
    fake_anthropic.script(key, streamed(final))
    agent_id = agent(turns.client())

    async def scenario() -> tuple[Task, list[str], list[dict[str, Any]]]:
        http = a2a_http(turns)
        config = ClientConfig(streaming=True, supported_protocol_bindings=["JSONRPC"], httpx_client=http)
        client = await ClientFactory(config).create_from_url(f"{turns.url}/v1/a2a/agents/{agent_id}")
        message = Message(message_id=unique("m"), role=Role.ROLE_USER, parts=[Part(text=f"hi {key}")])
        task = Task()
        partials: list[str] = []
        updates: list[dict[str, Any]] = []
        async for event in client.send_message(SendMessageRequest(message=message)):
            if event.HasField("task"):
                task.CopyFrom(event.task)
            elif event.HasField("artifact_update"):
                # The SDK's own rule for applying chunks (append, replace).
                append_artifact_to_task(task, event.artifact_update)
                updates.append({"append": event.artifact_update.append, "last": event.artifact_update.last_chunk})
                partials.append("".join(p.text for a in task.artifacts for p in a.parts))
            elif event.HasField("status_update"):
                task.status.CopyFrom(event.status_update.status)
        await client.close()
        return task, partials, updates

    task, partials, updates = asyncio.run(scenario())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    assert ["".join(p.text for p in a.parts) for a in task.artifacts] == [final], task.artifacts
    assert sum(1 for u in updates if u["append"]) >= 9, updates
    assert updates[-1]["last"], updates
    assert_grew(partials, final, "a2a-sdk")


def a2a_http(deployment: Deployment) -> Any:
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {deployment.bootstrap_key}"}, timeout=60)


async def tool_titled(mcp: Any, title: str) -> str:
    """The name of the agent tool titled `title`, through every page of `tools/list` (a
    workspace that has served many tests holds more than one page of agents)."""
    cursor = None
    while True:
        page = await mcp.list_tools(cursor=cursor)
        for tool in page.tools:
            if tool.title == title:
                return tool.name
        cursor = page.next_cursor
        assert cursor is not None, f"no tool titled {title!r} on any page"


def test_mcp_progress_carries_the_partial_text(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key = unique("pv-mcp")
    final = reply(key)
    name = f"Previewer {key}"
    client.beta.agents.create(name=name, model=MODEL)
    fake_anthropic.script(key, streamed(final))
    messages: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async def scenario() -> Any:
        http = httpx2.AsyncClient(
            headers={"authorization": f"Bearer {turns.bootstrap_key}"}, timeout=httpx2.Timeout(30.0, read=120.0)
        )
        async with Client(streamable_http_client(f"{turns.url}/v1/mcp", http_client=http)) as mcp:
            tool = await tool_titled(mcp, name)
            return await mcp.call_tool(tool, {"prompt": f"hi {key}"}, progress_callback=on_progress)

    result = asyncio.run(scenario())
    assert not result.is_error, result
    assert [c.text for c in result.content] == [final]
    assert_grew([m for m in messages if final.startswith(m)], final, "mcp")
    session_id = (result.meta or {})["agentd/session_id"]
    assert committed_texts(turns, session_id) == [final]


# ---------------------------------------------------------------------------------------
# A worker killed mid-message


def fast_env(provider_env: dict[str, str]) -> dict[str, str]:
    env = dict(provider_env)
    env.update({"AGENTD_LEASE": "1s", "AGENTD_QUEUE_ACK_WAIT": "1s", "AGENTD_DRAIN_TIMEOUT": "3s"})
    return env


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@node_clients
def test_worker_killed_mid_message_leaves_only_the_committed_text(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """An AI SDK client streams a message whose worker is SIGKILLed mid-message; another
    reconnects (`resumeStream`) mid-message. The next attempt writes the message anew:
    both clients end with exactly that committed text, no trace of the cut one."""
    deployment = launch("prod", worker=False, extra_env=fast_env(provider_env))
    worker = deployment.start_worker()
    key, thread = unique("pv-crash"), unique("thread")
    cut = f"This reply for {key} is cut short by a crash and must vanish from every client " * 2
    fake_anthropic.script(key, slow(cut, chunks=60, delay=0.1), streamed(reply(key)))
    options = {"url": deployment.url, "key": deployment.bootstrap_key, "thread": thread, "agent": agent(deployment.client())}
    sender = subprocess.Popen(
        ["node", "ai_sdk.mjs", "send", json.dumps({**options, "text": f"hi {key}"})],
        cwd=NODE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=NODE_ENV,
    )
    try:
        first = fake_anthropic.wait_requests(key, 1, 30)[0]
        fake_anthropic.wait_for(lambda: first.events_sent >= 15, 30, "the first reply streaming")
        resumer = subprocess.Popen(
            ["node", "ai_sdk.mjs", "resume", json.dumps(options)],
            cwd=NODE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=NODE_ENV,
        )
        fake_anthropic.wait_for(lambda: first.events_sent >= 25, 30, "more of the first reply")
        os.kill(worker.pid, signal.SIGKILL)
        worker = deployment.start_worker()
        out, err = sender.communicate(timeout=90)
        assert sender.returncode == 0, f"{out}\n{err}"
        sent = json.loads(out.strip().splitlines()[-1])
        out, err = resumer.communicate(timeout=90)
        assert resumer.returncode == 0, f"{out}\n{err}"
        resumed = json.loads(out.strip().splitlines()[-1])
    finally:
        for process in (sender, locals().get("resumer")):
            if process is not None and process.poll() is None:
                process.kill()
    final = reply(key)
    assert committed_texts(deployment, thread_session(deployment, "ai-sdk", thread)) == [final]
    for name, report in (("streaming client", sent), ("reconnected client", resumed)):
        assert report["status"] == "ready" and report["errors"] == [], (name, report)
        assistant = report["messages"][-1]
        assert assistant["role"] == "assistant" and texts(assistant) == [final], (name, assistant)
    # The streaming client did see the cut message live before it was taken back, then
    # the redone one grow.
    partials = sent["partials"]
    cut_seen = [i for i, p in enumerate(partials) if cut.startswith(p)]
    assert cut_seen, partials
    assert_grew(partials[cut_seen[-1] + 1 :], final, "after the crash")


@node_clients
def test_worker_killed_mid_message_in_ag_ui_a2a_and_mcp(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """Three clients stream three sessions on one worker, SIGKILLed while every reply is
    mid-message: `@ag-ui/client` (its message list reconciled by a snapshot), the
    `a2a-sdk` client (the answer artifact emptied, then rewritten) and the `mcp` client
    (its result) each end with exactly the message the next attempt committed."""
    deployment = launch("prod", worker=False, extra_env=fast_env(provider_env))
    worker = deployment.start_worker()
    client = deployment.client()
    keys = {surface: unique(f"pv-crash-{surface}") for surface in ("agui", "a2a", "mcp")}
    cut = {surface: f"This reply for {key} is cut short by a crash, then taken back " * 2 for surface, key in keys.items()}
    for surface, key in keys.items():
        fake_anthropic.script(key, slow(cut[surface], chunks=60, delay=0.1), streamed(reply(key)))
    agent_id = agent(client)
    tool_title = f"Crashing {keys['mcp']}"
    client.beta.agents.create(name=tool_title, model=MODEL)
    thread = unique("thread")
    agui = subprocess.Popen(
        ["node", "ag_ui.mjs", "send", json.dumps({
            "url": deployment.url, "key": deployment.bootstrap_key, "thread": thread, "agent": agent_id,
            "text": f"hi {keys['agui']}",
        })],
        cwd=NODE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=NODE_ENV,
    )

    async def over_a2a() -> tuple[Task, list[str]]:
        config = ClientConfig(streaming=True, supported_protocol_bindings=["JSONRPC"], httpx_client=a2a_http(deployment))
        a2a = await ClientFactory(config).create_from_url(f"{deployment.url}/v1/a2a/agents/{agent_id}")
        message = Message(message_id=unique("m"), role=Role.ROLE_USER, parts=[Part(text=f"hi {keys['a2a']}")])
        task, partials = Task(), []
        async for event in a2a.send_message(SendMessageRequest(message=message)):
            if event.HasField("task"):
                task.CopyFrom(event.task)
            elif event.HasField("artifact_update"):
                append_artifact_to_task(task, event.artifact_update)
                partials.append("".join(p.text for a in task.artifacts for p in a.parts))
            elif event.HasField("status_update"):
                task.status.CopyFrom(event.status_update.status)
        await a2a.close()
        return task, partials

    async def over_mcp() -> tuple[Any, list[str]]:
        messages: list[str] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            messages.append(message or "")

        http = httpx2.AsyncClient(
            headers={"authorization": f"Bearer {deployment.bootstrap_key}"}, timeout=httpx2.Timeout(30.0, read=120.0)
        )
        async with Client(streamable_http_client(f"{deployment.url}/v1/mcp", http_client=http)) as mcp:
            tool = await tool_titled(mcp, tool_title)
            result = await mcp.call_tool(tool, {"prompt": f"hi {keys['mcp']}"}, progress_callback=on_progress)
        return result, messages

    def kill_mid_message() -> Any:
        for key in keys.values():
            first = fake_anthropic.wait_requests(key, 1, 30)[0]
            fake_anthropic.wait_for(lambda first=first: first.events_sent >= 20, 30, f"{key} streaming")
        os.kill(worker.pid, signal.SIGKILL)
        return deployment.start_worker()

    async def scenario() -> tuple[Any, ...]:
        return await asyncio.gather(over_a2a(), over_mcp(), asyncio.to_thread(kill_mid_message))

    try:
        (task, a2a_partials), (result, mcp_messages), _ = asyncio.run(scenario())
        out, err = agui.communicate(timeout=90)
    finally:
        if agui.poll() is None:
            agui.kill()
    assert agui.returncode == 0, f"{out}\n{err}"
    report = json.loads(out.strip().splitlines()[-1])

    final = reply(keys["agui"])
    assert report["failures"] == [] and report["runErrors"] == [], report
    assert "MESSAGES_SNAPSHOT" in report["seen"], report["seen"]
    assert [m["content"] for m in report["messages"] if m["role"] == "assistant"] == [final], report["messages"]
    assert any(p and cut["agui"].startswith(p) for p in report["partials"]), report["partials"]
    assert committed_texts(deployment, thread_session(deployment, "ag-ui", thread)) == [final]

    final = reply(keys["a2a"])
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    assert ["".join(p.text for p in a.parts) for a in task.artifacts] == [final], task.artifacts
    assert any(p and cut["a2a"].startswith(p) for p in a2a_partials), a2a_partials
    assert "" in a2a_partials, "the cut message was taken back"

    final = reply(keys["mcp"])
    assert not result.is_error and [c.text for c in result.content] == [final], result
    assert any(m and cut["mcp"].startswith(m) for m in mcp_messages), mcp_messages
    assert committed_texts(deployment, (result.meta or {})["agentd/session_id"]) == [final]
