"""The conformance test agent (issue 25, item 3) over AG-UI and MCP, in both modes: an
agent on the scripted model (`SCRIPT_MODEL`) with the custom tool `ask`, whose `!`
scripts (worker/src/providers/script.rs) put the turn in each state a protocol must carry:
cancelled mid-run, waiting for input and continued, streaming chunks over time, failed.

* AG-UI: the official `@ag-ui/client` HttpAgent driven headless by
  tests/clients/node/conformance_ag_ui.mjs — a client abort that interrupts the run, a
  frontend tool call (`ask`) answered by a `tool` message in the next run, live
  `TEXT_MESSAGE_CONTENT` chunks, and `RUN_ERROR` (docs/api/ag-ui.md).
* MCP: the official Python `mcp` client (`mcp.client.Client`, `legacy` handshake mode and
  the default `auto`) — a call cancelled by the caller after a few progress
  notifications, progress notifications carrying the growing partial text, a failed
  turn as an `isError` result, and continue-after-input: the `ask` call elicited from a
  handshake client (answered, declined) and the turn going on; without elicitation the
  result says how to answer (docs/api/mcp.md).

What each protocol's thread did to its session is read back with the `anthropic` SDK.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx2
import pytest
import mcp_types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import ASK_TOOL as ASK, conformance_agent
from harness import Deployment, unique

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
FIVE_CHUNKS = "chunk 1 chunk 2 chunk 3 chunk 4 chunk 5 "
# `!chunks 50 100` takes 5 s to write: a session that idles well before that was stopped.
LONG_SCRIPT, LONG_SCRIPT_SECS = "!chunks 50 100", 5.0

needs_node = pytest.mark.skipif(
    not (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir() or shutil.which("node") is None,
    reason="the node clients are not installed (scripts/test runs npm ci in tests/clients/node)",
)


def settled(client: anthropic.Anthropic, session_id: str, *, needs: str | None = None, timeout: float = 20) -> list[Any]:
    """The session's events once it idles (after an event of type `needs`, if given)."""
    deadline = time.monotonic() + timeout
    while True:
        events = list(client.beta.sessions.events.list(session_id))
        kinds = [e.type for e in events]
        if kinds and kinds[-1] == "session.status_idle" and (needs is None or needs in kinds):
            return events
        assert time.monotonic() < deadline, f"session {session_id} did not settle: {kinds}"
        time.sleep(0.1)


def of_type(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def text_of(blocks: list[Any]) -> str:
    return "".join(b.text for b in blocks if b.type == "text")


def assert_stopped_early(events: list[Any]) -> None:
    """The interrupt stopped the long script: the session idled after it, long before the
    script could have written its last chunk, and no message holds that chunk."""
    kinds = [e.type for e in events]
    assert "user.interrupt" in kinds, kinds
    assert kinds.index("user.interrupt") < len(kinds) - 1 and kinds[-1] == "session.status_idle", kinds
    (prompt,) = of_type(events, "user.message")
    took = (events[-1].processed_at - prompt.processed_at).total_seconds()
    assert took < LONG_SCRIPT_SECS - 1, f"the session idled {took:.1f} s after the prompt: the chunks went on"
    for message in of_type(events, "agent.message"):
        assert "chunk 50" not in text_of(message.content), "the whole script was written"


# ---------------------------------------------------------------------------------------
# AG-UI: the official HttpAgent


def drive(scenario: str, deployment: Deployment, **options: Any) -> dict[str, Any]:
    options = {"url": deployment.url, "key": deployment.bootstrap_key, **options}
    result = subprocess.run(
        ["node", "conformance_ag_ui.mjs", scenario, json.dumps(options)],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "SUPPRESS_TRANSFORMATION_WARNINGS": "1"},
    )
    assert result.returncode == 0, f"node conformance_ag_ui.mjs {scenario} failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def thread_session(deployment: Deployment, thread: str) -> str:
    """The session an adapter thread (AG-UI's `threadId`, MCP's `thread_id`) is bound to,
    from AG-UI's thread history route."""
    response = deployment.http().get(f"/v1/ag-ui/threads/{thread}/messages", headers=deployment.headers())
    assert response.status_code == 200, response.text
    return response.json()["session_id"]


def events_of(run: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in run["events"] if e["type"] == kind]


def kinds_of(run: dict[str, Any]) -> list[str]:
    return [e["type"] for e in run["events"]]


@needs_node
def test_ag_ui_client_abort_interrupts_the_run(scripted: Deployment) -> None:
    client = scripted.client()
    agent, thread = conformance_agent(client), unique("thread")
    report = drive("cancel", scripted, thread=thread, agent=agent.id, text=LONG_SCRIPT, after=3, linger=300)
    (run,) = report["runs"]
    assert run["abortedAt"] is not None, f"the run never streamed 3 chunks: {kinds_of(run)}"
    # The only run error is the one the client reports for its own abort.
    assert [e["code"] for e in run["runErrors"]] == ["abort"], run["runErrors"]
    deltas = "".join(e["delta"] for e in events_of(run, "TEXT_MESSAGE_CONTENT"))
    assert deltas.startswith("chunk 1 chunk 2 chunk 3 "), deltas
    assert "RUN_FINISHED" not in kinds_of(run), "the run was aborted, not finished"
    # The gateway saw the client go: the session took a user.interrupt and idled, and
    # the chunks stopped.
    assert_stopped_early(settled(client, thread_session(scripted, thread), needs="user.interrupt"))


@needs_node
def test_ag_ui_frontend_tool_answer_continues_the_run(scripted: Deployment) -> None:
    client = scripted.client()
    agent, thread = conformance_agent(client), unique("thread")
    report = drive(
        "answer", scripted, thread=thread, agent=agent.id, text="!ask Which colour?; say Thanks.",
        tool="ask", description=ASK["description"], parameters=ASK["input_schema"], output="blue",
    )
    first, second = report["runs"]
    assert first["failures"] == [] and first["runErrors"] == [], first
    # The first run ends with the frontend tool call, left for the client to answer.
    kinds = kinds_of(first)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED", kinds
    (start,) = events_of(first, "TOOL_CALL_START")
    call = start["toolCallId"]
    assert start["toolCallName"] == "ask"
    args = "".join(e["delta"] for e in events_of(first, "TOOL_CALL_ARGS") if e["toolCallId"] == call)
    assert json.loads(args) == {"question": "Which colour?"}
    (end,) = events_of(first, "TOOL_CALL_END")
    assert end["toolCallId"] == call
    assert kinds.index("TOOL_CALL_START") < kinds.index("TOOL_CALL_ARGS") < kinds.index("TOOL_CALL_END")
    assert "TOOL_CALL_RESULT" not in kinds, "a frontend tool's result comes from the client"
    assert events_of(first, "RUN_FINISHED")[0]["outcome"]["pendingToolCallIds"] == [call]
    assert first["pending"] == [call], "the client read the pending call from RUN_FINISHED"
    # The tool message carried the answer: the second run goes on from it.
    assert second["failures"] == [] and second["runErrors"] == [], second
    kinds = kinds_of(second)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED", kinds
    assert "outcome" not in events_of(second, "RUN_FINISHED")[0], "nothing is pending any more"
    text = "".join(e["delta"] for e in events_of(second, "TEXT_MESSAGE_CONTENT"))
    assert text.startswith("The tool returned: blue. ") and "Thanks." in text, text
    assistant = [m for m in report["messages"] if m["role"] == "assistant" and m.get("content")]
    assert assistant[-1]["content"].strip() == "The tool returned: blue. Thanks.", report["messages"]
    # The managed API: the call, the client's answer to it, and the turn's end.
    events = settled(client, thread_session(scripted, thread))
    (use,) = of_type(events, "agent.custom_tool_use")
    (answer,) = of_type(events, "user.custom_tool_result")
    assert use.id == call and answer.custom_tool_use_id == call and text_of(answer.content) == "blue"
    assert events[-1].stop_reason.type == "end_turn"


@needs_node
def test_ag_ui_streams_chunks_as_they_are_written(scripted: Deployment) -> None:
    client = scripted.client()
    agent, thread = conformance_agent(client), unique("thread")
    report = drive("run", scripted, thread=thread, agent=agent.id, text="!chunks 5 50")
    (run,) = report["runs"]
    assert run["failures"] == [] and run["runErrors"] == [], run
    contents = events_of(run, "TEXT_MESSAGE_CONTENT")
    assert "".join(e["delta"] for e in contents) == FIVE_CHUNKS, contents
    # Several deltas, arriving over time (the chunks are 50 ms apart), all of one message
    # opened before them and closed after them.
    assert len(contents) >= 3, contents
    spread = contents[-1]["receivedAt"] - contents[0]["receivedAt"]
    assert spread >= 100, f"the chunks arrived together ({spread} ms apart)"
    assert len({e["messageId"] for e in contents}) == 1
    kinds = kinds_of(run)
    first, last = kinds.index("TEXT_MESSAGE_CONTENT"), len(kinds) - 1 - kinds[::-1].index("TEXT_MESSAGE_CONTENT")
    assert kinds.index("TEXT_MESSAGE_START") < first and kinds.index("TEXT_MESSAGE_END") > last, kinds
    assert kinds[-1] == "RUN_FINISHED", kinds
    (message,) = of_type(settled(client, thread_session(scripted, thread)), "agent.message")
    assert message.id == contents[0]["messageId"], "the live message is the committed one"
    assert text_of(message.content).strip() == FIVE_CHUNKS.strip()


@needs_node
def test_ag_ui_failed_turn_is_a_run_error(scripted: Deployment) -> None:
    client = scripted.client()
    agent, thread = conformance_agent(client), unique("thread")
    report = drive("run", scripted, thread=thread, agent=agent.id, text="!fail on purpose")
    (run,) = report["runs"]
    kinds = kinds_of(run)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_ERROR", kinds
    assert "RUN_FINISHED" not in kinds
    (error,) = events_of(run, "RUN_ERROR")
    assert error["message"] == "on purpose", error
    assert [e["message"] for e in run["runErrors"]] == ["on purpose"], "onRunErrorEvent fired"
    # `code` is the error type of the session.error that gave up.
    events = settled(client, thread_session(scripted, thread))
    (failed,) = of_type(events, "session.error")
    assert failed.error.message == "on purpose" and error["code"] == failed.error.type, (error, failed)
    assert events[-1].stop_reason.type == "retries_exhausted"


# ---------------------------------------------------------------------------------------
# MCP: the official Python client


def transport(deployment: Deployment) -> Any:
    http = httpx2.AsyncClient(
        headers={"authorization": f"Bearer {deployment.bootstrap_key}"}, timeout=httpx2.Timeout(30.0, read=60.0)
    )
    return streamable_http_client(f"{deployment.url}/v1/mcp", http_client=http)


def mcp_text(result: Any) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_mcp_cancelled_call_interrupts_the_turn(scripted: Deployment, mode: str) -> None:
    client = scripted.client()
    agent, thread = conformance_agent(client), unique("mcp-thread")
    partials: list[str] = []
    returned: list[Any] = []

    async def scenario() -> list[Any]:
        async with Client(transport(scripted), mode=mode) as mcp:
            streaming = anyio.Event()

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                if message and message.startswith("chunk "):
                    partials.append(message)
                    if len(partials) >= 2:
                        streaming.set()

            async def call() -> None:
                arguments = {"prompt": LONG_SCRIPT, "thread_id": thread}
                returned.append(await mcp.call_tool(agent.name, arguments, progress_callback=on_progress))

            # The caller gives up on the request after two partial texts: the client
            # cancels it (legacy: `notifications/cancelled`; 2026-07-28: the request's
            # stream closes).
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                with anyio.fail_after(20):
                    await streaming.wait()
                tasks.cancel_scope.cancel()
            # Still connected: the cancel itself, not a disconnect, interrupts the turn.
            session_id = thread_session(scripted, thread)
            events = await anyio.to_thread.run_sync(lambda: settled(client, session_id, needs="user.interrupt"))
            await mcp.list_tools()
            return events

    events = asyncio.run(scenario())
    assert returned == [], "the cancelled call returned no result"
    assert partials[1].startswith(partials[0]) and partials[1] != partials[0], partials
    assert_stopped_early(events)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_mcp_progress_carries_the_growing_partial_text(scripted: Deployment, mode: str) -> None:
    client = scripted.client()
    agent = conformance_agent(client)
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async def scenario() -> Any:
        async with Client(transport(scripted), mode=mode) as mcp:
            return await mcp.call_tool(agent.name, {"prompt": "!chunks 5 50"}, progress_callback=on_progress)

    result = asyncio.run(scenario())
    assert result.is_error is False, mcp_text(result)
    assert mcp_text(result).strip() == FIVE_CHUNKS.strip()
    values = [value for value, _ in progress]
    assert values == sorted(values) and len(set(values)) == len(values), values
    partials = [m for _, m in progress if m and m.startswith("chunk ")]
    # Several notifications, each the whole text so far: each extends the one before.
    assert len(partials) >= 2, progress
    for before, after in zip(partials, partials[1:]):
        assert after.startswith(before) and len(after) > len(before), partials
    assert FIVE_CHUNKS.startswith(partials[-1]), partials
    session = client.beta.sessions.retrieve(result.meta["agentd/session_id"])
    assert session.status == "idle" and session.agent.id == agent.id


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_mcp_failed_turn_is_an_error_result(scripted: Deployment, mode: str) -> None:
    client = scripted.client()
    agent = conformance_agent(client)

    async def scenario() -> Any:
        async with Client(transport(scripted), mode=mode) as mcp:
            return await mcp.call_tool(agent.name, {"prompt": "!fail on purpose"})

    result = asyncio.run(scenario())
    assert result.is_error is True
    assert mcp_text(result) == "the turn failed: on purpose"
    events = settled(client, result.meta["agentd/session_id"])
    assert [e.error.message for e in of_type(events, "session.error")] == ["on purpose"]
    assert events[-1].stop_reason.type == "retries_exhausted"


def ask_call(deployment: Deployment, mode: str, reply: dict[str, Any] | None) -> tuple[Any, list[Any]]:
    """Calls the conformance agent with `!ask …; say Thanks.`; a client with an
    elicitation callback answers with `reply` (None: a client without one)."""
    client = deployment.client()
    agent = conformance_agent(client)
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> Any:
        asked.append(params)
        return mcp_types.ElicitResult(**(reply or {}))

    async def scenario() -> Any:
        options: dict[str, Any] = {"mode": mode}
        if reply is not None:
            options["elicitation_callback"] = on_elicit
        async with Client(transport(deployment), **options) as mcp:
            return await mcp.call_tool(agent.name, {"prompt": "!ask Which colour?; say Thanks."})

    return asyncio.run(scenario()), asked


def test_mcp_elicitation_answers_the_agent_and_the_turn_goes_on(scripted: Deployment) -> None:
    result, asked = ask_call(scripted, "legacy", {"action": "accept", "content": {"answer": "blue"}})
    assert result.is_error is False, mcp_text(result)
    assert mcp_text(result).strip() == "The tool returned: blue. Thanks."
    (params,) = asked
    assert params.message == "The agent asks (tool `ask`): Which colour?"
    assert params.requested_schema["required"] == ["answer"]
    events = settled(scripted.client(), result.meta["agentd/session_id"])
    (use,) = of_type(events, "agent.custom_tool_use")
    (answer,) = of_type(events, "user.custom_tool_result")
    assert answer.custom_tool_use_id == use.id and text_of(answer.content) == "blue"
    assert events[-1].stop_reason.type == "end_turn"


def test_mcp_declined_elicitation_is_an_error_answer(scripted: Deployment) -> None:
    result, asked = ask_call(scripted, "legacy", {"action": "decline"})
    assert len(asked) == 1 and result.is_error is False
    assert mcp_text(result).strip() == "The tool returned: the user declined to answer. Thanks."
    (answer,) = of_type(settled(scripted.client(), result.meta["agentd/session_id"]), "user.custom_tool_result")
    assert answer.is_error is True


@pytest.mark.parametrize(("mode", "reply"), [("legacy", None), ("auto", {"action": "accept", "content": {}})])
def test_mcp_without_elicitation_the_call_says_how_to_answer(
    scripted: Deployment, mode: str, reply: dict[str, Any] | None
) -> None:
    # A handshake client without the capability, and a 2026-07-28 client (the protocol
    # forbids server-to-client requests): the result says how to answer instead.
    result, asked = ask_call(scripted, mode, reply)
    assert asked == []
    assert result.is_error is True and "POST /v1/sessions/" in mcp_text(result), mcp_text(result)
    events = settled(scripted.client(), result.meta["agentd/session_id"])
    assert events[-1].stop_reason.type == "requires_action"
