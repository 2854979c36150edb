"""The conformance test agent (issue 25 item 3) over A2A and the AI SDK, both modes: an
agent on the scripted model (`SCRIPT_MODEL`, README "The test model's scripts") with a
custom tool `ask`, whose `!` scripts hold a task or a turn in each state on purpose.

- A2A (docs/api/a2a.md) with the official `a2a-sdk` client: cancel mid-run, continue
  after input-required, a chunked answer artifact, a failed task; with the `@a2a-js/sdk`
  client (tests/clients/node/conformance_a2a.mjs): cancel mid-run and the chunked
  artifact.
- AI SDK (docs/api/ai-sdk.md) with the official `ai` chat engine driven headless
  (tests/clients/node/conformance_ai_sdk.mjs): stop mid-stream, a client-side tool's output
  sent back after `tool-calls`, text deltas over time.

What each turn left in the session is read through the managed API with `anthropic`."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Awaitable, TypeVar

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import CancelTaskRequest, GetTaskRequest
from google.protobuf.json_format import MessageToDict

from conftest import conformance_agent as create_conformance_agent
from harness import Deployment, unique
from test_a2a import user as a2a_message

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
FIVE_CHUNKS = "chunk 1 chunk 2 chunk 3 chunk 4 chunk 5"
# 50 chunks, 100 ms apart: five seconds of writing, canceled long before its end.
LONG = "!chunks 50 100"
T = TypeVar("T")

node_clients = pytest.mark.skipif(
    shutil.which("node") is None
    or not (NODE_DIR / "node_modules" / "@a2a-js" / "sdk").is_dir()
    or not (NODE_DIR / "node_modules" / "ai").is_dir(),
    reason="the node clients are not installed (scripts/test runs npm ci in tests/clients/node)",
)


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


def conformance_agent(deployment: Deployment) -> str:
    """The conformance test agent's id."""
    return create_conformance_agent(deployment.client()).id


# ---------------------------------------------------------------------------------------
# The session under the protocol, through the managed API


def session_of(deployment: Deployment, agent_id: str) -> str:
    (session,) = list(deployment.client().beta.sessions.list(agent_id=agent_id, limit=10))
    return session.id


def settled(deployment: Deployment, session_id: str, timeout: float = 20.0) -> list[Any]:
    """The session's events once it is idle and its history has stopped growing."""
    client = deployment.client()
    deadline = time.monotonic() + timeout
    while client.beta.sessions.retrieve(session_id).status != "idle":
        assert time.monotonic() < deadline, f"session {session_id} did not idle"
        time.sleep(0.1)
    events = list(client.beta.sessions.events.list(session_id, limit=1000))
    # Nothing is committed after the idle: the run is over, not still writing.
    time.sleep(0.5)
    again = list(client.beta.sessions.events.list(session_id, limit=1000))
    assert [e.id for e in again] == [e.id for e in events], [e.type for e in again]
    return events


def kinds(events: list[Any]) -> list[str]:
    return [e.type for e in events]


def message_texts(events: list[Any]) -> list[str]:
    return ["".join(b.text for b in e.content if b.type == "text") for e in events if e.type == "agent.message"]


def assert_cut_short(events: list[Any]) -> None:
    """The long turn ended early: idle, and its 50th chunk never written."""
    types = kinds(events)
    assert types[-1] == "session.status_idle" and events[-1].stop_reason.type == "end_turn", types
    assert not any("chunk 50" in text for text in message_texts(events)), message_texts(events)


def assert_interrupted(events: list[Any]) -> None:
    """The turn was interrupted (`user.interrupt` after its input), then cut short."""
    types = kinds(events)
    assert "user.interrupt" in types, types
    assert types.index("user.interrupt") > types.index("user.message"), types
    assert_cut_short(events)


def assert_run_canceled(deployment: Deployment, session_id: str) -> None:
    """A2A CancelTask is a durable cancel of the task's run (docs/api/a2a.md): the run
    settles with outcome `cancelled` (docs/api/durable.md)."""
    response = deployment.http().get(f"/v1/durable/threads/{session_id}/dispatches", headers=deployment.headers())
    assert response.status_code == 200, response.text
    (run_,) = response.json()["dispatches"]
    assert run_["status"] == "done" and run_["outcome"] == "cancelled" and run_["cancel_requested"], run_


# ---------------------------------------------------------------------------------------
# A2A, the Python client


def a2a_base(deployment: Deployment, agent_id: str) -> str:
    return f"{deployment.url}/v1/a2a/agents/{agent_id}"


async def a2a_client(deployment: Deployment, agent_id: str, *, streaming: bool = False) -> Any:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {deployment.bootstrap_key}"}, timeout=60)
    config = ClientConfig(streaming=streaming, supported_protocol_bindings=["JSONRPC"], httpx_client=http)
    return await ClientFactory(config).create_from_url(a2a_base(deployment, agent_id))


def artifact_text(update: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in update["artifact"].get("parts", []))


def answer(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


def state_of(event: dict[str, Any]) -> str | None:
    if "task" in event:
        return event["task"]["status"]["state"]
    if "statusUpdate" in event:
        return event["statusUpdate"]["status"]["state"]
    return None


def test_a2a_cancel_mid_run(scripted: Deployment) -> None:
    agent_id = conformance_agent(scripted)

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
        streaming = await a2a_client(scripted, agent_id, streaming=True)
        control = await a2a_client(scripted, agent_id)
        events: list[dict[str, Any]] = []
        canceling: asyncio.Task[Any] | None = None
        async for raw in streaming.send_message(a2a_message(LONG)):
            event = MessageToDict(raw)
            events.append(event)
            working = "TASK_STATE_WORKING" in [state_of(e) for e in events]
            chunks = [e for e in events if "artifactUpdate" in e]
            if canceling is None and working and len(chunks) >= 2:
                # Cancel while the stream is still being read: it must end CANCELED.
                task_id = events[0]["task"]["id"]
                canceling = asyncio.create_task(control.cancel_task(CancelTaskRequest(id=task_id)))
        assert canceling is not None, f"the stream ended before the task was canceled: {events}"
        canceled = MessageToDict(await canceling)
        got = MessageToDict(await control.get_task(GetTaskRequest(id=events[0]["task"]["id"])))
        await streaming.close()
        await control.close()
        return events, canceled, got

    events, canceled, got = run(scenario())
    assert events[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED", events[0]
    assert "TASK_STATE_WORKING" in [state_of(e) for e in events], events
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED", canceled
    assert got["status"]["state"] == "TASK_STATE_CANCELED" and answer(got) == "", got
    # The stream ends with the cancel, long before the 50 chunks were written.
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED", events[-3:]
    chunks = [artifact_text(e["artifactUpdate"]) for e in events if "artifactUpdate" in e]
    assert not any("chunk 50" in c for c in chunks), chunks
    assert len(chunks) < 50, chunks
    # The session under the task: its run was canceled (a durable cancel, not a
    # `user.interrupt`), and it idles with nothing more written.
    session_id = session_of(scripted, agent_id)
    assert_cut_short(settled(scripted, session_id))
    assert_run_canceled(scripted, session_id)


def test_a2a_continue_after_input_required(scripted: Deployment) -> None:
    agent_id = conformance_agent(scripted)

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        streaming = await a2a_client(scripted, agent_id, streaming=True)
        events = [MessageToDict(e) async for e in streaming.send_message(a2a_message("!ask Which colour?; say Thanks."))]
        await streaming.close()
        status = events[-1]["statusUpdate"]["status"]
        assert status["state"] == "TASK_STATE_INPUT_REQUIRED", events
        text, data = status["message"]["parts"]
        assert "ask" in text["text"], text
        (awaited,) = data["data"]["awaiting"]
        assert awaited["awaiting"] == "user.custom_tool_result" and awaited["name"] == "ask", awaited
        assert awaited["input"] == {"question": "Which colour?"}, awaited
        # The answer, as the docs say: a data part holding the managed event body, on the same task.
        task = events[0]["task"]
        body = {"type": "user.custom_tool_result", "custom_tool_use_id": awaited["id"], "content": [{"type": "text", "text": "blue"}]}
        client = await a2a_client(scripted, agent_id)
        (done,) = [MessageToDict(e) async for e in client.send_message(a2a_message("", task=task["id"], context=task["contextId"], data=body))]
        await client.close()
        return events, done["task"]

    events, done = run(scenario())
    assert done["id"] == events[0]["task"]["id"] and done["status"]["state"] == "TASK_STATE_COMPLETED", done
    text = answer(done)
    assert "The tool returned: blue" in text and "Thanks." in text, text
    assert text.strip() == "The tool returned: blue. Thanks.", text
    session_events = settled(scripted, session_of(scripted, agent_id))
    assert kinds(session_events).count("user.custom_tool_result") == 1, kinds(session_events)


def test_a2a_chunked_artifact(scripted: Deployment) -> None:
    agent_id = conformance_agent(scripted)

    async def scenario() -> list[tuple[float, dict[str, Any]]]:
        client = await a2a_client(scripted, agent_id, streaming=True)
        timed = [(time.monotonic(), MessageToDict(e)) async for e in client.send_message(a2a_message("!chunks 5 50"))]
        await client.close()
        return timed

    timed = run(scenario())
    events = [e for _, e in timed]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", events
    updates = [(at, e["artifactUpdate"]) for at, e in timed if "artifactUpdate" in e]
    # The answer arrives in appends, one per model delta, as the model writes them ...
    appends = [(at, u) for at, u in updates if u.get("append")]
    assert len({artifact_text(u) for _, u in appends}) >= 3, updates
    assert appends[-1][0] - updates[0][0] >= 0.1, "the chunks arrived at once, not as written"
    # ... applied as the spec says, they build the text the last chunk confirms.
    built = ""
    for _, update in updates[:-1]:
        built = built + artifact_text(update) if update.get("append") else artifact_text(update)
    last = updates[-1][1]
    assert last.get("lastChunk") is True and not last.get("append"), last
    assert artifact_text(last).strip() == FIVE_CHUNKS, last
    assert built == artifact_text(last), (built, last)
    assert {u["artifact"]["artifactId"] for _, u in updates} == {f"{events[0]['task']['id']}-answer"}


def test_a2a_failed_task_names_the_error(scripted: Deployment) -> None:
    agent_id = conformance_agent(scripted)

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        client = await a2a_client(scripted, agent_id, streaming=True)
        events = [MessageToDict(e) async for e in client.send_message(a2a_message("!fail on purpose"))]
        got = MessageToDict(await client.get_task(GetTaskRequest(id=events[0]["task"]["id"])))
        await client.close()
        return events, got

    events, got = run(scenario())
    status = events[-1]["statusUpdate"]["status"]
    assert status["state"] == "TASK_STATE_FAILED", events
    assert status["message"]["role"] == "ROLE_AGENT" and "on purpose" in status["message"]["parts"][0]["text"], status
    assert got["status"]["state"] == "TASK_STATE_FAILED" and "on purpose" in got["status"]["message"]["parts"][0]["text"], got
    assert answer(got) == "", got
    session_events = settled(scripted, session_of(scripted, agent_id))
    (error,) = [e for e in session_events if e.type == "session.error"]
    assert "on purpose" in error.error.message, error
    assert session_events[-1].stop_reason.type == "retries_exhausted", session_events[-1]


# ---------------------------------------------------------------------------------------
# A2A, the JS client


def node(script: str, scenario: str, deployment: Deployment, **options: Any) -> dict[str, Any]:
    options = {"url": deployment.url, "key": deployment.bootstrap_key, **options}
    result = subprocess.run(["node", script, scenario, json.dumps(options)], cwd=NODE_DIR, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"node {script} {scenario} failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


@node_clients
def test_a2a_js_cancel_mid_run(scripted: Deployment) -> None:
    agent_id = conformance_agent(scripted)
    report = node("conformance_a2a.mjs", "cancel", scripted, agent=agent_id, text=LONG, after=2)
    events = report["events"]
    assert report["canceledAnswer"]["state"] == "TASK_STATE_CANCELED", report
    assert report["state"] == "TASK_STATE_CANCELED" and report["answer"] == "", report
    assert (events[-1]["kind"], events[-1]["state"]) == ("statusUpdate", "TASK_STATE_CANCELED"), events[-3:]
    chunks = [e["text"] for e in events if e["kind"] == "artifactUpdate"]
    assert len(chunks) < 50 and not any("chunk 50" in c for c in chunks), chunks
    session_id = session_of(scripted, agent_id)
    assert_cut_short(settled(scripted, session_id))
    assert_run_canceled(scripted, session_id)


@node_clients
def test_a2a_js_chunked_artifact(scripted: Deployment) -> None:
    agent_id = conformance_agent(scripted)
    report = node("conformance_a2a.mjs", "chunks", scripted, agent=agent_id, text="!chunks 5 50")
    events = report["events"]
    assert events[-1]["kind"] == "statusUpdate" and events[-1]["state"] == "TASK_STATE_COMPLETED", events
    updates = [e for e in events if e["kind"] == "artifactUpdate"]
    appends = [u for u in updates if u["append"]]
    assert len({u["text"] for u in appends}) >= 3, updates
    assert appends[-1]["at"] - updates[0]["at"] >= 100, updates
    built = ""
    for update in updates[:-1]:
        built = built + update["text"] if update["append"] else update["text"]
    assert updates[-1]["lastChunk"] and not updates[-1]["append"], updates[-1]
    assert updates[-1]["text"].strip() == FIVE_CHUNKS and built == updates[-1]["text"], (built, updates[-1])


# ---------------------------------------------------------------------------------------
# AI SDK, the `ai` chat engine


def ai_sdk(scenario: str, deployment: Deployment, **options: Any) -> dict[str, Any]:
    return node("conformance_ai_sdk.mjs", scenario, deployment, thread=unique("thread"), **options)


def chunks_of(request: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [c for c in request["chunks"] if isinstance(c["chunk"], dict) and c["chunk"]["type"] == kind]


@node_clients
def test_ai_sdk_stop_mid_stream_interrupts_the_turn(scripted: Deployment) -> None:
    agent_id = conformance_agent(scripted)
    report = ai_sdk("abort", scripted, agent=agent_id, text=LONG, after=3, linger=500)
    # The client: the stream was aborted (onFinish isAbort), the chat is ready again and
    # keeps the text it had, with no finish chunk from the server.
    assert report["finished"][-1]["isAbort"] is True, report["finished"]
    assert report["status"] == "ready" and report["errors"] == [], report
    assert report["shownAtStop"].startswith("chunk 1 chunk 2 chunk 3"), report["shownAtStop"]
    assert "chunk 50" not in report["shownAfter"], report["shownAfter"]
    (request,) = report["requests"]
    assert chunks_of(request, "finish") == [], request["chunks"][-3:]
    # The session: the turn was interrupted when the client went away, and idles.
    assert_interrupted(settled(scripted, session_of(scripted, agent_id)))


@node_clients
def test_ai_sdk_tool_output_continues_the_turn(scripted: Deployment) -> None:
    agent_id = conformance_agent(scripted)
    report = ai_sdk("ask", scripted, agent=agent_id, text="!ask Which colour?; say Thanks.", output="blue", final="Thanks.")
    assert report["errors"] == [], report
    first, second = report["requests"]
    # The first stream ends asking: a call of the client-side tool, finish `tool-calls`.
    (call,) = chunks_of(first, "tool-input-available")
    assert call["chunk"]["toolName"] == "ask" and call["chunk"]["input"] == {"question": "Which colour?"}, call
    assert [c["chunk"]["finishReason"] for c in chunks_of(first, "finish")] == ["tool-calls"], first["chunks"]
    assert report["toolCall"] == {"toolName": "ask", "input": {"question": "Which colour?"}}, report
    # The client sent the output back (addToolOutput); the next stream carries the answer.
    said = "".join(c["chunk"]["delta"] for c in chunks_of(second, "text-delta"))
    assert said.strip() == "The tool returned: blue. Thanks.", said
    assert [c["chunk"]["finishReason"] for c in chunks_of(second, "finish")] == ["stop"], second["chunks"]
    assert [f["finishReason"] for f in report["finished"]] == ["tool-calls", "stop"], report["finished"]
    assistant = report["messages"][-1]
    (tool,) = [p for p in assistant["parts"] if p["type"] == "tool-ask"]
    assert tool["state"] == "output-available" and tool["output"] == "blue", tool
    session_events = settled(scripted, session_of(scripted, agent_id))
    (result,) = [e for e in session_events if e.type == "user.custom_tool_result"]
    assert result.custom_tool_use_id == tool["toolCallId"] and result.content[0].text == "blue", result


@node_clients
def test_ai_sdk_text_deltas_as_the_model_writes(scripted: Deployment) -> None:
    agent_id = conformance_agent(scripted)
    report = ai_sdk("chunks", scripted, agent=agent_id, text="!chunks 5 50")
    assert report["status"] == "ready" and report["errors"] == [], report
    (request,) = report["requests"]
    deltas = chunks_of(request, "text-delta")
    assert len(deltas) >= 3, request["chunks"]
    assert deltas[-1]["at"] - deltas[0]["at"] >= 100, "the deltas arrived at once, not as written"
    assert len({d["chunk"]["id"] for d in deltas}) == 1, deltas
    said = "".join(d["chunk"]["delta"] for d in deltas)
    assert said.strip() == FIVE_CHUNKS, said
    assert [c["chunk"]["finishReason"] for c in chunks_of(request, "finish")] == ["stop"], request["chunks"]
    texts = [p["text"] for p in report["messages"][-1]["parts"] if p["type"] == "text"]
    assert texts == [said], texts
    assert message_texts(settled(scripted, session_of(scripted, agent_id))) == [said]
