"""AI SDK UI message stream (issue 8): the official `ai` chat engine (AbstractChat +
DefaultChatTransport, the code path of `useChat`) driven headless by
tests/clients/node/ai_sdk.mjs against both modes, with the model played by the fake.
Also the thread history route, stream resume, and the same conversation through the
managed API."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import anthropic
import pytest

from fake_models import FakeAnthropic, Reply, call, http_error, say, slow, text, thinking
from harness import Deployment, unique

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
MODEL = "claude-sonnet-4-5"
ASK_TOOLS = [{"type": "agent_toolset_20260401", "default_config": {"permission_policy": {"type": "always_ask"}}}]
WEATHER = {
    "type": "custom",
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}

pytestmark = pytest.mark.skipif(
    not (NODE_DIR / "node_modules" / "ai").is_dir() or shutil.which("node") is None,
    reason="the node clients are not installed (scripts/test runs npm ci in tests/clients/node)",
)


def drive(scenario: str, deployment: Deployment, **options: Any) -> dict[str, Any]:
    options = {"url": deployment.url, "key": deployment.bootstrap_key, **options}
    result = subprocess.run(
        ["node", "ai_sdk.mjs", scenario, json.dumps(options)],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"node {scenario} failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def agent(client: anthropic.Anthropic, **fields: Any) -> str:
    return client.beta.agents.create(name=unique("aisdk-agent"), model=MODEL, **fields).id


def texts(message: dict[str, Any]) -> list[str]:
    return [p["text"] for p in message["parts"] if p["type"] == "text"]


def history(deployment: Deployment, thread: str) -> dict[str, Any]:
    response = deployment.http().get(f"/v1/ai-sdk/threads/{thread}/messages", headers=deployment.headers())
    assert response.status_code == 200, response.text
    return response.json()


def test_plain_text_and_the_same_thread_through_the_managed_api(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key, thread = unique("aisdk"), unique("thread")
    fake_anthropic.script(key, say(f"hello from agentd {key}", input_tokens=12, output_tokens=5))
    report = drive("send", turns, thread=thread, agent=agent(client), text=f"hi {key}")
    assert report["status"] == "ready" and report["errors"] == [], report
    user, assistant = report["messages"]
    assert texts(user) == [f"hi {key}"]
    assert assistant["role"] == "assistant" and texts(assistant) == [f"hello from agentd {key}"]
    assert [p["type"] for p in assistant["parts"]] == ["step-start", "text"]
    assert assistant["metadata"]["usage"] == {"inputTokens": 12, "outputTokens": 5}
    # The thread is a session: the managed API sees the same committed history...
    page = history(turns, thread)
    session_id = page["session_id"]
    assert [m["role"] for m in page["data"]] == ["user", "assistant"] and page["next_page"] is None
    events = [e.type for e in client.beta.sessions.events.list(session_id)]
    assert events[0] == "user.message" and "agent.message" in events
    # ...and a turn sent there shows up in the AI SDK history.
    fake_anthropic.script(key, say("second answer"))
    client.beta.sessions.events.send(session_id, events=[{"type": "user.message", "content": [{"type": "text", "text": f"more {key}"}]}])
    deadline = time.monotonic() + 30
    while len(history(turns, thread)["data"]) < 4:
        assert time.monotonic() < deadline, history(turns, thread)
        time.sleep(0.1)
    assert texts(history(turns, thread)["data"][-1]) == ["second answer"]
    first = turns.http().get(f"/v1/ai-sdk/threads/{thread}/messages", params={"limit": 1}, headers=turns.headers()).json()
    assert len(first["data"]) == 1 and first["next_page"]
    rest = turns.http().get(f"/v1/ai-sdk/threads/{thread}/messages", params={"limit": 100, "page": first["next_page"]}, headers=turns.headers()).json()
    assert [m["id"] for m in first["data"] + rest["data"]] == [m["id"] for m in history(turns, thread)["data"]]


def test_reasoning_then_text(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("reason")
    fake_anthropic.script(key, Reply(blocks=[thinking("let me think"), text("Forty-two.")]))
    report = drive("send", turns, thread=unique("thread"), agent=agent(turns.client()), text=f"why {key}")
    assert report["status"] == "ready", report
    assistant = report["messages"][-1]
    assert [p["type"] for p in assistant["parts"]] == ["step-start", "reasoning", "text"]
    assert texts(assistant) == ["Forty-two."]


def test_client_side_tool_round_trip(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("tool")
    fake_anthropic.script(key, call("get_weather", {"city": "Paris"}), say("Sunny in Paris."))
    report = drive(
        "tool", turns, thread=unique("thread"), agent=agent(turns.client(), tools=[WEATHER]),
        text=f"weather {key}", output={"forecast": "sunny"}, final="Sunny in Paris.",
    )
    assert report["errors"] == [], report
    parts = report["messages"][-1]["parts"]
    (tool,) = [p for p in parts if p["type"] == "tool-get_weather"]
    assert tool["state"] == "output-available" and tool["input"] == {"city": "Paris"}
    _, second = fake_anthropic.wait_requests(key, 2)
    (result,) = second.blocks("tool_result")
    assert "sunny" in json.dumps(result["content"])


def test_approval_denied(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("approve")
    fake_anthropic.script(key, call("bash", {"command": "rm -rf /"}), say("Understood, not running it."))
    report = drive(
        "approval", turns, thread=unique("thread"), agent=agent(turns.client(), tools=ASK_TOOLS),
        text=f"clean up {key}", approved=False, reason="too dangerous", final="Understood, not running it.",
    )
    assert report["errors"] == [], report
    (tool,) = [p for p in report["messages"][-1]["parts"] if p["type"] == "dynamic-tool"]
    assert tool["toolName"] == "bash"
    _, second = fake_anthropic.wait_requests(key, 2)
    (result,) = second.blocks("tool_result")
    assert result["is_error"] is True and "too dangerous" in json.dumps(result["content"])


def test_error_mid_stream_is_an_error_chunk(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    key = unique("fail")
    fake_anthropic.script(key, *[http_error(500, "upstream broke")] * 6)
    report = drive("send", turns, thread=unique("thread"), agent=agent(turns.client()), text=f"hi {key}")
    assert report["status"] == "error", report
    assert report["errors"] and report["finished"][-1]["isError"] is True


def test_resume_after_disconnect(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key, thread = unique("resume"), unique("thread")
    fake_anthropic.script(key, say("first"), slow("streamed while you were away", chunks=20, delay=0.2))
    agent_id = agent(client)
    drive("send", turns, thread=thread, agent=agent_id, text=f"one {key}")
    # Nothing under way: 204 and nothing changes.
    idle = drive("resume", turns, thread=thread, agent=agent_id)
    assert idle["status"] == "ready" and idle["messages"] == [] and idle["errors"] == []
    # A turn started elsewhere (the managed API) is picked up by resumeStream.
    session_id = history(turns, thread)["session_id"]
    client.beta.sessions.events.send(session_id, events=[{"type": "user.message", "content": [{"type": "text", "text": f"two {key}"}]}])
    fake_anthropic.wait_requests(key, 2)
    resumed = drive("resume", turns, thread=thread, agent=agent_id)
    assert resumed["status"] == "ready" and resumed["errors"] == [], resumed
    assert texts(resumed["messages"][-1]) == ["streamed while you were away"]


def test_bad_requests_before_the_stream(turns: Deployment) -> None:
    http = turns.http()
    headers = turns.headers(beta=False)
    no_agent = http.post("/v1/ai-sdk/chat", json={"id": unique("t"), "messages": [{"id": "1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}], "trigger": "submit-message"}, headers=headers)
    assert no_agent.status_code == 400 and no_agent.json()["error"]["type"] == "invalid_request_error", no_agent.text
    assert http.post("/v1/ai-sdk/chat", json={"id": "t", "messages": []}, headers=headers).status_code == 400
    assert http.post("/v1/ai-sdk/chat", json={"messages": []}, headers=headers).status_code == 400
    assert http.post("/v1/ai-sdk/chat", json={"id": "t", "messages": []}).status_code == 401
    assert http.get(f"/v1/ai-sdk/threads/{unique('none')}/messages", headers=headers).status_code == 404
    assert http.get(f"/v1/ai-sdk/chat/{unique('none')}/stream", headers=headers).status_code == 204


def test_cors_is_off_by_default_and_exact_when_configured(turns: Deployment, launch: Any) -> None:
    preflight = {"origin": "http://app.example:5173", "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type"}
    default = turns.http().options("/v1/ai-sdk/chat", headers=preflight)
    assert "access-control-allow-origin" not in default.headers, "no CORS unless configured"
    deployment = launch("dev", extra_env={"AGENTD_CORS_ORIGINS": "http://app.example:5173, https://other.example"})
    allowed = deployment.http().options("/v1/ai-sdk/chat", headers=preflight)
    assert allowed.status_code == 200, allowed.text
    assert allowed.headers["access-control-allow-origin"] == "http://app.example:5173"
    assert allowed.headers["access-control-allow-credentials"] == "true"
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    refused = deployment.http().options("/v1/ai-sdk/chat", headers={**preflight, "origin": "http://evil.example"})
    assert "access-control-allow-origin" not in refused.headers
    # A real request from the allowed origin carries the header too (and still needs a key).
    anonymous = deployment.http().post("/v1/ai-sdk/chat", json={}, headers={"origin": "http://app.example:5173"})
    assert anonymous.status_code == 401 and anonymous.headers["access-control-allow-origin"] == "http://app.example:5173"


def test_the_default_agent_starts_threads_that_name_none(launch: Any) -> None:
    deployment = launch("dev", extra_env={"AGENTD_ADAPTER_DEFAULT_AGENT": "agent_configured_default"})
    body = {"id": unique("t"), "messages": [{"id": "1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    response = deployment.http().post("/v1/ai-sdk/chat", json=body, headers=deployment.headers(beta=False))
    # The configured agent was used: this one does not exist, and the error names it.
    assert response.status_code in (400, 404), response.text
    assert "agent_configured_default" in response.json()["error"]["message"], response.text


def test_subagents_show_as_tool_calls_and_one_data_part_per_thread(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    """docs/api/multiagent.md: a coordinator's `spawn_thread` is a tool call of the primary,
    and each subagent's status is a `data-session-thread` part the client reconciles by id."""
    client = turns.client()
    helper = client.beta.agents.create(name=unique("aisdk-helper"), model=MODEL)
    boss = agent(client, multiagent={"type": "coordinator", "agents": [helper.id]})
    key, job = unique("aisdk-boss"), unique("aisdk-job")
    fake_anthropic.script(key, call("spawn_thread", {"agent": helper.name, "message": job}), say(f"done {key}"))
    fake_anthropic.script(job, say("the child's answer"))
    report = drive("send", turns, thread=unique("thread"), agent=boss, text=f"go {key}")
    assert report["status"] == "ready" and report["errors"] == [], report
    assistant = report["messages"][-1]
    (thread,) = [p for p in assistant["parts"] if p["type"] == "data-session-thread"]
    assert thread["id"].startswith("sthr_") and thread["data"]["agent_name"] == helper.name
    assert thread["data"]["status"] == "idle", "the running part was replaced by the idle one"
    (tool,) = [p for p in assistant["parts"] if p.get("toolName") == "spawn_thread"]
    assert tool["state"] == "output-available" and "the child's answer" in tool["output"]
    assert texts(assistant)[-1] == f"done {key}"
