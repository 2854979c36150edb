"""MCP logging and resumable streams (issue 25, item 4), in both modes, with the
conformance test agent (the scripted model, `SCRIPT_MODEL`).

* Logging: the official Python `mcp` client — `logging/setLevel` in the 2025-11-25
  handshake (`legacy`) and the per-request `io.modelcontextprotocol/logLevel` opt-in of
  2026-07-28 (`auto`, the client's `log_level`): the turn's progress arrives as
  `notifications/message` at or above the level, and nothing without an opt-in.
* Resumption: raw HTTP, because a client hides its reconnects — a POST stream cut
  mid-call resumes with `GET` + `Last-Event-ID` with nothing missed or repeated, on the
  same gateway and (prod) on another gateway, also after the call has finished.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Iterator

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import SCRIPT_MODEL, conformance_agent
from harness import Deployment, unique

MCP_ACCEPT = "application/json, text/event-stream"
PROTOCOL = "2025-11-25"


def script_agent(deployment: Deployment) -> str:
    """An agent on the scripted model; its name is its MCP tool name."""
    return deployment.client().beta.agents.create(name=unique("resume"), model=SCRIPT_MODEL).name


def transport(deployment: Deployment) -> Any:
    http = httpx2.AsyncClient(
        headers={"authorization": f"Bearer {deployment.bootstrap_key}"}, timeout=httpx2.Timeout(30.0, read=60.0)
    )
    return streamable_http_client(f"{deployment.url}/v1/mcp", http_client=http)


# ---------------------------------------------------------------------------------------
# Logging


def logged_call(deployment: Deployment, mode: str, level: str | None, set_level: bool) -> tuple[list[Any], Any]:
    messages: list[Any] = []

    async def on_log(params: Any) -> None:
        messages.append(params)

    async def scenario() -> Any:
        options: dict[str, Any] = {"mode": mode, "logging_callback": on_log}
        if level and not set_level:
            options["log_level"] = level
        async with Client(transport(deployment), **options) as mcp:
            if level and set_level:
                await mcp.set_logging_level(level)
            result = await mcp.call_tool(script_agent(deployment), {"prompt": "!say hello"})
            # Handshake-era log messages ride the session's GET stream: give them a moment.
            await asyncio.sleep(0.5)
            return result

    return messages, asyncio.run(scenario())


@pytest.mark.parametrize(("mode", "set_level"), [("legacy", True), ("auto", False)])
def test_turn_progress_arrives_as_log_messages_at_or_above_the_level(
    scripted: Deployment, mode: str, set_level: bool
) -> None:
    messages, result = logged_call(scripted, mode, "info", set_level)
    assert result.is_error is False
    said = [m.data["message"] for m in messages]
    assert "session running" in said and "agent message" in said and said[-1] == "session idle: end_turn", said
    assert all(m.logger == "agentd" and m.level in ("info", "notice", "warning", "error") for m in messages), messages
    # Debug messages (model requests) are below the level.
    assert "model request started" not in said
    session_ids = {m.data["session_id"] for m in messages}
    assert len(session_ids) == 1 and next(iter(session_ids)).startswith("sesn_"), session_ids

    debug, _ = logged_call(scripted, mode, "debug", set_level)
    assert "model request started" in [m.data["message"] for m in debug]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_no_log_messages_without_an_opt_in(scripted: Deployment, mode: str) -> None:
    messages, result = logged_call(scripted, mode, None, False)
    assert result.is_error is False
    assert messages == []


def test_set_level_refuses_an_unknown_level(scripted: Deployment) -> None:
    with raw(scripted) as http:
        session = initialize(http)
        response = http.post("/v1/mcp", headers=headers(session), json=request(2, "logging/setLevel", {"level": "loud"}))
        body = next(message for _, message in sse(response.iter_lines()) if message)
        assert body["error"]["code"] == -32602, body


# ---------------------------------------------------------------------------------------
# Resumption


def raw(deployment: Deployment, url: str | None = None) -> httpx.Client:
    return httpx.Client(
        base_url=url or deployment.url,
        headers={"authorization": f"Bearer {deployment.bootstrap_key}"},
        timeout=httpx.Timeout(30.0),
        trust_env=False,
    )


def headers(session: str | None = None, **extra: str) -> dict[str, str]:
    out = {"accept": MCP_ACCEPT, "content-type": "application/json", "mcp-protocol-version": PROTOCOL, **extra}
    if session:
        out["mcp-session-id"] = session
    return out


def request(id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def sse(lines: Iterator[str]) -> Iterator[tuple[str | None, dict[str, Any] | None]]:
    """(event id, JSON-RPC message or None for a priming event) per SSE event."""
    event_id, data = None, []
    for line in lines:
        if line == "":
            if event_id is not None or data:
                text = "\n".join(data).strip()
                yield event_id, (json.loads(text) if text else None)
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def initialize(http: httpx.Client, capabilities: dict[str, Any] | None = None) -> str:
    params = {
        "protocolVersion": PROTOCOL,
        "capabilities": capabilities or {},
        "clientInfo": {"name": "resume-test", "version": "1"},
    }
    response = http.post("/v1/mcp", headers=headers(), json=request(1, "initialize", params))
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post("/v1/mcp", headers=headers(session), json=initialized).status_code == 202
    return session


def progress_of(message: dict[str, Any] | None) -> float | None:
    if message and message.get("method") == "notifications/progress":
        return message["params"]["progress"]
    return None


def cut_call(http: httpx.Client, session: str, tool: str, keep: int) -> tuple[str, list[float]]:
    """Calls `tool` with a slow script and drops the POST stream after `keep` progress
    notifications: the last event id seen and the progress values read."""
    call = request(7, "tools/call", {"name": tool, "arguments": {"prompt": "!chunks 12 100"}, "_meta": {"progressToken": "p"}})
    seen: list[float] = []
    last = None
    with http.stream("POST", "/v1/mcp", headers=headers(session), json=call) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for event_id, message in sse(response.iter_lines()):
            assert event_id, "every event of a resumable stream has an id"
            last = event_id
            assert not (message and message.get("id") == 7), "the call answered before the cut"
            if (value := progress_of(message)) is not None:
                seen.append(value)
                if len(seen) == keep:
                    break
    assert last is not None
    return last, seen


def resume(http: httpx.Client, session: str, last: str) -> tuple[list[float], dict[str, Any]]:
    """GET with Last-Event-ID: the progress values replayed and the call's response."""
    seen: list[float] = []
    with http.stream("GET", "/v1/mcp", headers=headers(session, **{"last-event-id": last})) as response:
        assert response.status_code == 200, response.read()
        for _, message in sse(response.iter_lines()):
            if (value := progress_of(message)) is not None:
                seen.append(value)
            if message and message.get("id") == 7:
                return seen, message
    pytest.fail("the resumed stream ended without the call's response")


def assert_whole(before: list[float], after: list[float], response: dict[str, Any]) -> None:
    values = before + after
    assert values == list(range(1, len(values) + 1)), f"missed or repeated progress: {before} then {after}"
    text = "".join(block["text"] for block in response["result"]["content"] if block["type"] == "text")
    assert text.strip() == " ".join(f"chunk {i}" for i in range(1, 13)), text
    assert response["result"].get("isError") is not True


def test_a_cut_stream_resumes_on_the_same_gateway(scripted: Deployment) -> None:
    tool = script_agent(scripted)
    with raw(scripted) as http:
        session = initialize(http)
        last, before = cut_call(http, session, tool, keep=3)
        after, response = resume(http, session, last)
    assert after, "the call was still running: later progress arrives on the resumed stream"
    assert_whole(before, after, response)


def test_a_stream_resumes_after_its_call_has_finished(scripted: Deployment) -> None:
    tool = script_agent(scripted)
    with raw(scripted) as http:
        session = initialize(http)
        last, before = cut_call(http, session, tool, keep=2)
        time.sleep(2.5)  # the script takes 1.2 s: the call has answered by now
        after, response = resume(http, session, last)
    assert_whole(before, after, response)


def test_a_cut_stream_resumes_on_another_gateway(scripted: Deployment) -> None:
    if scripted.mode != "prod":
        pytest.skip("one process in dev: there is no other gateway")
    tool = script_agent(scripted)
    other = scripted.start_gateway()
    with raw(scripted) as first, raw(scripted, other) as second:
        session = initialize(first)
        last, before = cut_call(first, session, tool, keep=3)
        after, response = resume(second, session, last)
    assert_whole(before, after, response)


def test_an_unknown_last_event_id_gets_an_empty_stream(scripted: Deployment) -> None:
    with raw(scripted) as http:
        session = initialize(http)
        response = http.get("/v1/mcp", headers=headers(session, **{"last-event-id": "nope|0"}))
        assert response.status_code == 200
        assert [m for _, m in sse(iter(response.text.splitlines() + [""])) if m] == []


def test_an_elicitation_answered_through_another_gateway_reaches_the_asking_one(scripted: Deployment) -> None:
    """A client's reply to an elicitation may land on any gateway behind the balancer."""
    if scripted.mode != "prod":
        pytest.skip("one process in dev: there is no other gateway")
    tool = conformance_agent(scripted.client()).name
    other = scripted.start_gateway()
    prompt = "!ask Which colour?; say Thanks."
    call = request(7, "tools/call", {"name": tool, "arguments": {"prompt": prompt}})
    asked, result = [], None
    with raw(scripted) as first, raw(scripted, other) as second:
        session = initialize(first, {"elicitation": {"form": {}}})
        # A reply that never reaches the asking gateway fails the read (10 s of silence:
        # keep-alives come every 15 s) instead of waiting out the question's timeout.
        first.timeout = httpx.Timeout(30.0, read=10.0)
        with first.stream("POST", "/v1/mcp", headers=headers(session), json=call) as response:
            for _, message in sse(response.iter_lines()):
                if message and message.get("method") == "elicitation/create":
                    asked.append(message)
                    answer = {"action": "accept", "content": {"answer": "blue"}}
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer}
                    # The reply goes to the other gateway.
                    assert second.post("/v1/mcp", headers=headers(session), json=reply).status_code == 202
                if message and message.get("id") == 7:
                    result = message
                    break
    assert len(asked) == 1 and asked[0]["params"]["message"] == "The agent asks (tool `ask`): Which colour?"
    assert result is not None and result["result"].get("isError") is not True, result
    text = "".join(block["text"] for block in result["result"]["content"] if block["type"] == "text")
    assert text.strip() == "The tool returned: blue. Thanks."
